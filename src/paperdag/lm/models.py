"""Small transformer encoders from a transformers config (sizes as arguments), and loading a real local checkpoint."""

from __future__ import annotations

import os
from pathlib import Path

from transformers import AutoModel, AutoTokenizer, BertConfig, BertForMaskedLM, BertModel, PreTrainedModel
from transformers.tokenization_utils_base import PreTrainedTokenizerBase


def tiny_bert_config(
    vocab_size: int,
    hidden_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int = 512,
    max_position_embeddings: int = 128,
    dropout: float = 0.1,
    pad_token_id: int = 0,
) -> BertConfig:
    """A BERT config of the given sizes; hidden_size must be a multiple of num_heads."""
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} must be a multiple of num_heads {num_heads}")
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position_embeddings,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        pad_token_id=pad_token_id,
    )


def tiny_encoder(config: BertConfig) -> BertModel:
    """A randomly initialised BERT encoder (token states only, no pooler)."""
    return BertModel(config, add_pooling_layer=False)


def tiny_masked_lm(config: BertConfig) -> BertForMaskedLM:
    """A randomly initialised BERT with its masked-language-model head (logits over the vocabulary)."""
    return BertForMaskedLM(config)


def load_encoder_and_tokenizer(path: str | Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A local checkpoint directory's encoder (AutoModel, token states) and tokenizer, without network access."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    where = Path(path)
    if not where.is_dir():
        raise FileNotFoundError(f"encoder checkpoint {path} is not a local directory (a save_pretrained output is expected)")
    model = AutoModel.from_pretrained(where, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=True)
    return model, tokenizer
