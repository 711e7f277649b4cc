"""The fair dense baseline: a bi-encoder of the MILCO student's size (the same tiny encoder or checkpoint, the same
source tokenizer), trained on the same data with the same teacher and budget, its embedding the mean-pooled token
states (dimension h_m):

    H = Encoder(x)                                   # (B, T, h_m)
    v = normalize(sum_T H * mask / sum_T mask)       # (B, h_m) mean pooling, unit length
    s(q, d) = <v_q, v_d> / tau                       # tau: the dense teacher's temperature, so both score alike

Stage 1 on the parallel text (the sparse student's SMSE has no dense analogue): in-batch contrastive alignment,
each foreign sentence against its English side among the batch's (symmetric InfoNCE); stage 2 exactly MILCO's
KL(softmax(teacher) || softmax(student)) over the same groups and teacher scores (no FLOPS: nothing is sparse).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedModel
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from paperdag.lm import TrainConfig, train_loop
from paperdag.methods.milco.config import ModelParams
from paperdag.methods.milco.losses import kl_distillation
from paperdag.methods.milco.training import collate, groups_data, tokenize

ENCODER_DIR = "encoder"


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


def align_dense(model: DenseEncoder, parallel: pl.DataFrame, *, steps: int, lr: float, batch: int, max_length: int,
                seed: int) -> list[float]:
    """Stage 1: symmetric in-batch InfoNCE between each foreign sentence and its English side; loss per step."""
    foreign = tokenize(model.tokenizer, parallel["source"].to_list(), max_length)
    english = tokenize(model.tokenizer, parallel["english"].to_list(), max_length)
    pad, rng = model.tokenizer.pad_token_id, np.random.default_rng(seed)
    model.train()

    def loss_at(step: int) -> torch.Tensor:
        rows = rng.choice(len(foreign), size=min(batch, len(foreign)), replace=False)
        f = model(*collate([foreign[r] for r in rows], pad))
        e = model(*collate([english[r] for r in rows], pad))
        logits = f @ e.T / model.temperature  # (B, B), the pairs on the diagonal
        target = torch.arange(len(rows))
        return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))

    history = train_loop(model.parameters(), loss_at, TrainConfig(steps=steps, lr=lr, warmup_steps=steps // 10, seed=seed),
                         "milco dense baseline: contrastive alignment")
    model.eval()
    return history


def distill_dense(model: DenseEncoder, corpus: pl.DataFrame, queries: pl.DataFrame, groups: pl.DataFrame, *, steps: int, lr: float,
                  batch: int, max_length: int, seed: int) -> list[float]:
    """Stage 2: MILCO's KL distillation of the dense teacher's group scores, on the same train queries and groups."""
    train = queries.filter(pl.col("split") == "train").sort("query_id")
    data = groups_data(model.tokenizer, train["text"].to_list(), corpus.sort("doc_id")["text"].to_list(), groups["doc_ids"].to_list(),
                       groups["teacher_scores"].to_list(), max_length)
    pad, rng, g = model.tokenizer.pad_token_id, np.random.default_rng(seed), data.groups.shape[1]
    model.train()

    def loss_at(step: int) -> torch.Tensor:
        rows = rng.choice(len(data.query_ids), size=min(batch, len(data.query_ids)), replace=False)
        q = model(*collate([data.query_ids[r] for r in rows], pad))  # (B, h)
        d = model(*collate([data.passage_ids[int(i)] for r in rows for i in data.groups[r]], pad)).view(len(rows), g, -1)
        student = torch.einsum("bh,bgh->bg", q, d) / model.temperature  # (B, G)
        return kl_distillation(student, torch.as_tensor(data.teacher_scores[rows], dtype=student.dtype))

    history = train_loop(model.parameters(), loss_at, TrainConfig(steps=steps, lr=lr, warmup_steps=steps // 10, seed=seed),
                         "milco dense baseline: KL distillation")
    model.eval()
    return history
