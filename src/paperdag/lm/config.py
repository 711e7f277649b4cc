"""TinyLMConfig: the params every tiny-LM training stage shares (sizes, optimiser, model_path), as a base of the
stage's own params dataclass, so params.yaml keeps one flat section per stage. Light: pydantic, no torch."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import NonNegativeInt, PositiveFloat, PositiveInt


@dataclass(frozen=True, kw_only=True)
class TinyLMConfig:
    """A tiny causal LM trained from scratch, or a real local checkpoint fine-tuned (paperdag.lm.tiny).

    A stage's params subclass it (`@dataclass(frozen=True) class TrainParams(TinyLMConfig): mixture: ...`); the
    engine builds the subclass from the stage's params.yaml section and checks every bound here when it loads."""

    model_path: str = ""  # "": a tiny Llama from scratch; else a local save_pretrained directory (never the hub)
    vocab_size: PositiveInt  # upper bound of the byte-level BPE vocabulary learnt from the training texts
    hidden_size: PositiveInt  # a multiple of num_heads
    num_layers: PositiveInt
    num_heads: PositiveInt  # a multiple of num_kv_heads (grouped-query attention)
    num_kv_heads: PositiveInt
    intermediate_size: PositiveInt
    steps: PositiveInt  # optimiser steps
    batch_size: PositiveInt
    lr: PositiveFloat  # peak learning rate (AdamW, linear warm-up then linear decay, no weight decay)
    warmup_steps: NonNegativeInt
    threads: PositiveInt | None = None  # torch threads of the stage (None: as the runner set them)
    seed: int  # filled by the engine: the stage's own seed

    def __post_init__(self) -> None:
        # ValueError(field, why): the engine names that field's params.yaml key (paperdag.engine.params.build)
        if self.hidden_size % self.num_heads:
            raise ValueError("hidden_size", f"must be a multiple of num_heads = {self.num_heads}; got {self.hidden_size}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_heads", f"must be a multiple of num_kv_heads = {self.num_kv_heads}; got {self.num_heads}")
