"""welfare_nns's figure: relevance (ratio) against diversity (entropy) per dataset and scheme, drawn by the shared
paperdag.figures.pareto_panels. Only the evaluate stage imports this module."""

from __future__ import annotations

from matplotlib.figure import Figure

from paperdag.figures import pareto_panels

STYLE = {  # method -> (colour, marker), in legend order
    "exact-top-k": ("black", "*"), "top-k": ("gray", "o"), "top-k-ef": ("lightgray", "."), "div-ann": ("tab:orange", "s"), "mmr": ("tab:green", "^"),
    "nash-ann": ("tab:blue", "D"), "nash-ann-exact": ("tab:cyan", "d"), "p-mean": ("tab:purple", "v"),
    "p-fetch-union": ("tab:pink", "P"), "greedy-nsw": ("tab:red", "X"),
}


def pareto(table: list[dict]) -> Figure:
    """One point per parameter value, a line per method, a panel per dataset/scheme (the exact oracle's Nash dashed)."""
    return pareto_panels(table, ("dataset", "scheme"), "ratio_cos", "entropy", STYLE, dashed=("nash-ann-exact",),
                         title=lambda r: f"{r['dataset']} / {r['scheme']} ({r['kind']}, c={r['c']})",
                         xlabel="relevance ratio (sum cos / exact top-k)", ylabel="attribute entropy (nats)")
