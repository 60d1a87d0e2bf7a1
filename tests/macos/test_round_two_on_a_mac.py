"""On a real Mac (or GitHub's arm64 macOS runner, which has no MPS): the second round of facts
(docs/macos-and-pytorch.md, "Added" notes). Metal read the daemon's way, also inside a launchd
agent; the cache install seeds; the program Login Items names; the start-up hook and the hidden
flag on this Python; the probe's stop at pressure warning; apply()'s lateness on real MPS; MLX
jobs. Each takes seconds; `tests/macos/run.sh` runs them all."""

from __future__ import annotations

import json
import os
import plistlib
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd import paths
from mpsd.env import pyhooks
from mpsd.machine import metal, mljobs, recommended, sysctl
from mpsd.setup import launchd
from tests.conftest import wait_for
from tests.integration.shells import limits_text
from tests.macos.mps import USE_MPS, require_mps
from tests.macos.test_open_questions import PASTE, _gone, _plist

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(sys.platform != "darwin", reason="needs a real Mac"),
]


def test_metal_is_read_from_the_devices_this_mac_reports() -> None:
    """MTLCopyAllDevices first (skipping low-power devices), else the default device."""
    value = metal.working_set_size()
    memsize = sysctl.read("hw.memsize") or 0
    assert value is not None and value > 0, f"no Metal device answered through ctypes. {PASTE}"
    assert value <= 2 * memsize, f"Metal said {value} bytes on a Mac of {memsize}. {PASTE}"
    assert recommended.probe_subprocess() == (value, "metal")


def test_metal_answers_inside_a_launchd_agent(tmp_path: Path) -> None:
    """Apple documents MTLCreateSystemDefaultDevice as unsupported for daemons: does the agent
    read Metal through MTLCopyAllDevices, in gui/ (or user/ over ssh)?"""
    label, uid = f"io.github.mpsd.test-metal-{os.getpid()}", os.getuid()
    out = tmp_path / "metal.json"
    for domain in (f"gui/{uid}", f"user/{uid}"):
        plist = _plist(tmp_path, label, domain)
        data = plistlib.loads(plist.read_bytes())
        data["ProgramArguments"] = [sys.executable, "-c", recommended.probe_code()]
        data["StandardOutPath"] = str(out)
        plist.write_bytes(plistlib.dumps(data))
        if not launchd.launchctl("bootstrap", domain, str(plist)).ok:
            continue
        try:
            wait_for(lambda: out.exists() and out.read_bytes().strip(), f"the agent. {PASTE}")
        finally:
            launchd.launchctl("bootout", f"{domain}/{label}")
            _gone(f"{domain}/{label}")
        answer = json.loads(out.read_text().splitlines()[-1])
        assert answer.get("source") == "metal", (
            f"inside a launchd agent ({domain}) Metal said {answer}. {PASTE}"
        )
        return
    pytest.skip("neither gui/ nor user/ took a test agent here")


def test_install_seeds_a_real_recommended_max_that_outlives_a_worse_probe() -> None:
    recommended.seed()
    cache = json.loads(paths.recommended_max_cache().read_text())
    assert cache["source"] in ("metal", "torch"), f"the seeded cache says {cache}. {PASTE}"
    assert "boot_time" not in cache


def test_the_agent_runs_the_mpsd_script_so_login_items_names_it_mpsd(tmp_path: Path) -> None:
    args = plistlib.loads(
        launchd.render(sys.executable, tmp_path / "c", tmp_path / "s", tmp_path / "d")
    )["ProgramArguments"]
    assert os.path.basename(args[0]) == "mpsd" and args[1:] == ["daemon"], args
    assert os.path.realpath(launchd.agent_python(args)) == os.path.realpath(sys.executable)
    done = subprocess.run([args[0], "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _venv_with_the_hook(tmp_path: Path) -> tuple[str, Path, dict[str, str]]:
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], check=True
    )
    python = str(tmp_path / ".venv" / "bin" / "python")
    site = Path(pyhooks.inspect_interpreter(python).site)
    pyhooks.write_copy(str(site))
    config = tmp_path / "config"
    config.mkdir()
    project = os.path.realpath(tmp_path)
    (config / "limits.toml").write_text(limits_text("0.77", "0.7", (project,)))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MPSD_CONFIG_DIR": str(config)}
    return python, site, env


def _high(python: str, cwd: Path, env: dict[str, str]) -> str:
    code = "import os; print(os.environ.get('PYTORCH_MPS_HIGH_WATERMARK_RATIO'))"
    done = subprocess.run([python, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.strip()


# cpython PR 113660 (skip a .pth whose name starts with a dot or that carries UF_HIDDEN) is in
# 3.13.0 and was backported in January 2024: the first patch release of 3.8-3.12 that has it.
# A fresh Mac's /usr/bin/python3 (3.9.6) predates it.
SKIPS_HIDDEN_FROM = {(3, 8): 19, (3, 9): 19, (3, 10): 14, (3, 11): 8, (3, 12): 2}


def test_the_start_up_hook_and_the_hidden_flag_on_this_python(tmp_path: Path) -> None:
    """Python skips a .pth with UF_HIDDEN (iCloud Drive sets it inside .venv) from 3.13.0 and
    the backports above, and runs it before them; writing the copy clears the flag. 3.15+ has
    the .start entry point only (no .pth)."""
    python, site, env = _venv_with_the_hook(tmp_path)
    assert _high(python, tmp_path, env) == "0.77"
    version = sys.version_info
    pth = site / pyhooks.PTH_FILE
    assert pth.exists() == (version < (3, 15)), sorted(p.name for p in site.iterdir())
    hook = pth if version < (3, 15) else site / pyhooks.START_FILE
    os.chflags(hook, os.stat(hook).st_flags | stat.UF_HIDDEN)
    assert pyhooks.hidden_files(str(site)) == [str(hook)]
    ran = _high(python, tmp_path, env) == "0.77"
    if version < (3, 15):
        skips = version >= (3, 13) or version[2] >= SKIPS_HIDDEN_FROM.get(version[:2], 99)
        said = "ran" if ran else "skipped"
        assert ran != skips, f"Python {sys.version} {said} a hidden .pth. {PASTE}"
    pyhooks.write_copy(str(site))
    assert pyhooks.hidden_files(str(site)) == []
    assert _high(python, tmp_path, env) == "0.77"


def test_the_pressure_level_is_read_where_the_probe_stops() -> None:
    """The probe stops at warning (2): the level is one the kernel reports."""
    assert sysctl.read("kern.memorystatus_vm_pressure_level") in (1, 2, 4)


def test_apply_after_mps_was_used_says_the_low_limit_came_too_late() -> None:
    require_mps()
    paths.limits_file().parent.mkdir(parents=True, exist_ok=True)
    paths.limits_file().write_text(limits_text("0.77", "0.7", ("/",)))
    code = (
        "import warnings, mpsd, torch\n"
        "before = mpsd.apply(anywhere=True)\n"
        f"{USE_MPS}\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    after = mpsd.apply(anywhere=True)\n"
        "print(before.low_too_late, after.low_too_late, len(seen))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if done.stdout.split()[:2] == ["None", "None"]:
        pytest.skip("this torch has no torch._C._accelerator_isAllocatorInitialized()")
    assert done.stdout.split() == ["False", "True", "1"], f"{done.stdout}. {PASTE}"


def test_an_mlx_process_is_an_ml_job() -> None:
    code = "import mlx.core as mx, sys, time; mx.eval(mx.ones(1)); print('ready', flush=True)"
    if subprocess.run([sys.executable, "-c", "import mlx.core"], capture_output=True).returncode:
        pytest.skip("needs MLX in this venv (`.venv/bin/pip install mlx`)")
    child = subprocess.Popen(
        [sys.executable, "-c", code + "; time.sleep(60)"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        jobs = {job.pid: job for job in mljobs.ProcessScanner().scan()}
    finally:
        child.kill()
        child.wait()
    assert child.pid in jobs and jobs[child.pid].reason == "mlx", f"{jobs}. {PASTE}"


def test_an_rc_file_keeps_its_acl_and_extended_attributes_through_mpsds_write(
    tmp_path: Path,
) -> None:
    """Issue 19: an rc file mpsd rewrites (a temp file renamed over it) keeps what the user set
    on it, as editors carry it over: copyfile(3) with COPYFILE_ACL | COPYFILE_XATTR."""
    from mpsd.atomic import write_atomic

    zshrc = tmp_path / ".zshrc"
    zshrc.write_text("export EDITOR=vim\n")
    subprocess.run(["chmod", "+a", "group:everyone allow read", str(zshrc)], check=True)
    subprocess.run(["xattr", "-w", "com.example.mine", "kept", str(zshrc)], check=True)
    assert write_atomic(zshrc, b"export EDITOR=vim\n# mpsd\n", follow_links=True)
    listing = subprocess.run(["ls", "-le", str(zshrc)], capture_output=True, text=True).stdout
    assert "group:everyone allow read" in listing, f"the ACL was lost: {listing}. {PASTE}"
    kept = subprocess.run(["xattr", "-p", "com.example.mine", str(zshrc)], capture_output=True)
    assert kept.stdout.strip() == b"kept", f"the extended attribute was lost. {PASTE}"
    subprocess.run(["chmod", "-N", str(zshrc)], check=False)  # so tmp_path can be removed
