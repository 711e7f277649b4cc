"""tokmem's result figures: a score of every method against the number of procedures added, round by round
(paperdag.figures' blocks). Only the stage drawing them imports this module, so restyling them reruns evaluate alone."""

from __future__ import annotations

from matplotlib.figure import Figure

from paperdag.figures import panels, tradeoff


def metric_vs_procedures(curve: dict[str, list[dict]], key: str, label: str) -> Figure:
    """curve: method -> its score-table rows by round (metrics.score_table); `key` the column drawn."""
    x = {m: [r["n_procedures"] for r in rows] for m, rows in curve.items()}
    shared = next(iter(x.values()))
    if any(v != shared for v in x.values()):  # every method is tested after the same rounds
        raise ValueError(f"tokmem figure: methods tested at different procedure counts {x}")
    fig, (ax,) = panels(6, 3.6)
    tradeoff(ax, shared, {m: [r[key] for r in rows] for m, rows in curve.items()}, xlabel="procedures added (memory rounds)",
             ylabel=label, ylim=(-2, 102), title=f"tokmem: {label} vs number of procedures")
    return fig
