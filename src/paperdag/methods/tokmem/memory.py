"""TokMem's memory bank (TokMem, ICLR 2026, arXiv 2510.00444): rows M appended to a frozen LM's vocabulary, one per
procedure, each used both as the input embedding of memory token m_i and as its output (lm_head) row (tied), so the
model routes by emitting m_i (logit h . m_i) and then conditions the response on it. The backbone's own vocabulary
keeps its own input rows E and output rows W (W = E only for a tied checkpoint):

    input table  [E; M]   (V + N, C)        output table  [W; M]   (V + N, C)

`masked` ids (the backbone's own procedure tokens, trained in pretraining) can be left out of the output softmax, so
memory tokens compete only with each other and ordinary tokens for routing.

    training sequence  [instruction][m_i][response]<eos>, loss on m_i and the response (the instruction is ignored)
    continual addition new rows per round; after every optimiser step the new (active) rows are renormalised:
                       m_i <- m_i * mean_{j inactive} ||m_j|| / ||m_i||

The same bank without emission (rows in the input only, logits over the backbone vocabulary) is prompt tuning: a soft
prompt of virtual tokens prepended to the query.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from paperdag.lm import IGNORE, Example, TrainConfig, collate, train_loop


class MemoryBank(torch.nn.Module):
    """Rows appended to `model`'s vocabulary: ids V.. V+N-1 (V = the backbone vocabulary). Rows of earlier rounds are
    frozen (`past`); the current round's rows (`new`) train. The backbone's own weights never get a gradient.

    emit=True: the rows are also output rows (tied; TokMem). emit=False: input-only rows (prompt tuning)."""

    def __init__(self, model: PreTrainedModel, emit: bool = True, masked: Sequence[int] = ()) -> None:
        super().__init__()
        self.model = model
        self.emit = emit
        self.masked = sorted(masked)  # backbone ids never predicted (loss and generation)
        model.requires_grad_(False)  # a LoRA injected afterwards (peft) is the only other trainable part
        embedding = model.get_input_embeddings().weight  # (V, C)
        self.vocab = embedding.shape[0]
        self.register_buffer("past", embedding.new_zeros(0, embedding.shape[1]))  # (N_past, C)
        self.new = torch.nn.Parameter(embedding.new_zeros(0, embedding.shape[1]))  # (N_new, C)

    @property
    def size(self) -> int:
        return self.past.shape[0] + self.new.shape[0]

    def rows(self) -> torch.Tensor:
        return torch.cat([self.past, self.new])  # (N, C)

    def add(self, n: int, norm: float, seed: int) -> range:
        """Freeze the current rows, append n new trainable rows (random directions of length `norm`); their ids."""
        gen = torch.Generator().manual_seed(seed)
        fresh = torch.randn(n, self.past.shape[1], generator=gen)
        self.past = torch.cat([self.past, self.new.detach()])
        self.new = torch.nn.Parameter(fresh * norm / fresh.norm(dim=-1, keepdim=True))
        return range(self.vocab + self.past.shape[0], self.vocab + self.size)

    @torch.no_grad()
    def renormalise(self, norm: float) -> None:
        """m_i <- m_i * norm / ||m_i|| for the active rows (norm: the mean norm of the inactive rows)."""
        self.new.mul_(norm / self.new.norm(dim=-1, keepdim=True))

    def inactive_norm(self, fallback: torch.Tensor) -> float:
        """Mean norm of the inactive (earlier rounds') rows; in the first round, of `fallback` rows (the backbone's)."""
        rows = self.past if self.past.shape[0] else fallback
        return float(rows.detach().norm(dim=-1).mean())

    def output_rows(self) -> torch.Tensor:
        """The backbone's output (lm_head) rows W, (V, C): its own, not the input embedding, for an untied checkpoint."""
        head = self.model.get_output_embeddings()
        if head is None or getattr(head, "bias", None) is not None:
            raise ValueError("tokmem MemoryBank: the backbone needs a bias-free linear lm_head (get_output_embeddings)")
        return head.weight

    def mask(self, logits: torch.Tensor) -> torch.Tensor:
        """logits (..., V [+ N]) with the masked backbone ids at -inf."""
        if not self.masked:
            return logits
        return logits.index_fill(-1, torch.tensor(self.masked, device=logits.device), float("-inf"))

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean cross-entropy over the labelled positions (memory tokens and response), with the bank in the table."""
        table = torch.cat([self.model.get_input_embeddings().weight, self.rows()])  # [E; M] (V + N, C)
        embeds = torch.nn.functional.embedding(batch["input_ids"], table)  # (B, T, C)
        base = getattr(self.model, self.model.base_model_prefix)
        states = base(inputs_embeds=embeds, attention_mask=batch["attention_mask"]).last_hidden_state  # (B, T, C)
        targets = batch["labels"][:, 1:]
        keep = targets != IGNORE
        head = torch.cat([self.output_rows(), self.rows()]) if self.emit else self.output_rows()  # [W; M] or W
        logits = self.mask(states[:, :-1][keep] @ head.T)  # (K, V + N) (tied rows: h . m_i for memory token i)
        return torch.nn.functional.cross_entropy(logits.float(), targets[keep])

    @torch.no_grad()
    def materialise(self) -> PreTrainedModel:
        """A copy of the model whose vocabulary holds the bank, for plain generation: input rows [E; M], output rows
        [W; M] (the backbone's own lm_head kept: an untied checkpoint's logits over its vocabulary are unchanged).
        Generation leaves `masked` ids out with `rule`."""
        model = copy.deepcopy(self.model)
        inputs = torch.cat([model.get_input_embeddings().weight, self.rows()])  # (V + N, C)
        outputs = torch.cat([self.output_rows(), self.rows()])
        tied = model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
        model.resize_token_embeddings(inputs.shape[0], mean_resizing=False)
        model.get_input_embeddings().weight.copy_(inputs)
        if not tied:
            model.get_output_embeddings().weight.copy_(outputs)
        return model.eval()

    def rule(self, logits: Sequence[torch.Tensor]) -> torch.Tensor:
        """The generation step rule of a materialised model: its logits with the masked ids left out."""
        return self.mask(logits[0])


def fit_bank(bank: MemoryBank, examples: Sequence[Example], config: TrainConfig, batch_size: int, pad_id: int,
             renormalise: bool, fallback_rows: torch.Tensor, description: str, progress: bool = True) -> list[float]:
    """Train the bank's active rows (and any other trainable parameter of its model, e.g. a first-round LoRA) on
    examples drawn with replacement; with `renormalise`, the active rows are rescaled after every optimiser step."""
    norm = bank.inactive_norm(fallback_rows)
    draw = random.Random(config.seed)
    bank.model.train()
    if renormalise:
        bank.renormalise(norm)

    def loss_at_step(step: int) -> torch.Tensor:
        if renormalise and step:  # the previous optimiser step's update, rescaled before it is used
            bank.renormalise(norm)
        return bank.loss(collate(draw.choices(examples, k=batch_size), pad_id))

    params = [bank.new, *(p for p in bank.model.parameters() if p.requires_grad)]
    history = train_loop(params, loss_at_step, config, description=description, progress=progress)
    if renormalise:
        bank.renormalise(norm)
    bank.model.eval()
    return history


def split_at_memory(tokens: Sequence[int], vocab: int) -> list[tuple[int, list[int]]]:
    """A generated sequence cut at its memory tokens: (memory index, the ordinary tokens after it) per memory token;
    tokens before the first memory token come under index -1."""
    out: list[tuple[int, list[int]]] = [(-1, [])]
    for tok in tokens:
        if tok >= vocab:
            out.append((tok - vocab, []))
        else:
            out[-1][1].append(tok)
    return out if out[0][1] else out[1:]


def routed(tokens: Sequence[int], vocab: int) -> int:
    """The procedure a generation routed to: the memory index of its first emitted token, -1 when that is no memory
    token (routing is read from what the model emits, nothing else)."""
    return tokens[0] - vocab if tokens and tokens[0] >= vocab else -1
