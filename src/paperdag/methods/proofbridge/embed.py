"""ProofBridge's joint embedding of NL theorems and formal proofs (paper, Sec. "Joint embedding").

    z_NL = normalize(g_NL(meanpool(E_NL(x))))       E_NL: all-MiniLM-L6-v2, only its top layers train
    z_FL = normalize(g_FL(meanpool(E_FL(y))))       E_FL: a byte-level encoder over the statement and the proof
                                                    states joined by " [SEP] ", pretrained by masked bytes, top layers train
    g = Linear -> GELU -> Dropout(0.1) -> Linear    (projection heads)
    L = 1/2 [CE(z_NL z_FL^T / tau, I) + CE(z_FL z_NL^T / tau, I)],  tau = 0.07   (symmetric InfoNCE, in-batch negatives)

The frozen layers' outputs are computed once (they do not change), so a training step runs only the top layers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

PAD, MASK, OFFSET = 0, 1, 2  # byte-level vocabulary: pad, mask, then the 256 bytes
BYTE_VOCAB = OFFSET + 256


def byte_ids(texts: list[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, T) byte ids (+OFFSET) right-padded, and the attention mask; texts cut at max_len bytes."""
    rows = [list(t.encode("utf-8"))[:max_len] for t in texts]
    length = max(1, max(len(r) for r in rows))
    ids = torch.full((len(rows), length), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r) + OFFSET
        mask[i, : len(r)] = 1
    return ids, mask


def additive_mask(mask: torch.Tensor) -> torch.Tensor:
    """(B, T) 0/1 -> (B, 1, 1, T) additive attention mask, what a BertLayer called directly takes."""
    return (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min


def mean_pool(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask[..., None].float()  # (B, T, 1)
    return (states * m).sum(1) / m.sum(1).clamp(min=1.0)  # (B, C)


def projection(d_in: int, d_hidden: int, d_out: int, dropout: float = 0.1) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(d_hidden, d_out))


def info_nce(z_nl: torch.Tensor, z_fl: torch.Tensor, tau: float) -> torch.Tensor:
    """Symmetric InfoNCE over a batch of B aligned pairs: (B, d) x (B, d), rows L2-normalised."""
    logits = z_nl @ z_fl.T / tau  # (B, B)
    target = torch.arange(len(z_nl))
    return 0.5 * (nn.functional.cross_entropy(logits, target) + nn.functional.cross_entropy(logits.T, target))


def pretrain_formal(texts: list[str], hidden: int, layers: int, heads: int, max_len: int, steps: int, batch: int, lr: float,
                    seed: int) -> tuple[nn.Module, list[float]]:
    """A tiny BERT over bytes, pretrained by masked-byte prediction (15 %) on `texts` (training theorems only);
    returns its encoder (token states) and the loss history."""
    from paperdag.lm import TrainConfig, tiny_bert_config, tiny_masked_lm, train_loop

    torch.manual_seed(seed)
    config = tiny_bert_config(BYTE_VOCAB, hidden, layers, heads, 4 * hidden, max_position_embeddings=max_len, pad_token_id=PAD)
    mlm = tiny_masked_lm(config)
    ids, mask = byte_ids(texts, max_len)
    draw = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)

    def loss_at(step: int) -> torch.Tensor:
        rows = torch.tensor(draw.sample(range(len(texts)), min(batch, len(texts))))
        x, m = ids[rows].clone(), mask[rows]
        chosen = (torch.rand(x.shape, generator=gen) < 0.15) & m.bool()
        labels = torch.where(chosen, x, torch.full_like(x, -100))
        x[chosen] = MASK
        return mlm(input_ids=x, attention_mask=m, labels=labels).loss

    history = train_loop(mlm.parameters(), loss_at, TrainConfig(steps=steps, lr=lr, warmup_steps=min(20, steps // 5), seed=seed),
                         description="proofbridge formal encoder (masked bytes)", progress=False)
    return mlm.bert.eval(), history


def frozen_states(encoder: nn.Module, ids: torch.Tensor, mask: torch.Tensor, n_top: int, batch: int = 64) -> torch.Tensor:
    """The hidden states entering the top n_top layers of a BERT-style encoder, (N, T, C), computed once."""
    out = []
    with torch.inference_mode():
        for lo in range(0, len(ids), batch):
            hs = encoder(input_ids=ids[lo : lo + batch], attention_mask=mask[lo : lo + batch], output_hidden_states=True).hidden_states
            out.append(hs[len(hs) - 1 - n_top])
    return torch.cat(out)


@dataclass
class Side:
    """One encoder side: the frozen states (N, T, C) and mask (N, T) of every text, its trainable top layers and
    projection head."""

    states: torch.Tensor
    mask: torch.Tensor
    top: nn.ModuleList
    head: nn.Sequential

    def embed(self, rows: torch.Tensor) -> torch.Tensor:
        h, m = self.states[rows], self.mask[rows]
        cut = int(m.sum(1).max())  # drop the all-padding tail of this batch
        h, m = h[:, :cut], m[:, :cut]
        ext = additive_mask(m)
        for layer in self.top:
            h = layer(h, attention_mask=ext)
            h = h[0] if isinstance(h, tuple) else h
        return nn.functional.normalize(self.head(mean_pool(h, m)), dim=-1)  # (B, d)

    def modules(self) -> nn.ModuleList:
        return nn.ModuleList([self.top, self.head])


def side(encoder: nn.Module, layers: nn.ModuleList, ids: torch.Tensor, mask: torch.Tensor, n_top: int, d_hidden: int, d_out: int,
         dropout: float) -> Side:
    """Freeze `encoder`, copy its top n_top `layers` as trainable, and add a projection head."""
    import copy

    for p in encoder.parameters():
        p.requires_grad_(False)
    states = frozen_states(encoder, ids, mask, n_top)
    top = nn.ModuleList([copy.deepcopy(layer) for layer in layers[len(layers) - n_top :]])
    for p in top.parameters():
        p.requires_grad_(True)
    return Side(states, mask, top, projection(states.shape[-1], d_hidden, d_out, dropout))


def train_joint(nl: Side, fl: Side, train_rows: list[int], steps: int, batch: int, lr: float, tau: float, seed: int) -> list[float]:
    """Symmetric InfoNCE on random batches of aligned (NL, formal) training pairs; only the top layers and heads train."""
    from paperdag.lm import TrainConfig, train_loop

    draw = random.Random(seed)
    modules = nn.ModuleList([nl.modules(), fl.modules()]).train()

    def loss_at(step: int) -> torch.Tensor:
        rows = torch.tensor(draw.sample(train_rows, min(batch, len(train_rows))))
        return info_nce(nl.embed(rows), fl.embed(rows), tau)

    history = train_loop(modules.parameters(), loss_at, TrainConfig(steps=steps, lr=lr, warmup_steps=min(20, steps // 5), seed=seed),
                         description="proofbridge joint embedding (InfoNCE)", progress=False)
    modules.eval()
    return history


def embed_rows(s: Side, rows: list[int], batch: int = 128) -> np.ndarray:
    with torch.inference_mode():
        parts = [s.embed(torch.tensor(rows[lo : lo + batch])) for lo in range(0, len(rows), batch)]
    return torch.cat(parts).numpy().astype(np.float32) if parts else np.zeros((0, 1), np.float32)


def gold_ranks(queries: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Query i's gold is candidate i: the 1-based rank of the gold under cosine (rows unit-norm), ties counted
    against the gold (a constant embedding ranks last, not first)."""
    scores = queries @ candidates.T  # (Q, C)
    gold = np.diag(scores)[:, None]
    return (scores >= gold).sum(1).astype(np.int64)


def top_k(queries: np.ndarray, candidates: np.ndarray, k: int, exclude: np.ndarray | None = None) -> np.ndarray:
    """(Q, k) candidate indices by cosine, best first; exclude[q, c] True removes a candidate for a query."""
    scores = queries @ candidates.T
    if exclude is not None:
        scores = np.where(exclude, -np.inf, scores)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    if exclude is not None and np.isinf(np.take_along_axis(scores, order, 1)).any():
        raise ValueError(f"top_k: fewer than {k} candidates remain for some query after exclusion")
    return order
