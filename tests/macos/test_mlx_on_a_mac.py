"""On a real Mac with MLX in this venv (`.venv/bin/pip install mlx`): MLX's limit through the
start-up hook with Metal, as tests/integration/test_mlx_hook.py checks it on MLX's Linux CPU
build; and MLX's own default on this Mac against MACOS.md's formula."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mpsd.machine import metal, sysctl
from tests.conftest import run_mpsd
from tests.integration import test_mlx_hook
from tests.integration.test_mlx_hook import LIMIT, MLX, mlx_venv, run, write_limits
from tests.macos.test_open_questions import PASTE

mlx_project = test_mlx_hook.mlx_project  # the fixture: an opted-in project with an mlx venv
pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(sys.platform != "darwin", reason="needs a real Mac"),
    pytest.mark.skipif(MLX is None, reason="needs MLX in this venv (`.venv/bin/pip install mlx`)"),
]

REPORT = (
    "import json, mlx.core as mx\n"
    "limit = mx.get_memory_limit()\n"
    "mx.eval(mx.ones((1024, 1024)) @ mx.ones((1024, 1024)))  # Metal works under it\n"
    "print(json.dumps({'limit': limit, 'cache': mx.set_cache_limit(0),\n"
    "  'metal': mx.metal.is_available()}))\n"
)


def test_an_mlx_job_on_metal_gets_limit_bytes_with_its_cache_no_larger(
    mlx_project, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    project, python, config, home, default = mlx_project
    write_limits(config, project)
    got = json.loads(run(python, project, home, REPORT))
    assert got["metal"], f"MLX found no Metal device. {PASTE}"
    assert got["limit"] == LIMIT and got["cache"] <= LIMIT, f"{got}. {PASTE}"
    later = "import mlx.core as mx; mx.set_memory_limit(12345); print(mx.get_memory_limit())"
    assert run(python, project, home, later) == "12345"
    write_limits(config, project, size=2 * LIMIT)  # changed between two starts
    assert json.loads(run(python, project, home, REPORT))["limit"] == 2 * LIMIT
    write_limits(config, project, switch="false")
    assert json.loads(run(python, project, home, REPORT))["limit"] == int(default)
    (config / "limits.toml").write_text("limit_bytes = lots\n")
    assert json.loads(run(python, project, home, REPORT))["limit"] == int(default)
    (config / "limits.toml").unlink()
    assert json.loads(run(python, project, home, REPORT))["limit"] == int(default)
    elsewhere = mlx_venv(tmp_path / "elsewhere-venv")
    assert run_mpsd("enable", "--python", elsewhere, str(project)).returncode == 0
    write_limits(config, project)
    assert json.loads(run(elsewhere, home, home, REPORT))["limit"] == int(default)
    code = "import sys; print([m for m in sys.modules if m.split('.')[0] == 'mlx'])"
    assert run(python, project, home, code) == "[]"


def test_mlxs_own_default_is_the_one_macos_md_gives() -> None:
    """min(1.5 x recommendedMaxWorkingSetSize, 0.95 x RAM) (MLX's allocator.cpp)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", "import mlx.core as mx; print(mx.get_memory_limit())"],
        capture_output=True,
        text=True,
        check=True,
    )
    recommended, ram = metal.working_set_size() or 0, sysctl.read("hw.memsize") or 0
    wanted = min(int(1.5 * recommended), int(0.95 * ram))
    got = int(done.stdout)
    assert abs(got - wanted) <= 1 << 20, f"MLX {got}, formula {wanted}. {PASTE}"
