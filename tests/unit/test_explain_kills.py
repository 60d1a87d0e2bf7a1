"""The one reader of the operating system's kill lines (``mpsd.oom.read_kills``), on real logs:
Linux's OOM killer and a memory cgroup's, macOS's memorystatus lines and JetsamEvent reports."""

from __future__ import annotations

import pytest

import mpsd
from mpsd.oom import Kill, find_errors, read_kills
from mpsd.oom.kills import CGROUP, JETSAM, LINUX_OOM, MEANS, SWAP
from mpsd.oom.render import render
from tests.fixture_files import kill_lines, oom_frameworks

LINUX = ["os-linux-oom-kill-process-2019", "os-linux-oom-syslog-python3"]
LINUX += ["os-linux-oom-mangled-commas", "os-linux-memcg-oom-uwsgi"]
SIZE_KEYS = {"total-vm": "total_vm_bytes", "anon-rss": "anon_rss_bytes"}
SIZE_KEYS |= {"file-rss": "file_rss_bytes", "shmem-rss": "shmem_rss_bytes"}
SIZE_KEYS |= {"pgtables": "pgtables_bytes"}


@pytest.mark.parametrize("ident", LINUX)
def test_linux_kills_give_every_pid_and_size_the_paste_states(ident: str) -> None:
    case = oom_frameworks()[ident]
    stated = case["numbers"].get("killed") or [case["numbers"]]
    kills = read_kills(case["text"])
    assert [k.pid for k in kills] == [s["pid"] for s in stated]
    for kill, want in zip(kills, stated):
        assert kill.os == "linux"
        assert kill.reason == (CGROUP if "memcg" in ident else LINUX_OOM)
        assert (kill.bytes, kill.bytes_are) == (want["anon_rss_bytes"], "anon_rss")
        sizes = dict(kill.sizes)
        for printed, key in SIZE_KEYS.items():
            if key in want:
                assert sizes[printed] == want[key], printed


def test_linux_kill_names_are_the_kernels_comm_even_in_parentheses() -> None:
    names = [k.name for k in read_kills(oom_frameworks()["os-linux-oom-syslog-python3"]["text"])]
    assert names == ["python3", "(resolved)"]
    # The older kernels' "Kill process N ... or sacrifice child" is no kill: its child was.
    old = read_kills(oom_frameworks()["os-linux-oom-kill-process-2019"]["text"])
    assert [(k.pid, k.name) for k in old] == [(89879, "python"), (89746, "python")]


# (pid, name, MB as logged) of the unified-log quotes
MACOS = {
    "unified-log-python312": (55572, "python3.12", 86587),
    "unified-log-timestamps": (70716, "kfx", 48617),
    "unified-log-python311": (36544, "python3.11", 198602),
    "log-show-ndjson": (94572, "ddirecta", 176853),
}


@pytest.mark.parametrize("ident", MACOS)
def test_macos_memorystatus_lines_give_the_compressed_size_not_rss(ident: str) -> None:
    pid, name, mb = MACOS[ident]
    assert read_kills(kill_lines()[ident]["text"]) == [
        Kill("macos", SWAP, pid, name, mb * 1024 * 1024, "compressed")
    ]
    assert "not its RSS" in MEANS["compressed"]


def test_the_swap_exhaustion_form_and_the_jetsam_line_are_read() -> None:
    swap = kill_lines()["xnu-swap-exhaustion"]["text"].replace("%s", "Python").replace("%d", "81")
    assert read_kills(swap) == [Kill("macos", SWAP, 81, "python")]
    # xnu's jetsam line, its format filled in: the KB figure is the footprint.
    line = (
        "memorystatus: killing_top_process pid 604 [Python] (vm-pageshortage 1 0 3) 19200KB - "
        "memorystatus_available_pages: 3012"
    )
    assert read_kills(line) == [
        Kill("macos", "vm-pageshortage", 604, "python", 19200 << 10, "footprint")
    ]


def test_a_jetsam_report_cut_before_its_processes_names_no_killed_process() -> None:
    case = oom_frameworks()["os-macos-jetsam-event-omlx"]
    (kill,) = read_kills(case["text"])
    n = case["numbers"]
    assert (kill.reason, kill.pid, kill.bytes) == (JETSAM, None, None)
    assert dict(kill.sizes) == {
        "system compressor": n["compressor_bytes"],
        "system active": n["active_bytes"],
        "zone map cap": n["zone_map_cap_bytes"],
    }
    out = render(find_errors(case["text"]))
    assert '"largestProcess" (python) is only the largest' in out


def test_a_jetsam_report_names_the_process_with_a_reason() -> None:
    # A JetsamEvent report's layout (bug_type 298): pages of pageSize bytes.
    report = """{"bug_type":"298"}
    {"largestProcess" : "Python", "memoryStatus" : {"compressorSize" : 10, "pageSize" : 16384,
     "memoryPages" : {"active" : 5}}, "processes" : [
      {"uuid" : "a-b", "states" : ["daemon"], "rpages" : 100, "pid" : 12, "name" : "cfprefsd"},
      {"uuid" : "c-d", "rpages" : 2000, "reason" : "vm-pageshortage",
       "physicalPages" : {"internal" : [1, 2]}, "pid" : 4242, "name" : "Python"}]}"""
    (kill,) = read_kills(report)
    assert (kill.reason, kill.pid, kill.name) == ("vm-pageshortage", 4242, "python")
    assert (kill.bytes, kill.bytes_are) == (2000 * 16384, "resident")
    out = " ".join(render(find_errors(report)).split())
    assert "Killed for memory by macOS (vm-pageshortage)" in out
    assert "handler (jetsam) killed it (vm-pageshortage)" in out and "python [4242]" in out


def test_kills_are_findings_of_explain_with_their_keys() -> None:
    (found,) = mpsd.explain(oom_frameworks()["os-linux-memcg-oom-uwsgi"]["text"])
    assert found["kind"] == "os_kill"
    assert (found["pid"], found["process"], found["reason"]) == (63214, "uwsgi", CGROUP)
    assert (found["bytes"], found["bytes_are"]) == (168951808, "anon_rss")
    assert found["sizes"]["total-vm"] == 3225055232
    out = render(find_errors(oom_frameworks()["os-linux-memcg-oom-uwsgi"]["text"]))
    assert "uwsgi [63214]" in out and "161.12 MiB" in out and "cgroup" in out


def test_text_that_only_mentions_kills_gives_none() -> None:
    assert read_kills("") == []
    assert read_kills("the OOM killer killed process trees; memorystatus: killing spree") == []


def test_a_jetsam_pid_or_size_in_other_digits_is_not_known_and_nothing_raises() -> None:
    # str.isdigit takes "²", which int() refuses: explain must still answer.
    report = '{"bug_type":"298"}\n{"pageSize" : 16384, "processes" : [{"uuid" : "x", '
    report += '"pid" : ², "rpages" : ³, "reason" : "per-process-limit", "name" : "python"}]}\n'
    [kill] = [f.kill for f in find_errors(report) if f.kill]
    assert (kill.pid, kill.bytes, kill.name) == (None, None, "python")
