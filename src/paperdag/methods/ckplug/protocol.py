"""The ckplug comparison: every decoding method (no-RAG, RAG, CAD, CK-PLUG at each alpha, adaptive CK-PLUG) on
the same test items with one model, greedy, each timed; and the closed-book recall that shows the facts were learnt.

Views per method: 0 = the parametric prompt (question only), 1 = the context prompt, 2 = both (context first), the
two views CK-PLUG's and CAD's step rules contrast (decoding.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
from rich.progress import track

from paperdag.lm import contains_answer, generate_batches, plain
from paperdag.methods.ckplug.data import context_prompt, parametric_prompt
from paperdag.methods.ckplug.decoding import cad_rule, ckplug_rule

Method = tuple[str, float | None, int, object, tuple[str, ...]]  # (name, alpha, views used, step rule, sets decoded)
BOTH = ("counterfactual", "adaptive")
COUNTERFACTUAL = ("counterfactual",)


def cad_name(beta: float) -> str:
    """CAD at one strength: its method name in the predictions."""
    return f"cad beta={beta:g}"


def method_rules(alphas: Sequence[float], cad_betas: Sequence[float], conflict_rule: str, relative_top: float, min_head: int,
                 entropy_over: str) -> list[Method]:
    """The methods compared, in table order: no-RAG, RAG, CAD at every beta, CK-PLUG at every alpha, adaptive CK-PLUG
    (entropies over `entropy_over`), then CK-PLUG and adaptive CK-PLUG with the entropies over the other choice. Every
    method decodes both sets (the fixed-alpha sweep on the adaptive set is adaptive mode's strongest baseline: CK-PLUG
    at its best fixed alpha), except the other entropy's fixed-alpha sweep: the counterfactual set only (MR)."""
    from paperdag.methods.ckplug.decoding import ENTROPY_OVER

    other = next(e for e in ENTROPY_OVER if e != entropy_over)
    rows: list[Method] = [("no-rag", None, 0, plain, BOTH), ("rag", None, 1, plain, BOTH)]
    rows += [(cad_name(b), None, 2, cad_rule(b), BOTH) for b in cad_betas]
    for suffix, over in (("", entropy_over), (f" [{other} entropy]", other)):
        sets = COUNTERFACTUAL if suffix else BOTH
        rows += [(f"ck-plug{suffix}", a, 2, ckplug_rule(a, conflict_rule, relative_top, min_head, over), sets) for a in alphas]
        rows.append((f"ck-plug-adaptive{suffix}", None, 2, ckplug_rule(None, conflict_rule, relative_top, min_head, over), BOTH))
    return rows


def decode_views(model, tokenizer, views: list[list[str]], rule, max_new_tokens: int, batch_size: int) -> tuple[list[str], dict]:
    """Greedy generations for every example (views: one prompt list per view), in batches; texts and timing."""
    ids = [[tokenizer(p)["input_ids"] for p in prompts] for prompts in views]
    out = generate_batches(model, ids, tokenizer.pad_token_id, tokenizer.eos_token_id, batch_size, rule=rule,
                           max_new_tokens=max_new_tokens)
    texts = [tokenizer.decode(t, skip_special_tokens=True).strip() for t in out.tokens]
    return texts, {"seconds": out.seconds, "new_tokens": out.new_tokens, "forward_passes": out.forward_passes}


def closed_book_recall(model, tokenizer, train_rows: pl.DataFrame, max_new_tokens: int) -> tuple[float, int]:
    """Share of the memorised (closed-book) facts the model answers without context, and how many were asked."""
    closed = train_rows.filter(pl.col("kind") == "closed_book")
    predictions = decode_views(model, tokenizer, [[parametric_prompt(q) for q in closed["question"]]], plain, max_new_tokens, 256)[0]
    hits = [contains_answer(p, a) for p, a in zip(predictions, closed["answer"], strict=True)]
    return sum(hits) / len(hits), len(hits)


def run_methods(model, tokenizer, sets: dict[str, pl.DataFrame], methods: list[Method], max_new_tokens: int, batch_size: int,
                description: str) -> tuple[pl.DataFrame, list[dict]]:
    """Every method on every test set: one prediction row per (set, item, method), and each run's decoding cost."""
    frames, timing = [], []
    jobs = [(name, table, m) for name, table in sets.items() for m in methods if name in m[4]]
    for set_name, table, (method, alpha, use, rule, _) in track(jobs, description=description):
        with_context = [context_prompt(c, q) for c, q in zip(table["context"], table["question"], strict=True)]
        without = [parametric_prompt(q) for q in table["question"]]
        views = {0: [without], 1: [with_context], 2: [with_context, without]}[use]
        texts, cost = decode_views(model, tokenizer, views, rule, max_new_tokens, batch_size)
        frames.append(table.with_row_index("item").with_columns(
            pl.lit(set_name).alias("set"), pl.lit(method).alias("method"), pl.lit(alpha, dtype=pl.Float64).alias("alpha"),
            pl.Series("prediction", texts, dtype=pl.String)))
        timing.append({"set": set_name, "method": method, "alpha": alpha, **cost,
                       "tokens_per_s": cost["new_tokens"] / cost["seconds"] if cost["seconds"] else None})
    return pl.concat(frames, how="diagonal_relaxed"), timing
