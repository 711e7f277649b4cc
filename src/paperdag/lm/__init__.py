"""Tiny language-model building blocks shared by methods: a trained subword tokenizer, small transformer encoders
built from a transformers config, and a plain seeded training loop.

train_wordpiece(texts) -> PreTrainedTokenizerFast -> tiny_bert_config(vocab_size=...) -> tiny_encoder / tiny_masked_lm
-> train_loop(parameters, loss_at_step, steps) -> loss history.

Causal LMs: train_byte_bpe(texts) -> tiny_llama_config -> tiny_causal_lm -> fit_causal_lm(model, examples) ->
checkpoint_writer / load_causal_lm (also real local checkpoints) -> generate(model, views, rule=StepRule) with one
DynamicCache per view. factworld: a synthetic world of entities, relations and values for knowledge / RAG tests.
"""

from __future__ import annotations

from paperdag.lm.causal import (
    IGNORE,
    Example,
    checkpoint_writer,
    collate,
    fit_causal_lm,
    load_causal_lm,
    target_loss,
    tiny_causal_lm,
    tiny_llama_config,
)
from paperdag.lm.factworld import RELATIONS, FactWorld, Relation, contains_answer, invented_names, make_fact_world, normalize_answer
from paperdag.lm.generate import Generation, StepRule, generate, left_pad, plain
from paperdag.lm.models import load_encoder_and_tokenizer, tiny_bert_config, tiny_encoder, tiny_masked_lm
from paperdag.lm.tokenizer import BPE_SPECIAL_TOKENS, SPECIAL_TOKENS, train_byte_bpe, train_wordpiece
from paperdag.lm.train import TrainConfig, train_loop

__all__ = [
    "BPE_SPECIAL_TOKENS",
    "IGNORE",
    "RELATIONS",
    "SPECIAL_TOKENS",
    "Example",
    "FactWorld",
    "Generation",
    "Relation",
    "StepRule",
    "checkpoint_writer",
    "collate",
    "contains_answer",
    "fit_causal_lm",
    "generate",
    "invented_names",
    "left_pad",
    "load_causal_lm",
    "make_fact_world",
    "normalize_answer",
    "plain",
    "target_loss",
    "tiny_causal_lm",
    "tiny_llama_config",
    "train_byte_bpe",
    "TrainConfig",
    "load_encoder_and_tokenizer",
    "tiny_bert_config",
    "tiny_encoder",
    "tiny_masked_lm",
    "train_loop",
    "train_wordpiece",
]
