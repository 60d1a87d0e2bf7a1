"""Other frameworks' errors and the systems' kills, on the real pastes of
tests/fixtures/oom-frameworks-dev.jsonl: each read as its own kind, every number the paste
states, and a fix in that framework's (and that user's shell's) own terms."""

from __future__ import annotations

from typing import Any

import pytest

import mpsd
from mpsd.oom import find_errors
from mpsd.oom.render import render
from tests.explain_support import GIB, close, limits_for
from tests.fixture_files import oom_frameworks

# The stated number -> the key explain reports it under.
AS = {"io_arguments_bytes": "requested_bytes", "base_limit_bytes": "limit_bytes"}
AS |= {"used_bytes": "in_use_bytes", "capacity_bytes": "total_bytes"}
AS |= {"numpy_request_bytes": "requested_bytes", "bfc_requests_bytes": "requested_bytes"}
AS |= {"cuda_driver_request_bytes": "requested_bytes", "requested_bytes_1": "requested_bytes"}
AS |= {"requested_bytes_2": "requested_bytes"}
# Stated but not read: the BFC allocator's other statistics, and what the paste does not print
# (a webui footer, a wired limit typed by the user, an array's size implied by code).
NOT_READ = {"max_in_use_bytes", "max_alloc_size_bytes", "available_bytes", "page_size_bytes"}
NOT_READ |= {"requested_mib_as_printed_bytes", "webui_footer", "implied_array_bytes"}
NOT_READ |= {"wired_limit_mb_as_typed", "unit_convention", "killed", "pid"}
NOT_READ |= {"compressor_bytes", "active_bytes", "zone_map_cap_bytes"}  # test_explain_kills
NOT_READ |= {"total_vm_bytes", "anon_rss_bytes", "file_rss_bytes", "shmem_rss_bytes"}
NOT_READ |= {"pgtables_bytes", "task_table_pages"}


def stated(case: dict[str, Any]) -> list[tuple[str, Any]]:
    out = []
    for key, value in case["numbers"].items():
        # The limit its error compares is XLA's base limit, not the BFC allocator's.
        if key in NOT_READ or (case["id"], key) == ("xla-reactant-2632-bfc-stats", "limit_bytes"):
            continue
        for v in value if isinstance(value, list) else [value]:
            out.append((AS.get(key, key), v))
    return out


KINDS = {"jax-xla": "xla_oom", "tensorflow": "tf_oom", "ggml": "ggml_oom", "vllm": "cuda_oom"}
KINDS |= {"windows-r": "cuda_oom", "os-kill": "os_kill"}
CASES = pytest.mark.parametrize("ident", list(oom_frameworks()))


@CASES
def test_every_stated_number_is_read(ident: str) -> None:
    case = oom_frameworks()[ident]
    found = mpsd.explain(case["text"])
    for key, value in stated(case):
        if key == "reserved_unallocated_bytes":
            assert any(close(f["reserved_bytes"] - f["allocated_bytes"], value) for f in found)
        elif key == "exceeded_by_bytes":
            assert any(close(f["in_use_bytes"] - f["total_bytes"], value) for f in found)
        else:
            assert any(key in f and close(f[key], value) for f in found), (key, value, found)


def test_every_paste_but_numbas_is_recognised_as_its_framework() -> None:
    missed = [i for i, case in oom_frameworks().items() if not mpsd.explain(case["text"])]
    assert missed == ["numba-wsl-cuinit-oom-title"]
    for ident, case in oom_frameworks().items():
        kinds = {f["kind"] for f in mpsd.explain(case["text"])}
        want = KINDS.get(case["category"])
        if ident.startswith("ggml-metal"):  # ggml's Metal errors are Metal's
            want = "mps_other"
        if want and ident not in ("rtorch-396-cpu-windows-buy-new-ram", "tf-45238-cpu-allocator"):
            assert want in kinds or "sigkill" in kinds, (ident, kinds)


def frameworks(ident: str) -> list[Any]:
    return [f["framework"] for f in mpsd.explain(oom_frameworks()[ident]["text"])]


def test_xla_errors_name_jax_only_where_the_paste_shows_it() -> None:
    assert frameworks("jax-colabfold-65") == ["jax"]
    assert frameworks("jax-788-replica-oom") == ["jax"]  # jaxlib's xla/python client
    assert frameworks("xla-reactant-2632-bfc-stats") == ["xla"]  # Julia: not JAX's variables
    assert frameworks("tf-loghi-55-xla-bfc") == ["tensorflow"] * 2  # TF's local_xla
    assert frameworks("tf-captcha-windows-16") == ["tensorflow"] * 3


def explained(ident: str, limits: Any = None) -> str:
    return " ".join(render(find_errors(oom_frameworks()[ident]["text"]), limits).split())


FIXES = {
    "jax-colabfold-65": ("export XLA_PYTHON_CLIENT_MEM_FRACTION=.90", "PYTORCH"),
    "xla-reactant-2632-bfc-stats": ("does not say which program drove XLA", "PYTORCH"),
    "tf-fair-59-graph-execution": ("set_memory_growth(gpu, True)", "XLA_PYTHON"),
    "ggml-cuda-ollama9782-gallocr": ("fewer layers on the GPU (-ngl", "PYTORCH"),
    "ggml-rocm-ollama11265": ("llama.cpp (ggml) out of memory on ROCm", "iogpu"),
    "ggml-metal-1890-status5-assert": ("status 5, an error, without its reason", "PYTORCH"),
    "vllm-club3090-16-enginecore": ("--gpu-memory-utilization", "Usual fixes"),
    "vllm-10439-no-cache-blocks": ("no memory left for its KV cache", "PYTORCH"),
    "a1111-14714-footer": ("Usual fixes", "--gpu-memory-utilization"),
    "tf-45238-cpu-allocator": ("ran out of main memory", "set_memory_growth"),
    "mlx-malloc-or-wait-9gb": ("mx.set_memory_limit", "PYTORCH"),
    "torch-wsl-cuda-init-error2": (".wslconfig", "expandable"),
    "os-exit-137-pycharm-facenet": ("`mpsd jobs` records such kills", "Linux's OOM killer)"),
}


@pytest.mark.parametrize("ident", FIXES)
def test_each_fix_is_the_frameworks_own(ident: str) -> None:
    says, never = FIXES[ident]
    assert says in explained(ident)
    assert never not in explained(ident)


def test_fixes_are_in_the_users_shell() -> None:
    windows = explained("tf-keras-9643-windows")
    assert "set TF_GPU_ALLOCATOR=cuda_malloc_async (cmd)" in windows
    assert '$env:TF_GPU_ALLOCATOR="cuda_malloc_async" (PowerShell)' in windows
    assert "export" not in windows
    r = explained("rtorch-688-cuda-oom")
    assert 'Sys.setenv(PYTORCH_CUDA_ALLOC_CONF = "expandable_segments:True")' in r
    assert "before library(torch)" in r and "export" not in r
    assert "export TF_GPU_ALLOCATOR" in explained("tf-fair-59-graph-execution")


def test_the_dataloader_in_the_traceback_is_named_for_every_kind() -> None:
    loader = '  File "/v/torch/utils/data/dataloader.py", line 1, in __next__\n'
    for ident in ("a1111-14714-footer", "tf-fair-59-graph-execution", "torch-cpu-buy-new-ram-72gb"):
        text = oom_frameworks()[ident]["text"]
        assert "each worker (num_workers)" in render(find_errors(loader + text))
        assert "each worker (num_workers)" not in render(find_errors(text))


def test_an_xpu_request_over_4_gib_says_the_single_allocation_limit_first() -> None:
    text = "XPU out of memory. Tried to allocate {} GiB (GPU 0; 15.56 GiB total capacity)"
    over = render(find_errors(text.format("6.00")))
    assert over.split("Why it failed")[1].split("\n")[1].strip().startswith("The request, 6.00")
    assert "4 GiB that Intel's GPUs allow" not in render(find_errors(text.format("2.00")))


def test_cpu_oom_names_its_framework() -> None:
    assert frameworks("torch-cpu-buy-new-ram-72gb") == ["torch"]
    assert frameworks("tf-45238-cpu-allocator")[-1] == "numpy"
    assert "Out of main memory (NumPy)" in render(
        find_errors(oom_frameworks()["tf-45238-cpu-allocator"]["text"])
    )


def test_the_mps_fix_says_use_less_when_the_job_needs_more_than_is_free() -> None:
    mps = (
        "MPS backend out of memory (MPS allocated: 9.00 GB, other allocations: 1.00 GB, max "
        "allowed: 10.00 GB). Tried to allocate 1.00 GB on private pool."
    )
    roomy = limits_for(0.9, 20 * GIB, baseline=30 * GIB)
    tight = limits_for(0.9, 20 * GIB, baseline=8 * GIB)
    said = "more than the 8.00 GiB usually free on this Mac"
    assert said in " ".join(render(find_errors(mps), tight).split())
    assert "usually free" not in " ".join(render(find_errors(mps), roomy).split())


def test_a_kill_the_log_explains_is_not_also_a_bare_sigkill() -> None:
    kinds = [
        f["kind"]
        for f in mpsd.explain(oom_frameworks()["os-slurm-cgroup-oom-after-epochs"]["text"])
    ]
    assert kinds == ["os_kill"]
    for ident in ("os-linux-killed-after-epoch-lightning", "os-macos-killed-9-rl-swarm"):
        assert [f["kind"] for f in mpsd.explain(oom_frameworks()[ident]["text"])] == ["sigkill"]
    assert mpsd.explain("The test was Killed by a timeout.\nKilled processes: 0") == []


def test_the_json_contract_has_a_row_for_every_kind() -> None:
    import re

    from mpsd.oom.finding import KINDS
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    table = page.split("## `mpsd explain --json`")[1].split("\n\n")[2]
    first = [re.findall(r"`(\w+)`", row.split(" | ")[0]) for row in table.splitlines()[2:]]
    assert all(names and names[0] in KINDS for names in first)
    assert set(KINDS) <= {name for names in first for name in names}


def test_a_kill_at_the_end_of_a_long_training_log_is_found() -> None:
    log = "Epoch 1: 100%|####| 209/209 [06:12<00:00, 1.78s/it, loss=0.0685]\n" * 40_000
    assert [f["kind"] for f in mpsd.explain(log + "Killed\n")] == ["sigkill"]


# Each new sentence (render.SAY, OTHER) where it applies, and a paste where it must not be.
SENTENCES = {
    "oom_killer": ("os-linux-oom-syslog-python3", "os-linux-memcg-oom-uwsgi"),
    "cgroup": ("os-slurm-cgroup-oom-after-epochs", "os-linux-oom-syslog-python3"),
    "swap_out": ("unified-log-python312", "os-linux-oom-syslog-python3"),
    "jetsam_cut": ("os-macos-jetsam-event-omlx", "unified-log-python312"),
    "killed": ("os-macos-zsh-killed-turicreate", "os-linux-oom-mangled-commas"),
    "bfc_warning": ("tf-captcha-windows-16", "tf-asr-78-bfc-stats"),
    "xla_in_use": ("tf-asr-78-bfc-stats", "jax-jaxline-11"),
    "tpu_hbm": ("xla-tpu-enzyme-jax-2422-hbm", "jax-jaxline-11"),
    "arguments": ("xla-reactant-2632-bfc-stats", "jax-jaxline-11"),
    "ggml_asked": ("ggml-cuda-ollama9782-gallocr", "ggml-cuda-3199-error2"),
    "status_5": ("ggml-metal-1890-status5-assert", "ggml-metal-pr7010-status5"),
    "malloc_or_wait": ("mlx-malloc-or-wait-sd-zsh-abort", "mlx-metal-cmdbuf-instructlab"),
    "init": ("torch-wsl-cuda-init-error2", "torch-cuda-runtime-oom-wsl-moss"),
    "vllm": ("vllm-backport-24-worker-failed", "a1111-14714-footer"),
}


def _text(ident: str) -> str:
    from tests.fixture_files import kill_lines

    return (oom_frameworks().get(ident) or kill_lines()[ident])["text"]


@pytest.mark.parametrize("name", SENTENCES)
def test_each_new_sentence_is_said_where_it_applies_and_only_there(name: str) -> None:
    import re

    from mpsd.oom.render import OTHER, SAY

    # The sentence's words up to its first value, as they read in the wrapped output.
    start = re.split(r"\{", SAY.get(name) or OTHER[name])[0][:40]
    where, not_there = SENTENCES[name]
    assert start in " ".join(render(find_errors(_text(where))).split()), start
    assert start not in " ".join(render(find_errors(_text(not_there))).split())


def test_a_bfc_stat_with_a_fraction_of_a_byte_is_not_known_and_nothing_raises() -> None:
    text = "Stats:\nLimit: 3157432729\nInUse: 1.5\n"
    text += "Resource exhausted: OOM when allocating tensor with shape[10] and type float\n"
    [found] = mpsd.explain(text)
    assert found["limit_bytes"] == 3157432729
    assert found["in_use_bytes"] is None
