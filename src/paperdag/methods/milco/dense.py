"""The fair dense baseline: a bi-encoder of the MILCO student's size (the same tiny encoder or checkpoint, the same
source tokenizer), trained on the same data with the same teacher and budget, its embedding the mean-pooled token
states (dimension h_m):

    H = Encoder(x)                                   # (B, T, h_m)
    v = normalize(sum_T H * mask / sum_T mask)       # (B, h_m) mean pooling, unit length
    s(q, d) = <v_q, v_d> / tau                       # tau: the dense teacher's temperature, so both score alike

Stage 1 on the parallel text (the sparse student's SMSE has no dense analogue): in-batch contrastive alignment,
each foreign sentence against its English side among the batch's (symmetric InfoNCE); stage 2 exactly MILCO's
KL(softmax(teacher) || softmax(student)) over the same groups and teacher scores (no FLOPS: nothing is sparse).

The baseline gets its own best settings (tune_dense): the stage-1 learning rate and InfoNCE temperature, and the
number of stage-2 steps (stage 2 fits the train queries and can overfit them), chosen on a validation share of the
cross-lingual train queries held out of stage 2; the chosen stage-1 model is then refit on all the train queries.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedModel
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from paperdag.lm import TrainConfig, train_loop
from paperdag.methods.milco.config import ModelParams, TrainDenseParams
from paperdag.methods.milco.losses import kl_distillation
from paperdag.methods.milco.sparse import top_k
from paperdag.methods.milco.training import check_learned, collate, groups_data, loss_summary, tokenize
from paperdag.retrieval.metrics import ndcg_at_k

ENCODER_DIR = "encoder"
DENSE = "dense_trained"  # the fair dense baseline's name in runs, tables and claims


class DenseEncoder(nn.Module):
    """Encoder -> mean pooling -> unit vector; scores are inner products divided by `temperature`."""

    def __init__(self, encoder: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, temperature: float) -> None:
        super().__init__()
        self.encoder, self.tokenizer, self.temperature = encoder, tokenizer, temperature

    @property
    def dim(self) -> int:
        return int(self.encoder.config.hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # (B, T, h_m)
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        return F.normalize((h * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0), dim=-1)  # (B, h_m)

    def save_pretrained(self, path: Path | str) -> None:
        path = Path(path)
        self.encoder.save_pretrained(path / ENCODER_DIR)
        self.tokenizer.save_pretrained(path / ENCODER_DIR)
        (path / "temperature.txt").write_text(f"{self.temperature!r}\n")

    @classmethod
    def from_pretrained(cls, path: Path | str) -> DenseEncoder:
        path = Path(path)
        encoder = AutoModel.from_pretrained(path / ENCODER_DIR, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(path / ENCODER_DIR, local_files_only=True)
        return cls(encoder, tokenizer, float((path / "temperature.txt").read_text()))

    @torch.no_grad()
    def encode(self, texts: list[str], max_length: int, batch: int = 256) -> np.ndarray:
        """Unit vectors (n, h_m), float32."""
        self.eval()
        ids = tokenize(self.tokenizer, texts, max_length)
        pad = self.tokenizer.pad_token_id
        parts = [self(*collate(ids[i : i + batch], pad)).numpy() for i in range(0, len(ids), batch)]
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, self.dim), dtype=np.float32)


def new_dense(model: ModelParams, tokenizer_dir: Path, seed: int, temperature: float) -> DenseEncoder:
    """A fresh dense bi-encoder of the MILCO student's sizes (or its local checkpoint `model.encoder`)."""
    from paperdag.methods.milco.student import new_encoder

    return DenseEncoder(*new_encoder(model, tokenizer_dir, seed), temperature)


def ndcg10(model: DenseEncoder, queries: pl.DataFrame, corpus: pl.DataFrame, max_length: int) -> float:
    """nDCG@10 of `queries` (columns text, relevant) over the whole corpus, exact search."""
    scores = model.encode(queries["text"].to_list(), max_length) @ model.encode(corpus.sort("doc_id")["text"].to_list(), max_length).T
    ranked = np.stack([top_k(row, 10) for row in scores]) if len(scores) else np.zeros((0, 10), dtype=np.int64)
    return float(ndcg_at_k(ranked, queries["relevant"].to_list(), 10))


def align_dense(model: DenseEncoder, parallel: pl.DataFrame, *, steps: int, lr: float, batch: int, max_length: int,
                seed: int, temperature: float | None = None) -> list[float]:
    """Stage 1: symmetric in-batch InfoNCE between each foreign sentence and its English side, logits divided by
    `temperature` (default: the model's score temperature); loss per step. Rows of the batch that share their
    English side (one English name in several languages) are not each other's negatives: they are masked out."""
    tau = model.temperature if temperature is None else temperature
    foreign = tokenize(model.tokenizer, parallel["source"].to_list(), max_length)
    english = tokenize(model.tokenizer, parallel["english"].to_list(), max_length)
    same_english = parallel["english"].rank("dense").to_numpy()  # equal English text -> equal id
    pad, rng = model.tokenizer.pad_token_id, np.random.default_rng(seed)
    model.train()

    def loss_at(step: int) -> torch.Tensor:
        rows = rng.choice(len(foreign), size=min(batch, len(foreign)), replace=False)
        f = model(*collate([foreign[r] for r in rows], pad))
        e = model(*collate([english[r] for r in rows], pad))
        ids = torch.as_tensor(same_english[rows])
        duplicate = (ids[:, None] == ids[None, :]) & ~torch.eye(len(rows), dtype=torch.bool)
        logits = (f @ e.T / tau).masked_fill(duplicate, float("-inf"))  # (B, B), the pairs on the diagonal
        target = torch.arange(len(rows))
        return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))

    history = train_loop(model.parameters(), loss_at, TrainConfig(steps=steps, lr=lr, warmup_steps=steps // 10, seed=seed),
                         "milco dense baseline: contrastive alignment")
    model.eval()
    return history


def distill_dense(model: DenseEncoder, corpus: pl.DataFrame, queries: pl.DataFrame, groups: pl.DataFrame, *, steps: int, lr: float,
                  batch: int, max_length: int, seed: int, every: int = 0, evaluate: Callable[[], float] | None = None
                  ) -> tuple[list[float], dict[int, float]]:
    """Stage 2: MILCO's KL distillation of the dense teacher's group scores, on the train queries of `queries` and
    their groups; loss per step, and evaluate() before every `every`-th step and after the last ({step: value})."""
    train = queries.filter(pl.col("split") == "train").sort("query_id")
    if train["query_id"].to_list() != groups["query_id"].to_list():
        raise ValueError("groups.parquet does not match the train queries of queries.parquet: rerun milco train_teacher")
    data = groups_data(model.tokenizer, train["text"].to_list(), corpus.sort("doc_id")["text"].to_list(), groups["doc_ids"].to_list(),
                       groups["teacher_scores"].to_list(), max_length)
    pad, rng, g = model.tokenizer.pad_token_id, np.random.default_rng(seed), data.groups.shape[1]
    scores: dict[int, float] = {}

    def check(step: int) -> None:
        if evaluate is not None and every and (step % every == 0 or step == steps):
            scores[step] = evaluate()  # eval mode, no gradient; the batch sampling (rng) is untouched
            model.train()

    model.train()

    def loss_at(step: int) -> torch.Tensor:
        check(step)
        rows = rng.choice(len(data.query_ids), size=min(batch, len(data.query_ids)), replace=False)
        q = model(*collate([data.query_ids[r] for r in rows], pad))  # (B, h)
        d = model(*collate([data.passage_ids[int(i)] for r in rows for i in data.groups[r]], pad)).view(len(rows), g, -1)
        student = torch.einsum("bh,bgh->bg", q, d) / model.temperature  # (B, G)
        return kl_distillation(student, torch.as_tensor(data.teacher_scores[rows], dtype=student.dtype))

    history = train_loop(model.parameters(), loss_at, TrainConfig(steps=steps, lr=lr, warmup_steps=steps // 10, seed=seed),
                         "milco dense baseline: KL distillation")
    check(steps)
    model.eval()
    return history, scores


def validation_split(queries: pl.DataFrame, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Validation documents and queries, split by document so that validation asks what the test asks: about
    documents stage 2 never trained on. A `fraction` of the documents the cross-lingual train queries are about is
    drawn; the validation queries are the cross-lingual train queries about any of them, and every train query
    about one of them (of either kind) is left out of stage 2 while tuning. Returns (document ids, query ids)."""
    train = queries.filter(pl.col("split") == "train").sort("query_id")
    cross = train.filter(pl.col("kind") == "crosslingual")
    docs = sorted({int(d) for rel in cross["relevant"].to_list() for d in rel})
    chosen = np.random.default_rng(seed).choice(np.array(docs, dtype=np.int64), size=max(1, round(fraction * len(docs))), replace=False)
    held = set(chosen.tolist())
    touching = [int(q) for q, rel in zip(train["query_id"], train["relevant"].to_list(), strict=True) if held & set(rel)]
    return sorted(held), touching


def tune_dense(p: TrainDenseParams, corpus: pl.DataFrame, queries: pl.DataFrame, parallel: pl.DataFrame, groups: pl.DataFrame,
               tokenizer_dir: Path) -> tuple[DenseEncoder, dict[str, Any]]:
    """The fair dense baseline at its best settings: for each (align_lr, align_temperature) of the grid, stage 1 on the
    parallel text, then stage 2 on the train queries minus those about the validation documents (validation_split),
    nDCG@10 of the cross-lingual validation queries every eval_every steps; the best (setting, steps) wins (ties: the
    earlier setting, the fewer steps) and its stage-1 model is refit with stage 2 on all the train queries for that
    many steps (its own schedule: warm-up and decay over those steps). A setting whose loss goes non-finite is out of
    the running. Returns the refit model and the grid."""
    start = time.perf_counter()
    train = queries.filter(pl.col("split") == "train").sort("query_id")
    cross = train.filter(pl.col("kind") == "crosslingual")
    val_docs, held_out = validation_split(queries, p.validation_fraction, p.seed)
    val = cross.filter(pl.col("query_id").is_in(held_out))
    fit_queries = queries.filter(~pl.col("query_id").is_in(held_out))
    fit_groups = groups.filter(~pl.col("query_id").is_in(held_out))
    grid: list[dict[str, Any]] = []
    best: tuple[float, int, DenseEncoder, dict[str, Any]] | None = None  # (validation nDCG@10, stage-2 steps, stage-1 model, setting)
    for lr in p.align_lrs:
        for tau in p.align_temperatures:
            setting = {"align_lr": lr, "align_temperature": tau}
            model = new_dense(p, tokenizer_dir, p.seed, p.temperature)
            try:
                align = align_dense(model, parallel, steps=p.align_steps, lr=lr, batch=p.align_batch, max_length=p.max_length,
                                    seed=p.seed, temperature=tau)
                stage1 = copy.deepcopy(model)
                history, by_step = distill_dense(model, corpus, fit_queries, fit_groups, steps=p.distill_steps, lr=p.distill_lr,
                                                 batch=p.distill_batch, max_length=p.max_length, seed=p.seed, every=p.eval_every,
                                                 evaluate=lambda m=model: ndcg10(m, val, corpus, p.max_length))
            except FloatingPointError as e:  # a learning rate too high for this setting: it is out of the running
                grid.append(setting | {"diverged": str(e)})
                continue
            grid.append(setting | {"align_loss": loss_summary(align), "loss": loss_summary(history),
                                   "val_ndcg10": {str(k): v for k, v in by_step.items()}})
            steps, score = max(by_step.items(), key=lambda kv: (kv[1], -kv[0]))
            if best is None or score > best[0]:
                best = (score, steps, stage1, setting)
    if best is None:
        raise ValueError(f"milco train_dense {p.item}: every setting of milco.train_dense.align_lrs x align_temperatures diverged: "
                         + "; ".join(g["diverged"] for g in grid))
    score, steps, model, chosen = best
    final: list[float] = []
    if steps:
        final, _ = distill_dense(model, corpus, queries, groups, steps=steps, lr=p.distill_lr, batch=p.distill_batch,
                                 max_length=p.max_length, seed=p.seed)
    learned = ndcg10(model, cross, corpus, p.max_length)
    check_learned({DENSE: learned}, [DENSE], p.min_train_ndcg10, f"milco train_dense {p.item}", "milco.train_dense.min_train_ndcg10")
    return model, {"dim": model.dim, "validation_documents": val_docs, "validation_queries": val["query_id"].to_list(),
                   "held_out_of_stage_2": held_out, "train_ndcg10": learned, "grid": grid,
                   "chosen": chosen | {"distill_steps": steps, "val_ndcg10": score},
                   "loss": loss_summary(final) if final else None, "train_s": time.perf_counter() - start}
