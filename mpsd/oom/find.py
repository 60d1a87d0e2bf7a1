"""``find_errors``: every known error in a paste, in order, each once."""

from __future__ import annotations

import re
from functools import cache

from mpsd.oom.finding import Finding
from mpsd.oom.normalize import CHUNK, chunks, likely, prepare, regions
from mpsd.oom.readers import HEADS, Head
from mpsd.oom.scan import find_phrase


@cache
def _regex(pattern: str, suffix: str = "") -> re.Pattern[str]:
    return re.compile(f"(?:{pattern}){suffix}")


def heads(text: str) -> list[tuple[int, Head]]:
    """Where errors start in squeezed ``text``: (position, head), in order."""
    hits: dict[int, Head] = {}
    spans: dict[str, list[tuple[int, int]]] = {}
    for head in HEADS:
        if not head.phrase:
            for m in _regex(head.pattern).finditer(text):
                hits.setdefault(m.start(), head)
            continue
        if head.phrase not in spans:
            spans[head.phrase] = find_phrase(text, head.phrase)
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


def read_squeezed(text: str, stop: int | None = None) -> list[Finding]:
    """The findings in already squeezed text (see ``normalize.prepare``) whose head is
    before ``stop`` (the rest of the text is only there to complete them)."""
    anchors = heads(text)
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
        finding = seen[key]
        if finding is not None:
            found.append(finding.copy())
    return found


RECENT = 20  # a repeated or truncated copy comes soon after its error: look that far back


def merge(findings: list[Finding]) -> list[Finding]:
    """Each error once: a repeated or truncated copy of an earlier error is folded into
    it (counted), keeping the copy with the most numbers, at the first one's place."""
    out: list[Finding | None] = []
    exact: dict[tuple[object, ...], Finding] = {}
    recent: dict[tuple[str, str], list[int]] = {}
    for finding in findings:
        key = tuple(finding.values().values())
        if key in exact:
            exact[key].count += finding.count
            continue
        kin = recent.setdefault((finding.kind, finding.detail), [])
        for i in reversed(kin[-RECENT:]):
            seen = out[i]
            assert seen is not None
            if seen.covers(finding):
                seen.count += finding.count
                break
            if finding.covers(seen):
                finding.count += seen.count
                out[i] = finding
                exact[key] = finding
                break
        else:
            exact[key] = finding
            kin.append(len(out))
            out.append(finding)
    return [f for f in out if f is not None]


def find_errors(text: str) -> list[Finding]:
    """Every PyTorch out-of-memory (and related) error in ``text``, in the order they
    appear, each distinct error once (``count`` says how often it was seen).

    Never raises on any input; in a large log reads only the regions near words that
    every known error contains.
    """
    found: list[Finding] = []
    large = len(text) > CHUNK
    for start, end in regions(text):
        for piece, lookahead in chunks(text, start, end):
            if large and not likely(piece):
                continue
            squeezed = prepare(piece)
            found.extend(read_squeezed(squeezed + prepare(lookahead), len(squeezed)))
    return merge(found)
