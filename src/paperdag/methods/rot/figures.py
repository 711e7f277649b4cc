"""RoT's two figures: accuracy against output tokens per arm, and one drawn thought path over the graph."""

from __future__ import annotations

from matplotlib.figure import Figure

from paperdag.figures import panels

STYLE = {"none": ("tab:gray", "o"), "static": ("tab:orange", "s"), "rot": ("tab:blue", "D")}
LABEL = {"none": "no template (CoT)", "static": "static top-1 template", "rot": "RoT dynamic template"}


def tradeoff_figure(per_replicate: list[dict]) -> Figure:
    """A dot per replicate and a large marker at the mean, per arm: output tokens (x) against accuracy (y)."""
    fig, (ax,) = panels(5.5, 4.0)
    for arm, (colour, marker) in STYLE.items():
        xs, ys = [r[f"tokens_{arm}"] for r in per_replicate], [r[f"acc_{arm}"] for r in per_replicate]
        ax.scatter(xs, ys, color=colour, marker=marker, alpha=0.35, s=20)
        ax.scatter([sum(xs) / len(xs)], [sum(ys) / len(ys)], color=colour, marker=marker, s=90, label=LABEL[arm], edgecolor="black")
    ax.set_xlabel("output tokens per problem (mean)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("accuracy vs output tokens (dots: replicates)", fontsize=10, loc="left")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def path_figure(problem_text: str, truth: list[str], nodes: list[dict], path: list[int], stop: str) -> Figure:
    """The stored templates the path touches, a row each (node = step, x = its position), sequential edges grey and
    the traversal in blue (start node circled); the query and the true steps in the title."""
    fig, (ax,) = panels(11.0, 1.6 + 0.9 * len({nodes[v]["template"] for v in path}))
    if not path:  # no RoT path to draw (the arm's rows are another arm's)
        ax.set_axis_off()
        ax.set_title(f"query: {problem_text}\nno RoT path", fontsize=8, loc="left")
        return fig
    rows = sorted({nodes[v]["template"] for v in path}, key=lambda t: min(i for i, v in enumerate(path) if nodes[v]["template"] == t))
    where = {}
    for y, t in enumerate(rows):
        chain = [n for n in nodes if n["template"] == t]
        for n in chain:
            where[n["node"]] = (n["position"], -y)
            ax.text(n["position"], -y, n["text"].split(":")[0], ha="center", va="center", fontsize=8,
                    bbox={"boxstyle": "round", "fc": "lightblue" if n["node"] in path else "white", "ec": "gray"})
        ax.plot([n["position"] for n in chain], [-y] * len(chain), color="lightgray", zorder=0)
    for a, b in zip(path, path[1:]):
        ax.annotate("", xy=where[b], xytext=where[a], arrowprops={"arrowstyle": "->", "color": "tab:blue", "lw": 2})
    ax.scatter(*where[path[0]], s=900, facecolors="none", edgecolors="tab:blue", lw=2)
    ax.set_yticks([-y for y in range(len(rows))], [f"template {t}" for t in rows], fontsize=8)
    ax.set_xlabel("step position in the stored template")
    ax.set_xlim(-0.7, max(p for p, _ in where.values()) + 0.7)
    ax.set_ylim(-len(rows) + 0.4, 0.6)
    steps = " -> ".join(s.split(":")[0] for s in truth)
    ax.set_title(f"query: {problem_text}\nneeded: {steps}; RoT stop rule: {stop}", fontsize=8, loc="left")
    return fig
