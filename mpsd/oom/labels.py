"""Sizes and their labels: ``mpsallocated:18.02gb`` is "allocated_bytes = 18.02 GiB".

In squeezed text (see ``normalize``) every size is labelled by the words just
before and just after it, matched even with a letter lost; the longest label wins.
"""

from __future__ import annotations

from functools import cache

from mpsd.oom.finding import Finding
from mpsd.oom.normalize import compiled
from mpsd.oom.units import binary_style, to_bytes

SIZE = r"(?<![\d.,])(\d+(?:[.,]\d+)*)(bytes?|[kmgtp]i?b)"
_SEPARATORS = ",;()[]{}.!?|"  # a label never spans one of these


def _after_last_separator(text: str) -> str:
    return text[max(text.rfind(c) for c in _SEPARATORS) + 1 :]


def _before_first_separator(text: str) -> str:
    found = [i for i in (text.find(c) for c in _SEPARATORS) if i >= 0]
    return text[: min(found)] if found else text


CONTEXT = 48  # how far a label may be from its number


def variants(word: str, shortest: int = 7) -> tuple[str, ...]:
    """``word`` and, for words of ``shortest`` letters or more, ``word`` with one letter lost."""
    out = [word]
    if len(word) >= shortest:
        out += [word[:i] + word[i + 1 :] for i, ch in enumerate(word) if ch.isalpha()]
    return tuple(dict.fromkeys(out))


@cache
def _label_forms(label: str) -> tuple[str, ...]:
    return variants(label)


def _match_len(context: str, labels: tuple[str, ...], at_end: bool) -> int:
    """The length of the longest form of a label that ``context`` ends (or starts) with:
    the labels as written first, their forms with a lost letter only when none fits."""
    test = context.endswith if at_end else context.startswith
    exact = [len(label) for label in labels if test(label)]
    if exact:
        return max(exact)
    best = 0
    # A form with one letter lost ends with the label's last letter or, when that was the
    # one lost, its last but one (starts with its first or second): a quick test first.
    edge = context[-1:] if at_end else context[:1]
    for label in labels:
        if not edge or edge not in (label[-2:] if at_end else label[:2]):
            continue
        for form in _label_forms(label)[1:]:
            if len(form) > best and test(form):
                best = len(form)
    return best


# field -> (labels just before the number, labels just after it)
Labels = dict[str, tuple[tuple[str, ...], tuple[str, ...]]]


def read_sizes(seg: str, labels: Labels, found: Finding) -> dict[str, int]:
    """Label every size in ``seg`` and set the first of each field on ``found``.

    Returns the sizes of fields that are not attributes of ``Finding`` (helpers
    such as CUDA's "reserved but unallocated").
    """
    extra: dict[str, int] = {}
    prev_end = 0
    sizes = list(compiled(SIZE).finditer(seg))
    for i, m in enumerate(sizes):
        before = seg[max(prev_end, m.start() - CONTEXT) : m.start()]
        before = _after_last_separator(before.rstrip(":=~)")).rstrip(":=~")
        next_start = sizes[i + 1].start() if i + 1 < len(sizes) else len(seg)
        after = seg[m.end() : min(next_start, m.end() + CONTEXT)]
        after = _before_first_separator(after)
        prev_end = m.end()
        parsed = to_bytes(m.group(1), m.group(2))
        if parsed is None:
            continue
        best_key, best_len = "", 0
        for key, (befores, afters) in labels.items():
            n = max(_match_len(before, befores, True), _match_len(after, afters, False))
            if n > best_len:
                best_key, best_len = key, n
        if not best_key:
            continue
        if best_key.startswith("_"):
            extra.setdefault(best_key, parsed[0])
        elif getattr(found, best_key) is None:
            setattr(found, best_key, parsed[0])
            found.rounding[best_key] = parsed[1]
            if not m.group(2).startswith("byte"):
                found.binary_units = binary_style(m.group(2))
    return extra
