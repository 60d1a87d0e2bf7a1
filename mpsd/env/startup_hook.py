"""The interpreter start-up hook: ``mpsd enable`` copies this file into a project's virtual
environments (and those named with ``--python``) as ``_mpsd_startup.py``, beside a
``_mpsd_startup.pth`` whose one line imports it and a ``_mpsd_startup.start`` naming ``start``
(PEP 829's entry point, for Python 3.15+). Every ``python`` of that environment then runs it
at start, however it was started (an IDE, a notebook kernel, cron, ``uv run``).

What it does is the shell hooks' decision (docs: README, "IDEs, notebooks and scripts"): when
neither watermark variable is set, the working directory or the environment itself
(``sys.prefix``) lies inside a project of limits.toml, and limits.toml holds a valid pair of
ratios, it sets PYTORCH_MPS_HIGH_WATERMARK_RATIO and PYTORCH_MPS_LOW_WATERMARK_RATIO (and the
``_MPSD_EXPORTED_*`` records the hooks keep, so a hooked shell started below can tell them from
the user's). limits.toml is read as the hooks read it: one ``key = value`` a line, ratios as plain
decimals in (0, 2] with low <= high, the projects as ``    "/path",`` lines (sorted, and searched
by bisection); a file over 256 KiB is ignored, and so is everything when mpsd's config or data
dir fails the trust rule (``mpsd.paths.untrusted``: owned by the user, writable by nobody else).
Where the environment has mlx, it also sets MLX's memory limit to ``limit_bytes`` right after
the first ``import mlx.core`` (the last section; docs/usage.md, "MLX").

The rules it must keep, because it runs in environments that are not mpsd's:
- standard library only, Python 3.8 to 3.14, and only what start-up has already imported
  (``os``, ``sys``): no ``from __future__`` (that is an import too), no ``typing``;
- never prints, never raises: an exception in a ``.pth`` line prints a traceback at every
  start of python, so everything is wrapped;
- cheap: ``bench/pth_hook.py`` measures it against the same interpreter without it.

Where mpsd's dirs are follows ``mpsd.paths``; a test holds the two to the same answers.
"""

import os
import sys

TYPE_CHECKING = False  # not `typing`: this file may import only what start-up has (above)
if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping
    from typing import Any

HIGH_VAR = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
LOW_VAR = "PYTORCH_MPS_LOW_WATERMARK_RATIO"
MAX_BYTES = 256 * 1024
_HIGH = b"high_watermark_ratio = "
_LOW = b"low_watermark_ratio = "


def mpsd_dir(environ: "Mapping[str, str]", kind: str) -> str:
    """mpsd's ``"CONFIG"`` or ``"DATA"`` dir for ``environ``, as ``mpsd.paths`` has them:
    ``$MPSD_<kind>_DIR``, else ``$XDG_<kind>_HOME/mps`` (absolute only), else ``~/.config/mps``
    or ``~/.local/share/mps``."""
    value = environ.get("MPSD_" + kind + "_DIR")
    if value:
        return os.path.expanduser(value)  # reads HOME from os.environ, as mpsd.paths does
    base = environ.get("XDG_" + kind + "_HOME")
    if base and os.path.isabs(base):
        return os.path.join(base, "mps")
    home = environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".config" if kind == "CONFIG" else ".local/share", "mps")


def trusted(directory: str) -> bool:
    """The trust rule (``mpsd.paths.untrusted``): the dir is absent, or owned by this user
    and writable by nobody else."""
    try:
        st = os.stat(directory)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def ratio(text: str) -> int:
    """``text`` in billionths when it is a plain decimal in (0, 2] (at most 9 decimals), else 0."""
    whole, dot, frac = text.partition(".")
    if whole not in ("0", "1", "2") or (dot and not frac) or len(frac) > 9:
        return 0
    if frac.strip("0123456789"):  # ASCII digits only (str.isdigit takes others)
        return 0
    value = int(whole) * 1000000000 + int((frac + "000000000")[:9])
    return value if value <= 2000000000 else 0


def setting(data: "bytes | bytearray", key: bytes) -> str:
    """What follows the first line ``key`` starts in ``data`` (which starts with a newline)."""
    start = data.find(b"\n" + key)
    if start < 0:
        return ""
    start += len(key) + 1
    return data[start : data.find(b"\n", start)].decode("utf-8", "replace")


def covered(data: "bytes | bytearray", directory: str) -> bool:
    """Whether the physical ``directory`` is, or lies below, a project of ``data`` (limits.toml
    between a newline first and one last): whether it or an ancestor is a ``    "/path",`` line
    of the ``projects = [`` array. mpsd writes that array sorted (``projects.for_limits``), so
    the lines are searched by bisection (``deepest``): its cost grows with the logarithm of the
    number of projects."""
    first = data.find(b"\nprojects = [\n") + 13  # at the "\n" that ends that line
    if first < 13:
        return False
    try:
        path = directory.encode("utf-8")
    except UnicodeError:  # bytes that are not UTF-8: no line but "/" can name an ancestor
        path = b"/"
    at = data.find(b"]", first)  # the array ends at the first "]" line (or the file's end)
    while at >= 0 and data[at - 1 : at + 2] != b"\n]\n":
        at = data.find(b"]", at + 1)
    last = at - 1 if at >= 0 else len(data) - 1  # at the "\n" that ends its last line
    name = deepest(data, first, last, path)
    if name is None:
        return False
    refused = ('"', "\\", "\x7f")  # with control characters: a line the hooks refuse
    return not any(char in refused or char < " " for char in name.decode("utf-8"))


def deepest(data: "bytes | bytearray", first: int, last: int, path: bytes) -> "bytes | None":
    """The deepest ancestor of ``path`` (or itself) among the sorted lines between the newlines
    at ``first`` and ``last``; None when there is none, or the lines are out of order."""
    while True:
        # Every listed ancestor of `path` lies between `name` and `path`, so starts `name`.
        name = bytes(before(data, first, last, path))
        if name == b"/" or (
            name and path.startswith(name) and path[len(name) : len(name) + 1] in (b"", b"/")
        ):
            return name  # `name` is `path` or an ancestor of it
        if path == b"/":
            return None
        end = len(path)
        while end > 0 and not name.startswith(path[:end]):  # the deepest ancestor it may be
            end = path.rfind(b"/", 0, end)
        path = path[:end] if end > 0 else b"/"


def before(data: "bytes | bytearray", low: int, high: int, path: bytes) -> "bytes | bytearray":
    """The name of the last line at or before ``path`` among the lines between the newlines at
    ``low`` and ``high``, read as sorted ``    "name",`` lines (any other line sorts last);
    b"" when there is none."""
    found = b""  # type: bytes | bytearray
    while low < high:
        start = data.rfind(b"\n", low, (low + high) // 2 + 1)  # the line around the middle
        end = data.find(b"\n", start + 1, high + 1)
        name = b"\xff"  # type: bytes | bytearray  # never in UTF-8: after every path
        if data.startswith(b'    "', start + 1) and data.startswith(b'",', end - 2):
            name = data[start + 6 : end - 2]
        if name <= path:
            found, low = name, end
        else:
            high = start
    return found


def read_limits(path: str) -> "bytearray | None":
    """limits.toml's bytes between a newline first and one last, or None when it is missing,
    unreadable, no regular file, over 256 KiB, or not the user's own or writable by others
    (``mpsd.limits.read_file``'s rules)."""
    try:
        # O_NONBLOCK: a FIFO in the file's place must not hang every python's start.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o170000 != 0o100000 or st.st_size > MAX_BYTES:  # S_ISREG, the cap
            return None
        if st.st_uid != os.getuid() or st.st_mode & 0o022:  # the trust rule for the file
            return None
        # One buffer, a newline either side, a byte more to see a file that grew meanwhile:
        # a fresh process pays for each page it touches, so no other copy and no bigger buffer.
        data = bytearray(st.st_size + 2)
        if os.readv(fd, [memoryview(data)[1:]]) != st.st_size:
            return None  # changed while read: mpsd writes by rename, so not its own
    except OSError:
        return None
    finally:
        os.close(fd)
    data[0] = data[-1] = 10  # "\n"
    return None if b"\0" in data else data  # not text: the other readers ignore it whole


def decide(environ: "Mapping[str, str]", cwd: "str | None", prefix: str) -> "dict[str, str]":
    """The variables to set for a python started in ``cwd`` (physical; None when unknown)
    from the environment ``prefix`` (resolved here only when ``cwd`` is outside every
    project), with ``environ``; empty when none."""
    if HIGH_VAR in environ or LOW_VAR in environ:
        return {}
    data = limits_here(environ, cwd, prefix)
    if data is None:
        return {}
    high, low = setting(data, _HIGH), setting(data, _LOW)
    high_value, low_value = ratio(high), ratio(low)
    if not high_value or not low_value or low_value > high_value:
        return {}
    return {HIGH_VAR: high, LOW_VAR: low, "_MPSD_EXPORTED_HIGH": high, "_MPSD_EXPORTED_LOW": low}


def limits_here(environ: "Mapping[str, str]", cwd: "str | None", prefix: str) -> "bytearray | None":
    """limits.toml's bytes (as ``read_limits`` gives them) when mpsd's dirs pass the trust rule
    and ``cwd`` or the environment ``prefix`` lies in one of its projects; else None."""
    config = mpsd_dir(environ, "CONFIG")
    if not (trusted(config) and trusted(mpsd_dir(environ, "DATA"))):
        return None
    data = read_limits(os.path.join(config, "limits.toml"))
    if data is None:
        return None
    in_cwd = cwd is not None and covered(data, cwd)
    if not in_cwd and not covered(data, os.path.realpath(prefix)):
        return None
    return data


def here() -> "str | None":
    """The working directory (physical: the kernel's path); None when it was removed."""
    try:
        return os.getcwd()
    except OSError:
        return None


def apply(environ: "MutableMapping[str, str]") -> None:
    """Set the variables in ``environ`` (``os.environ``) as ``decide`` says. Never raises."""
    try:
        for name, value in decide(environ, here(), sys.prefix).items():
            environ[name] = value
    except BaseException:
        pass


# -- MLX, which reads no variable. Where the environment has mlx (one stat), this module is first
# on sys.meta_path: the finder every import passes (one comparison), and for the first `import
# mlx.core` the loader: mlx.core's own runs, then MLX's limit is set from limits.toml as it is
# then, its cache no larger (never the wired limit: the user's). Not a class: making one costs
# every start more than this whole section.
_MLX_SWITCH = b"mlx_limit = "
_LIMIT_BYTES = b"limit_bytes = "
_mlx_loader = []  # type: list[Any]  # mlx.core's own loader


def set_mlx_limits(core: "Any") -> None:
    """MLX's limit to limits.toml's ``limit_bytes`` where its ``mlx_limit = true`` and
    ``limits_here`` finds a project, the cache no larger; else nothing. Never raises."""
    try:
        data = limits_here(os.environ, here(), sys.prefix)
        text = setting(data, _LIMIT_BYTES) if data and setting(data, _MLX_SWITCH) == "true" else ""
        digits = text and len(text) <= 18 and not text.strip("0123456789")  # below 2**63
        limit = int(text) if digits else 0
        if limit:
            core.set_memory_limit(limit)
            cache = core.set_cache_limit(limit)  # returns the one before
            if cache < limit:  # no larger than it was either
                core.set_cache_limit(cache)
    except BaseException:
        pass


def find_spec(name: str, path: "Any" = None, target: "Any" = None) -> "Any":
    if name != "mlx.core":
        return None
    me = sys.modules.get(__name__)
    try:
        for finder in sys.meta_path:  # the spec the finders after this one give
            find = getattr(finder, "find_spec", None) if finder is not me else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if hasattr(spec.loader, "exec_module"):
                    _mlx_loader[:] = [spec.loader]
                    spec.loader = me
                return spec
    except BaseException:
        pass
    return None  # the import system asks the others itself


def create_module(spec: "Any") -> "Any":
    return _mlx_loader[0].create_module(spec)


def exec_module(module: "Any") -> None:
    loader = _mlx_loader[0]
    try:
        loader.exec_module(module)
    finally:
        if sys.modules.get(__name__) in sys.meta_path:
            sys.meta_path.remove(sys.modules[__name__])
        if getattr(module, "__spec__", None) is not None:
            module.__loader__ = module.__spec__.loader = loader
    set_mlx_limits(module)


_started = []  # type: list[bool]


def start() -> None:
    """The entry point of ``_mpsd_startup.start`` (PEP 829, 3.15+) and of the ``.pth`` line's
    import: the values are applied once, whichever runs (both may). Never raises."""
    if not _started:
        _started.append(True)
        apply(os.environ)
        try:  # MLX: this module first on sys.meta_path where the environment has mlx (one stat)
            if os.path.isdir(os.path.join(os.path.dirname(__file__), "mlx")):
                sys.meta_path.insert(0, sys.modules[__name__])
        except BaseException:
            pass


if __name__ == "_mpsd_startup":  # imported by its .pth line; as mpsd.env.startup_hook, inert
    start()
