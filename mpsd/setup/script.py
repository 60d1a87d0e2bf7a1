"""This mpsd's ``mpsd`` command, found in one place, the way uv finds its own: the ``scripts``
dir of the install scheme holding mpsd (a venv's or the interpreter's ``bin``, or the user
scheme's of ``pip install --user``), through Homebrew's ``opt`` path. The launchd agent runs it,
and every message that names ``mpsd`` names it as ``command()`` does."""

from __future__ import annotations

import os
import sys

from mpsd.setup import homebrew


def script() -> str | None:
    """This mpsd's console script (absolute, not resolved), or None (run ``python -m mpsd``)."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = os.path.join(sys.prefix, "bin", "mpsd")  # a venv's or a prefix's: sysconfig unasked
    if package.startswith(sys.prefix + os.sep) and os.access(found, os.X_OK):
        return homebrew.opt_path(os.path.abspath(found))
    import site
    import sysconfig

    if sys.version_info >= (3, 10):
        user = sysconfig.get_preferred_scheme("user")
    else:
        user = "osx_framework_user" if getattr(sys, "_framework", "") else "posix_user"
    userbase = os.environ.get("PYTHONUSERBASE") or site.getuserbase()
    base = {"base": sys.prefix, "platbase": sys.exec_prefix, "userbase": userbase}
    schemes = [sysconfig.get_paths(vars=base), sysconfig.get_paths(user, vars=base)]
    schemes.sort(key=lambda scheme: package not in (scheme["purelib"], scheme["platlib"]))
    for scheme in schemes:
        found = os.path.join(scheme["scripts"], "mpsd")
        if os.path.isfile(found) and os.access(found, os.X_OK):
            return homebrew.opt_path(os.path.abspath(found))
    return None


def command() -> str:
    """How a new terminal runs this mpsd: ``mpsd`` when on its PATH (an activated venv's bin
    does not count), else the console script by its full path, else ``python -m mpsd``."""
    venv_bin = os.path.join(os.environ.get("VIRTUAL_ENV", ""), "bin")
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        found = os.path.join(folder, "mpsd")
        if (
            os.path.isabs(folder)
            and folder != venv_bin
            and os.path.isfile(found)
            and os.access(found, os.X_OK)
        ):
            return "mpsd"
    return script() or f"{homebrew.opt_path(sys.executable)} -m mpsd"


def default_start() -> str:
    """How to start the daemon without asking launchd: worded once, for status, doctor and jobs."""
    return f"start it with `{homebrew.START if homebrew.runs_agent() else command() + ' daemon'}`"
