"""The operating system's kill lines: Linux's OOM killer (system-wide or a memory cgroup's),
macOS's ``memorystatus`` lines and JetsamEvent reports. The one reader of them: explain finds
them among the other errors (``HEADS``), ``mpsd jobs`` reads a log with ``find.read_kills``.

Pure. Each reader takes the squeezed text from its head on (``normalize``), so a process name
is in lower case, without spaces.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mpsd.oom import finding as fk
from mpsd.oom.finding import Finding, Kill
from mpsd.oom.normalize import compiled
from mpsd.oom.readers import Extract, Head

# What a Kill's ``bytes`` are, by its ``bytes_are``.
MEANS = {
    "anon_rss": "its anonymous memory in RAM when killed (anon-rss)",
    "compressed": "its memory in the compressor (at its uncompressed size), not its RSS",
    "footprint": "its physical footprint when killed",
    "resident": "its resident memory when killed (rpages x the page size)",
}
LINUX_OOM = "Linux's OOM killer"
CGROUP = "a memory cgroup's limit"
SWAP = "swap exhausted"
JETSAM = "jetsam"  # a JetsamEvent report whose killed process is not in the paste


def _found(os: str, reason: str, pid: str | None, name: str | None, *size: Any) -> Finding:
    """The finding of a kill; ``size``: its bytes (or None), what they are, every size."""
    n, are, sizes = (*size, None, None, None)[:3]
    kill = Kill(os, reason, int(pid) if pid else None, name, n, are if n is not None else None)
    return Finding(fk.OS_KILL, reason, kill=replace(kill, sizes=sizes or ()))


# "killedprocess7899(python)total-vm:26,184,840kb,anon-rss:153,700,88kb,..." (a paste may add
# digit-group commas); the oldest kernels print no sizes, 2.6 ones "vsz".
_LINUX = r"(\d{1,10})\((.{1,64}?)\)(?=total-vm|vsz|anon-rss|uid|,|$)"
_LINUX_SIZE = r"(total-vm|vsz|anon-rss|file-rss|shmem-rss|pgtables):(\d[\d,]{0,20})kb"


def _linux(reason: str) -> Extract:
    def extract(seg: str) -> Finding | None:
        m = compiled(_LINUX).match(seg, seg.find("process") + 7)
        if not m:
            return None
        sizes: dict[str, int] = {}
        for s in compiled(_LINUX_SIZE).finditer(seg, m.end(), m.end() + 200):
            sizes.setdefault(s[1], int(s[2].replace(",", "")) * 1024)  # "kB": KiB
        rss = sizes.get("anon-rss")
        return _found("linux", reason, m[1], m[2], rss, "anon_rss", tuple(sizes.items()))

    return extract


# xnu: "memorystatus: killing largest compressed process %s [%d] %llu MB" (no paging space),
# "memorystatus: killing %s [%d] due to swap exhaustion", and the jetsam line
# "memorystatus: killing_top_process pid %d [%s] (%s %d ...) %lluKB - ...".
_COMPRESSED = r"(.{1,64}?)\[(\d{1,10})\](\d{1,12})mb"
_SWAP = r"(.{1,64}?)\[(\d{1,10})\]duetoswapexhaustion"
_JETSAM_LINE = r"pid(\d{1,10})\[(.{0,64}?)\]\(([a-z][a-z-]{1,40}?)[\d~]*\)(?:(\d{1,15})kb)?"


def _compressed(seg: str) -> Finding | None:
    m = compiled(_COMPRESSED).match(seg, len("memorystatus:killinglargestcompressedprocess"))
    return m and _found("macos", SWAP, m[2], m[1], int(m[3]) << 20, "compressed")


def _swap(seg: str) -> Finding | None:
    m = compiled(_SWAP).match(seg, len("memorystatus:killing"))
    return m and _found("macos", SWAP, m[2], m[1])


def _jetsam_line(seg: str) -> Finding | None:
    m = compiled(_JETSAM_LINE).match(seg, seg.find("process") + 7)
    kb = m and m[4] and int(m[4]) << 10
    return m and _found("macos", m[3], m[1], m[2] or None, kb or None, "footprint")


# A JetsamEvent report (bug_type 298), squeezed: quotes gone, '"pageSize" : 16384' is
# "pagesize:16384". Its killed processes are those with a "reason"; sizes are in pages.
_PAGE = r"pagesize:(\d{1,7})"
_REASON = r"reason:([a-z][a-z-]{1,40})[,}]"
_FIELD = r"(?<![a-z])(pid|name|rpages):([^,{}\[\]]{1,64})"
_LARGEST = r"largestprocess:([^,{}]{1,64})"
# The system's memory at the kill, in pages but zoneMapCap (bytes).
_SYSTEM = r"(compressorsize|active|zonemapcap):(\d{1,20})[,}]"
SYSTEM = {"compressorsize": "system compressor", "active": "system active", "zonemapcap": ""}


def _killed(seg: str) -> tuple[str, str] | None:
    """The first process entry with a reason (the killed one): (reason, its text). An entry
    starts at "{uuid:" and may hold objects of its own ("physicalPages")."""
    at = seg.find("reason:")
    for _ in range(100):  # (a bound: each try looks at most 4000 characters)
        if at < 0:
            return None
        m = compiled(_REASON).match(seg, at)
        start = seg.rfind("{uuid:", max(0, at - 2000), at)
        if m and start >= 0:
            end = seg.find("{uuid:", at, at + 2000)
            return m[1], seg[start : end if end >= 0 else at + 2000]
        at = seg.find("reason:", at + 7)
    return None


def _jetsam_event(seg: str) -> Finding | None:
    page = compiled(_PAGE).search(seg, 0, 4000)
    size = int(page[1]) if page else 0
    system = {
        SYSTEM[k] or "zone map cap": int(n) * (1 if k == "zonemapcap" else size)
        for k, n in compiled(_SYSTEM).findall(seg, 0, 4000)
        if size or k == "zonemapcap"
    }
    m = _killed(seg)
    if m is None:  # the report was cut before its processes: the largest is not the killed
        largest = compiled(_LARGEST).search(seg, 0, 4000)
        return _found("macos", JETSAM, None, largest and largest[1], None, None, (*system.items(),))
    fields = dict(compiled(_FIELD).findall(m[1]))
    pid, rpages = fields.get("pid", ""), fields.get("rpages", "")
    ascii_digits = compiled("[0-9]{1,19}").fullmatch  # str.isdigit takes "²", which int() refuses
    n = int(rpages) * size if size and ascii_digits(rpages) else None
    pid_ = pid if ascii_digits(pid) else None
    return _found("macos", m[0], pid_, fields.get("name"), n, "resident", tuple(system.items()))


HEADS = (
    Head("memory cgroup out of memory: killed process", _linux(CGROUP), 400),
    Head("killed process", _linux(LINUX_OOM), 400, 40, r"\d"),
    Head("memorystatus: killing largest compressed process", _compressed, 160),
    Head("memorystatus: killing", _swap, 160, after=r"(?!largest|_).{1,64}?\]duetoswap"),
    Head("memorystatus: killing_", _jetsam_line, 200, after=r"[a-z]{1,20}_processpid\d"),
    Head("bug_type:298", _jetsam_event, 300_000),
    # slurm: "Detected 1 oom-kill event(s) in StepId=191.batch cgroup."
    Head("detected", lambda seg: _found("linux", CGROUP, None, None), 40, 0, r"\d+oom-killevent"),
)
