"""``python -m mpsd``: what launchd runs (``python -m mpsd daemon``)."""

import sys

from mpsd.cli import main

sys.exit(main())
