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


class Seeds:
    """Where each half of a phrase was found in one text, kept for the next phrase with the
    same half ("cuda out of mem", "hip out of mem"...): one search per half, however many
    phrases share it. ``looked`` counts the places the phrases were tried at (the work),
    over every text it was used for."""

    __slots__ = ("looked", "positions", "text")

    def __init__(self) -> None:
        self.positions: dict[str, list[int]] = {}
        self.looked = 0
        self.text = ""

    def find(self, text: str, seed: str) -> list[int]:
        if text is not self.text:
            self.text, self.positions = text, {}
        hits = self.positions.get(seed)
        if hits is None:
            hits = self.positions[seed] = []
            i = text.find(seed)
            while i >= 0:
                hits.append(i)
                i = text.find(seed, i + 1)
        self.looked += len(hits)
        return hits


def find_phrase(text: str, phrase: str, seeds: Seeds | None = None) -> list[tuple[int, int]]:
    """Every (start, end) of ``phrase`` in ``text``, allowing one lost letter, in order.
    ``seeds``: the halves already found in ``text`` (see ``Seeds``)."""
    if seeds is None:
        seeds = Seeds()
    if len(phrase) < FUZZY_FROM:
        halves = [(phrase, 0)]
    else:
        half = len(phrase) // 2
        halves = [(phrase[:half], 0), (phrase[half:], half)]
    first_two = (phrase[:2], phrase[1:3], phrase[0] + phrase[2:3])
    spans: set[tuple[int, int]] = set()
    for seed, offset in halves:
        for i in seeds.find(text, seed):
            # The phrase starts `offset` before its second half, or one later when a
            # letter of the first half was lost.
            for start in (i - offset, i - offset + 1) if offset else (i,):
                # fuzzy_at's own first test, inline: it rejects nearly every false seed.
                if start >= 0 and text[start : start + 2] in first_two:
                    end = fuzzy_at(text, start, phrase)
                    if end >= 0:
                        spans.add((start, end))
                        break
    return sorted(spans)
