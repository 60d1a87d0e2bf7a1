"""The macOS output parsers against every recorded real output they are meant to read.

Each record of fixtures/macos/command-outputs.jsonl whose command is vm_stat, sysctl,
memory_pressure, top or a recommendedMaxWorkingSetSize log line is checked with the
numbers its text contains (and, where the record's context states the Mac's RAM,
that the figure is the share of that RAM Metal reports). launchctl records belong to
the installer's tests.
"""

from __future__ import annotations

import pytest

from mpsd.machine import macos
from mpsd.machine.macos import GIB, KIB, MIB
from tests.fixture_files import command_outputs

RECORDS = {row["id"]: row for row in command_outputs()}


def text(record_id: str) -> str:
    return str(RECORDS[record_id]["text"])


# --- vm_stat ------------------------------------------------------------------------------

# id: (page size, free, speculative, file-backed, purgeable, swapouts, last complete key)
VM_STAT = {
    "vm_stat-wazuh-22113": (4096, 6127229, 430715, 1080348, 11820, 0, "swapouts"),
    "vm_stat-benchmarkdotnet-847": (4096, 90662, 38418, 859068, 20762, 84599798, "swapouts"),
    "vm_stat-ansible-silicon-m1pro-32gb": (16384, 6472, 18210, 546992, 19224, 437651, "swapouts"),
    "vm_stat-ansible-intel-vm-2gb": (4096, 24686, 16232, 251947, 17512, 0, "swapouts"),
    "vm_stat-ohai-old-format-16gb": (4096, 2155305, 531321, None, None, None, "pageouts"),
    "vm_stat-openclaw-mini2-20260526": (16384, 15160, 2084, 516277, 11748, 0, "swapouts"),
    "vm_stat-openclaw-mini2-20260529": (16384, 652276, 183582, 538942, 23079, 16, "swapouts"),
    "vm_stat-timnewmac-16gb-wide-first12": (
        16384,
        12216,
        14945,
        None,
        1058,
        None,
        "pages_reactivated",
    ),
    "vm_stat-telegraf-10632-8gb-partial": (
        4096,
        98230,
        893692,
        1193587,
        5001,
        None,
        "anonymous_pages",
    ),
    "vm_stat-hmcl-4876-partial": (16384, 3857, 1075, 294894, 17340, None, "decompressions"),
    "vm_stat-fhem-sysmon-osx-8gb": (4096, 5268, 878, 88747, 69, 1017813, "swapouts"),
    "vm_stat-matlab-intel-64gb": (4096, 8295673, 2582, 3479077, 14, 12842498, "swapouts"),
    "vm_stat-buntest-16gb-as": (16384, 3754, 638, 181282, 4920, 64301281, "swapouts"),
}

# RAM the record's context states (or that its pair states) for the page-total check.
VM_STAT_RAM = {
    "vm_stat-wazuh-22113": 32 * GIB,
    "vm_stat-benchmarkdotnet-847": 16 * GIB,
    "vm_stat-ansible-silicon-m1pro-32gb": 34359738368,
    "vm_stat-ansible-intel-vm-2gb": 2147483648,
    "vm_stat-ohai-old-format-16gb": 17179869184,
    "vm_stat-openclaw-mini2-20260526": 34359738368,
    "vm_stat-openclaw-mini2-20260529": 34359738368,
    "vm_stat-fhem-sysmon-osx-8gb": 8589934592,
    "vm_stat-matlab-intel-64gb": 64 * GIB,
    "vm_stat-buntest-16gb-as": 16 * GIB,
    "vm_stat-telegraf-10632-8gb-partial": 8589934592,
    "vm_stat-hmcl-4876-partial": 24 * GIB,
}


@pytest.mark.parametrize("record_id", sorted(VM_STAT))
def test_vm_stat_counters_are_read_from_every_recorded_output(record_id: str) -> None:
    page, free, spec, file_backed, purgeable, swapouts, last = VM_STAT[record_id]
    vm = macos.parse_vm_stat(text(record_id))
    assert vm.page_size == page
    assert vm.get("pages_free") == free
    assert vm.get("pages_speculative") == spec
    assert vm.get("file_backed_pages") == file_backed
    assert vm.get("pages_purgeable") == purgeable
    assert vm.swapouts == swapouts
    assert list(vm.counters)[-1] == last
    expected = (free + spec + (file_backed or 0) + (purgeable or 0)) * page
    assert vm.available_bytes() == expected


@pytest.mark.parametrize("record_id", sorted(VM_STAT_RAM))
def test_vm_stat_page_queues_add_up_to_the_macs_ram(record_id: str) -> None:
    vm = macos.parse_vm_stat(text(record_id))
    queues = (
        "pages_free",
        "pages_active",
        "pages_inactive",
        "pages_speculative",
        "pages_wired_down",
        "pages_occupied_by_compressor",
    )
    total = sum(vm.get(k) or 0 for k in queues) * (vm.page_size or 0)
    ram = VM_STAT_RAM[record_id]
    assert 0.85 * ram < total <= 1.01 * ram


def test_vm_stat_quoted_and_unknown_lines_are_kept_by_snake_case_label() -> None:
    vm = macos.parse_vm_stat(text("vm_stat-wazuh-22113"))
    assert vm.get("translation_faults") == 11477162
    assert vm.get("pages_wired_down") == 715958
    assert vm.get("pages_stored_in_compressor") == 0
    assert len(vm.counters) == 22


def test_old_vm_stat_object_cache_line_is_not_a_counter() -> None:
    vm = macos.parse_vm_stat(text("vm_stat-ohai-old-format-16gb"))
    assert vm.get("pageins") == 630064
    assert not any(key.startswith("object_cache") for key in vm.counters)


def test_vm_stat_line_cut_mid_number_is_dropped_not_misread() -> None:
    cut = text("vm_stat-hmcl-4876-partial") + "\nCompressions:                         6543"
    vm = macos.parse_vm_stat(cut)
    assert vm.get("compressions") is None
    assert vm.get("decompressions") == 591661242


def test_vm_stat_without_header_needs_the_page_size_from_elsewhere() -> None:
    body = text("vm_stat-wazuh-22113").split("\n", 1)[1]
    vm = macos.parse_vm_stat(body)
    assert vm.page_size is None
    assert vm.available_bytes() is None
    assert vm.available_bytes(page_size=4096) == (6127229 + 430715 + 1080348 + 11820) * 4096


# --- memory_pressure ------------------------------------------------------------------------

MEMORY_PRESSURE = {
    # id: (total bytes, page size, free, purgeable, speculative, swapouts, compressor, free %)
    "memory_pressure_Q-mistralrs-2419": (None, None, None, None, None, None, None, 47),
    "memory_pressure-openclaw-mini2-20260526": (
        34359738368,
        16384,
        15123,
        11748,
        2087,
        0,
        120555,
        87,
    ),
    "memory_pressure-openclaw-mini2-20260529": (
        34359738368,
        16384,
        652235,
        23079,
        183582,
        16,
        96636,
        88,
    ),
    "memory_pressure-timnewmac-16gb": (17179869184, 16384, 11961, 1058, 14941, 0, 308084, 57),
    "memory_pressure-mthfr-head20-20261002": (
        17179869184,
        16384,
        3415,
        9530,
        825,
        180230,
        334351,
        None,
    ),
    "memory_pressure-mthfr-tail3-20261002": (None, None, None, None, None, None, None, 50),
    "memory_pressure-openclaw-mini2-66pct": (34359738368, 16384, 4156, 4793, 1253, 0, 229071, 66),
}


@pytest.mark.parametrize("record_id", sorted(MEMORY_PRESSURE))
def test_memory_pressure_figures_are_read_from_every_recorded_output(record_id: str) -> None:
    total, page, free, purgeable, spec, swapouts, compressor, percent = MEMORY_PRESSURE[record_id]
    mp = macos.parse_memory_pressure(text(record_id))
    assert mp.total_bytes == total
    assert mp.page_size == page
    assert mp.counters.get("pages_free") == free
    assert mp.counters.get("pages_purgeable") == purgeable
    assert mp.counters.get("pages_speculative") == spec
    assert mp.counters.get("swapouts") == swapouts
    assert mp.counters.get("pages_used_by_compressor") == compressor
    assert mp.free_percent == percent
    if total is not None:
        assert mp.total_pages is not None and mp.total_pages * (page or 0) == total


def test_memory_pressure_tail_keeps_the_pageouts_it_shows() -> None:
    mp = macos.parse_memory_pressure(text("memory_pressure-mthfr-tail3-20261002"))
    assert dict(mp.counters) == {"pageouts": 238738}


def test_memory_pressure_agrees_with_vm_stat_taken_a_moment_before() -> None:
    vm = macos.parse_vm_stat(text("vm_stat-openclaw-mini2-20260529"))
    mp = macos.parse_memory_pressure(text("memory_pressure-openclaw-mini2-20260529"))
    for key in ("pages_wired_down", "pages_inactive", "swapouts", "pages_purgeable"):
        assert mp.counters[key] == vm.counters[key]
    assert abs(mp.counters["pages_free"] - vm.counters["pages_free"]) < 100


# --- sysctl -----------------------------------------------------------------------------------

SWAPUSAGE = {
    # id: (total, used, free) as printed, in MiB
    "swap-powerlevel9k-1108": (1024.00, 379.25, 644.75),
    "swap-walles-px-80": (4096.00, 2743.50, 1352.50),
    "swap-fastfetch-pr245-zero": (0.0, 0.0, 0.0),
    "swap-mthfr-a0-20261002": (2048.00, 998.81, 1049.19),
    "swap-mthfr-a0rerun-20261002": (2048.00, 990.81, 1057.19),
    "swap-fhem-sysmon-osx-8gb": (1024.00, 529.25, 494.75),
    "swap-loaded-48gib-darwinbackend": (13312.00, 11625.69, 1686.31),
    "swap-n-form-cn-report-16gb": (2048.00, 1426.50, 621.50),
    "sysctl-loaded-48gib-darwinbackend": (13312.00, 11625.69, 1686.31),
}


@pytest.mark.parametrize("record_id", sorted(SWAPUSAGE))
def test_swapusage_is_read_in_bytes_from_every_recorded_form(record_id: str) -> None:
    total, used, free = SWAPUSAGE[record_id]
    swap = macos.parse_swapusage(text(record_id))
    assert swap is not None
    assert swap.total_bytes == round(total * MIB)
    assert swap.used_bytes == round(used * MIB)
    assert swap.free_bytes == round(free * MIB)
    assert swap.encrypted
    assert swap.used_bytes + swap.free_bytes == swap.total_bytes


def test_swapusage_with_comma_decimals_reads_the_same_as_with_dots() -> None:
    swap = macos.parse_swapusage(text("swap-powerlevel9k-1108"))
    assert swap is not None and swap.used_bytes == 397672448  # 379.25 MiB


def test_swapusage_absent_is_none() -> None:
    assert macos.parse_swapusage(text("memsize-ohai-16gb")) is None


SYSCTL_INTS = {
    "memsize-ansible-silicon-32gb": ("hw.memsize", 34359738368),
    "memsize-ansible-intel-vm-2gb": ("hw.memsize", 2147483648),
    "memsize-fhem-sysmon-8gb": ("hw.memsize", 8589934592),
    "memsize-ohai-16gb": ("hw.memsize", 17179869184),
    "memorystatus_level-ansible-silicon": ("kern.memorystatus_level", 71),
    "memorystatus_level-ansible-intel-vm": ("kern.memorystatus_level", 78),
    "iogpu-wired-limit-set-llmfit-570": ("iogpu.wired_limit_mb", 26000),
}


@pytest.mark.parametrize("record_id", sorted(SYSCTL_INTS))
def test_integer_sysctls_are_read_in_plain_dash_n_and_write_forms(record_id: str) -> None:
    name, value = SYSCTL_INTS[record_id]
    assert macos.sysctl_int(text(record_id), name) == value


def test_a_multi_key_sysctl_dump_gives_each_key() -> None:
    dump = text("sysctl-loaded-48gib-darwinbackend")
    assert macos.sysctl_int(dump, "kern.memorystatus_vm_pressure_level") == 2
    assert macos.sysctl_int(dump, "kern.memorystatus_level") == 41
    assert macos.sysctl_int(dump, "hw.ncpu") == 18
    assert macos.parse_sysctl(dump)["vm.loadavg"] == "{ 21.53 26.57 41.30 }"
    assert macos.sysctl_int(dump, "vm.loadavg") is None
    assert macos.sysctl_int(dump, "hw.memsize") is None


def test_sysctl_int_of_another_key_is_none() -> None:
    assert macos.sysctl_int(text("memorystatus_level-ansible-silicon"), "hw.memsize") is None


# --- top -l 1 ----------------------------------------------------------------------------------

TOP = {
    # id: (used, wired, compressor, unused) as (number, unit) pairs; swapins, swapouts
    "top-header-openclaw-mini2-20260526": ((31, GIB), (2221, MIB), (1884, MIB), (344, MIB), 0, 0),
    "physmem-openclaw-mini2-20260526": (
        (31, GIB),
        (2221, MIB),
        (1884, MIB),
        (344, MIB),
        None,
        None,
    ),
    "physmem-openclaw-mini2-20260529": ((19, GIB), (2105, MIB), (1510, MIB), (13, GIB), None, None),
    "top-header-timnewmac-16gb": ((15, GIB), (1938, MIB), (4814, MIB), (438, MIB), 0, 0),
    "physmem-timnewmac-16gb": ((15, GIB), (1938, MIB), (4814, MIB), (438, MIB), None, None),
    "physmem-openclaw-mini2-20260529-1330": (
        (27, GIB),
        (1999, MIB),
        (1310, MIB),
        (4790, MIB),
        None,
        None,
    ),
    "physmem-ubersicht-10-2015": ((7886, MIB), (1796, MIB), None, (303, MIB), None, None),
    "top-header-ubersicht-10-2015": ((7886, MIB), (1796, MIB), None, (303, MIB), 5314138, 6539939),
    "physmem-pocketmine-960-osx109": ((7304, MIB), (1796, MIB), None, (25, GIB), None, None),
    "physmem-dracula-tmux-53-1014": ((16, GIB), (3127, MIB), None, (171, MIB), None, None),
    "physmem-telegraf-10632-8gb": ((4329, MIB), (1426, MIB), None, (3861, MIB), None, None),
}


def _bytes(pair: tuple[int, int] | None) -> int | None:
    return None if pair is None else pair[0] * pair[1]


@pytest.mark.parametrize("record_id", sorted(TOP))
def test_top_physmem_is_read_in_bytes_from_every_recorded_form(record_id: str) -> None:
    used, wired, compressor, unused, swapins, swapouts = TOP[record_id]
    top = macos.parse_top(text(record_id))
    assert top is not None
    assert top.used_bytes == _bytes(used)
    assert top.wired_bytes == _bytes(wired)
    assert top.compressor_bytes == _bytes(compressor)
    assert top.unused_bytes == _bytes(unused)
    assert top.swapins == swapins
    assert top.swapouts == swapouts


def test_top_physmem_used_plus_unused_is_about_the_ram() -> None:
    top = macos.parse_top(text("physmem-telegraf-10632-8gb"))  # an 8 GB Mac
    assert top is not None and top.used_bytes and top.unused_bytes
    assert abs(top.used_bytes + top.unused_bytes - 8 * GIB) < 0.01 * 8 * GIB


def test_top_of_osx_10_8_form_reads_free_as_unused() -> None:
    line = "PhysMem: 1173M wired, 2413M active, 1118M inactive, 4704M used, 3485M free."
    top = macos.parse_top(line)
    assert top is not None
    assert (top.used_bytes, top.unused_bytes, top.wired_bytes) == (
        4704 * MIB,
        3485 * MIB,
        1173 * MIB,
    )
    assert top.items["active"] == 2413 * MIB


def test_top_without_physmem_is_none() -> None:
    assert macos.parse_top(text("vm_stat-wazuh-22113")) is None


# --- recommendedMaxWorkingSetSize ---------------------------------------------------------------

MB = 1_000_000
# id: [(kind, bytes as printed)] in order, then the RAM the context states and Metal's share of
# it (None where the context states no RAM or the device is not a share of RAM).
WORKING_SET: dict[str, tuple[list[tuple[str, float]], int | None, float | None]] = {
    "rmwss-llamacpp-3213-m2max-96gb": ([("recommended_max", 73728.00 * MIB)], 96 * GIB, 3 / 4),
    "rmwss-llamacpp-pr2011-m1max-32gb": ([("recommended_max", 21845.34 * MIB)], 32 * GIB, 2 / 3),
    "rmwss-ollama-434-m2max-32gb": ([("recommended_max", 21845.34 * MIB)], 32 * GIB, 2 / 3),
    "rmwss-llamacpp-1870-m1max-64gb": ([("recommended_max", 49152.00 * MIB)], 64 * GIB, 3 / 4),
    "rmwss-magicoder-19-m1-16gb": ([("recommended_max", 10922.67 * MIB)], 16 * GIB, 2 / 3),
    "rmwss-llamacpppython-687-m1pro-16gb": (
        [("recommended_max", 10922.67 * MIB)],
        16 * GIB,
        2 / 3,
    ),
    "rmwss-ollama-12912-16gb": ([("recommended_max", 11453.25 * MB)], 16 * GIB, 2 / 3),
    "rmwss-ollama-12912-sysmem-16gb": ([("ram", 16.0 * GIB)], None, None),
    "rmwss-ds4-893-m5max-128gb": (
        [("recommended_max", 107.52 * GIB), ("recommended_max", 112.00 * GIB)],
        None,
        None,
    ),
    "rmwss-chatglmcpp-76-m2air-8gb": ([("recommended_max", 5461.34 * MIB)], 8 * GIB, 2 / 3),
    "rmwss-whispercpp-1516-m2max": (
        [("recommended_max", 77309.41 * MB), ("recommended_max", 77309.41 * MB)],
        96 * GIB,
        3 / 4,
    ),
    "rmwss-audiowhisper-34-paravirtual": ([("recommended_max", 1073.74 * MB)], None, None),
    "rmwss-mlx-pr1060-device-info": ([("recommended_max", 188743680000)], None, None),
    "rmwss-h2ogpt-1359-m1": (
        [("recommended_max", 5726.63 * MB), ("recommended_max", 5461.34 * MIB)],
        8 * GIB,
        2 / 3,
    ),
    "rmwss-llamacpp-4495-m1air": (
        [("recommended_max", 11453.25 * MB), ("recommended_max", 10922.67 * MIB)],
        16 * GIB,
        2 / 3,
    ),
    "rmwss-llmfit-754-m3-16gb": (
        [("recommended_max", 11.84 * GIB), ("ram", 16.00 * GIB)],
        None,
        None,
    ),
    "rmwss-llamaserver-listdevices-llmfit-570": ([("recommended_max", 26000 * MIB)], None, None),
    "rmwss-pytorch-pr189215-torch-mps": ([("recommended_max", 17.760009765625 * GIB)], None, None),
    "rmwss-m4max-36gb-doc": ([("recommended_max", 30150.67 * MB)], None, None),
    "rmwss-ollama-017-m4-32gb-imac": ([("recommended_max", 26800.60 * MB)], None, None),
    "rmwss-ollama-017-m4-32gb-sysmem": (
        [("recommended_max", 25.0 * GIB), ("ram", 32.0 * GIB)],
        None,
        None,
    ),
    "rmwss-llamacpp-5206-intel-mbp2019": ([("recommended_max", 8176.00 * MIB)], None, None),
    "rmwss-llamacpp-8886-intel-uhd": ([("recommended_max", 1536.00 * MIB)], None, None),
    # PyTorch prints max allowed = ratio x recommended max; with the default ratio 1.7
    # of torch 2.0-2.12 the recommended max is max allowed / 1.7.
    "rmwss-mps-oom-langchainchatchat-533-16gb": ([("max_allowed", 18.13 * GIB)], 16 * GIB, 2 / 3),
    "rmwss-mps-oom-fooocus-980-8gb": ([("max_allowed", 9.07 * GIB)], 8 * GIB, 2 / 3),
    "rmwss-mps-oom-pinokio-941-16gb": ([("max_allowed", 18.13 * GIB)], 16 * GIB, 2 / 3),
    "rmwss-mps-oom-bobofun-8-m1max-64gb": ([("max_allowed", 81.60 * GIB)], 64 * GIB, 3 / 4),
    "rmwss-mps-oom-comfyui-9308-m3max-128gb": ([("max_allowed", 163.20 * GIB)], 128 * GIB, 3 / 4),
    "rmwss-mps-oom-comfyui-11584-m1ultra-128gb": ([("max_allowed", 182.78 * GIB)], None, None),
}


@pytest.mark.parametrize("record_id", sorted(WORKING_SET))
def test_working_set_figures_are_read_from_every_recorded_log(record_id: str) -> None:
    expected, _, _ = WORKING_SET[record_id]
    figures = macos.parse_working_set_log(text(record_id))
    assert [(f.kind, f.bytes) for f in figures] == [(k, round(v)) for k, v in expected]


@pytest.mark.parametrize(
    "record_id", sorted(k for k, (_, ram, _) in WORKING_SET.items() if ram is not None)
)
def test_working_set_is_the_share_of_ram_metal_reports(record_id: str) -> None:
    """The unit each 'MB' was read in is right: the figure is 2/3 or 3/4 of the RAM."""
    _, ram, share = WORKING_SET[record_id]
    assert ram is not None and share is not None
    for figure in macos.parse_working_set_log(text(record_id)):
        value = figure.bytes / 1.7 if figure.kind == "max_allowed" else figure.bytes
        # Metal's figure is the share rounded up to whole 16 KiB pages.
        slack = figure.precision / (1.7 if figure.kind == "max_allowed" else 1) + 16 * KIB
        assert abs(value - share * ram) <= slack, figure


def test_m1_ultra_oom_shows_the_macos_26_share_of_128_gib() -> None:
    (figure,) = macos.parse_working_set_log(text("rmwss-mps-oom-comfyui-11584-m1ultra-128gb"))
    assert round(figure.bytes / 1.7 / GIB, 2) == 107.52


def test_the_iogpu_override_shows_as_the_working_set() -> None:
    stock, raised = macos.parse_working_set_log(text("rmwss-ds4-893-m5max-128gb"))
    assert raised.bytes == 114688 * MIB  # iogpu.wired_limit_mb = 114688
    assert stock.bytes < raised.bytes
    devices = macos.recommended_max_from_log(text("rmwss-llamaserver-listdevices-llmfit-570"))
    limit = macos.sysctl_int(text("iogpu-wired-limit-set-llmfit-570"), "iogpu.wired_limit_mb")
    assert limit is not None and devices == limit * MIB


def test_ollama_metal_total_is_the_working_set_rounded_to_a_tenth_of_a_gib() -> None:
    exact = macos.recommended_max_from_log(text("rmwss-ollama-017-m4-32gb-imac"))
    rounded = macos.recommended_max_from_log(text("rmwss-ollama-017-m4-32gb-sysmem"))
    assert exact is not None and rounded is not None
    assert abs(exact - rounded) <= 0.05 * GIB


def test_recommended_max_from_log_is_the_first_working_set_figure() -> None:
    assert macos.recommended_max_from_log(text("rmwss-ds4-893-m5max-128gb")) == round(107.52 * GIB)
    assert macos.recommended_max_from_log(text("rmwss-ollama-12912-sysmem-16gb")) is None
    assert macos.recommended_max_from_log(text("rmwss-mps-oom-fooocus-980-8gb")) is None


def test_ggml_mb_without_context_defaults_to_the_current_1e6_convention() -> None:
    line = "ggml_metal_init: recommendedMaxWorkingSetSize  = 12345.67 MB"
    assert macos.recommended_max_from_log(line) == round(12345.67 * MB)


def test_figures_carry_the_precision_of_the_printed_digits() -> None:
    (mib,) = macos.parse_working_set_log(text("rmwss-magicoder-19-m1-16gb"))
    assert mib.precision == round(0.005 * MIB)
    (exact,) = macos.parse_working_set_log(text("rmwss-mlx-pr1060-device-info"))
    assert exact.precision == 0


# --- coverage of the recordings ---------------------------------------------------------------

MINE = {
    "vm_stat": VM_STAT,
    "memory_pressure": MEMORY_PRESSURE,
    "sysctl": {**SWAPUSAGE, **SYSCTL_INTS},
    "top": TOP,
    "recommendedMaxWorkingSetSize": WORKING_SET,
}


def test_every_recorded_output_of_these_commands_is_tested() -> None:
    untested = []
    for record_id, record in RECORDS.items():
        command = str(record["command"])
        if command.startswith("launchctl"):
            continue
        covered = {k for table in MINE.values() for k in table}
        if record_id not in covered:
            untested.append((record_id, command))
    assert untested == []


def test_a_torch_repl_in_bytes_or_divided_reads_the_same_bytes() -> None:
    raw = ">>> torch.mps.recommended_max_memory()\n40200893440"
    divided = ">>> torch.mps.recommended_max_memory() / 2**30\n37.44"
    assert macos.recommended_max_from_log(raw) == 40200893440
    assert abs((macos.recommended_max_from_log(divided) or 0) - 40200893440) < 0.005 * GIB
