"""Synthetic point sets for each metric the paper evaluates, as pure functions of a seed.

All clustered families draw k prototypes and perturb them, so a good learned forest exists (gamma near 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def uniform_cube(n: int, dim: int, seed: int) -> np.ndarray:
    """(n, dim) points uniform in [0, 1]^dim."""
    return np.random.default_rng(seed).random((n, dim))


def bit_strings(n: int, bits: int, components: int, flip: float, seed: int) -> np.ndarray:
    """(n, bits) 0/1 array: k random prototypes, each bit of each point flipped with probability `flip`."""
    rng = np.random.default_rng(seed)
    prototypes = rng.integers(0, 2, size=(components, bits), dtype=np.uint8)
    which = rng.integers(components, size=n)
    flips = (rng.random((n, bits)) < flip).astype(np.uint8)
    return prototypes[which] ^ flips


def item_sets(n: int, vocabulary: int, components: int, set_size: int, seed: int) -> list[list[int]]:
    """n sets of items in [0, vocabulary): each cluster prefers its own topic of items (80%) over the rest."""
    rng = np.random.default_rng(seed)
    topics = [rng.choice(vocabulary, size=max(set_size * 2, 1), replace=False) for _ in range(components)]
    sets: list[list[int]] = []
    for c in rng.integers(components, size=n):
        size = max(1, int(rng.poisson(set_size)))
        from_topic = rng.random(size) < 0.8
        items = np.where(from_topic, rng.choice(topics[c], size=size), rng.integers(vocabulary, size=size))
        sets.append(sorted({int(x) for x in items}))
    return sets


def edited_strings(n: int, length: int, components: int, edits: int, seed: int) -> list[str]:
    """n strings: k random prototypes of `length` letters, each copy with up to `edits` random edits."""
    rng = np.random.default_rng(seed)
    prototypes = ["".join(rng.choice(list(_ALPHABET), size=length)) for _ in range(components)]
    out: list[str] = []
    for c in rng.integers(components, size=n):
        s = list(prototypes[c])
        for _ in range(int(rng.integers(edits + 1))):
            pos = int(rng.integers(len(s) + 1))
            op = rng.integers(3)
            letter = str(rng.choice(list(_ALPHABET)))
            if op == 0 or not s:  # insert
                s.insert(pos, letter)
            elif op == 1:  # delete
                del s[min(pos, len(s) - 1)]
            else:  # substitute
                s[min(pos, len(s) - 1)] = letter
        out.append("".join(s))
    return out


def digits() -> np.ndarray:
    """scikit-learn's load_digits (1797 x 64, ships offline), as float64."""
    from sklearn.datasets import load_digits

    return load_digits().data.astype(np.float64)


def point_table(name: str, p: Any, seed: int) -> pl.DataFrame:
    """Instance `name`'s points table, its sizes read from `p` (the synthesize params: `<name>_n`, `<name>_dim`, ...);
    gaussian_noisy is the headline's mixture family at smaller n (train gives it a noisy forest)."""
    from paperdag.methods.mfc import tables
    from paperdag.points import gaussian_mixture

    if name in ("gaussian", "gaussian_noisy"):
        n = p.gaussian_n if name == "gaussian" else p.gaussian_noisy_n
        return tables.vectors(name, gaussian_mixture(n, p.gaussian_dim, p.gaussian_components, p.gaussian_separation, seed))
    if name == "uniform":
        return tables.vectors(name, uniform_cube(p.uniform_n, p.uniform_dim, seed))
    if name == "hamming":
        bits = bit_strings(p.hamming_n, p.hamming_bits, p.hamming_components, p.hamming_flip, seed)
        return tables.items(name, "hamming", [row.tolist() for row in bits])
    if name == "jaccard":
        return tables.items(name, "jaccard", item_sets(p.jaccard_n, p.jaccard_vocabulary, p.jaccard_components,
                                                       p.jaccard_set_size, seed))
    if name == "edit":
        return tables.strings(name, edited_strings(p.edit_n, p.edit_length, p.edit_components, p.edit_max_edits, seed))
    if name == "digits":
        return tables.vectors(name, digits())
    raise ValueError(f"unknown mfc instance {name!r}")
