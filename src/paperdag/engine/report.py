"""`paperdag report`: one HTML page and one Markdown file a reviewer reads first.

It opens with a summary (a row per pipeline: its claims by status, its audit), then one card per pipeline:
1. its declared claims judged on its metrics: held / not held / within noise, the value with its 95 % interval,
   the paper's sentence;
2. its plots;
3. provenance: the audit of every artifact it wrote (audit.py: file, run, params, commit, chain, environment,
   verify), with the broken links named and the run that made each one;
4. the params that differ from the paper's scale (the pipeline's `paper_scale:` section);
5. its metrics files' `headline` and `table` blocks (the method against its baselines), collapsed.
Wide tables scroll inside their card and long ones are collapsed; values are formatted, never raw JSON.
"""

from __future__ import annotations

import base64
import html
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from paperdag.engine import claims
from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import atomic_write_text, dvc_md5
from paperdag.engine.params import load_params, lookup
from paperdag.engine.spec import load_project

_CSS = """body{font-family:system-ui,sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;color:#222;background:#fafafa}
.card{background:#fff;border:1px solid #ddd;border-radius:8px;padding:.4em 1.4em 1em;margin:1.5em 0}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}td.text{text-align:left;max-width:32em}
img{max-width:100%;border:1px solid #eee}summary{cursor:pointer;font-weight:600;margin:.6em 0}
figure{display:inline-block;vertical-align:top;max-width:48%;margin:.5em 1% .5em 0}
.meta{color:#666;font-size:12px}.badge{border-radius:4px;padding:1px 6px;font-size:12px;white-space:nowrap}
.held,.ok{background:#e3f4e3;color:#075e07}.not_held,.broken{background:#fbe3e3;color:#9b0000}
.within_noise,.warn{background:#fff3d6;color:#7a5200}.missing,.none{background:#eee;color:#555}"""

_STATUS_LABEL = {"held": "held", "within_noise": "within noise", "not_held": "not held", "missing": "missing"}


def _fmt(v: Any, limit: int = 120) -> str:
    """A value as a person reads it: numbers to 4 significant digits, intervals as 'm [lo, hi]', dicts and lists
    as 'k: v' and comma lists (shortened past `limit` characters)."""
    if isinstance(v, bool):
        text = "yes" if v else "no"
    elif isinstance(v, float):
        text = f"{v:.4g}"
    elif isinstance(v, dict) and "mean" in v and "ci95_low" in v:  # an interval from paperdag.stats
        text = (f"{_fmt(v['mean'])} (n={v.get('n')})" if v["ci95_low"] is None else
                f"{_fmt(v['mean'])} [{_fmt(v['ci95_low'])}, {_fmt(v['ci95_high'])}] (n={v.get('n')})")
    elif isinstance(v, dict):
        text = ", ".join(f"{k}: {_fmt(x, limit)}" for k, x in v.items())
    elif isinstance(v, (list, tuple)):
        text = ", ".join(_fmt(x, limit) for x in v)
    elif v is None:
        return ""
    else:
        return str(v)  # a sentence (the paper's claim) is shown whole
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rows(block: Any) -> list[dict[str, Any]]:
    if isinstance(block, dict):
        return [{"metric": k, "value": v} for k, v in block.items()]
    if isinstance(block, list):
        return [r for r in block if isinstance(r, dict)]
    return []


def _badge(status: str, label: str | None = None) -> str:
    return f"<span class='badge {html.escape(status)}'>{html.escape(label or _STATUS_LABEL.get(status, status))}</span>"


def _html_table(rows: list[dict[str, Any]], raw: frozenset[str] = frozenset(), text: frozenset[str] = frozenset()) -> str:
    """A table in a horizontally scrolling box; `raw` columns hold HTML already, `text` columns are left-aligned."""
    if not rows:
        return ""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)

    def cell(r: dict[str, Any], c: str) -> str:
        value = r.get(c, "")
        body = value if c in raw else html.escape(_fmt(value))
        return f"<td class=text>{body}</td>" if c in text or c in raw else f"<td>{body}</td>"

    body = "".join("<tr>" + "".join(cell(r, c) for c in cols) + "</tr>" for r in rows)
    return f"<div class=scroll><table><tr>{head}</tr>{body}</table></div>"


def _md_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r.get(c, "")).replace("|", "\\|") for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _audit(root: Path) -> dict[str, Any]:
    """The audit of every pipeline (audit.py), or {'error': why} when it cannot run (no dvc.lock yet)."""
    from paperdag.engine.audit import audit

    try:
        return audit(root)
    except PaperdagError as e:
        return {"error": str(e), "pipelines": {}}


def _provenance(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per audited artifact: its status, the links that broke (or warn), its verify status and its run."""
    rows = []
    for o in outputs:
        said = [f"{x['link']} {x['status']}: {x['detail']}" for x in o["links"] if x["status"] in ("broken", "warning")]
        rows.append({"artifact": o["path"], "stage": o["stage"], "md5": o["md5"][:12], "status": "ok" if o["ok"] else "broken",
                     "verify": o["verify"], "run": (o["run_id"] or "none")[:12], "links": "; ".join(said) or "every link holds"})
    return rows


def _paper_scale(p: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for key, paper in p.paper_scale.items():
        ours = lookup(params, key)
        if ours != paper:
            rows.append({"param": key, "here": ours, "paper": paper})
    return rows


def collect(root: Path) -> dict[str, Any]:
    """Everything the report shows, as data (also handy for tests)."""
    root = Path(root).resolve()
    params = load_params(root)
    project = load_project(root, params)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    audited = _audit(root)
    pipelines = []
    for name, p in sorted(project.pipelines.items()):
        metrics, plots = [], []
        for s in project.order(name):
            for a in s.outputs.values():
                path = root / a.path
                if a.kind not in ("metric", "plot") or not path.exists() or (s.builtin and a.kind == "metric"):
                    continue
                entry = {"stage": s.address, "path": a.path, "md5": dvc_md5(path)}
                if a.kind == "metric":
                    metrics.append({**entry, "data": json.loads(path.read_text())})
                else:
                    plots.append(entry)
        try:
            judged = [{"claim": c, **e} for c, e in claims.evaluate_pipeline(root, name, project).items()] if p.claims else []
            claims_error = ""
        except PaperdagError as e:  # a claim naming a key the metrics file lacks: shown, not fatal to the report
            judged, claims_error = [], str(e)
        audit_p = audited["pipelines"].get(name, {"ok": False, "outputs": []})
        pipelines.append({
            "name": name, "description": p.description, "claims": judged, "claims_error": claims_error,
            "counts": {s: sum(c["status"] == s for c in judged) for s in claims.STATUSES},
            "metrics": metrics, "plots": plots,
            "provenance": _provenance(audit_p["outputs"]),
            "audit_ok": bool(audit_p["outputs"]) and audit_p["ok"],
            "audit_error": audited.get("error", ""),
            "paper_scale": _paper_scale(p, params),
        })
    return {"commit": commit or "none", "pipelines": pipelines}


def _claim_rows(judged: list[dict[str, Any]], html_badges: bool) -> list[dict[str, Any]]:
    rows = []
    for c in judged:
        interval = f"[{_fmt(c['ci95_low'])}, {_fmt(c['ci95_high'])}]" if c["ci95_low"] is not None else ""
        status = _badge(c["status"]) if html_badges else _STATUS_LABEL[c["status"]]
        rows.append({"claim": c["claim"], "status": status, "value": c["value"], "95% interval": interval,
                     "n": c["n"], "test": c["test"], "baseline": c["baseline"], "the paper says": c["paper"]})
    return rows


def _summary_rows(data: dict[str, Any], html_links: bool) -> list[dict[str, Any]]:
    rows = []
    for p in data["pipelines"]:
        name = f"<a href='#{html.escape(p['name'])}'>{html.escape(p['name'])}</a>" if html_links else p["name"]
        row = {"pipeline": name}
        for s in claims.STATUSES:
            row[_STATUS_LABEL[s]] = p["counts"][s]
        n_broken = sum(r["status"] == "broken" for r in p["provenance"])
        audit = ("no artifacts in dvc.lock" if not p["provenance"] else
                 f"{n_broken} of {len(p['provenance'])} artifacts broken" if n_broken else f"{len(p['provenance'])} artifacts ok")
        row["audit"] = (_badge("ok" if p["audit_ok"] else "broken" if n_broken else "none", audit) if html_links else audit)
        rows.append(row)
    return rows


def write_report(root: Path, out: Path, data: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """report/index.html and report/README.md from `data` (collect(root) unless given)."""
    root = Path(root).resolve()
    out = out if out.is_absolute() else root / out
    data = collect(root) if data is None else data
    (out / "plots").mkdir(parents=True, exist_ok=True)
    h = [f"<!doctype html><html lang=en><meta charset=utf-8><link rel=icon href='data:,'><title>paperdag report</title>"
         f"<style>{_CSS}</style>", "<h1>paperdag report</h1>",
         f"<p class=meta>git commit {html.escape(data['commit'])}</p>",
         _html_table(_summary_rows(data, True), raw=frozenset({"pipeline", "audit"}))]
    md = ["# paperdag report", "", f"git commit `{data['commit']}`", "", _md_table(_summary_rows(data, False))]
    for p in data["pipelines"]:
        name = p["name"]
        h += [f"<section class=card id='{html.escape(name)}'>", f"<h2>{html.escape(name)}</h2><p>{html.escape(p['description'])}</p>"]
        md += [f"## {name}", "", p["description"], ""]
        if not p["metrics"] and not p["plots"]:
            h.append(f"<p>{_badge('missing', 'no results yet')} run <code>dvc repro</code> or "
                     f"<code>paperdag run {html.escape(name)}</code></p>")
            md += [f"No results yet: run `dvc repro` or `paperdag run {name}`.", ""]
        if p["claims"] or p["claims_error"]:
            h.append("<h3>claims</h3>")
            md += ["### claims", ""]
            if p["claims_error"]:
                h.append(f"<p>{_badge('broken', 'error')} {html.escape(p['claims_error'])}</p>")
                md += [f"error: {p['claims_error']}", ""]
            h.append(_html_table(_claim_rows(p["claims"], True), raw=frozenset({"status"}), text=frozenset({"the paper says"})))
            md += [_md_table(_claim_rows(p["claims"], False))]
        for pl in p["plots"]:
            src = root / pl["path"]
            file = pl["path"].replace("/", "__")
            shutil.copyfile(src, out / "plots" / file)
            b64 = base64.b64encode(src.read_bytes()).decode()
            h.append(f"<figure><img alt='{html.escape(pl['path'])}' src='data:image/png;base64,{b64}'>"
                     f"<figcaption class=meta>{html.escape(pl['path'])} ({html.escape(pl['stage'])})</figcaption></figure>")
            md += [f"![{pl['path']}](plots/{file})", ""]
        broken = sum(r["status"] == "broken" for r in p["provenance"])
        title = f"provenance: {len(p['provenance'])} artifacts" + (f", {broken} with a broken link" if broken else ", every link holds")
        h.append(f"<details{' open' if broken else ''}><summary>{html.escape(title)}</summary>")
        if p["audit_error"]:
            h.append(f"<p>{_badge('broken', 'audit failed')} {html.escape(p['audit_error'])}</p>")
        rows = [{**r, "status": _badge(r["status"])} for r in p["provenance"]]
        h += [_html_table(rows, raw=frozenset({"status"}), text=frozenset({"links"})), "</details>"]
        md += [f"### {title}", "", _md_table(p["provenance"])]
        if p["paper_scale"]:
            h += [f"<details><summary>{len(p['paper_scale'])} params differ from the paper's scale</summary>",
                  _html_table(p["paper_scale"]), "</details>"]
            md += ["### params that differ from the paper's scale", "", _md_table(p["paper_scale"])]
        for m in p["metrics"]:
            blocks = [(k, m["data"].get(k)) for k in ("headline", "table")]
            if not any(b for _, b in blocks):
                blocks = [("metrics", m["data"])]
            for title, block in blocks:
                rows = _rows(block)
                if rows:
                    h += [f"<details{' open' if title == 'headline' else ''}><summary>{html.escape(m['path'])}: {title}"
                          f" ({len(rows)} rows)</summary><p class=meta>{html.escape(m['stage'])}, md5 {m['md5']}</p>",
                          _html_table(rows), "</details>"]
                    md += [f"### {m['path']}: {title}", "", _md_table(rows)]
        h.append("</section>")
    html_path, md_path = out / "index.html", out / "README.md"
    atomic_write_text(html_path, "\n".join(h) + "\n</html>\n")
    atomic_write_text(md_path, "\n".join(md) + "\n")
    return html_path, md_path


def summary(data: dict[str, Any]) -> str:
    """Every pipeline's claims and headline block as plain text, from collect()'s data (what `make repro` prints at
    the end)."""
    lines = []
    for p in data["pipelines"]:
        if p["claims"]:
            lines.append(f"{p['name']} claims: " + ", ".join(f"{n} {_STATUS_LABEL[s]}" for s, n in p["counts"].items() if n))
        for m in p["metrics"]:
            headline = m["data"].get("headline")
            if isinstance(headline, dict):
                lines.append(f"{p['name']}  ({m['path']})")
                width = max(len(k) for k in headline) if headline else 0
                lines += [f"  {k:<{width}}  {_fmt(v)}" for k, v in headline.items()]
    return "\n".join(lines) or "no results yet"
