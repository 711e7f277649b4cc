"""The translate-then-BM25 baseline's translator: a word dictionary learned from the same parallel text MILCO
aligns on (Dice co-occurrence), applied word by word; unknown words (unseen proper nouns) pass through."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def learn_dictionary(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each source word -> the English word maximising Dice = 2 c(f, e) / (c(f) + c(e)) over sentence pairs."""
    src_count: Counter[str] = Counter()
    en_count: Counter[str] = Counter()
    joint: Counter[tuple[str, str]] = Counter()
    for source, english in pairs:
        f_words, e_words = set(source.lower().split()), set(english.lower().split())
        src_count.update(f_words)
        en_count.update(e_words)
        joint.update((f, e) for f in f_words for e in e_words)
    best: dict[str, tuple[float, str]] = {}
    for (f, e), c in joint.items():
        dice = 2 * c / (src_count[f] + en_count[e])
        if f not in best or (dice, e) > best[f]:
            best[f] = (dice, e)
    return {f: e for f, (_, e) in best.items()}


def translate(text: str, dictionary: dict[str, str]) -> str:
    return " ".join(dictionary.get(w, w) for w in text.lower().split())
