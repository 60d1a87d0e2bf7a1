"""The start-up hook's module (copied into environments that have no mpsd): it reads limits.toml
exactly as the shared decision does, finds it where ``mpsd.paths`` does, and imports nothing."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsd import paths
from mpsd.env import startup_hook
from mpsd.env.decision import containing_project, decide_exports
from mpsd.limits import parse_text, ratio_value
from tests.integration.shells import limits_text

PROJECT = "/Users/me/code/diffusion"
SOURCE = Path(startup_hook.__file__)

# Lines limits.toml may hold, well-formed and not: hypothesis strings them together.
LINES = st.sampled_from(
    [
        "high_watermark_ratio = 0.77",
        "high_watermark_ratio = 0.5",
        "high_watermark_ratio = 2.5",
        "high_watermark_ratio = ",
        "high_watermark_ratio = 1",
        "low_watermark_ratio = 0.7",
        "low_watermark_ratio = 0.9",
        "low_watermark_ratio = 0",
        "low_watermark_ratio = 0.7 ",
        "low_watermark_ratio = .7",
        "projects = [",
        "projects = []",
        "]",
        "  ]",
        f'    "{PROJECT}",',
        '    "/Users/me/other",',
        '    "/",',
        '    "/with\\"quote",',
        '    "/tab\there",',
        '    "relative",',
        '   "/three/spaces",',
        '    "/no/comma"',
        "limit_bytes = 1",
        "# high_watermark_ratio = 0.3",
        "",
    ]
)


# Where a python may start: in a project, below one, beside one, in a path no line may name.
DIRECTORIES = (PROJECT, PROJECT + "/src", "/Users/me/code", "/Users/me/other2", '/with"quote')


def _hook_and_shared(text: str) -> list[tuple[dict[str, str], dict[str, str], bool, bool]]:
    """For each of DIRECTORIES: (the hook's exports, the shared decision's, the hook's and the
    shared decision's answer to "is it inside a project")."""
    view = parse_text(text)
    data = f"\n{text}\n".encode()
    found = []
    with tempfile.TemporaryDirectory() as config:
        Path(config, "limits.toml").write_text(text)
        environ = {"MPSD_CONFIG_DIR": config}
        for directory in DIRECTORIES:
            got = startup_hook.decide(environ, directory, "/nowhere")
            hooked = {k: v for k, v in got.items() if k.startswith("PYTORCH")}
            wanted = decide_exports(view, directory, {}).wanted
            inside = containing_project(directory, view.projects) is not None
            found.append((hooked, wanted, startup_hook.covered(data, directory), inside))
    return found


# The project lines mpsd may write (enable refuses the others) and some it never writes.
PROJECT_LINES = st.sampled_from(
    [PROJECT, "/Users/me/other", "/", "/Users/me/code/diffusion-2", "/Users/me/code/a", "/Zed"]
)


OTHER_LINES = LINES.filter(lambda line: not line.lstrip().startswith(("projects", "]", '"')))


@given(st.lists(OTHER_LINES, max_size=8), st.lists(PROJECT_LINES, unique=True, max_size=6))
@settings(deadline=None, max_examples=400)
def test_the_hook_reads_limits_toml_as_mpsd_writes_it_as_the_shared_decision_does(
    lines: list[str], projects: list[str]
) -> None:
    # mpsd writes the array sorted (for_limits), one well-formed line each, among any lines.
    array = ["projects = [", *(f'    "{p}",' for p in sorted(projects)), "]"]
    text = "\n".join([*lines, *array, *lines]) + "\n"
    for hooked, wanted, covered, inside in _hook_and_shared(text):
        assert hooked == wanted and covered == inside


@given(st.lists(LINES, max_size=14))
@settings(deadline=None, max_examples=400)
def test_a_hand_made_limits_toml_never_makes_the_hook_export_where_mpsd_would_not(
    lines: list[str],
) -> None:
    # Out of order or malformed, a line can only hide a project from the hook, never add one.
    for hooked, wanted, covered, inside in _hook_and_shared("\n".join(lines) + "\n"):
        assert inside or not covered
        assert hooked in ({}, wanted)


def test_the_hook_finds_each_of_a_thousand_projects_and_nothing_beside_them() -> None:
    listed = [f"/Users/me/code/p{i:04d}" for i in range(1000)] + ["/Users/me/code/p0001/deep"]
    data = ("\n" + limits_text("0.77", "0.7", tuple(sorted(listed))) + "\n").encode()
    for project in listed[::7]:
        assert startup_hook.covered(data, project)
        assert startup_hook.covered(data, project + "/src/pkg")
    for outside in ("/Users/me/code", "/Users/me/code/p0001x", "/Users/me/code/p1000", "/Zed"):
        assert not startup_hook.covered(data, outside), outside


def test_a_limits_file_with_a_nul_byte_is_ignored_as_the_other_readers_ignore_it(
    tmp_path: Path,
) -> None:
    text = limits_text("0.77", "0.7", (PROJECT,))
    (tmp_path / "limits.toml").write_text(text + "\0\n")
    assert startup_hook.decide({"MPSD_CONFIG_DIR": str(tmp_path)}, PROJECT, "/x") == {}
    (tmp_path / "limits.toml").write_text(text)
    assert startup_hook.decide({"MPSD_CONFIG_DIR": str(tmp_path)}, PROJECT, "/x")


@given(st.text(max_size=12))
@settings(deadline=None, max_examples=300)
def test_the_hook_accepts_exactly_the_ratios_the_hooks_accept(text: str) -> None:
    assert startup_hook.ratio(text) == (ratio_value(text) or 0)


SETTINGS = {
    "MPSD_CONFIG_DIR": (None, "", "/abs/config", "~/cfg", "~", "relative/cfg"),
    "XDG_CONFIG_HOME": (None, "", "/xdg", "relative-xdg"),
    "HOME": ("/home/one", "/home/two/"),
}


def test_the_hook_finds_mpsd_dirs_where_mpsd_paths_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every combination of the settings, for both dirs: one loop, each failure naming its case.
    for kind, combo in itertools.product(("CONFIG", "DATA"), itertools.product(*SETTINGS.values())):
        setting = {name.replace("CONFIG", kind): value for name, value in zip(SETTINGS, combo)}
        with monkeypatch.context() as env:
            for name, value in setting.items():
                if value is None:
                    env.delenv(name, raising=False)
                else:
                    env.setenv(name, value)
            wanted = paths.config_dir() if kind == "CONFIG" else paths.data_dir()
            found = startup_hook.mpsd_dir(os.environ, kind)
            assert found == str(wanted), f"the {kind} dir with {setting} (None: unset)"


@pytest.mark.parametrize("kind", ["CONFIG", "DATA"])
def test_a_config_or_data_dir_writable_by_others_makes_the_hook_set_nothing(
    kind: str, tmp_path: Path
) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "limits.toml").write_text(limits_text("0.77", "0.7", (PROJECT,)))
    (tmp_path / "data").mkdir()
    environ = {"MPSD_CONFIG_DIR": str(tmp_path / "config"), "MPSD_DATA_DIR": str(tmp_path / "data")}
    assert startup_hook.decide(environ, PROJECT, "/x")
    (tmp_path / kind.lower()).chmod(0o777)
    assert startup_hook.decide(environ, PROJECT, "/x") == {}
    assert paths.untrusted(tmp_path / kind.lower())  # as mpsd's own rule says
    if os.getuid() == 0:  # another user's dir (only root can give one away)
        (tmp_path / kind.lower()).chmod(0o755)
        os.chown(tmp_path / kind.lower(), 65534, -1)
        assert startup_hook.decide(environ, PROJECT, "/x") == {}


def test_the_module_imports_only_what_python_start_up_already_has() -> None:
    tree = ast.parse(SOURCE.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    # collections.abc and typing only under `if TYPE_CHECKING:` (False at run time), for mypy;
    # and no `from __future__`, which is a real import at run time.
    assert imported == {"os", "sys", "collections.abc", "typing"}
    guarded = [n for n in tree.body if isinstance(n, ast.If)]
    assert any(isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING" for n in guarded)


def test_user_values_win_even_one_of_them(tmp_path: Path) -> None:
    limits = tmp_path / "limits.toml"
    limits.write_text(limits_text("0.77", "0.7", (PROJECT,)))
    environ = {"MPSD_CONFIG_DIR": str(tmp_path)}
    assert startup_hook.decide(environ, PROJECT, "/x")["PYTORCH_MPS_HIGH_WATERMARK_RATIO"] == "0.77"
    for name in ("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "PYTORCH_MPS_LOW_WATERMARK_RATIO"):
        assert startup_hook.decide({**environ, name: "1.0"}, PROJECT, "/x") == {}


def test_the_environment_inside_a_project_counts_as_much_as_the_directory(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".venv").mkdir(parents=True)
    (tmp_path / "limits.toml").write_text(limits_text("0.77", "0.7", (str(project),)))
    environ = {"MPSD_CONFIG_DIR": str(tmp_path)}
    assert startup_hook.decide(environ, "/elsewhere", str(project / ".venv"))
    link = tmp_path / "link"
    link.symlink_to(project)  # sys.prefix through a symlink: resolved
    assert startup_hook.decide(environ, "/elsewhere", str(link / ".venv"))
    assert startup_hook.decide(environ, None, str(tmp_path / "other")) == {}


def test_a_limits_file_over_256_kib_is_ignored(tmp_path: Path) -> None:
    text = limits_text("0.77", "0.7", (PROJECT,))
    limits = tmp_path / "limits.toml"
    limits.write_text(text + "#" * (256 * 1024 - len(text)))
    assert startup_hook.read_limits(str(limits)) is not None
    limits.write_text(text + "#" * (256 * 1024 - len(text) + 1))
    assert startup_hook.read_limits(str(limits)) is None


def test_apply_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(startup_hook, "decide", lambda *a: broken())
    environ: dict[str, str] = {}
    startup_hook.apply(environ)
    assert environ == {}


# -- MLX (issue 32) --------------------------------------------------------------------------


class FakeCore:
    """mlx.core's calls, recorded; ``cache``: the cache limit before."""

    def __init__(self, cache: int = 1 << 50) -> None:
        self.calls: list[tuple[str, int]] = []
        self.cache = cache

    def set_memory_limit(self, value: int) -> int:
        self.calls.append(("memory", value))
        return 0

    def set_cache_limit(self, value: int) -> int:
        self.calls.append(("cache", value))
        before, self.cache = self.cache, value
        return before


def _mlx_gets(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    cwd: str = PROJECT,
    prefix: str = "/x",
    switch: str = "mlx_limit = true",
    size: str = "30954687948",
    cache: int = 1 << 50,
) -> FakeCore:
    """The calls ``set_mlx_limits`` makes for a python in ``cwd`` from ``prefix``."""
    text = limits_text("0.77", "0.7", (PROJECT,)).replace("30954687948", size)
    (tmp_path / "limits.toml").write_text(
        text.replace("mlx_limit = true\n", switch + "\n" if switch else "")
    )
    monkeypatch.setenv("MPSD_CONFIG_DIR", str(tmp_path))
    monkeypatch.setattr(startup_hook, "here", lambda: cwd)
    monkeypatch.setattr(sys, "prefix", prefix)
    core = FakeCore(cache)
    startup_hook.set_mlx_limits(core)
    return core


def test_mlx_gets_limit_bytes_in_a_project_with_the_switch_on_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = ("memory", 30954687948)
    assert _mlx_gets(monkeypatch, tmp_path, PROJECT + "/src").calls[0] == limit
    assert _mlx_gets(monkeypatch, tmp_path, "/elsewhere", PROJECT + "/.venv").calls[0] == limit
    assert _mlx_gets(monkeypatch, tmp_path, "/elsewhere").calls == []
    # The user's watermark variables are PyTorch's business: MLX gets its limit still.
    monkeypatch.setenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "1")
    assert _mlx_gets(monkeypatch, tmp_path).calls[0] == limit
    for switch in ("mlx_limit = false", "", "mlx_limit = True", "mlx_limit = true "):
        assert _mlx_gets(monkeypatch, tmp_path, switch=switch).calls == [], switch


@pytest.mark.parametrize("size", ["", "12x", "-5", "1e9", " 5", "\u0663", "9" * 19, "0"])
def test_a_limit_bytes_mpsd_never_writes_leaves_mlx_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: str
) -> None:
    assert _mlx_gets(monkeypatch, tmp_path, size=size).calls == []


@pytest.mark.parametrize("cache", [1 << 40, 1 << 25])
def test_the_cache_limit_ends_no_larger_than_the_limit_nor_than_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: int
) -> None:
    core = _mlx_gets(monkeypatch, tmp_path, cache=cache)
    assert core.calls[0] == ("memory", 30954687948)
    assert core.cache == min(cache, 30954687948)


def test_the_finder_waits_for_mlx_core_and_sets_the_limit_right_after_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in mlx package (the real one: tests/integration/test_mlx_hook.py)."""
    (tmp_path / "mlx").mkdir()
    (tmp_path / "mlx" / "__init__.py").write_text("")
    (tmp_path / "mlx" / "core.py").write_text(
        "calls = []\n"
        "def set_memory_limit(v):\n    calls.append(('memory', v))\n    return 0\n"
        "def set_cache_limit(v):\n    calls.append(('cache', v))\n    return 1 << 50\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(startup_hook, "__file__", str(tmp_path / "_mpsd_startup.py"))
    monkeypatch.setattr(
        startup_hook, "limits_here", lambda *a: b"\nlimit_bytes = 1234\nmlx_limit = true\n"
    )
    for name in ("mlx", "mlx.core"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(startup_hook, "_started", [])
    startup_hook.start()
    assert sys.meta_path[0] is startup_hook  # the module is the finder
    import json  # noqa: F401 - any other import passes by

    assert importlib.util.find_spec("mlx.core") is not None  # found, not loaded: no call
    assert sys.meta_path[0] is startup_hook
    core = importlib.import_module("mlx.core")
    assert core.calls == [("memory", 1234), ("cache", 1234)]
    assert startup_hook not in sys.meta_path  # once: a reload sets nothing
    assert type(core.__loader__).__name__ == "SourceFileLoader"
    assert core.__spec__.loader is core.__loader__
    for name in ("mlx", "mlx.core"):
        del sys.modules[name]


def test_no_mlx_beside_the_hook_no_finder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(startup_hook, "__file__", str(tmp_path / "_mpsd_startup.py"))
    monkeypatch.setattr(startup_hook, "_started", [])
    startup_hook.start()
    assert startup_hook not in sys.meta_path


def test_status_looks_for_the_hook_under_the_name_enable_writes_it() -> None:
    from mpsd.env import exports, pyhooks

    assert exports.HOOK_FILE == pyhooks.MODULE_FILE
