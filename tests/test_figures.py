"""paperdag.figures: the shared drawings (loss curves, trade-offs, panels, mean bands) draw what they are given."""

from __future__ import annotations

from paperdag.figures import decorate, loss_curves, mean_band, panels, reference_lines, tradeoff, tradeoff_panels


def test_loss_curves_draw_each_named_loss_with_its_running_mean() -> None:
    """Two named losses: a faint per-step line and a running mean each, labelled by name; one loss keeps the
    plain "step loss" / "mean of N" labels; an empty history draws nothing."""
    fig, (ax,) = panels(6, 3)
    loss_curves(ax, {"loss": [4.0, 3.0, 2.0], "kl": [1.0, 0.5, 0.25]}, ylabel="nats", title="t")
    assert [line.get_label() for line in ax.get_lines()] == ["loss (step)", "loss, mean of 1", "kl (step)", "kl, mean of 1"]
    assert ax.get_ylabel() == "nats" and ax.get_legend() is not None
    fig, (ax,) = panels(6, 3)
    loss_curves(ax, {"loss": [float(i) for i in range(100)]})
    assert [line.get_label() for line in ax.get_lines()] == ["step loss", "mean of 2"]
    assert list(ax.get_lines()[1].get_ydata()[:3]) == [0.0, 0.5, 1.5]
    fig, (ax,) = panels(6, 3)
    loss_curves(ax, {"loss": []})
    assert ax.get_lines() == [] and ax.get_legend() is None


def test_tradeoff_panels_share_labels_and_one_legend() -> None:
    """One panel per title; the y label on the first only, the legend on the last only; each method's fixed style."""
    styles = {"a": ("black", "--"), "b": ("tab:red", ":")}
    fig = tradeoff_panels([4, 8, 16], {"s1": {"a": [1, 2, 3], "b": [3, 2, 1]}, "s2": {"a": [0, 0, 0], "b": [1, 1, 1]}},
                          ylabel="em", xlabel="budget", styles=styles, log2_x=True)
    first, last = fig.axes
    assert (first.get_ylabel(), last.get_ylabel()) == ("em", "") and first.get_legend() is None and last.get_legend() is not None
    assert [t.get_text() for t in first.get_xticklabels()] == ["4", "8", "16"] and first.get_xscale() == "log"
    assert [(line.get_color(), line.get_linestyle()) for line in last.get_lines()] == [("black", "--"), ("tab:red", ":")]
    assert [t.get_text() for t in (first.title, last.title)] == ["", ""] and first.get_title(loc="left") == "s1"


def test_mean_band_and_reference_lines() -> None:
    """A mean line with its band and a thin line per replicate; a horizontal line per baseline at its value."""
    fig, (ax,) = panels(6, 3)
    mean_band(ax, [0, 1], [1.0, 2.0], low=[0.5, 1.5], high=[1.5, 2.5], colour="tab:blue", label="m", replicates=[[0.9, 2.1], [1.1, 1.9]])
    reference_lines(ax, {"rag": (1.5, "black", "--")})
    decorate(ax, xlabel="alpha", ylim=(0, 3), xticks=[0, 1])
    assert [line.get_label() for line in ax.get_lines()][0] == "m" and len(ax.get_lines()) == 4
    assert list(ax.get_lines()[-1].get_ydata()) == [1.5, 1.5] and len(ax.collections) == 1
    fig, (ax,) = panels(6, 3)
    tradeoff(ax, [1, 2], {"x": [1, 2]}, xlabel="k", legend=False)
    assert ax.get_legend() is None and ax.get_xlabel() == "k"
