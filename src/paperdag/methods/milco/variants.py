"""One replicate's students: MILCO and its ablations (no LexEcho, no connector, no alignment), each stage 1 (once per
connector setting, shared by the variants that align) then stage 2, all from the same initial seed. (The fair dense
baseline is its own stage: paperdag.methods.milco.dense.)"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import polars as pl

from paperdag.methods.milco.config import TrainParams
from paperdag.methods.milco.model import Milco
from paperdag.methods.milco.sparse import brute_force_search
from paperdag.methods.milco.student import load_teacher, new_student
from paperdag.methods.milco.training import align_on_parallel, check_learned, distill_on_groups, encode_sparse, loss_summary, tokenize
from paperdag.retrieval.metrics import ndcg_at_k


def train_variants(p: TrainParams, corpus: pl.DataFrame, queries: pl.DataFrame, parallel: pl.DataFrame, groups: pl.DataFrame,
                   teacher: Path, tokenizer: Path) -> tuple[dict[str, Milco], dict[str, Any]]:
    """{variant: trained student}, and per model its losses and seconds."""
    en_model, en_tok = load_teacher(teacher)
    models: dict[str, Milco] = {}
    stats: dict[str, Any] = {}
    aligned: dict[bool, Milco] = {}  # connector -> the stage-1 student
    for name, v in p.variants.items():
        start = time.perf_counter()
        if v.align and v.connector not in aligned:
            student = new_student(p, en_model, tokenizer, p.seed, connector=v.connector, echo=True)
            history = align_on_parallel(student, en_model, en_tok, parallel, steps=p.align_steps, lr=p.align_lr, batch=p.align_batch,
                                        max_length=p.max_length, seed=p.seed, soft_tau=p.align_soft_tau, soft_steps=p.align_soft_steps)
            aligned[v.connector] = student
            stats[f"align_connector_{v.connector}"] = {"loss": loss_summary(history), "train_s": time.perf_counter() - start}
        if v.align:
            student = copy.deepcopy(aligned[v.connector]).with_echo(v.echo)
        else:
            student = new_student(p, en_model, tokenizer, p.seed, connector=v.connector, echo=v.echo)
        history = distill_on_groups(student, corpus, queries, groups, steps=p.distill_steps, lr=p.distill_lr, batch=p.distill_batch,
                                    lambda_q=p.lambda_q, lambda_d=p.lambda_d, max_length=p.max_length, seed=p.seed)
        models[name] = student
        stats[name] = {"connector": v.connector, "echo": v.echo, "align": v.align, "loss": loss_summary(history),
                       "train_s": time.perf_counter() - start}
    stats["train_ndcg10"] = train_query_ndcg10(models, corpus, queries, p.max_length)
    full = [name for name, v in p.variants.items() if v.connector and v.echo and v.align]
    check_learned(stats["train_ndcg10"], full, p.min_train_ndcg10, f"milco train {p.item}", "milco.train.min_train_ndcg10")
    return models, stats


def train_query_ndcg10(models: dict[str, Milco], corpus: pl.DataFrame, queries: pl.DataFrame, max_length: int
                       ) -> dict[str, float]:
    """nDCG@10 of each model on the cross-lingual train queries, over the whole corpus (exact search, unpruned): a
    learning check, not a quality estimate (stage 2 trains on these queries). A model near 0 here did not learn to
    retrieve across languages, and a comparison with it would mean nothing."""
    train = queries.filter((pl.col("split") == "train") & (pl.col("kind") == "crosslingual")).sort("query_id")
    texts, docs, relevant = train["text"].to_list(), corpus.sort("doc_id")["text"].to_list(), train["relevant"].to_list()
    out = {}
    for name, model in models.items():
        q = encode_sparse(model, tokenize(model.tokenizer, texts, max_length))
        ranked = brute_force_search(q, encode_sparse(model, tokenize(model.tokenizer, docs, max_length)), 10)[1]
        out[name] = float(ndcg_at_k(ranked, relevant, 10))
    return out


def load_models(path: Path, names: list[str]) -> dict[str, Milco]:
    """The models train_variants wrote under `path` (one directory each)."""
    return {name: Milco.from_pretrained(path / name) for name in names}
