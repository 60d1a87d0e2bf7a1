"""``find_errors``: every known error in a paste, in order, each once."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from mpsd.oom.finding import Finding
from mpsd.oom.normalize import CHUNK, blocks, likely, prepare
from mpsd.oom.readers import HEADS, Head
from mpsd.oom.scan import Seeds, find_phrase


@cache
def _regex(pattern: str, suffix: str = "") -> re.Pattern[str]:
    return re.compile(f"(?:{pattern}){suffix}")


def heads(text: str, seeds: Seeds | None = None) -> list[tuple[int, Head]]:
    """Where errors start in squeezed ``text``: (position, head), in order. ``seeds``
    counts the work (see ``scan.Seeds``)."""
    if seeds is None:
        seeds = Seeds()
    hits: dict[int, Head] = {}
    spans: dict[str, list[tuple[int, int]]] = {}
    for head in HEADS:
        if not head.phrase:
            for m in _regex(head.pattern).finditer(text):
                hits.setdefault(m.start(), head)
            continue
        if head.phrase not in spans:
            spans[head.phrase] = find_phrase(text, head.phrase, seeds)
        for start, end in spans[head.phrase]:
            if head.before and not _regex(head.before, r"\Z").search(
                text, max(0, start - 40), start
            ):
                continue
            if head.after and not _regex(head.after).match(text, end):
                continue
            hits.setdefault(start, head)
    anchors: list[tuple[int, Head]] = []
    last_at = -(10**9)
    for at in sorted(hits):
        head = hits[at]
        if head.lookback and at - last_at < head.lookback:
            continue  # a part of the message whose head was just read
        anchors.append((at, head))
        last_at = at
    return anchors


READ_COST = 30  # reading one error's numbers costs about as much as 30 places looked at


def read_squeezed(text: str, stop: int | None = None, seeds: Seeds | None = None) -> list[Finding]:
    """The findings in already squeezed text (see ``normalize.prepare``) whose head is
    before ``stop`` (the rest of the text is only there to complete them). ``seeds``
    counts the work (see ``scan.Seeds``)."""
    if seeds is None:
        seeds = Seeds()
    anchors = heads(text, seeds)
    found: list[Finding] = []
    seen: dict[tuple[str, str], Finding | None] = {}
    for i, (start, head) in enumerate(anchors):
        if stop is not None and start >= stop:
            break
        end = anchors[i + 1][0] if i + 1 < len(anchors) else len(text)
        segment = text[start : min(end, start + head.max_len)]
        key = (head.name, segment)
        if key not in seen:  # a log may repeat one error thousands of times
            seen[key] = head.extract(segment)
            seeds.looked += READ_COST
        finding = seen[key]
        if finding is not None:
            found.append(finding.copy())
    return found


RECENT = 20  # a repeated or truncated copy comes soon after its error: look that far back
MAX_DISTINCT = 100_000  # distinct errors kept (repeats of them are still counted)


class Merger:
    """Each error once: a repeated or truncated copy of an earlier error is folded into
    it (counted), keeping the copy with the most numbers, at the first one's place.

    Fed one finding at a time, so that a log of a million repeats of one error holds one
    finding, not a million. Past MAX_DISTINCT distinct errors a new one is dropped (no
    paste has that many; the bound keeps memory bounded whatever the input)."""

    def __init__(self) -> None:
        self.out: list[Finding | None] = []
        self.exact: dict[tuple[object, ...], Finding] = {}
        self.recent: dict[tuple[str, str], list[int]] = {}

    def add(self, finding: Finding) -> None:
        key = tuple(finding.values().values())
        if key in self.exact:
            self.exact[key].count += finding.count
            return
        kin = self.recent.setdefault((finding.kind, finding.detail), [])
        for i in reversed(kin[-RECENT:]):
            seen = self.out[i]
            assert seen is not None
            if seen.covers(finding):
                seen.count += finding.count
                return
            if finding.covers(seen):
                finding.count += seen.count
                self.out[i] = finding
                self.exact[key] = finding
                # Later exact copies of the truncated one count here too, not in it.
                self.exact[tuple(seen.values().values())] = finding
                return
        if len(self.out) >= MAX_DISTINCT:
            return
        self.exact[key] = finding
        kin.append(len(self.out))
        del kin[:-RECENT]
        self.out.append(finding)

    def findings(self) -> list[Finding]:
        return [f for f in self.out if f is not None]


# How much work explain does before it stops reading (places looked at, see
# ``scan.Seeds``): a few seconds' worth. A real log, even of 100 MB with an error in every
# block, needs a small part of it; only a paste made of tens of thousands of errors, or of
# their words, reaches it.
BUDGET = 2_000_000


class Scan:
    """The findings in a text read in pieces, and whether the reading stopped early."""

    __slots__ = ("findings", "read", "stopped")

    def __init__(self, findings: list[Finding], read: int, stopped: bool) -> None:
        self.findings = findings
        self.read = read  # characters read
        self.stopped = stopped  # True when BUDGET ran out before the end of the text


def scan(pieces: Iterable[str], budget: int = BUDGET) -> Scan:
    """``find_errors`` for a text given in consecutive pieces of any size (a file read in
    parts): holds no more than a block of it, and takes time linear in its length. Stops
    reading (``Scan.stopped``) once the work reaches ``budget``: whatever the input, explain
    answers within seconds."""
    merger = Merger()
    seeds = Seeds()
    read = 0
    for block, lookahead, large in blocks(pieces):
        if seeds.looked >= budget:
            return Scan(merger.findings(), read, True)
        read += len(block)
        if large and not likely(block, lookahead):
            continue
        squeezed = prepare(block)
        for finding in read_squeezed(squeezed + prepare(lookahead), len(squeezed), seeds):
            merger.add(finding)
    return Scan(merger.findings(), read, False)


def find_errors_in(pieces: Iterable[str]) -> list[Finding]:
    """``scan``'s findings."""
    return scan(pieces).findings


def find_errors(text: str) -> list[Finding]:
    """Every PyTorch out-of-memory (and related) error in ``text``, in the order they
    appear, each distinct error once (``count`` says how often it was seen).

    Never raises on any input, and takes time linear in its length; in a large log reads
    only the blocks with words that every known error contains. A text of tens of
    thousands of errors is read only up to ``BUDGET`` (see ``scan``).
    """
    return find_errors_in(text[i : i + CHUNK] for i in range(0, len(text), CHUNK))
