"""One replicate's students: MILCO and its ablations (no LexEcho, no connector, no alignment), each stage 1 (once per
connector setting, shared by the variants that align) then stage 2, all from the same initial seed; and the fair
dense baseline of the same size on the same data, teacher and steps (paperdag.methods.milco.dense)."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import polars as pl

from paperdag.methods.milco.config import TrainParams
from paperdag.methods.milco.dense import DenseEncoder, align_dense, distill_dense, new_dense
from paperdag.methods.milco.model import Milco
from paperdag.methods.milco.student import load_teacher, new_student
from paperdag.methods.milco.training import align_on_parallel, distill_on_groups, loss_summary

DENSE = "dense_trained"  # the fair dense baseline's name among the trained models


def train_variants(p: TrainParams, corpus: pl.DataFrame, queries: pl.DataFrame, parallel: pl.DataFrame, groups: pl.DataFrame,
                   teacher: Path, tokenizer: Path) -> tuple[dict[str, Milco | DenseEncoder], dict[str, Any]]:
    """{variant: trained student} | {DENSE: dense bi-encoder}, and per model its losses and seconds."""
    en_model, en_tok = load_teacher(teacher)
    models: dict[str, Milco | DenseEncoder] = {}
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
    start = time.perf_counter()
    dense = new_dense(p, tokenizer, p.seed, p.temperature)
    align_history = align_dense(dense, parallel, steps=p.align_steps, lr=p.align_lr, batch=p.align_batch, max_length=p.max_length,
                                seed=p.seed)
    history = distill_dense(dense, corpus, queries, groups, steps=p.distill_steps, lr=p.distill_lr, batch=p.distill_batch,
                            max_length=p.max_length, seed=p.seed)
    models[DENSE] = dense
    stats[DENSE] = {"dim": dense.dim, "align_loss": loss_summary(align_history), "loss": loss_summary(history),
                    "train_s": time.perf_counter() - start}
    return models, stats


def load_models(path: Path, names: list[str]) -> dict[str, Milco | DenseEncoder]:
    """The models train_variants wrote under `path` (one directory each)."""
    return {name: DenseEncoder.from_pretrained(path / name) if name == DENSE else Milco.from_pretrained(path / name) for name in names}
