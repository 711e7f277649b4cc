"""The MILCO model (Nguyen et al., ICLR 2026, arXiv 2510.00671): a multilingual encoder whose token states are
mapped by a connector into the hidden space of an English learned-sparse (SPLADE-like) model and read out by that
model's masked-language-model head, plus the LexEcho head weighting the source tokens themselves.

    H = Encoder(x)                                    # (B, T, h_m) multilingual token states
    Z = GELU(W H)                                     # (B, T, h_e) connector; no-connector ablation: Z = [H, 0] (zero-padded to h_e)
    L = Head(Z) * words                               # (B, T, V_en) English lexical (MLM) logits of the text's own tokens
    t = log(1 + relu(max_T L))                        # (B, V_en) pivot vector, one weight per English term (max over words)
    w_i = relu(echo(H_i)) * mask_i * scale            # (B, T) LexEcho weight of source token i, keyed by its id
    s(q, d) = <t_q, t_d> + sum_i sum_j w_i^q w_j^d [id_i == id_j]

`words` is the attention mask without the special tokens ([CLS], [SEP], ...): a term's weight comes from the text's
own tokens. With [CLS] / [SEP] in the max, stage 1's max-pool gradient reached only each term's argmax position and
settled on the two special positions (hubs that read the whole sentence), and the student stalled (README, milco).
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoModel, AutoTokenizer, BertConfig, PreTrainedModel
from transformers.models.bert.modeling_bert import BertOnlyMLMHead
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

HEAD_FILE, CONFIG_FILE, ENCODER_DIR = "milco_heads.safetensors", "milco_config.json", "encoder"


@dataclass(frozen=True)
class SparseRep:
    """A batch of MILCO representations: the pivot vectors and the LexEcho (source id, weight) pairs."""

    pivot: torch.Tensor  # (B, V_en) t, non-negative
    ids: torch.Tensor  # (B, T) source token ids
    echo: torch.Tensor | None  # (B, T) w_i, non-negative; None without LexEcho


def path_free(config: dict) -> dict:
    """A saved model config without the checkout's paths (`_name_or_path` is where the model was loaded from), so
    that its bytes are the same in every clone."""
    return {k: v for k, v in config.items() if k not in ("_name_or_path", "name_or_path")}


class ZeroPad(nn.Module):
    """The no-connector ablation's map of H (B, T, h_m) into the head's width h_e >= h_m: [H, 0]; nothing learned."""

    def __init__(self, extra: int) -> None:
        super().__init__()
        self.extra = extra

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return nn.functional.pad(h, (0, self.extra)) if self.extra else h


@dataclass(frozen=True)
class MilcoConfig:
    connector: bool  # Z = GELU(W H); False: the head reads H directly, zero-padded to h_e (needs h_m <= h_e)
    echo: bool  # LexEcho head on
    head_config: dict  # the English model's BertConfig (hidden size h_e, vocabulary V_en) the head was built for
    special_ids: list[int]  # source ids never echoed ([CLS], [SEP], [PAD], ...)


class Milco(nn.Module):
    """Encoder -> connector -> English lexical head (pivot), and the LexEcho head; `forward` gives a SparseRep."""

    def __init__(self, encoder: PreTrainedModel, head: BertOnlyMLMHead, tokenizer: PreTrainedTokenizerBase,
                 config: MilcoConfig) -> None:
        super().__init__()
        h_m, h_e = encoder.config.hidden_size, config.head_config["hidden_size"]
        if not config.connector and h_m > h_e:
            raise ValueError(f"without a connector the English head (hidden {h_e}) reads the encoder states directly, "
                             f"zero-padded, which have hidden size {h_m} > {h_e}: give the teacher at least the encoder's size")
        self.encoder, self.head, self.tokenizer, self.config = encoder, head, tokenizer, config
        self.connector = nn.Sequential(nn.Linear(h_m, h_e), nn.GELU()) if config.connector else ZeroPad(h_e - h_m)
        self.echo_head = nn.Linear(h_m, 1) if config.echo else None
        self.scale = nn.Parameter(torch.ones(1)) if config.echo else None  # learnable, initialised to 1
        self.register_buffer("special", torch.tensor(sorted(config.special_ids), dtype=torch.long), persistent=False)

    @classmethod
    def from_teacher(cls, encoder: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, teacher: PreTrainedModel,
                     connector: bool, echo: bool) -> Milco:
        """A student whose English head starts as a copy of the English teacher's MLM head (as in the paper)."""
        config = MilcoConfig(connector=connector, echo=echo, head_config=path_free(teacher.config.to_dict()),
                             special_ids=sorted(set(tokenizer.all_special_ids)))
        return cls(encoder, copy.deepcopy(teacher.cls), tokenizer, config)

    def with_echo(self, echo: bool) -> Milco:
        """The same encoder, connector and head with LexEcho switched on (a fresh head) or off."""
        if (self.echo_head is not None) == echo:
            return self
        switched = Milco(self.encoder, self.head, self.tokenizer, replace(self.config, echo=echo))
        switched.connector = self.connector
        return switched

    @property
    def en_vocab_size(self) -> int:
        return int(self.config.head_config["vocab_size"])

    @property
    def src_vocab_size(self) -> int:
        return int(self.encoder.config.vocab_size)

    def words(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) 1 at the text's own tokens: the attention mask without the special tokens."""
        return attention_mask * ~torch.isin(input_ids, self.special)

    def lexical_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """L = Head(GELU(W H)) * words (B, T, V_en), H (B, T, h_m) and words (B, T)."""
        h = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # (B, T, h_m)
        z = self.connector(h)  # (B, T, h_e)
        words = self.words(input_ids, attention_mask)
        return self.head(z) * words.unsqueeze(-1), h, words

    def max_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, tau: float = 0.0) -> torch.Tensor:
        """max_T L over the words (B, V_en), the raw pooled logits stage 1 aligns with the teacher's; tau > 0 pools
        with soft_max_pool instead (every word gets gradient)."""
        logits, _, words = self.lexical_logits(input_ids, attention_mask)
        return soft_max_pool(logits, words, tau)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SparseRep:
        logits, h, words = self.lexical_logits(input_ids, attention_mask)
        pivot = torch.log1p(torch.relu(masked_max(logits, words)))  # t (B, V_en)
        if self.echo_head is None:
            return SparseRep(pivot, input_ids, None)
        w = torch.relu(self.echo_head(h).squeeze(-1)) * words * self.scale  # (B, T)
        return SparseRep(pivot, input_ids, w)

    # ------------------------------------------------------------ saving (a DVC directory output)

    def save_pretrained(self, path: Path | str) -> None:
        """path/encoder/ (encoder + tokenizer, save_pretrained), path/milco_heads.safetensors, path/milco_config.json."""
        path = Path(path)
        self.encoder.save_pretrained(path / ENCODER_DIR)
        self.tokenizer.save_pretrained(path / ENCODER_DIR)
        state = {f"head.{k}": v for k, v in self.head.state_dict().items()}
        state |= {f"connector.{k}": v for k, v in self.connector.state_dict().items()}
        if self.echo_head is not None:
            state |= {f"echo_head.{k}": v for k, v in self.echo_head.state_dict().items()} | {"scale": self.scale.data}
        save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, path / HEAD_FILE)
        (path / CONFIG_FILE).write_text(json.dumps(asdict(self.config), indent=2) + "\n")

    @classmethod
    def from_pretrained(cls, path: Path | str) -> Milco:
        path = Path(path)
        if not (path / CONFIG_FILE).exists():
            raise FileNotFoundError(f"{path / CONFIG_FILE} is missing: {path} is not a directory written by Milco.save_pretrained")
        config = MilcoConfig(**json.loads((path / CONFIG_FILE).read_text()))
        encoder = AutoModel.from_pretrained(path / ENCODER_DIR, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(path / ENCODER_DIR, local_files_only=True)
        head = BertOnlyMLMHead(BertConfig(**config.head_config))
        model = cls(encoder, head, tokenizer, config)
        state = load_file(path / HEAD_FILE)
        for name, module in (("head", model.head), ("connector", model.connector), ("echo_head", model.echo_head)):
            if module is not None:
                module.load_state_dict({k[len(name) + 1:]: v for k, v in state.items() if k.startswith(name + ".")})
        if model.scale is not None:
            model.scale.data.copy_(state["scale"])
        return model


# ---------------------------------------------------------------- pooling over tokens


def masked_max(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """max over T of logits (B, T, V) where mask (B, T) is 1: (B, V); 0 for a row with no such token."""
    keep = mask.bool()
    pooled = logits.masked_fill(~keep.unsqueeze(-1), torch.finfo(logits.dtype).min).max(dim=1).values
    return torch.where(keep.any(dim=1, keepdim=True), pooled, torch.zeros_like(pooled))


def soft_max_pool(logits: torch.Tensor, mask: torch.Tensor, tau: float) -> torch.Tensor:
    """A smooth max over T of logits (B, T, V) where mask (B, T) is 1: tau * (logsumexp_T(L / tau) - log n), n the
    row's tokens; masked_max at tau = 0, the mean as tau grows, and every token gets a share of the gradient
    (softmax(L / tau)) where max gives it all to the argmax. 0 for a row with no token."""
    if tau == 0:
        return masked_max(logits, mask)
    keep = mask.bool()
    n = keep.sum(dim=1, keepdim=True).clamp(min=1).to(logits.dtype)  # (B, 1)
    scaled = (logits / tau).masked_fill(~keep.unsqueeze(-1), torch.finfo(logits.dtype).min)
    pooled = tau * (torch.logsumexp(scaled, dim=1) - torch.log(n))
    return torch.where(keep.any(dim=1, keepdim=True), pooled, torch.zeros_like(pooled))


# ---------------------------------------------------------------- the score


def echo_match(q_ids: torch.Tensor, q_w: torch.Tensor, d_ids: torch.Tensor, d_w: torch.Tensor) -> torch.Tensor:
    """sum_i sum_j w_i^q w_j^d [id_i == id_j] for every (query, document) pair: (Bq, Tq) x (Bd, Td) -> (Bq, Bd)."""
    same = (q_ids[:, None, :, None] == d_ids[None, :, None, :]).to(q_w.dtype)  # (Bq, Bd, Tq, Td)
    return torch.einsum("qi,dj,qdij->qd", q_w, d_w, same)


def score(q: SparseRep, d: SparseRep) -> torch.Tensor:
    """s(q, d) = <t_q, t_d> + LexEcho exact-match term, for all pairs: (Bq, Bd)."""
    s = q.pivot @ d.pivot.T
    if q.echo is not None and d.echo is not None:
        s = s + echo_match(q.ids, q.echo, d.ids, d.echo)
    return s


def group_scores(q: SparseRep, d: SparseRep, group: int) -> torch.Tensor:
    """Scores of query b against its own `group` passages d[b*group:(b+1)*group]: (B, group)."""
    b = q.pivot.shape[0]
    s = torch.einsum("bv,bgv->bg", q.pivot, d.pivot.view(b, group, -1))
    if q.echo is not None and d.echo is not None:
        ids, w = d.ids.view(b, group, -1), d.echo.view(b, group, -1)
        same = (q.ids[:, None, :, None] == ids[:, :, None, :]).to(w.dtype)  # (B, G, Tq, Td)
        s = s + torch.einsum("bi,bgj,bgij->bg", q.echo, w, same)
    return s


def to_sparse_matrix(rep: SparseRep, en_vocab_size: int, src_vocab_size: int) -> sp.csr_matrix:
    """Rows (B, V_en + V_src): columns [0, V_en) the pivot weights, V_en + id the summed echo weights of source
    token `id` (repeated tokens add up), so that row_q . row_d == score(q, d)."""
    pivot = rep.pivot.detach().cpu().numpy().astype(np.float32)
    rows, cols = np.nonzero(pivot)
    vals = pivot[rows, cols]
    if rep.echo is not None:
        w = rep.echo.detach().cpu().numpy().astype(np.float32)
        erows, ecols = np.nonzero(w > 0)
        rows = np.concatenate([rows, erows])
        cols = np.concatenate([cols, en_vocab_size + rep.ids.cpu().numpy()[erows, ecols]])
        vals = np.concatenate([vals, w[erows, ecols]])
    m = sp.csr_matrix((vals, (rows, cols)), shape=(pivot.shape[0], en_vocab_size + src_vocab_size), dtype=np.float32)
    m.sum_duplicates()
    m.sort_indices()
    return m
