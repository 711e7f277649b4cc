"""Greedy generation with explicit KV caches and a hook for per-step distribution rules.

A generation decodes one shared continuation y from one or more *views* of each example (e.g. a prompt with a
retrieved context and the same prompt without it). Each view keeps its own transformers 5 `DynamicCache` (passed as
`cache=`, not the deprecated `past_key_values=`); every step runs one forward pass per view on the last token, and a
`StepRule` turns the views' next-token logits into the scores the token is chosen from:

    def contrast(logits):                    # logits: one (B, V) tensor per view
        with_ctx, without = logits
        return 2 * with_ctx.log_softmax(-1) - without.log_softmax(-1)

    out = generate(model, [ctx_prompts, plain_prompts], pad_id, eos_id, rule=contrast)

Plain decoding is one view with the default rule (the logits themselves).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel

StepRule = Callable[[Sequence[torch.Tensor]], torch.Tensor]  # per-view (B, V) logits -> (B, V) scores; argmax is taken


def plain(logits: Sequence[torch.Tensor]) -> torch.Tensor:
    """The default rule: the first view's logits (ordinary greedy decoding)."""
    return logits[0]


@dataclass
class Generation:
    tokens: list[list[int]]  # generated ids per example, up to and without eos
    steps: int  # decoding steps run (the longest continuation, eos included)
    forward_passes: int  # model calls (one per view per step)
    seconds: float  # wall time of the whole generation
    new_tokens: int  # generated tokens summed over examples, eos included


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ids and attention mask with every prompt right-aligned, so position -1 is each row's next-token slot."""
    length = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), length), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, length - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
        mask[row, length - len(prompt) :] = 1
    return ids, mask


class _View:
    """One prompt batch with its own KV cache, advanced one token at a time."""

    def __init__(self, model: PreTrainedModel, prompts: Sequence[Sequence[int]], pad_id: int) -> None:
        self.model = model
        self.ids, self.mask = left_pad(prompts, pad_id)  # (B, T)
        self.cache = DynamicCache(config=model.config)
        self.next_position = self.mask.sum(-1)  # (B,) position of the next token (padding takes no positions)

    def first(self) -> torch.Tensor:
        """Prefill: the prompt through the model, filling the cache; the (B, V) logits at the last position."""
        positions = (self.mask.cumsum(-1) - 1).clamp(min=0)  # (B, T)
        out = self.model(input_ids=self.ids, attention_mask=self.mask, position_ids=positions, cache=self.cache,
                         use_cache=True, logits_to_keep=1)
        return out.logits[:, -1].float()

    def step(self, token: torch.Tensor) -> torch.Tensor:
        """One decoding step on `token` (B,), reusing the cache; the (B, V) next-token logits."""
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=-1)  # (B, T + 1)
        out = self.model(input_ids=token[:, None], attention_mask=self.mask, position_ids=self.next_position[:, None],
                         cache=self.cache, use_cache=True)
        self.next_position = self.next_position + 1
        return out.logits[:, -1].float()


@torch.inference_mode()
def generate(
    model: PreTrainedModel,
    views: Sequence[Sequence[Sequence[int]]],
    pad_id: int,
    eos_id: int | Sequence[int],
    rule: StepRule = plain,
    max_new_tokens: int = 16,
) -> Generation:
    """Greedy decoding of one continuation per example from len(views) prompt batches (each B prompts, in the same
    example order), the next token being argmax rule([logits of each view]). A row stops at an eos id."""
    if not views or any(len(v) != len(views[0]) for v in views):
        raise ValueError("generate: every view needs one prompt per example (same batch size)")
    stops = torch.tensor([eos_id] if isinstance(eos_id, int) else list(eos_id), dtype=torch.long)
    start = time.perf_counter()
    model.eval()
    streams = [_View(model, prompts, pad_id) for prompts in views]
    logits = [s.first() for s in streams]
    batch = len(views[0])
    tokens = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long)
    done = torch.zeros(batch, dtype=torch.bool)
    passes, steps, new = len(streams), 0, 0
    for t in range(max_new_tokens):
        chosen = rule(logits).argmax(-1)  # (B,)
        chosen = torch.where(done, torch.full_like(chosen, pad_id), chosen)
        tokens[:, t] = chosen
        new += int((~done).sum())
        steps = t + 1
        done = done | torch.isin(chosen, stops)
        if bool(done.all()) or t == max_new_tokens - 1:
            break
        logits = [s.step(chosen) for s in streams]
        passes += len(streams)
    seconds = time.perf_counter() - start
    out = []
    for row in tokens[:, :steps].tolist():
        cut = next((i for i, tok in enumerate(row) if tok in stops.tolist() or tok == pad_id), len(row))
        out.append(row[:cut])
    return Generation(tokens=out, steps=steps, forward_passes=passes, seconds=seconds, new_tokens=new)


def generate_batches(
    model: PreTrainedModel,
    views: Sequence[Sequence[Sequence[int]]],
    pad_id: int,
    eos_id: int | Sequence[int],
    batch_size: int,
    rule: StepRule = plain,
    max_new_tokens: int = 16,
) -> Generation:
    """`generate` over consecutive batches of `batch_size` examples (every view cut alike): the continuations in
    example order, the costs summed (steps: the most any batch ran)."""
    tokens: list[list[int]] = []
    steps, passes, seconds, new = 0, 0, 0.0, 0
    for lo in range(0, len(views[0]) if views else 0, batch_size):
        out = generate(model, [v[lo : lo + batch_size] for v in views], pad_id, eos_id, rule=rule, max_new_tokens=max_new_tokens)
        tokens += out.tokens
        steps, passes, seconds, new = max(steps, out.steps), passes + out.forward_passes, seconds + out.seconds, new + out.new_tokens
    return Generation(tokens=tokens, steps=steps, forward_passes=passes, seconds=seconds, new_tokens=new)
