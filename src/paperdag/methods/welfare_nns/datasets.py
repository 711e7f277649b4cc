"""The evaluation's datasets, pure functions of their params and seed: a Gaussian mixture with the paper's schemes,
generated product titles embedded by a sentence encoder, load_digits, and a user's points."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from paperdag.methods.welfare_nns.instances import (
    CATEGORIES,
    COLOURS,
    clus_attributes,
    multi_label_membership,
    prob_attributes,
    product_queries,
    product_titles,
    unit_rows,
)
from paperdag.points import gaussian_mixture
from paperdag.retrieval import encode, load_encoder


def build_datasets(p: Any, user_points: tuple[np.ndarray, np.ndarray | None] | None = None) -> dict[str, Any]:
    """Unit-norm item vectors and queries per dataset of p.datasets, their attribute schemes, a catalogue describing
    them, and the product titles.

    gauss: Gaussian mixture with schemes clus (k-means cluster), prob (skewed draw) and multi (both at once);
    products: MiniLM-embedded titles with colour (single) and colour+category (multi); digits: load_digits with its
    labels; file: a user's points (items, their attribute or None) with that attribute, or clus when it has none.
    `p` is the synthesize params (sizes, skews, encoder, points_file, seed).
    """
    vectors: dict[str, np.ndarray] = {}
    attributes: dict[str, np.ndarray] = {}
    catalogue: dict[str, Any] = {}
    products = pl.DataFrame(schema={"title": pl.String, "colour": pl.String, "category": pl.String})

    def add(name: str, items: np.ndarray, queries: np.ndarray, schemes: dict[str, tuple[np.ndarray, list[str]]], **extra: Any) -> None:
        vectors[f"{name}.items"], vectors[f"{name}.queries"] = unit_rows(items), unit_rows(queries)
        catalogue[name] = {"n": len(items), "dim": items.shape[1], "queries": len(queries), "schemes": {}, **extra}
        for scheme, (values, names) in schemes.items():
            attributes[f"{name}.{scheme}"] = values.astype(np.uint8 if values.ndim == 2 else np.int64)
            kind = "multi" if values.ndim == 2 else "single"
            catalogue[name]["schemes"][scheme] = {"kind": kind, "c": len(names), "names": names}

    if "gauss" in p.datasets:
        points = gaussian_mixture(p.gauss_n + p.n_queries, p.gauss_dim, p.gauss_components, p.gauss_separation, p.seed).astype(np.float32)
        items, queries = points[: p.gauss_n], points[p.gauss_n :]  # queries: fresh draws from the same mixture
        clus = clus_attributes(unit_rows(items), p.clus_attributes, p.seed)
        prob = prob_attributes(p.gauss_n, p.prob_attributes, p.prob_skew, p.seed + 1)
        clus_names = [f"cluster {i}" for i in range(p.clus_attributes)]
        prob_names = [f"p{i}" for i in range(p.prob_attributes)]
        multi = multi_label_membership((clus, p.clus_attributes), (prob, p.prob_attributes))
        add("gauss", items, queries, {"clus": (clus, clus_names), "prob": (prob, prob_names), "multi": (multi, clus_names + prob_names)})
    if "products" in p.datasets:
        titles, colours, categories = product_titles(p.products_n, p.colour_skew, p.seed + 2)
        texts = product_queries()
        encoder = load_encoder(p.encoder)
        items, queries = encode(encoder, titles), encode(encoder, texts, progress=False)
        both = multi_label_membership((colours, len(COLOURS)), (categories, len(CATEGORIES)))
        add("products", items, queries, {"colour": (colours, list(COLOURS)), "colour+category": (both, list(COLOURS + CATEGORIES))},
            query_texts=texts, encoder=p.encoder)
        products = pl.DataFrame(
            {"title": titles, "colour": [COLOURS[i] for i in colours], "category": [CATEGORIES[i] for i in categories]}
        )
    if "digits" in p.datasets:
        from sklearn.datasets import load_digits

        digits = load_digits()  # (1797, 64), ships offline; held-out digits are the queries
        order = np.random.default_rng(p.seed + 3).permutation(len(digits.target))
        held_out = min(p.n_queries, len(order) // 5)
        rows, query_rows = order[held_out:], order[:held_out]
        add("digits", digits.data[rows], digits.data[query_rows], {"label": (digits.target[rows], [str(d) for d in range(10)])})
    if user_points is not None:
        items, labels = user_points
        order = np.random.default_rng(p.seed + 4).permutation(len(items))
        held_out = min(p.n_queries, len(items) // 5)
        rows, query_rows = order[held_out:], order[:held_out]
        if labels is None:
            scheme, labels, c = "clus", clus_attributes(unit_rows(items), p.clus_attributes, p.seed), p.clus_attributes
        else:
            scheme, c = "attribute", int(labels.max()) + 1
        add("file", items[rows], items[query_rows], {scheme: (labels[rows], [str(a) for a in range(c)])}, source=p.points_file)
    return {"vectors": vectors, "attributes": attributes, "catalogue": catalogue, "products": products}
