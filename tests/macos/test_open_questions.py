"""One test per open question about macOS that mpsd's numbers rest on: each is a guess until a
real Mac answers it (docs/macos-and-pytorch.md marks them "verify on a Mac"). Each takes a few
seconds. Run them with `pytest -m macos tests/macos` (README: "On a Mac: the tests only a Mac
can run"); a failure message says what to paste back.
"""

from __future__ import annotations

import os
import plistlib
import subprocess
import sys
from pathlib import Path

import pytest

from mpsd.machine import macos, metal, mljobs, sampler
from mpsd.setup import launchd
from tests.conftest import wait_for
from tests.macos.mps import require_mps

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(sys.platform != "darwin", reason="needs a real Mac"),
]

MIB = 1 << 20
GIB = 1 << 30
PASTE = (
    "Please paste this failure, with the output of `sw_vers`, `sysctl hw.model hw.memsize` and "
    "`python -c 'import torch; print(torch.__version__)'`, into the issue tracker"
)


def _torch_mps() -> None:
    require_mps()


HOLD_1_GIB = """
import sys, torch
torch.zeros(1, device="mps"); torch.mps.synchronize()
print("base", torch.mps.driver_allocated_memory(), flush=True)
sys.stdin.readline()
x = torch.rand(256, 1024, 1024, device="mps")  # 1 GiB of float32
torch.mps.synchronize()
print("held", torch.mps.driver_allocated_memory(), flush=True)
sys.stdin.readline()
"""


def _said(child: subprocess.Popen[str], word: str) -> int:
    """The number after ``word`` on the child's next line; fails with its stderr otherwise."""
    assert child.stdout is not None
    line = child.stdout.readline().split()
    if len(line) != 2 or line[0] != word:
        child.kill()
        _, err = child.communicate()
        pytest.fail(f"the MPS child stopped ({err.strip()[-800:]}). {PASTE}")
    return int(line[1])


def test_mps_memory_shows_in_the_phys_footprint() -> None:
    """mpsd counts a PyTorch job's memory by its phys_footprint: does MPS memory show there?"""
    _torch_mps()
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_1_GIB],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdin is not None
        driver_base = _said(child, "base")
        footprint_base = mljobs.footprint(child.pid)
        child.stdin.write("\n")
        child.stdin.flush()
        driver_held = _said(child, "held")
        footprint_held = mljobs.footprint(child.pid)
    finally:
        child.kill()
        child.wait()
    assert footprint_base is not None and footprint_held is not None, (
        f"proc_pid_rusage could not read the child's footprint. {PASTE}"
    )
    driver = driver_held - driver_base
    footprint = footprint_held - footprint_base
    assert footprint >= 0.9 * min(driver, GIB), (
        f"a 1 GiB MPS tensor grew torch.mps.driver_allocated_memory() by {driver / MIB:.0f} MiB "
        f"but the process's phys_footprint by only {footprint / MIB:.0f} MiB. {PASTE}"
    )


def test_the_ctypes_metal_read_equals_torchs_recommended_max_memory() -> None:
    """mpsd reads recommendedMaxWorkingSetSize through ctypes: is it torch's number?"""
    _torch_mps()
    code = (
        "import torch\n"
        "get = getattr(torch.mps, 'recommended_max_memory', None)\n"
        "print(get() if get else 'none')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    if done.stdout.strip() == "none":
        pytest.skip("torch older than 2.5 has no torch.mps.recommended_max_memory()")
    from_torch = int(done.stdout.strip())
    from_ctypes = metal.working_set_size()
    assert from_ctypes == from_torch, (
        f"Metal through ctypes read {from_ctypes} bytes, torch.mps.recommended_max_memory() "
        f"{from_torch}. {PASTE}"
    )


def test_the_sysctl_sum_agrees_with_vm_stats_counters() -> None:
    """Free memory read by sysctl, and the same counters as vm_stat prints them: the same sum?"""
    before = sampler.DarwinSource(vm_stat=lambda: None).read()
    text = sampler.run_vm_stat()
    after = sampler.DarwinSource(vm_stat=lambda: None).read()
    assert text is not None, f"vm_stat could not be run. {PASTE}"
    vm = macos.parse_vm_stat(text)
    pages = [vm.get(k) for k in ("pages_free", "file_backed_pages", "pages_purgeable")]
    assert vm.page_size and None not in pages, f"vm_stat lacks a counter: {text}. {PASTE}"
    by_vm_stat = sum(p or 0 for p in pages) * vm.page_size
    assert (before.source, after.source) == ("sysctl", "sysctl")
    low = min(before.available_bytes, after.available_bytes) - 8 * MIB
    high = max(before.available_bytes, after.available_bytes) + 8 * MIB
    assert low <= by_vm_stat <= high, (
        f"sysctl said {before.available_bytes} then {after.available_bytes} bytes free "
        f"({dict(before.parts)}), vm_stat in between {by_vm_stat} ({text}). {PASTE}, and the "
        "output of `vm_stat` run twice"
    )


def _plist(tmp_path: Path, label: str, domain: str) -> Path:
    """mpsd's own plist for ``domain``, under a test label, running a harmless sleep."""
    rendered = launchd.render(sys.executable, tmp_path / "c", tmp_path / "s", tmp_path / "d")
    data = plistlib.loads(launchd.for_domain(rendered, domain))
    data["Label"] = label
    data["ProgramArguments"] = ["/bin/sleep", "300"]
    (tmp_path / "s").mkdir(exist_ok=True)  # where its StandardOutPath points
    path = tmp_path / f"{label}.plist"
    path.write_bytes(plistlib.dumps(data))
    return path


def _gone(target: str) -> None:
    """Wait until launchd no longer lists ``target`` (after a bootout)."""
    wait_for(lambda: not launchd.launchctl("print", target).ok, f"{target} to go. {PASTE}")


def test_the_agent_bootstraps_and_boots_out_in_this_session_and_print_parses(
    tmp_path: Path,
) -> None:
    """mpsd's plist in the running session: does bootstrap take it (with the session types
    mpsd writes for user/ over ssh), does `launchctl print` read as mpsd parses it, and does
    bootout let it go?"""
    label = f"io.github.mpsd.test-{os.getpid()}"
    uid = os.getuid()
    gui = launchd.Result(("bootstrap", f"gui/{uid}"), 0, "", "")
    for domain in (f"gui/{uid}", f"user/{uid}"):
        plist = _plist(tmp_path, label, domain)
        target = f"{domain}/{label}"
        result = launchd.launchctl("bootstrap", domain, str(plist))
        if domain.startswith("gui/") and not result.ok:
            gui = result
            continue  # no GUI session (ssh): what install falls back to comes next
        try:
            assert result.ok, (
                f"`launchctl bootstrap {domain}` of mpsd's plist failed: exit "
                f"{result.returncode}, {result.stderr.strip()!r} (gui/ before it: exit "
                f"{gui.returncode}, {gui.stderr.strip()!r}). {PASTE}, and whether you are "
                "logged in at the Mac or over ssh"
            )
            printed = launchd.launchctl("print", target)
            job = launchd.parse_print(printed.stdout, domain)
            assert (job.path, job.arguments) == (str(plist), ["/bin/sleep", "300"]), (
                f"`launchctl print {target}` did not read as mpsd expects: {job}. {PASTE}, "
                f"and this output:\n{printed.stdout}"
            )
        finally:
            out = launchd.launchctl("bootout", target)
        assert out.ok, f"`launchctl bootout {target}` failed: {out.message}. {PASTE}"
        _gone(target)  # fails, saying so, while launchd still lists it
        return
    pytest.fail(f"neither gui/{uid} nor user/{uid} was tried. {PASTE}")
