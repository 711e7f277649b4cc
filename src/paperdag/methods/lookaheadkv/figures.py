"""lookaheadkv's result figure: mean exact match over replicates against the per-head budget C, one panel per split, one line per method
(paperdag.figures' blocks). Only the stage drawing it imports this module, so restyling it reruns evaluate alone."""

from __future__ import annotations

from matplotlib.figure import Figure

from paperdag.figures import tradeoff_panels
from paperdag.methods.lookaheadkv.data import METHODS

# each method's (colour, line style)
STYLE = {"full": ("black", "--"), "streaming": ("tab:gray", ":"), "h2o": ("tab:green", "-"), "snapkv": ("tab:orange", "-"),
         "draft": ("tab:purple", "-"), "lookahead": ("tab:blue", "-"), "oracle": ("tab:red", ":")}


def accuracy_vs_budget(mean_em: dict[str, dict[str, dict[str, float]]]) -> Figure:
    """mean_em: split -> method -> budget (a string) -> exact match, the mean over replicates (metrics.headline)."""
    splits = list(mean_em)
    budgets = sorted(int(b) for b in mean_em[splits[0]]["full"])
    curves = {split: {m: [mean_em[split][m][str(b)] for b in budgets] for m in METHODS} for split in splits}
    return tradeoff_panels(budgets, curves, ylabel="exact match (%)", xlabel="per-head budget C (tokens)", styles=STYLE,
                           markersize=3, ylim=(-3, 103), log2_x=True)
