"""``tomllib`` where Python has it (3.11+), else its backport ``tomli`` (the same API).

Use ``from mpsd._toml import tomllib``; pyproject installs ``tomli`` only before 3.11.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

__all__ = ["tomllib"]
