"""TokMem's knobs, as the params types its stages extend (light: pydantic, no torch): the memory and calls tracks'
training, and the baselines' (each trained with the same steps per round and tested after every round)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field, PositiveFloat, PositiveInt


@dataclass(frozen=True, kw_only=True)
class MemorySettings:
    steps_per_round: PositiveInt  # memory track: optimiser steps per round
    batch_size: PositiveInt
    lr: PositiveFloat
    tool_steps_per_round: PositiveInt  # calls track
    tool_lr: PositiveFloat
    tool_lora: bool  # the calls track's first round also trains a q/v LoRA (frozen afterwards)
    lora_r: PositiveInt
    lora_alpha: PositiveInt
    renormalise: bool  # new rows rescaled to the inactive rows' mean norm after every step
    mask_backbone_procedures: bool  # the backbone's own procedure tokens left out of the routing softmax
    max_new_tokens: PositiveInt
    max_call_tokens: PositiveInt
    eval_batch_size: PositiveInt
    seed: int  # each round's seed is seed + round (calls track: seed + 100 + round)


@dataclass(frozen=True, kw_only=True)
class BaselineSettings:
    encoder: str  # the retriever of RAG and prompt tuning (paperdag.retrieval.load_encoder)
    steps_per_round: PositiveInt
    batch_size: PositiveInt
    prompt_tokens: PositiveInt  # prompt tuning: soft-prompt rows per procedure
    prompt_lr: PositiveFloat
    lora_r: PositiveInt
    lora_alpha: PositiveInt
    lora_targets: Annotated[list[str], Field(min_length=1)]  # the backbone's linear layers the LoRA adapts
    lora_lrs: Annotated[list[PositiveFloat], Field(min_length=1)]  # candidates, the best on a round-1 validation split
    validation_queries: PositiveInt  # round-1 training queries per procedure held out to choose the LoRA rate
    replay_fraction: Annotated[float, Field(ge=0, le=1)]  # lora_replay: share of each batch from earlier rounds
    tool_steps_per_round: PositiveInt  # calls track: steps per tool round (TokMem's: train_memory.tool_steps_per_round)
    tool_lora_lrs: Annotated[list[PositiveFloat], Field(min_length=1)]  # calls-track LoRA rates tried
    rag_top_ks: Annotated[list[PositiveInt], Field(min_length=1)]  # calls-track RAG: descriptions in the prompt, tried
    tool_validation_calls: PositiveInt  # training calls held out to choose those two (scored after the last round)
    max_new_tokens: PositiveInt
    max_call_tokens: PositiveInt  # calls track: generation length cap (named calls)
    eval_batch_size: PositiveInt
    seed: int  # each round's seed is seed + round (calls track: seed + 100 + round)


def budget(s: MemorySettings | BaselineSettings) -> dict[str, int]:
    """The training budget a method's settings give each round (steps, batch), compared across TokMem and its
    baselines by metrics.headline: the comparisons hold only at the same budget."""
    return {"steps_per_round": s.steps_per_round, "tool_steps_per_round": s.tool_steps_per_round, "batch_size": s.batch_size}
