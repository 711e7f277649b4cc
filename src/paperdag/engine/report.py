"""`paperdag report`: one HTML page and one Markdown file with every pipeline's results.

Per pipeline: its declared claims judged on its metrics (held / not held / within noise, with intervals), the
`headline` block of each metrics file, its `table` block (the method against its baselines), its plots, and the
lineage header (git commit, the MLflow runs that wrote them). Metrics files are plain JSON dicts; the two blocks
are conventions the report renders when present.
"""

from __future__ import annotations

import base64
import html
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from paperdag.engine import claims, dvc
from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import atomic_write_text, dvc_md5
from paperdag.engine.spec import load_project

_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.meta{color:#666;font-size:12px}.ok{color:#080}.bad{color:#b00}"""


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict) and "mean" in v and "ci95_low" in v:  # an interval from paperdag.stats
        if v["ci95_low"] is None:
            return f"{_fmt(v['mean'])} (n={v.get('n')})"
        return f"{_fmt(v['mean'])} [{_fmt(v['ci95_low'])}, {_fmt(v['ci95_high'])}] (n={v.get('n')})"
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


def _rows(block: Any) -> list[dict[str, Any]]:
    if isinstance(block, dict):
        return [{"metric": k, "value": v} for k, v in block.items()]
    if isinstance(block, list):
        return [r for r in block if isinstance(r, dict)]
    return []


def _html_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c, '')))}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _md_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r.get(c, "")).replace("|", "\\|") for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def collect(root: Path) -> dict[str, Any]:
    """Everything the report shows, as data (also handy for tests)."""
    from paperdag.engine.lineage import runs_by_output

    root = Path(root).resolve()
    project = load_project(root)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    lock_outs = {o["path"]: o.get("md5") for e in (dvc.lock(root).get("stages") or {}).values() for o in e.get("outs", [])}
    from paperdag.engine.records import pending

    runs = runs_by_output(root) if (root / "mlflow.db").exists() or pending(root) else {}
    pipelines = []
    for name, p in sorted(project.pipelines.items()):
        metrics, plots, run_ids = [], [], {}
        for s in project.order(name):
            for a in s.outputs.values():
                path = root / a.path
                if a.kind not in ("metric", "plot") or not path.exists():
                    continue
                md5 = dvc_md5(path)
                matching = [r["run_id"] for r in runs.get((a.path, md5), [])]
                if matching:
                    run_ids[s.address] = matching[0]  # newest first
                entry = {"stage": s.address, "path": a.path, "md5": md5, "in_dvc_lock": lock_outs.get(a.path) == md5}
                if a.kind == "metric":
                    metrics.append({**entry, "data": json.loads(path.read_text())})
                else:
                    plots.append(entry)
        try:
            judged = claims.rows(name, claims.evaluate_pipeline(root, name)) if p.claims else []
        except PaperdagError as e:  # a claim naming a key the metrics file lacks: shown, not fatal to the report
            judged = [{"claim": "(error)", "status": str(e)}]
        pipelines.append({"name": name, "description": p.description, "claims": judged, "metrics": metrics,
                          "plots": plots, "runs": run_ids})
    return {"commit": commit or "none", "pipelines": pipelines}


def write_report(root: Path, out: Path) -> tuple[Path, Path]:
    root = Path(root).resolve()
    out = out if out.is_absolute() else root / out
    data = collect(root)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    h = [f"<!doctype html><meta charset=utf-8><title>paperdag report</title><style>{_CSS}</style>",
         "<h1>paperdag report</h1>", f"<p class=meta>git commit {html.escape(data['commit'])}</p>"]
    md = ["# paperdag report", "", f"git commit `{data['commit']}`", ""]
    for p in data["pipelines"]:
        h.append(f"<h2>{html.escape(p['name'])}</h2><p>{html.escape(p['description'])}</p>")
        md += [f"## {p['name']}", "", p["description"], ""]
        if not p["metrics"] and not p["plots"]:
            h.append("<p class=bad>no results yet: run <code>dvc repro</code> or <code>paperdag run " + html.escape(p["name"]) + "</code></p>")
            md += [f"No results yet: run `dvc repro` or `paperdag run {p['name']}`.", ""]
        if p["claims"]:
            rows = [{k: v for k, v in r.items() if k != "pipeline"} for r in p["claims"]]
            h += ["<h3>claims</h3>", _html_table(rows).replace("<td>held</td>", "<td class=ok>held</td>")
                  .replace("<td>not held</td>", "<td class=bad>not held</td>")]
            md += ["### claims", "", _md_table(rows)]
        runs = ", ".join(f"{k}: {v}" for k, v in p["runs"].items()) or "none recorded"
        h.append(f"<p class=meta>MLflow runs: {html.escape(runs)}</p>")
        md += [f"MLflow runs: {runs}", ""]
        for m in p["metrics"]:
            stale = "" if m["in_dvc_lock"] else " (not the version recorded in dvc.lock)"
            h.append(f"<h3>{html.escape(m['path'])}</h3><p class=meta>{html.escape(m['stage'])}, md5 {m['md5']}{stale}</p>")
            md += [f"### {m['path']}", "", f"{m['stage']}, md5 `{m['md5']}`{stale}", ""]
            blocks = [(k, m["data"].get(k)) for k in ("headline", "table")]
            if not any(b for _, b in blocks):
                blocks = [("metrics", m["data"])]
            for title, block in blocks:
                rows = _rows(block)
                if rows:
                    h += [f"<h4>{title}</h4>", _html_table(rows)]
                    md += [f"**{title}**", "", _md_table(rows)]
        for pl in p["plots"]:
            src = root / pl["path"]
            name = pl["path"].replace("/", "__")
            shutil.copyfile(src, out / "plots" / name)
            b64 = base64.b64encode(src.read_bytes()).decode()
            h.append(f"<h4>{html.escape(pl['path'])}</h4><img alt='{html.escape(pl['path'])}' src='data:image/png;base64,{b64}'>")
            md += [f"![{pl['path']}](plots/{name})", ""]
    html_path, md_path = out / "index.html", out / "README.md"
    atomic_write_text(html_path, "\n".join(h) + "\n")
    atomic_write_text(md_path, "\n".join(md) + "\n")
    return html_path, md_path


def summary(root: Path) -> str:
    """Every pipeline's headline block as plain text (what `make repro` prints at the end)."""
    lines = []
    for p in collect(root)["pipelines"]:
        if p["claims"]:
            counts = {st: sum(r.get("status") == st for r in p["claims"]) for st in ("held", "within noise", "not held", "missing")}
            lines.append(f"{p['name']} claims: " + ", ".join(f"{n} {st}" for st, n in counts.items() if n))
        for m in p["metrics"]:
            headline = m["data"].get("headline")
            if isinstance(headline, dict):
                lines.append(f"{p['name']}  ({m['path']})")
                width = max(len(k) for k in headline) if headline else 0
                lines += [f"  {k:<{width}}  {_fmt(v)}" for k, v in headline.items()]
    return "\n".join(lines) or "no results yet"
