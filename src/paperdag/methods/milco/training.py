"""The three trainings at small scale, each a loss per step handed to paperdag.lm.train_loop:

  train_english_teacher  the English SPLADE-like teacher: a lexical warm-up towards log(1 + tf) * idf weights, then
                         KL distillation of the dense teacher's group scores with FLOPS (as stage 2, in English)
  align                  stage 1, sparse alignment pretraining on parallel text: SMSE(m, e) + SMSE(me, e)
  distill                stage 2, contrastive KL distillation over (query, group) + lambda_q FLOPS(t_q) + lambda_d FLOPS(t_d)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp
import torch
from rich.progress import track
from transformers import PreTrainedModel
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from paperdag.lm import TrainConfig, train_loop
from paperdag.methods.milco.losses import alignment_loss, flops, kl_distillation, smse
from paperdag.methods.milco.model import (
    Milco,
    SparseRep,
    group_scores,
    to_sparse_matrix,
)


def tokenize(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_length: int) -> list[list[int]]:
    return tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]


def collate(ids: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded input_ids and attention_mask (B, T_max)."""
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, x in enumerate(ids):
        input_ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask[i, : len(x)] = 1
    return input_ids, mask


def teacher_pivot(teacher: PreTrainedModel, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The English SPLADE teacher's vector log(1 + relu(max_T logits * mask)) (B, V_en)."""
    logits = teacher(input_ids=input_ids, attention_mask=mask).logits * mask.unsqueeze(-1)
    return torch.log1p(torch.relu(logits.max(dim=1).values))


def teacher_max_logits(teacher: PreTrainedModel, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """e: the teacher's raw max-pooled logits (B, V_en), the target of stage 1."""
    return (teacher(input_ids=input_ids, attention_mask=mask).logits * mask.unsqueeze(-1)).max(dim=1).values


@dataclass(frozen=True)
class Groups:
    """Stage-2 training data: query q_b with its passages (positive first) and the dense teacher's scores."""

    query_ids: list[list[int]]  # token ids per query
    passage_ids: list[list[int]]  # token ids per document (indexed by doc id)
    groups: np.ndarray  # (n_queries, G) doc ids
    teacher_scores: np.ndarray  # (n_queries, G) teacher scores (already divided by the temperature)


def groups_data(tokenizer: PreTrainedTokenizerBase, query_texts: Sequence[str], passage_texts: Sequence[str], groups: Sequence[Sequence[int]],
                teacher_scores: Sequence[Sequence[float]], max_length: int) -> Groups:
    """Groups from text: the train queries (in group order) and every document (by doc id), tokenized."""
    return Groups(query_ids=tokenize(tokenizer, query_texts, max_length), passage_ids=tokenize(tokenizer, passage_texts, max_length),
                  groups=np.array(groups), teacher_scores=np.array(teacher_scores))


def loss_summary(history: list[float]) -> dict[str, float]:
    """Steps, and the mean loss over the first and the last tenth of them."""
    n = max(1, len(history) // 10)
    return {"steps": len(history), "first": float(np.mean(history[:n])), "last": float(np.mean(history[-n:]))}


def _distill_loss(encode, groups: Groups, batch: int, lambda_q: float, lambda_d: float, pad_id: int,
                  rng: np.random.Generator) -> torch.Tensor:
    rows = rng.choice(len(groups.query_ids), size=min(batch, len(groups.query_ids)), replace=False)
    g = groups.groups.shape[1]
    q = encode(*collate([groups.query_ids[r] for r in rows], pad_id))
    d = encode(*collate([groups.passage_ids[int(i)] for r in rows for i in groups.groups[r]], pad_id))
    student = group_scores(q, d, g)  # (B, G)
    teacher = torch.as_tensor(groups.teacher_scores[rows], dtype=student.dtype)
    return kl_distillation(student, teacher) + lambda_q * flops(q.pivot) + lambda_d * flops(d.pivot)


def check_learned(scores: dict[str, float], names: list[str], minimum: float, where: str, key: str) -> None:
    """ValueError naming every model of `names` whose cross-lingual train-query nDCG@10 is below `minimum` (params.yaml `key`)."""
    weak = {n: scores[n] for n in names if scores[n] < minimum}
    if weak:
        shown = ", ".join(f"{n} {v:.3f}" for n, v in weak.items())
        raise ValueError(f"{where}: nDCG@10 on the cross-lingual train queries {shown} < {key} = {minimum}: the model did not "
                         "learn to retrieve across languages, so comparing with it means nothing; raise its steps or the model size")


def tfidf_targets(ids: Sequence[Sequence[int]], vocab_size: int, special_ids: Sequence[int]) -> tuple[np.ndarray, list[Counter]]:
    """idf (V,) = log(N / df) over `ids`, and each text's term counts (special tokens dropped)."""
    special = set(special_ids)
    counts = [Counter(t for t in x if t not in special) for x in ids]
    df = np.zeros(vocab_size)
    for c in counts:
        df[list(c)] += 1
    idf = np.log(len(ids) / np.maximum(df, 1))
    return idf.astype(np.float32), counts


def train_english_teacher(
    teacher: PreTrainedModel,
    sentences: list[list[int]],
    groups: Groups,
    warmup: TrainConfig,
    distill: TrainConfig,
    batch: int,
    group_batch: int,
    lambda_q: float,
    lambda_d: float,
    pad_id: int,
    special_ids: Sequence[int],
    progress: bool = True,
) -> dict[str, list[float]]:
    """Lexical warm-up: SMSE(t, log(1 + tf) * idf) on English sentences; then KL + FLOPS on English groups."""
    vocab = teacher.config.vocab_size
    idf, counts = tfidf_targets(sentences, vocab, special_ids)
    rng = np.random.default_rng(warmup.seed)
    teacher.train()

    def warm_loss(step: int) -> torch.Tensor:
        rows = rng.choice(len(sentences), size=min(batch, len(sentences)), replace=False)
        target = torch.zeros((len(rows), vocab))
        for i, r in enumerate(rows):
            terms = list(counts[r])
            target[i, terms] = torch.tensor([math.log1p(counts[r][t]) * idf[t] for t in terms], dtype=torch.float32)
        return smse(teacher_pivot(teacher, *collate([sentences[r] for r in rows], pad_id)), target)

    def encode(ids: torch.Tensor, mask: torch.Tensor) -> SparseRep:
        return SparseRep(teacher_pivot(teacher, ids, mask), ids, None)

    history = {"warmup": train_loop(teacher.parameters(), warm_loss, warmup, "milco teacher: tf-idf warm-up", progress)}
    history["distill"] = train_loop(
        teacher.parameters(), lambda step: _distill_loss(encode, groups, group_batch, lambda_q, lambda_d, pad_id, rng),
        distill, "milco teacher: KL distillation", progress)
    teacher.eval()
    return history


def align(
    student: Milco,
    teacher: PreTrainedModel,
    foreign: list[list[int]],
    english_student: list[list[int]],
    english_teacher: list[list[int]],
    config: TrainConfig,
    batch: int,
    teacher_pad_id: int,
    soft_tau: float = 0.0,
    soft_steps: int = 0,
    progress: bool = True,
) -> list[float]:
    """Stage 1: SMSE(m, e) + SMSE(me, e) on parallel (foreign, English) pairs; the teacher is frozen.

    The student's m and me pool with soft_max_pool at a temperature annealed linearly from soft_tau to 0 over the
    first soft_steps steps, then with the paper's max: with the max from the start, each term's gradient reaches one
    token only and a from-scratch encoder stalls (README, milco). soft_tau = 0 is the paper's max throughout."""
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    student.train()
    pad = student.tokenizer.pad_token_id
    rng = np.random.default_rng(config.seed)

    def loss_at(step: int) -> torch.Tensor:
        rows = rng.choice(len(foreign), size=min(batch, len(foreign)), replace=False)
        tau = soft_tau * max(0.0, 1.0 - step / soft_steps) if soft_steps else 0.0
        m = student.max_logits(*collate([foreign[r] for r in rows], pad), tau=tau)  # (B, V_en)
        me = student.max_logits(*collate([english_student[r] for r in rows], pad), tau=tau)  # (B, V_en)
        with torch.no_grad():
            e = teacher_max_logits(teacher, *collate([english_teacher[r] for r in rows], teacher_pad_id))
        return alignment_loss(m, me, e)

    history = train_loop(student.parameters(), loss_at, config, "milco stage 1: sparse alignment", progress)
    student.eval()
    return history


def distill(student: Milco, groups: Groups, config: TrainConfig, batch: int, lambda_q: float, lambda_d: float,
            progress: bool = True) -> list[float]:
    """Stage 2: KL(softmax(teacher) || softmax(student)) over groups + lambda_q FLOPS(t_q) + lambda_d FLOPS(t_d)."""
    student.train()
    rng = np.random.default_rng(config.seed)
    pad = student.tokenizer.pad_token_id
    history = train_loop(
        student.parameters(), lambda step: _distill_loss(student, groups, batch, lambda_q, lambda_d, pad, rng),
        config, "milco stage 2: KL distillation", progress)
    student.eval()
    return history


@torch.no_grad()
def encode_sparse(model: Milco, ids: list[list[int]], batch: int = 256, description: str = "milco encode") -> sp.csr_matrix:
    """CSR rows (n, V_en + V_src) of the pivot and LexEcho weights (see to_sparse_matrix)."""
    model.eval()
    pad = model.tokenizer.pad_token_id
    parts = [to_sparse_matrix(model(*collate(ids[i : i + batch], pad)), model.en_vocab_size, model.src_vocab_size)
             for i in track(range(0, len(ids), batch), description=description, disable=len(ids) < 2000)]
    return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, model.en_vocab_size + model.src_vocab_size))


def align_on_parallel(student: Milco, teacher: PreTrainedModel, teacher_tokenizer: PreTrainedTokenizerBase, parallel: pl.DataFrame,
                      *, steps: int, lr: float, batch: int, max_length: int, seed: int, soft_tau: float = 0.0,
                      soft_steps: int = 0) -> list[float]:
    """Stage 1 on the parallel text (columns source, english): its loss per step."""
    src_tok = student.tokenizer
    return align(
        student, teacher,
        foreign=tokenize(src_tok, parallel["source"].to_list(), max_length),
        english_student=tokenize(src_tok, parallel["english"].to_list(), max_length),
        english_teacher=tokenize(teacher_tokenizer, parallel["english"].to_list(), max_length),
        config=TrainConfig(steps=steps, lr=lr, warmup_steps=steps // 10, seed=seed),
        batch=batch, teacher_pad_id=teacher_tokenizer.pad_token_id, soft_tau=soft_tau, soft_steps=soft_steps,
    )


def distill_on_groups(student: Milco, corpus: pl.DataFrame, queries: pl.DataFrame, groups: pl.DataFrame, *, steps: int, lr: float,
                      batch: int, lambda_q: float, lambda_d: float, max_length: int, seed: int) -> list[float]:
    """Stage 2 on the train queries (source-language text) and the dense teacher's groups: its loss per step."""
    train = queries.filter(pl.col("split") == "train").sort("query_id")
    if train["query_id"].to_list() != groups["query_id"].to_list():
        raise ValueError("groups.parquet does not match the train queries of queries.parquet: rerun milco train_teacher")
    data = groups_data(student.tokenizer, train["text"].to_list(), corpus.sort("doc_id")["text"].to_list(), groups["doc_ids"].to_list(),
                       groups["teacher_scores"].to_list(), max_length)
    return distill(student, data, TrainConfig(steps=steps, lr=lr, warmup_steps=steps // 10, seed=seed), batch, lambda_q, lambda_d)
