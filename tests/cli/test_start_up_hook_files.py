"""The start-up hook's files on newer Pythons: the PEP 829 ``.start`` entry point (tested
directly and through a simulated pass of 3.15's ``site`` rules: no 3.15 is installed here), the
refresh ``mpsd install`` gives every listed copy, and macOS's hidden flag (through the flags
seam: Linux has no ``chflags``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd.cli import main
from mpsd.env import pyhooks
from tests.installkit import hook_sources_fixture, no_launchctl_fixture  # noqa: F401
from tests.integration.shells import limits_text

HIGH = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"

# PEP 829 as 3.15's site.py applies it to one site-packages dir (no 3.15 exists here): a `.pth`
# whose `.start` of the same name exists has its import lines skipped; then every `.start`
# line `module:function` is imported and called. Names that start with a dot or carry the
# hidden flag are skipped (3.13+ and the 2024 backports). Run with `python -S`, so that the real
# site.py does nothing.
PEP_829_SITE = """
import importlib, os, sys
site = sys.argv[1]
sys.path.append(site)
names = sorted(n for n in os.listdir(site) if not n.startswith("."))
for name in names:
    if name.endswith(".pth"):
        skip_imports = os.path.exists(os.path.join(site, name[:-4] + ".start"))
        for line in open(os.path.join(site, name)):
            if line.startswith(("import ", "import\\t")) and not skip_imports:
                exec(line)
for name in names:
    if name.endswith(".start"):
        for line in open(os.path.join(site, name)):
            line = line.strip()
            if line and not line.startswith("#"):
                module, _, function = line.partition(":")
                getattr(importlib.import_module(module), function)()
"""
# Then: what the pass set, and that a second call (both ran) applies nothing again.
CHECK = """
first = os.environ.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO")
del os.environ["PYTORCH_MPS_HIGH_WATERMARK_RATIO"]
sys.modules["_mpsd_startup"].start()
print(first, os.environ.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO"))
"""


@pytest.fixture
def hooked_site(tmp_path: Path, isolated_dirs: dict[str, Path]) -> tuple[Path, dict[str, str]]:
    """A site-packages with mpsd's copy, a project in limits.toml, and the environment a
    python started in the project gets."""
    site = tmp_path / "site-packages"
    site.mkdir()
    pyhooks.write_copy(str(site))
    project = Path(os.path.realpath(tmp_path))
    (isolated_dirs["config"]).mkdir(exist_ok=True)
    (isolated_dirs["config"] / "limits.toml").write_text(
        limits_text("0.77", "0.7", (str(project),))
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(isolated_dirs["home"])}
    env["MPSD_CONFIG_DIR"] = str(isolated_dirs["config"])
    return site, env


def _python(site: Path, env: dict[str, str], code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(site), *args],
        cwd=site.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.strip()


def test_the_copy_has_a_start_file_naming_a_no_argument_entry_point(
    hooked_site: tuple[Path, dict[str, str]],
) -> None:
    site, env = hooked_site
    assert (site / "_mpsd_startup.start").read_text() == "_mpsd_startup:start\n"
    assert pyhooks.check_copy(str(site)) == "current"
    # The entry point directly: the module imported as the hook, then start() called.
    code = (
        "import os, sys; sys.path.append(sys.argv[1]); import _mpsd_startup as m\n"
        "first = os.environ.pop('PYTORCH_MPS_HIGH_WATERMARK_RATIO'); m.start()\n"
        "print(first, os.environ.get('PYTORCH_MPS_HIGH_WATERMARK_RATIO'))"
    )
    assert _python(site, env, code) == "0.77 None"


def test_pep_829_site_rules_apply_the_values_once_through_the_start_file(
    hooked_site: tuple[Path, dict[str, str]],
) -> None:
    site, env = hooked_site
    assert _python(site, env, PEP_829_SITE + CHECK) == "0.77 None"
    # An old Python's site.py reads only the .pth: the values come, once, from its import line.
    old = "import os, site, sys; site.addsitedir(sys.argv[1])\n"
    assert _python(site, env, old + CHECK) == "0.77 None"
    # The copy for 3.15+: the module and its .start alone.
    (site / pyhooks.PTH_FILE).unlink()
    assert _python(site, env, PEP_829_SITE + CHECK) == "0.77 None"


def test_outside_every_project_the_entry_point_sets_nothing(
    hooked_site: tuple[Path, dict[str, str]], isolated_dirs: dict[str, Path]
) -> None:
    site, env = hooked_site
    (isolated_dirs["config"] / "limits.toml").write_text(limits_text("0.77", "0.7", ("/nowhere",)))
    code = "import os, sys; sys.path.append(sys.argv[1]); import _mpsd_startup as m; m.start()\n"
    code += "print(os.environ.get('PYTORCH_MPS_HIGH_WATERMARK_RATIO'))"
    assert _python(site, env, code) == "None"


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_install_refreshes_every_listed_copy_to_this_mpsds_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An upgrade asks for `mpsd install`: a copy enable wrote before (no .start, an older
    module) is brought up to date; a lost copy is left to enable."""
    old, lost = tmp_path / "old-site", tmp_path / "lost-site"
    old.mkdir()
    lost.mkdir()
    (old / pyhooks.MODULE_FILE).write_bytes(b"# an older mpsd's hook\n")
    (old / pyhooks.PTH_FILE).write_text(pyhooks.PTH_TEXT)
    pyhooks._write_record(
        [
            pyhooks.Entry(str(tmp_path), "/p/bin/python", str(old)),
            pyhooks.Entry(str(tmp_path), "/q/bin/python", str(lost)),
        ]
    )
    assert main(["install", "--dry-run"]) == 0
    assert "old-site/_mpsd_startup.start (python start-up hook)" in capsys.readouterr().out
    assert not (old / pyhooks.START_FILE).exists()
    assert main(["install"]) == 0
    out = capsys.readouterr().out
    assert "old-site/_mpsd_startup.start (python start-up hook)" in out
    assert pyhooks.check_copy(str(old)) == "current"
    assert list(lost.iterdir()) == []
    assert main(["install"]) == 0
    assert "start-up hook" not in capsys.readouterr().out  # nothing left to refresh


class Flags:
    """``st_flags`` as macOS keeps them, for files of this Linux machine."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.flags: dict[str, int] = {}
        monkeypatch.setattr(pyhooks, "file_flags", self.get)
        monkeypatch.setattr(pyhooks, "set_file_flags", self.flags.__setitem__)

    def get(self, path: str) -> int:
        os.stat(path)  # a missing file fails as on a Mac
        return self.flags.get(path, 0)


def test_a_hidden_hook_file_is_reported_by_status_and_doctor_and_enable_clears_the_flag(
    hooked_site: tuple[Path, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Python skips a .pth with UF_HIDDEN (3.13+, and 3.8-3.12 since their January 2024
    releases), which iCloud Drive sets inside .venv."""
    site, _ = hooked_site
    flags = Flags(monkeypatch)
    pth, start = str(site / pyhooks.PTH_FILE), str(site / pyhooks.START_FILE)
    flags.flags[pth] = pyhooks.UF_HIDDEN | 0x40  # another flag stays as it is
    project = Path(os.path.realpath(tmp_path))
    pyhooks._write_record([pyhooks.Entry(str(project), sys.executable, str(site))])
    monkeypatch.chdir(project)
    monkeypatch.setattr("mpsd.health.system.torch_info", lambda *_: None)
    main(["doctor", "--json"])
    checks = json.loads(capsys.readouterr().out)["checks"]
    (check,) = [c for c in checks if c["name"] == "start-up hook"]
    assert check["status"] == "problem" and "3.8-3.12 since their January 2024" in check["detail"]
    assert check["fix"] == f"run `chflags nohidden {pth}`"
    main(["status"])
    assert f"run `chflags nohidden {pth}`" in capsys.readouterr().out
    main(["status", "--json"])
    (env,) = json.loads(capsys.readouterr().out)["start_up_hooks"]
    assert env["hidden"] == [pth]
    assert pyhooks.write_copy(str(site)) is True  # what enable does: the flag goes
    assert flags.flags[pth] == 0x40 and start not in flags.flags
    assert pyhooks.hidden_files(str(site)) == []


@pytest.mark.usefixtures("hook_sources", "no_launchctl")
def test_python_3_15_gets_the_module_and_its_start_file_only_and_3_14_keeps_the_pth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From 3.20 a .pth import line warns even beside its .start: for 3.15+ enable writes none,
    and install's refresh drops the one an older mpsd wrote. A stand-in interpreter answers as
    3.15 would (no 3.15 is installed here): its site-packages is lib/python3.15/site-packages,
    the version mpsd goes by (CPython's layout), so install's refresh needs no python to run."""
    from tests.cli.test_enable_python import standin_python

    project = Path(os.path.realpath(tmp_path)) / "proj"
    project.mkdir()
    sites = {}
    for version in ((3, 15), (3, 14)):
        name = "python{}.{}".format(*version)
        prefix = tmp_path / name
        sites[version] = prefix / "lib" / name / "site-packages"
        python = standin_python(prefix, sites[version], version)
        assert main(["enable", str(project), "--python", str(python)]) == 0
    capsys.readouterr()
    names = {v: sorted(p.name for p in site.iterdir()) for v, site in sites.items()}
    assert names[(3, 15)] == ["_mpsd_startup.py", "_mpsd_startup.start"]
    assert names[(3, 14)] == ["_mpsd_startup.pth", "_mpsd_startup.py", "_mpsd_startup.start"]
    # A copy an older mpsd wrote into 3.15's site-packages (module and .pth): outdated, and
    # install takes the .pth out, as it brings the .start in.
    new = sites[(3, 15)]
    (new / pyhooks.START_FILE).unlink()
    (new / pyhooks.PTH_FILE).write_text(pyhooks.PTH_TEXT)
    assert pyhooks.check_copy(str(new)) == "outdated"
    assert main(["install"]) == 0
    assert sorted(p.name for p in new.iterdir()) == ["_mpsd_startup.py", "_mpsd_startup.start"]
    assert pyhooks.check_copy(str(new)) == "current"
    assert pyhooks.check_copy(str(sites[(3, 14)])) == "current"
