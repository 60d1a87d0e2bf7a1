"""``find_errors``: every known error in a paste, in order, each once."""

from __future__ import annotations

from mpsd.explain.finding import Finding
from mpsd.explain.normalize import chunks, prepare, regions
from mpsd.explain.readers import BY_NAME, Head, any_head


def read_squeezed(text: str) -> list[Finding]:
    """The findings in already squeezed text (see ``normalize.prepare``)."""
    anchors: list[tuple[int, Head]] = []
    last_at = -(10**9)
    for m in any_head().finditer(text):
        name = m.lastgroup
        if name is None:  # pragma: no cover - every alternative is a named group
            continue
        head = BY_NAME[name]
        if head.lookback and m.start() - last_at < head.lookback:
            continue  # a part of the message whose head was just read
        anchors.append((m.start(), head))
        last_at = m.start()
    found: list[Finding] = []
    for i, (start, head) in enumerate(anchors):
        end = anchors[i + 1][0] if i + 1 < len(anchors) else len(text)
        finding = head.extract(text[start : min(end, start + head.max_len)])
        if finding is not None:
            found.append(finding)
    return found


def merge(findings: list[Finding]) -> list[Finding]:
    """Each error once: a repeated or truncated copy of an earlier error is folded into
    it (counted), keeping the copy with the most numbers, at the first one's place."""
    out: list[Finding] = []
    for finding in findings:
        for i, seen in enumerate(out):
            if seen.covers(finding):
                seen.count += finding.count
                break
            if finding.covers(seen):
                finding.count += seen.count
                out[i] = finding
                break
        else:
            out.append(finding)
    return out


def find_errors(text: str) -> list[Finding]:
    """Every PyTorch out-of-memory (and related) error in ``text``, in the order they
    appear, each distinct error once (``count`` says how often it was seen).

    Never raises on any input; reads only the regions of ``text`` near words that
    every known error contains, so a large log is cheap.
    """
    found: list[Finding] = []
    for start, end in regions(text):
        for piece in chunks(text, start, end):
            found.extend(read_squeezed(prepare(piece)))
    return merge(found)
