"""A fresh MILCO student and the English teacher it starts from, loaded from their directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer, PreTrainedModel

from paperdag.lm import load_encoder_and_tokenizer, tiny_bert_config, tiny_encoder
from paperdag.methods.milco.config import ModelParams
from paperdag.methods.milco.model import Milco


def new_student(model: ModelParams, teacher: PreTrainedModel, tokenizer_dir: Path, seed: int, *, connector: bool, echo: bool) -> Milco:
    """The encoder (tiny of the model's sizes, or its local checkpoint `model.encoder`), the connector, the
    teacher's MLM head copied."""
    torch.manual_seed(seed)
    if model.encoder:
        encoder, tokenizer = load_encoder_and_tokenizer(model.encoder)
    else:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        encoder = tiny_encoder(tiny_bert_config(len(tokenizer), model.hidden_size, model.num_layers, model.num_heads,
                                                model.intermediate_size, model.max_length))
    return Milco.from_teacher(encoder, tokenizer, teacher, connector=connector, echo=echo)


def load_teacher(path: Path) -> tuple[PreTrainedModel, Any]:
    """The English SPLADE teacher (eval mode) and its tokenizer."""
    return AutoModelForMaskedLM.from_pretrained(path, local_files_only=True).eval(), AutoTokenizer.from_pretrained(path)
