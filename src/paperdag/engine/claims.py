"""Claims: the paper's sentences a pipeline tests, declared in `pipelines/<m>.yaml` and judged on its metrics.

    claims:
      beats_snapkv_question_before:
        paper: "LookaheadKV outperforms SnapKV ... at small budgets"   # the sentence or table it tests
        metric: data/lookaheadkv/metrics.json:headline.em_diff_lkv_snapkv_before_c8
        test: "> 0"                          # <op> <number>; "value > 0" and "ci95_low > 0" mean the same
        baseline: snapkv                     # the strongest baseline it is judged against ("none": the method alone)

The metric is a number or an interval (a dict with `mean` or `value`, `ci95_low`, `ci95_high`, `n`, as
paperdag.stats writes them). A number is `held` when it passes the test, else `not_held`. An interval is judged
on its conservative end (the low end for > and >=, the high end for < and <=): `held` when that end passes,
`within_noise` when only the mean does (or the interval has no ends: one replicate), `not_held` when the mean
fails. A claim whose metric file does not exist yet
is `missing`; a metric that is null (JSON `null`: the pipeline ran and could not measure it, e.g. a cost lost in
timing noise) is `not_held`: the run does not show the claim, and a stage that judges it must not fail.

Each pipeline with claims gets a stage `<m>:claims` (dvc.yaml `<m>-claims`) that judges them and writes
`data/<m>/claims.json`, a DVC metric; its MLflow run carries each claim's value and status.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paperdag.engine.errors import SpecError

if TYPE_CHECKING:
    from paperdag.engine.spec import Project

STATUSES = ("held", "within_noise", "not_held", "missing")
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq}
_TEST = re.compile(r"^\s*(value|mean|ci95_low|ci95_high)?\s*(>=|<=|==|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_KEYS = {"paper", "metric", "test", "baseline"}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Claim:
    name: str
    paper: str
    metric_path: str  # the metrics JSON, relative to the repo root
    metric_key: str  # dotted key inside it
    op: str
    threshold: float
    baseline: str
    declared_test: str = ""  # the test as written in the pipeline file

    @property
    def metric(self) -> str:
        return f"{self.metric_path}:{self.metric_key}"

    @property
    def test(self) -> str:
        return self.declared_test or f"{self.op} {self.threshold:g}"


def claims_path(pipeline: str) -> str:
    return f"data/{pipeline}/claims.json"


def parse(file: str, doc: Any) -> dict[str, Claim]:
    """The `claims:` block of a pipeline file; every error names the file and the key."""
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise SpecError(file, "claims", "expected a mapping of claim name -> {paper, metric, test, baseline}")
    out = {}
    for name, c in doc.items():
        where = f"claims.{name}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise SpecError(file, where, "claim names are lower-case letters, digits and '_'")
        if not isinstance(c, dict):
            raise SpecError(file, where, "expected a mapping with paper, metric, test, baseline")
        for key in c:
            if key not in _KEYS:
                raise SpecError(file, f"{where}.{key}", f"unknown key (allowed: {', '.join(sorted(_KEYS))})")
        for key in sorted(_KEYS):
            if not isinstance(c.get(key), str) or not c[key].strip():
                raise SpecError(file, f"{where}.{key}", "required, a non-empty string")
        path, sep, key = c["metric"].partition(":")
        if not sep or not path or not key:
            raise SpecError(file, f"{where}.metric", f"expected '<metrics file>:<dotted key>', got {c['metric']!r}")
        m = _TEST.match(c["test"])
        if not m:
            raise SpecError(file, f"{where}.test", f"expected '<op> <number>' with op one of {', '.join(_OPS)}, "
                            f"got {c['test']!r}")
        side, op, number = m.groups()
        if (side == "ci95_low" and op not in (">", ">=")) or (side == "ci95_high" and op not in ("<", "<=")):
            raise SpecError(file, f"{where}.test", f"{c['test']!r}: an interval is judged on its conservative end "
                            "(the low end for > and >=, the high end for < and <=); write the test on the value")
        out[name] = Claim(name=name, paper=c["paper"].strip(), metric_path=path, metric_key=key, op=op,
                          threshold=float(number), baseline=c["baseline"].strip(), declared_test=c["test"].strip())
    return out


def _lookup(data: Any, dotted: str) -> Any:
    node = data
    for part in dotted.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(part)
    return node


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and not math.isnan(v):  # +-inf compares (a ratio over a zero cost)
        return float(v)
    return None


def judge(claim: Claim, metrics: Any, file: str) -> dict[str, Any]:
    """One claim's entry, judged on the metrics JSON it names (`metrics` is None when the file does not exist)."""
    entry: dict[str, Any] = {"paper": claim.paper, "metric": claim.metric, "test": claim.test,
                             "baseline": claim.baseline, "value": None, "ci95_low": None, "ci95_high": None,
                             "n": None, "status": "missing"}
    if metrics is None:
        return entry
    try:
        raw = _lookup(metrics, claim.metric_key)
    except KeyError:
        raise SpecError(file, f"claims.{claim.name}.metric",
                        f"{claim.metric_path} has no key '{claim.metric_key}'") from None
    if raw is None:  # measured as unmeasurable: the claim is not shown
        entry["status"] = "not_held"
        return entry
    low = high = None
    n: Any = None  # replicates behind the value: known only for an interval
    interval = isinstance(raw, dict)
    if interval:
        value = _number(raw.get("mean", raw.get("value")))
        low, high = _number(raw.get("ci95_low")), _number(raw.get("ci95_high"))
        n = raw.get("n")
    else:
        value = _number(raw)
    if value is None:
        raise SpecError(file, f"claims.{claim.name}.metric", f"{claim.metric} is {raw!r}: expected a number, "
                        "a bool, or an interval (a dict with mean / value, ci95_low, ci95_high, n)")
    test = _OPS[claim.op]
    end = low if claim.op in (">", ">=") else high if claim.op in ("<", "<=") else None
    if not test(value, claim.threshold):
        status = "not_held"
    elif claim.op != "==" and ((end is None and interval) or (end is not None and not test(end, claim.threshold))):
        status = "within_noise"  # an interval metric without its end (one replicate) cannot show the claim
    else:
        status = "held"
    entry.update(value=value, ci95_low=low, ci95_high=high, n=n, status=status)
    return entry


def judge_all(file: str, claims: dict[str, Claim], metrics: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every claim, given the metric files' contents by path (absent paths: not produced yet)."""
    return {name: judge(c, metrics.get(c.metric_path), file) for name, c in claims.items()}


def evaluate_pipeline(root: Path, pipeline: str, project: Project | None = None,
                      metrics: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Judge a pipeline's claims on the metric files now on disk (`project`: root's, loaded unless given), or on
    `metrics` (metric path -> content) for the paths it has."""
    from paperdag.engine.spec import load_project

    p = (project or load_project(root)).pipeline(pipeline)
    metrics = dict(metrics or {})
    for c in p.claims.values():
        f = Path(root) / c.metric_path
        if f.exists() and c.metric_path not in metrics:
            metrics[c.metric_path] = json.loads(f.read_text())
    return judge_all(p.file, p.claims, metrics)


def document(judged: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """claims.json: every claim, and how many have each status."""
    counts = {s: sum(e["status"] == s for e in judged.values()) for s in STATUSES}
    return {"claims": judged, "summary": counts}


def run_tags(judged: dict[str, dict[str, Any]]) -> dict[str, str]:
    """MLflow tags for the claims stage's run (statuses are words; values go in as metrics)."""
    return {f"claim.{name}.status": e["status"] for name, e in judged.items()}


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def rows(pipeline: str, judged: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for name, e in judged.items():
        interval = f"[{_fmt(e['ci95_low'])}, {_fmt(e['ci95_high'])}]" if e["ci95_low"] is not None else ""
        out.append({"pipeline": pipeline, "claim": name, "value": _fmt(e["value"]), "95% interval": interval,
                    "n": _fmt(e["n"]), "test": e["test"], "baseline": e["baseline"], "status": e["status"].replace("_", " ")})
    return out


def table(rows_: list[dict[str, str]], markdown: bool = False, columns: list[str] | None = None) -> str:
    """A plain-text (aligned) or Markdown table of claim rows."""
    if not rows_:
        return "no claims declared"
    cols = columns or list(rows_[0])
    if markdown:
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(r[c].replace("|", "\\|") for c in cols) + " |" for r in rows_]
        return "\n".join(lines)
    widths = {c: max(len(c), *(len(r[c]) for r in rows_)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(r[c].ljust(widths[c]) for c in cols) for r in rows_]
    return "\n".join(lines)


README_START = "<!-- paperdag claims {pipeline}: written by `paperdag claims --readme`, do not edit -->"
README_END = "<!-- /paperdag claims -->"


def update_readme(path: Path, tables: dict[str, str]) -> list[str]:
    """Replace each pipeline's generated claims block in README.md; returns the pipelines whose block was written.
    A pipeline without a block in the README is skipped (the README says where its table goes)."""
    from paperdag.engine.fsutil import atomic_write_text

    text = path.read_text()
    written = []
    for pipeline, body in tables.items():
        start = README_START.format(pipeline=pipeline)
        i = text.find(start)
        if i < 0:
            continue
        j = text.find(README_END, i)
        if j < 0:
            raise SpecError(path.name, start, f"no closing {README_END}")
        text = text[: i + len(start)] + "\n" + body + "\n" + text[j:]
        written.append(pipeline)
    atomic_write_text(path, text)
    return written
