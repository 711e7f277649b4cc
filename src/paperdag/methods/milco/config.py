"""The model's params types: the encoder's sizes (or a local checkpoint) and a variant's ablation switches, read
from params.yaml milco.model and milco.variants.<variant>."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import PositiveInt


@dataclass(frozen=True)
class ModelParams:
    encoder: str  # "" = a tiny BERT trained from scratch on this world's text; else a local checkpoint directory
    src_vocab_size: PositiveInt
    en_vocab_size: PositiveInt
    hidden_size: PositiveInt
    teacher_hidden_size: PositiveInt
    num_layers: PositiveInt
    num_heads: PositiveInt
    intermediate_size: PositiveInt
    max_length: PositiveInt


@dataclass(frozen=True)
class VariantParams:
    variant: str  # name of the model variant (milco, no_echo, no_connector, no_align)
    connector: bool  # Z = GELU(W H); False: the English head reads H directly
    echo: bool  # LexEcho head
