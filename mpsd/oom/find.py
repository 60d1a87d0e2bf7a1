"""``find_errors``: every known error in a paste, in order, each once, read in windows of
about a MB: time linear in the text's length, memory of a window."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from mpsd.oom import frameworks, kills, readers
from mpsd.oom.finding import OS_KILL, SIGKILL, Finding, Kill
from mpsd.oom.normalize import compiled, prepare
from mpsd.oom.readers import Head, around

WINDOW = 1 << 20  # a text is read in windows of about this many characters
TAIL = 8 * 1024  # with the characters after it that an error starting in it may run into
# Every known error has one of these (most have several, so a wrap inside one leaves another).
WORDS = tuple("memor alloc water invalid buffer ndarray dimen dims resource kill".split())  # noqa: SIM905
RECENT = 20  # a repeated or truncated copy comes soon after its error: look that far back
MAX_FINDINGS = 1000  # distinct errors read; the errors after them are only counted
MAX_READ = 10 * MAX_FINDINGS  # the texts of errors read, kept to count their repeats
# Errors mpsd sees but does not read (squeezed words, all present): named, never explained.
SEEN = (
    (("numba", "cuda_error_out_of_memory"), "a numba CUDA out-of-memory error"),
    (("cuda_error_out_of_memory",), "a CUDA driver out-of-memory error (CUDA_ERROR_OUT_OF_MEMORY)"),
    (("memoryerror",), "a Python MemoryError"),
    (("outofmemory",), "an out-of-memory message"),
)
_TRACEBACK = "traceback(mostrecentcalllast)"
HEADS = (*readers.HEADS, *kills.HEADS, *frameworks.HEADS)


def windows(pieces: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Consecutive ``pieces`` of a text (each up to a window) -> (window, tail): windows cut
    after a line break, each with the TAIL characters after it (none after the last)."""
    buffer = ""
    for piece in pieces:
        buffer += piece
        while len(buffer) >= WINDOW + TAIL:
            cut = buffer.rfind("\n", WINDOW // 2, WINDOW) + 1 or WINDOW
            yield buffer[:cut], buffer[cut : cut + TAIL]
            buffer = buffer[cut:]
    yield buffer, ""


def heads(text: str) -> list[tuple[int, Head]]:
    """Where errors start in squeezed ``text``: (position, head), in order."""
    hits: dict[int, Head] = {}
    for head in HEADS:
        at = text.find(head.phrase)
        while at >= 0:
            end = at + len(head.phrase)
            if not head.after or compiled(head.after).match(text, end):
                hits.setdefault(at, head)
            at = text.find(head.phrase, end)
    found: list[tuple[int, Head]] = []
    for at in sorted(hits):
        if not (hits[at].lookback and found and at - found[-1][0] < hits[at].lookback):
            found.append((at, hits[at]))  # (else a part of the message whose head was just read)
    return found


@dataclass
class Found:
    """Each error once: a repeated or truncated copy of an earlier error is folded into it
    (counted), keeping the copy with the most numbers, at the first one's place. Past
    MAX_FINDINGS distinct errors, the later ones are only counted (``more``)."""

    findings: list[Finding] = field(default_factory=list)
    more: int = 0
    seen: list[str] = field(default_factory=list)  # what was seen but not read (SEEN)
    cut: bool = False  # the text ends in a traceback without its error line
    _exact: dict[tuple[object, ...], Finding] = field(default_factory=dict)
    _recent: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    _read: dict[tuple[Head, str], Finding | None] = field(default_factory=dict)
    _near: dict[tuple[int, str], Finding] = field(default_factory=dict)

    def add(self, finding: Finding) -> None:
        if finding.key() in self._exact:
            self._exact[finding.key()].count += 1
            return
        kin = self._recent.setdefault((finding.kind, finding.detail), [])
        for i in reversed(kin):
            seen = self.findings[i]
            if seen.covers(finding):
                seen.count += 1
                return
            if finding.covers(seen):
                self.findings[i] = replace(finding, count=seen.count + 1)
                # Later exact copies of either count in the fuller one.
                self._exact[finding.key()] = self._exact[seen.key()] = self.findings[i]
                return
        if len(self.findings) >= MAX_FINDINGS:
            self.more += 1
            return
        self._exact[finding.key()] = new = replace(finding)
        kin.append(len(self.findings))
        del kin[:-RECENT]
        self.findings.append(new)

    def read(self, text: str, stop: int) -> None:
        """Add the findings of squeezed ``text`` whose head is before ``stop`` (the rest only
        completes them). Past MAX_FINDINGS, an error not seen before is only counted."""
        anchors = heads(text)
        for i, (start, head) in enumerate(anchors):
            if start >= stop:
                break
            end = anchors[i + 1][0] if i + 1 < len(anchors) else len(text)
            key = (head, text[start : min(end, start + head.max_len)])
            if key in self._read:  # a log may repeat one error thousands of times
                finding = self._read[key]
            elif len(self.findings) >= MAX_FINDINGS:
                self.more += 1
                continue
            else:
                finding = head.extract(key[1])
                if len(self._read) < MAX_READ:
                    self._read[key] = finding
            if finding is not None:  # with what the traceback before it and its lines tell
                near = (id(finding), text[anchors[i - 1][0] if i else 0 : end])
                told = self._near.get(near) or around(finding, near[1])
                # A log may repeat an error and its lines (kept short: memory stays flat);
                # an id is kept while _read holds its finding.
                if len(near[1]) < 4096 > len(self._near) and self._read.get(key) is finding:
                    self._near[near] = told
                self.add(told)


def scan(pieces: Iterable[str]) -> Found:
    """The errors in a text given in consecutive pieces (a file read in parts, none longer
    than a window); a window without any of WORDS is skipped."""
    found = Found()
    for n, (window, tail) in enumerate(windows(pieces)):
        if n or tail:
            low = (window + tail).lower()
            if not any(word in low for word in WORDS):
                continue
        squeezed = prepare(window)
        found.read(squeezed + prepare(tail), len(squeezed))
        what = next((s for words, s in SEEN if all(w in squeezed for w in words)), None)
        if what and what not in found.seen[:10]:
            found.seen.append(what)
        last = squeezed.rfind(_TRACEBACK)
        found.cut = last >= 0 and not compiled(r"(?:error|exception):").search(squeezed, last)
    if any(f.kind == OS_KILL for f in found.findings):  # the SIGKILL the log explains
        found.findings = [f for f in found.findings if f.kind != SIGKILL]
    return found


def find_errors(text: str) -> list[Finding]:
    """The first MAX_FINDINGS PyTorch out-of-memory (and related) errors in ``text``, in
    order, each distinct one once (``count``: how often it was seen). Never raises."""
    return scan(text[i : i + WINDOW] for i in range(0, len(text), WINDOW)).findings


def read_kills(text: str) -> list[Kill]:
    """The processes the system killed for memory, as the kill lines in ``text`` say
    (``kills``), each once, in order. Never raises."""
    return [f.kill for f in find_errors(text) if f.kill is not None]
