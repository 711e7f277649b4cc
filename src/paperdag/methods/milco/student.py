"""A fresh MILCO student and the English teacher it starts from, loaded from their directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer, PreTrainedModel

from paperdag.lm import load_encoder_and_tokenizer, tiny_bert_config, tiny_encoder
from paperdag.methods.milco.config import ModelParams
from paperdag.methods.milco.model import Milco


def new_encoder(model: ModelParams, tokenizer_dir: Path, seed: int) -> tuple[PreTrainedModel, Any]:
    """A fresh encoder, tiny of the model's sizes on the source tokenizer (initialised from torch's seed `seed`), or
    its local checkpoint `model.encoder`; and its tokenizer. MILCO's students and the fair dense baseline start here."""
    torch.manual_seed(seed)
    if model.encoder:
        return load_encoder_and_tokenizer(model.encoder)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    return tiny_encoder(tiny_bert_config(len(tokenizer), model.hidden_size, model.num_layers, model.num_heads,
                                         model.intermediate_size, model.max_length)), tokenizer


def new_student(model: ModelParams, teacher: PreTrainedModel, tokenizer_dir: Path, seed: int, *, connector: bool, echo: bool) -> Milco:
    """The encoder (new_encoder), the connector, the teacher's MLM head copied."""
    encoder, tokenizer = new_encoder(model, tokenizer_dir, seed)
    return Milco.from_teacher(encoder, tokenizer, teacher, connector=connector, echo=echo)


def load_teacher(path: Path) -> tuple[PreTrainedModel, Any]:
    """The English SPLADE teacher (eval mode) and its tokenizer."""
    return AutoModelForMaskedLM.from_pretrained(path, local_files_only=True).eval(), AutoTokenizer.from_pretrained(path)
