"""The interpreter start-up hook in a project's environments: find them, write the hook's copy
in, remove it, and keep the list of every copy mpsd installed.

A copy is three files in an environment's site-packages: ``_mpsd_startup.py`` (a byte-for-byte
copy of ``mpsd/env/startup_hook.py``: the environment has no mpsd), ``_mpsd_startup.pth`` (one
guarded line that imports it) and ``_mpsd_startup.start`` (its PEP 829 entry point, 3.15+);
for 3.15 and newer, only the module and the ``.start`` (from 3.20 a ``.pth`` import line warns
even beside one). Writing one clears macOS's hidden flag, which Python obeys for ``.pth`` files
since 3.13.0 and the January 2024 releases of 3.8-3.12. The list (``python-hooks.tsv``)
holds project, interpreter, site-packages per copy, so ``disable`` and ``uninstall`` remove
what it lists and ``status`` tells a lost copy from one never asked for. What ``status`` calls
imports nothing beyond ``os`` (its start-up is a contract).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpsd import paths
from mpsd.errors import MpsdError

MODULE = "_mpsd_startup"
MODULE_FILE = MODULE + ".py"
PTH_FILE = MODULE + ".pth"
# One line: site.py executes a .pth line that starts with `import`. The try keeps a deleted
# module from printing "Error processing line 1" at every start.
PTH_TEXT = f'import sys; exec("try:\\n import {MODULE}\\nexcept BaseException:\\n pass")\n'
START_FILE = MODULE + ".start"
START_TEXT = f"{MODULE}:start\n"  # PEP 829: one `module:function` entry point a line
COPY_FILES = (MODULE_FILE, PTH_FILE, START_FILE)
UF_HIDDEN = 0x8000  # stat.UF_HIDDEN
HIDDEN = (
    "macOS's hidden flag (set by iCloud Drive's sync inside .venv) makes Python skip it "
    "(3.13+, and 3.8-3.12 since their January 2024 releases)"
)
ENV_DIRS = (".venv", "venv", "env")
RECORD_NAME = "python-hooks.tsv"
_HEADER = "# mpsd: every start-up hook copy it installed (project, python, site-packages)\n"
INSPECT = (
    "import json, sys, sysconfig\n"
    "print(json.dumps([list(sys.version_info[:2]), sysconfig.get_paths()['purelib'], sys.prefix,\n"
    "  getattr(sys, 'real_prefix', sys.base_prefix)]))"
)
PYTHON_TIMEOUT = 60.0


@dataclass(frozen=True)
class Entry:
    """One copy: installed for ``project``, in the site-packages ``site`` of ``python``."""

    project: str
    python: str
    site: str


def copy_contents(site: str) -> list[tuple[str, bytes | None]]:
    """Each file of the copy in ``site`` and the bytes it must hold (None: absent). The ``.pth``
    is absent from a 3.15+ site-packages (its ``lib/python3.X``, as CPython lays them out)."""
    module = Path(__file__).with_name("startup_hook.py").read_bytes()
    minors = [part[8:].rstrip("t") for part in Path(site).parts if part.startswith("python3.")]
    new = bool(minors) and minors[-1].isdigit() and int(minors[-1]) >= 15  # 3.15t: free-threaded
    return list(zip(COPY_FILES, (module, None if new else PTH_TEXT.encode(), START_TEXT.encode())))


def file_flags(path: str) -> int:
    """The file's BSD flags (``st_flags``: macOS; 0 elsewhere). A seam for tests."""
    return getattr(os.stat(path), "st_flags", 0)


def set_file_flags(path: str, flags: int) -> None:
    os.chflags(path, flags)  # type: ignore[attr-defined,unused-ignore]  # BSD and macOS only


def hidden_files(site: str) -> list[str]:
    """The files of the copy in ``site`` that carry the hidden flag (``HIDDEN``)."""
    found = [os.path.join(site, name) for name in COPY_FILES]
    return [path for path in found if os.path.exists(path) and file_flags(path) & UF_HIDDEN]


def unhide_command(paths: list[str]) -> str:
    import shlex

    return "chflags nohidden " + " ".join(map(shlex.quote, paths))


def record_path() -> Path:
    return paths.state_dir() / RECORD_NAME


def record() -> list[Entry]:
    """The copies mpsd installed, as the list says: empty when it is missing, unreadable or in
    a state dir that fails the trust rule (a planted list names programs mpsd would run)."""
    from mpsd.files import read_bytes

    try:
        lines = read_bytes(record_path(), limit=1 << 20).decode("utf-8").split("\n")
    except (OSError, UnicodeDecodeError):
        return []
    rows = (line.split("\t") for line in lines if not line.startswith("#"))
    return [Entry(*fields) for fields in rows if len(fields) == 3 and all(fields)]


def _write_record(entries: Iterable[Entry]) -> None:
    from mpsd.atomic import write_atomic

    unique = list(dict.fromkeys(entries))
    target = record_path()
    if not unique:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        return
    text = _HEADER + "".join(f"{e.project}\t{e.python}\t{e.site}\n" for e in unique)
    write_atomic(target, text.encode("utf-8"))


def _locked() -> Any:
    from mpsd.locks import exclusive  # not at the top: ``status`` imports this module

    return exclusive(paths.state_dir() / "python-hooks.lock")


# -- the environments of a project ---------------------------------------------------------


def environments_of(project: str) -> list[str]:
    """The virtual environments of ``project``: ``.venv``, ``venv``, ``env`` with a pyvenv.cfg."""
    return [
        os.path.join(project, name)
        for name in ENV_DIRS
        if os.path.isfile(os.path.join(project, name, "pyvenv.cfg"))
    ]


def env_python(env: str) -> str:
    """The interpreter of the virtual environment ``env`` (every venv tool makes ``bin/python``)."""
    return os.path.join(env, "bin", "python")


def has_copy(site: str) -> bool:
    module, pth, start = (os.path.isfile(os.path.join(site, name)) for name in COPY_FILES)
    return module and (pth or start)


def env_copy_site(env: str) -> str | None:
    """The ``lib/python*/site-packages`` of the venv ``env`` that has a copy, if any."""
    lib = os.path.join(env, "lib")
    try:
        names = os.listdir(lib)
    except OSError:
        return None
    sites = (os.path.join(lib, name, "site-packages") for name in names if name[:6] == "python")
    return next((site for site in sites if has_copy(site)), None)


# What kind of Python a site-packages belongs to (``kind``): a hook in a virtual environment or
# a conda env reaches that environment's pythons only; one in a base installation reaches every
# python started from it, in every project and out of them.
VENV, CONDA, SYSTEM, INSTALLATION = "venv", "conda", "system", "installation"
# Where an operating system keeps the Python it ships and updates itself: macOS's (the Command
# Line Tools', Xcode's, /System's) and a Linux distribution's under /usr. /usr/local is not one
# (Homebrew's prefix on Intel Macs, a Python built from source). docs/commands.md, `enable`.
SYSTEM_PREFIXES = ("/usr", "/System", "/Library/Developer/CommandLineTools")
NOT_SYSTEM_PREFIXES = ("/usr/local",)


def _under(path: str, tops: Iterable[str]) -> bool:
    return any(path == top or path.startswith(top.rstrip("/") + "/") for top in tops)


def kind(prefix: str, base_prefix: str) -> str:
    """VENV (``pyvenv.cfg``, or a prefix apart from its base), CONDA (``conda-meta/``), SYSTEM
    (``SYSTEM_PREFIXES``, Xcode's) or INSTALLATION (pyenv's, Homebrew's, python.org's, uv's)."""
    if prefix != base_prefix or os.path.isfile(os.path.join(prefix, "pyvenv.cfg")):
        return VENV
    if os.path.isdir(os.path.join(prefix, "conda-meta")):
        return CONDA
    real = os.path.realpath(prefix)
    parts = real.split("/")
    xcode = len(parts) > 2 and parts[1] == "Applications" and parts[2].startswith("Xcode")
    if xcode or (_under(real, SYSTEM_PREFIXES) and not _under(real, NOT_SYSTEM_PREFIXES)):
        return SYSTEM
    return INSTALLATION


@dataclass(frozen=True)
class Target:
    """An interpreter asked where its site-packages is; ``kind``: what that belongs to."""

    python: str
    site: str
    prefix: str
    version: str
    kind: str = VENV


def inspect_interpreter(python: str) -> Target:
    """Ask ``python`` (a path, or a command on PATH) for its site-packages, in a subprocess; one
    sentence when it is no interpreter, older than 3.8, the system's own, or read-only."""
    import json
    import subprocess

    given = python
    if os.sep not in python:
        found = paths.program(python)  # never a ./python3 of the working directory
        if found is None:
            raise MpsdError(f"{given} is not on PATH; give the path of the python to set up.")
        python = found
    python = os.path.abspath(os.path.expanduser(python))
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise MpsdError(
            f"{python} is not an executable file; give the path of a python interpreter "
            "(e.g. ~/miniconda3/envs/NAME/bin/python)."
        )
    try:
        done = subprocess.run(
            [python, "-I", "-c", INSPECT],
            capture_output=True,
            text=True,
            timeout=PYTHON_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MpsdError(f"{python} could not be run ({exc}); is it a python interpreter?") from None
    try:
        (major, minor), site, prefix, base = json.loads(done.stdout.strip().splitlines()[-1])
        version = f"{int(major)}.{int(minor)}"
    except (ValueError, IndexError, TypeError):
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise MpsdError(
            f"{python} did not say where its site-packages is ({said}); is it a python interpreter?"
        ) from None
    if (int(major), int(minor)) < (3, 8):
        raise MpsdError(f"{python} is Python {version}; the start-up hook needs 3.8 or later.")
    found = kind(str(prefix), str(base))
    if found == SYSTEM:
        raise MpsdError(
            f"{python} is the system's own Python {version} (its site-packages, {site}, serves "
            "every program of this machine that runs it), so mpsd puts no start-up hook there; "
            "use a virtual environment of your own (`python3 -m venv .venv` in the project), "
            "or start this one with `mpsd run -- python ...`."
        )
    if not os.path.isdir(site) or not os.access(site, os.W_OK):
        raise MpsdError(
            f"cannot write to {site}, the site-packages of {python}; use an environment of "
            "your own (a venv, conda env) or `mpsd run` for this interpreter."
        )
    return Target(python, site, prefix, version, found)


# -- writing copies, removing them ----------------------------------------------------


def write_copy(site: str, python: str | None = None) -> bool:
    """Write the files into ``site`` (and remove one its Python does without), clear their
    hidden flag; True when something changed. With ``python``, also its bytecode: a python that
    writes none (a read-only venv) would compile the hook at every start, 5 ms instead of a
    fraction of one."""
    from mpsd.atomic import write_atomic

    try:
        changed = []
        for name, data in copy_contents(site):
            if data is not None:
                changed.append(write_atomic(Path(site, name), data))
            elif os.path.exists(path := os.path.join(site, name)):
                os.unlink(path)
                changed.append(True)
        for path in hidden_files(site):
            set_file_flags(path, file_flags(path) & ~UF_HIDDEN)
            changed.append(True)
    except OSError as exc:
        raise MpsdError(f"cannot write the start-up hook into {site} ({exc.strerror}).") from None
    if python is not None:
        import subprocess

        compile_it = "import py_compile, sys; py_compile.compile(sys.argv[1], doraise=True)"
        with contextlib.suppress(OSError, subprocess.SubprocessError):  # then python's own
            subprocess.run(
                [python, "-I", "-c", compile_it, os.path.join(site, MODULE_FILE)],
                capture_output=True,
                timeout=PYTHON_TIMEOUT,
            )
    return any(changed)


def remove_copy(site: str) -> bool:
    """Remove the files (and the module's bytecode) from ``site``; True when one was there."""
    removed = False
    for path in copy_files([Entry("", "", site)]):
        try:
            if not _is_copy(path):
                continue  # not mpsd's file: python-hooks.tsv only says where to look
            os.unlink(path)
            removed = True
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise MpsdError(f"cannot remove {path} ({exc.strerror}); remove it by hand.") from None
    remove_bytecode(site)
    return removed


def _is_copy(path: str) -> bool:
    """Whether ``path`` is a file of mpsd's copy (the ``.pth`` and ``.start`` as written, the
    module of any mpsd version), a regular file not a link; FileNotFoundError when absent."""
    from mpsd.files import read_bytes

    if os.path.islink(path):
        return False
    data = read_bytes(path, limit=1 << 20)
    name = os.path.basename(path)
    if name == MODULE_FILE:
        return data.startswith(b'"""The interpreter start-up hook: ``mpsd enable``')
    return data == (PTH_TEXT if name == PTH_FILE else START_TEXT).encode()


def remove_bytecode(site: str) -> None:
    """Remove the module's bytecode, and ``__pycache__`` when nothing else is in it."""
    cache = Path(site, "__pycache__")
    with contextlib.suppress(OSError):
        for pyc in cache.glob(MODULE + ".*"):
            pyc.unlink()
        cache.rmdir()


@dataclass
class SetUp:
    """What ``set_up`` did: ``done`` (target, changed) per environment; ``dropped``: listed
    interpreters that no longer exist; ``problems``: one sentence each."""

    done: list[tuple[Target, bool]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    found_none: bool = False


def set_up(project: str, explicit: Iterable[Target] = ()) -> SetUp:
    """Put the hook into the environments found in ``project``, those in ``explicit``
    (``--python``) and those listed for it before (a lost copy comes back); update the list."""
    result = SetUp()
    targets: dict[str, Target] = {}
    for target in explicit:
        targets[target.python] = target
    listed = [entry.python for entry in record() if entry.project == project]
    pythons = [env_python(env) for env in environments_of(project)]
    pythons += [python for python in listed if python not in pythons]
    for python in pythons:
        if python in targets or not _under(python, [project]):
            continue  # SPEC: the list names no program mpsd runs; --python names one again
        if not os.path.exists(python):
            if python in listed:
                result.dropped.append(python)
            else:
                result.problems.append(
                    f"{python} is missing (a venv whose base Python was removed?); recreate "
                    f"the environment, then run `mpsd enable` again."
                )
            continue
        try:
            targets[python] = inspect_interpreter(python)
        except MpsdError as exc:
            problem = str(exc)
            if python in listed:  # set up before: its copy stays until taken out
                import shlex

                command = f"mpsd disable {shlex.quote(project)} --python {shlex.quote(python)}"
                problem = f"{problem.rstrip('.')}; `{command}` takes out the copy set up before."
            result.problems.append(problem)
    result.found_none = not targets and not result.problems
    with _locked():
        redone = {*result.dropped, *targets}
        entries = [e for e in record() if not (e.project == project and e.python in redone)]
        for target in targets.values():
            result.done.append((target, write_copy(target.site, target.python)))
            entries.append(Entry(project, target.python, target.site))
        _write_record(entries)
    return result


def _take_out(mine: list[Entry], entries: list[Entry]) -> list[tuple[Entry, str]]:
    """Drop ``mine`` from the list and take their copies out unless another entry lists the same
    site-packages: each ``removed``, ``gone`` (already missing) or ``kept``."""
    rest = [e for e in entries if e not in mine]
    still_used = {e.site for e in rest}
    done = []
    for entry in mine:
        if entry.site in still_used:
            done.append((entry, "kept"))
        else:
            done.append((entry, "removed" if remove_copy(entry.site) else "gone"))
    _write_record(rest)
    return done


def tear_down(project: str) -> list[str]:
    """Take the hook out of ``project``'s listed environments; the site-packages left."""
    with _locked():
        entries = record()
        done = _take_out([e for e in entries if e.project == project], entries)
    return [entry.site for entry, outcome in done if outcome == "removed"]


def _same_python(a: str, b: str) -> bool:
    """``a`` and ``b`` name the same environment's python: the same file in the same directory
    (the directory's links resolved, not the file's: every venv's python is a link to its base
    interpreter), or two ``python*`` names in the same ``bin`` (``python`` and ``python3``)."""

    def parts(path: str) -> tuple[str, str]:
        path = os.path.abspath(os.path.expanduser(path))
        return os.path.realpath(os.path.dirname(path)), os.path.basename(path)

    (dir_a, name_a), (dir_b, name_b) = parts(a), parts(b)
    return dir_a == dir_b and (
        name_a == name_b or all(n.startswith("python") for n in (name_a, name_b))
    )


def tear_down_python(project: str, python: str) -> list[tuple[Entry, str]]:
    """Take the hook out of the interpreter ``python`` listed for ``project`` (which stays opted
    in): what ``_take_out`` did; one sentence (exit 1) when ``project`` lists no such python."""
    from mpsd.errors import EXIT_ABSENT

    with _locked():
        entries = record()
        mine = [e for e in entries if e.project == project and _same_python(e.python, python)]
        if not mine:
            raise MpsdError(
                f"{python} has no start-up hook from mpsd for {project}; `mpsd projects` lists "
                "each project's.",
                EXIT_ABSENT,
            )
        return _take_out(mine, entries)


def facts_for(project: str | None) -> list[dict[str, Any]]:
    """The environments of ``project`` (found or listed) and their hook, JSON-ready, ``state``
    one of: ``current``, ``outdated`` (another mpsd's copy), ``lost`` (listed, gone: a recreated
    environment), ``gone`` (listed, its python no longer exists) or ``none``."""
    if project is None:
        return []
    listed = [entry for entry in record() if entry.project == project]
    rows = [(env, env_python(env)) for env in environments_of(project)]
    found = {python for _, python in rows}
    rows += [(entry.site, entry.python) for entry in listed if entry.python not in found]
    facts = []
    for where, python in rows:
        entry = next((e for e in listed if e.python == python), None)
        site = entry.site if entry is not None and has_copy(entry.site) else env_copy_site(where)
        if site:
            state = check_copy(site)
        else:
            state = "none" if entry is None else "lost" if os.path.exists(python) else "gone"
        facts.append(
            {
                "project": project,
                "environment": where,
                "python": python,
                "site": site or (entry.site if entry else None),
                "state": state,
                "hidden": hidden_files(site) if site else [],
            }
        )
    return facts


def check_copy(site: str) -> str:
    """``current``, ``outdated`` (another mpsd's files, or one missing) or ``missing``."""
    if not has_copy(site):
        return "missing"
    try:
        same = all(
            Path(site, name).read_bytes() == data if data else not Path(site, name).exists()
            for name, data in copy_contents(site)
        )
    except OSError:
        same = False
    return "current" if same else "outdated"


def copy_files(entries: Iterable[Entry]) -> list[str]:
    """The files of every listed copy (for ``uninstall``), each once."""
    names = (PTH_FILE, START_FILE, MODULE_FILE)
    return list(dict.fromkeys(os.path.join(e.site, name) for e in entries for name in names))
