"""Synthetic worlds for diverse NNS, pure functions of a seed: a Gaussian mixture with the paper's attribute schemes
("Clus": attribute = k-means cluster; "Prob": attribute drawn from a skewed distribution, independent of position),
a multi-label scheme (both at once), and product titles with colour / category attributes.
"""

from __future__ import annotations

import itertools

import numpy as np


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32), so inner product = cosine."""
    v = np.asarray(vectors, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def clus_attributes(vectors: np.ndarray, clusters: int, seed: int) -> np.ndarray:
    """"Clus": attribute = the point's k-means cluster (mini-batch k-means, `clusters` clusters). (n,) int64."""
    from sklearn.cluster import MiniBatchKMeans

    km = MiniBatchKMeans(n_clusters=clusters, random_state=seed, n_init=3, batch_size=4096)
    return km.fit_predict(np.asarray(vectors, dtype=np.float32)).astype(np.int64)


def skewed_probabilities(c: int, skew: float) -> np.ndarray:
    """Zipf-like p_l proportional to 1 / (l + 1)^skew over c attributes (skew = 0: uniform)."""
    weights = 1.0 / np.arange(1, c + 1) ** skew
    return weights / weights.sum()


def prob_attributes(n: int, c: int, skew: float, seed: int) -> np.ndarray:
    """"Prob": each point's attribute drawn independently from skewed_probabilities(c, skew). (n,) int64."""
    return np.random.default_rng(seed).choice(c, size=n, p=skewed_probabilities(c, skew)).astype(np.int64)


def multi_label_membership(*attribute_families: tuple[np.ndarray, int]) -> np.ndarray:
    """Items carrying one attribute from each family (e.g. Clus and Prob): (n, sum of c) bool, families side by side."""
    n = len(attribute_families[0][0])
    total = sum(c for _, c in attribute_families)
    membership = np.zeros((n, total), dtype=bool)
    offset = 0
    for attrs, c in attribute_families:
        membership[np.arange(n), offset + np.asarray(attrs)] = True
        offset += c
    return membership


def perturbed_queries(vectors: np.ndarray, n_queries: int, noise: float, seed: int) -> np.ndarray:
    """Queries near the data: random data points + N(0, noise^2 I) (float32)."""
    rng = np.random.default_rng(seed)
    base = vectors[rng.choice(len(vectors), size=n_queries, replace=False)]
    return (base + rng.normal(scale=noise, size=base.shape)).astype(np.float32)


# ---------------------------------------------------------------- product titles

COLOURS = ("black", "white", "navy", "grey", "red", "green", "beige", "blue", "pink", "yellow", "brown", "purple")
CATEGORIES = ("shirt", "t-shirt", "dress", "jeans", "jacket", "sweater", "skirt", "shorts", "sneakers", "boots", "hat", "scarf")
MATERIALS = ("cotton", "linen", "wool", "denim", "leather", "silk", "polyester", "cashmere", "fleece", "corduroy")
BRANDS = ("Northwind", "Alder & Co", "Lumen", "Fjord", "Marlowe", "Kestrel", "Oakridge", "Solenne", "Tidewater", "Verano")
STYLES = ("classic", "slim-fit", "oversized", "vintage", "relaxed", "everyday", "premium", "organic", "lightweight", "cropped")
TEMPLATES = (
    "{brand} {style} {colour} {material} {category}",
    "{colour} {category} in {material} by {brand}",
    "{style} {material} {category}, {colour}",
    "{brand} {colour} {category} ({material}, {style})",
)


def product_titles(n: int, colour_skew: float, seed: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """n distinct product titles from TEMPLATES (colour x category x material x brand x style), with their colour and
    category ids. Colours are skewed (Zipf colour_skew), so a plain top-k for "shirt" tends to return one colour."""
    rng = np.random.default_rng(seed)
    p_colour = skewed_probabilities(len(COLOURS), colour_skew)
    titles, colours, categories, seen = [], [], [], set()
    for _ in itertools.count():
        if len(titles) == n:
            break
        colour = int(rng.choice(len(COLOURS), p=p_colour))
        category = int(rng.integers(len(CATEGORIES)))
        title = TEMPLATES[int(rng.integers(len(TEMPLATES)))].format(
            brand=BRANDS[int(rng.integers(len(BRANDS)))],
            style=STYLES[int(rng.integers(len(STYLES)))],
            colour=COLOURS[colour],
            material=MATERIALS[int(rng.integers(len(MATERIALS)))],
            category=CATEGORIES[category],
        )
        if title not in seen:  # distinct titles: duplicates would tie and make top-k arbitrary
            seen.add(title)
            titles.append(title)
            colours.append(colour)
            categories.append(category)
    return titles, np.asarray(colours, dtype=np.int64), np.asarray(categories, dtype=np.int64)


def product_queries() -> list[str]:
    """One query per category ("shirt"), then one per (material, category) pair on a fixed diagonal."""
    plain = list(CATEGORIES)
    with_material = [f"{MATERIALS[i % len(MATERIALS)]} {c}" for i, c in enumerate(CATEGORIES)]
    return plain + with_material
