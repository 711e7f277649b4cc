"""Tiny language-model building blocks shared by methods: a trained subword tokenizer, small transformer encoders
built from a transformers config, and a plain seeded training loop.

train_wordpiece(texts) -> PreTrainedTokenizerFast -> tiny_bert_config(vocab_size=...) -> tiny_encoder / tiny_masked_lm
-> train_loop(parameters, loss_at_step, steps) -> loss history.
"""

from __future__ import annotations

from paperdag.lm.models import load_encoder_and_tokenizer, tiny_bert_config, tiny_encoder, tiny_masked_lm
from paperdag.lm.tokenizer import SPECIAL_TOKENS, train_wordpiece
from paperdag.lm.train import TrainConfig, train_loop

__all__ = [
    "SPECIAL_TOKENS",
    "TrainConfig",
    "load_encoder_and_tokenizer",
    "tiny_bert_config",
    "tiny_encoder",
    "tiny_masked_lm",
    "train_loop",
    "train_wordpiece",
]
