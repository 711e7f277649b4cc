"""lookaheadkv's result figure: exact match against the per-head budget C, one panel per split, one line per method
(paperdag.figures' blocks). Only the stage drawing it imports this module, so restyling it reruns evaluate alone."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from paperdag.figures import tradeoff_panels
from paperdag.methods.lookaheadkv.data import METHODS
from paperdag.methods.lookaheadkv.metrics import exact_match_grid

# each method's (colour, line style)
STYLE = {"full": ("black", "--"), "streaming": ("tab:gray", ":"), "h2o": ("tab:green", "-"), "snapkv": ("tab:orange", "-"),
         "draft": ("tab:purple", "-"), "lookahead": ("tab:blue", "-"), "oracle": ("tab:red", ":")}


def accuracy_vs_budget(table: pl.DataFrame) -> Figure:
    """table: metrics.exact_match_table."""
    em, budgets, splits = exact_match_grid(table)
    curves = {split: {m: [em[(split, m, b)] for b in budgets] for m in METHODS} for split in splits}
    return tradeoff_panels(budgets, curves, ylabel="exact match (%)", xlabel="per-head budget C (tokens)", styles=STYLE,
                           markersize=3, ylim=(-3, 103), log2_x=True)
