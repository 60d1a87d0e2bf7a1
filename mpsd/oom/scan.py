"""Finding a phrase in squeezed text even when one of its letters was lost.

No regex: two ``str.find`` scans for the phrase's halves (a lost letter breaks at
most one of them), then a check of the whole phrase where a half was found. Fast
on a 50 MB log, and nothing to compile at start-up.
"""

from __future__ import annotations

FUZZY_FROM = 7  # shorter phrases must be exact


def fuzzy_at(text: str, start: int, phrase: str) -> int:
    """Where ``phrase`` (or it with one letter lost) ends if it starts at ``start``; -1 if not."""
    if text.startswith(phrase, start):
        return start + len(phrase)
    if len(phrase) < FUZZY_FROM:
        return -1
    # With one letter lost, the text starts with the phrase's first two letters, or
    # with them minus the lost one: a cheap test that rejects nearly every false seed.
    head = text[start : start + 2]
    if head != phrase[:2] and head != phrase[1:3] and head != phrase[0] + phrase[2]:
        return -1
    for i, ch in enumerate(phrase):
        if ch.isalpha() and text.startswith(phrase[:i] + phrase[i + 1 :], start):
            return start + len(phrase) - 1
    return -1


def find_phrase(text: str, phrase: str) -> list[tuple[int, int]]:
    """Every (start, end) of ``phrase`` in ``text``, allowing one lost letter, in order."""
    if len(phrase) < FUZZY_FROM:
        seeds = [(phrase, 0)]
    else:
        half = len(phrase) // 2
        seeds = [(phrase[:half], 0), (phrase[half:], half)]
    spans: set[tuple[int, int]] = set()
    for seed, offset in seeds:
        i = text.find(seed)
        while i >= 0:
            # The phrase starts `offset` before its second half, or one later when a
            # letter of the first half was lost.
            for start in (i - offset, i - offset + 1) if offset else (i,):
                if start >= 0:
                    end = fuzzy_at(text, start, phrase)
                    if end >= 0:
                        spans.add((start, end))
                        break
            i = text.find(seed, i + 1)
    return sorted(spans)
