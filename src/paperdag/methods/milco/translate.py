"""The translate-then-BM25 baseline's translator: a word dictionary learned from the same parallel text MILCO
aligns on, applied word by word; unknown words (unseen proper nouns) pass through.

The dictionary is IBM Model 1's (nltk.translate.IBMModel1: EM over the sentence pairs, English given source, with a
NULL word), each source word mapped to its most probable English word. A co-occurrence (Dice) dictionary, used
before, maps most inflected forms, each seen a few times, to the rarest English word of their sentences: 15 % of the
test queries' words right, cross-lingual nDCG@10 0.007, where IBM Model 1 gets 57 % and 0.22 (README, milco)."""

from __future__ import annotations

from collections.abc import Iterable


def learn_dictionary(pairs: Iterable[tuple[str, str]], iterations: int = 5) -> dict[str, str]:
    """Each source word -> argmax_e t(e | f) of IBM Model 1 trained for `iterations` EM rounds on the (source,
    English) sentence pairs (lower-cased, split on spaces); ties go to the alphabetically first English word."""
    from nltk.translate import AlignedSent, IBMModel1

    bitext = [AlignedSent(english.lower().split(), source.lower().split()) for source, english in pairs]
    if not bitext:
        return {}
    table = IBMModel1(bitext, iterations).translation_table  # table[e][f] = t(e | f); f None is the NULL word
    sources = {f for pair in bitext for f in pair.mots}
    best: dict[str, tuple[float, str]] = {}
    for e in sorted(k for k in table if k is not None):
        for f, prob in table[e].items():
            if f in sources and (f not in best or prob > best[f][0]):
                best[f] = (prob, e)
    return {f: e for f, (_, e) in best.items()}


def translate(text: str, dictionary: dict[str, str]) -> str:
    return " ".join(dictionary.get(w, w) for w in text.lower().split())
