"""Tiny language-model building blocks shared by methods: a trained subword tokenizer, small transformer encoders
built from a transformers config, and a plain seeded training loop.

train_wordpiece(texts) -> PreTrainedTokenizerFast -> tiny_bert_config(vocab_size=...) -> tiny_encoder / tiny_masked_lm
-> train_loop(parameters, loss_at_step, steps) -> loss history.

Causal LMs: train_byte_bpe(texts) -> tiny_llama_config -> tiny_causal_lm -> fit_causal_lm(model, examples) ->
checkpoint_writer / load_causal_lm (also real local checkpoints) -> generate(model, views, rule=StepRule) with one
DynamicCache per view. The lifecycle a training stage runs (tiny.py): params subclassing TinyLMConfig ->
build_or_load (from scratch, or model_path) -> fit_pools -> lm_stats; fit(parameters, step -> named losses) ->
TrainingReport for any objective. factworld: a synthetic world of entities, relations and values for knowledge / RAG tests.
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names: the package alone imports neither torch nor
# transformers (a stage that only builds a fact world does not pay for them)
__getattr__, __dir__, __all__ = attach(__name__, {
    "causal": ["IGNORE", "Example", "checkpoint_writer", "collate", "fit_causal_lm", "load_causal_lm", "target_loss",
               "tiny_causal_lm", "tiny_llama_config"],
    "factworld": ["RELATIONS", "FactWorld", "Relation", "contains_answer", "invented_names", "make_fact_world",
                  "normalize_answer"],
    "config": ["TinyLMConfig"],
    "generate": ["Generation", "StepRule", "generate", "generate_batches", "left_pad", "plain"],
    "models": ["load_encoder_and_tokenizer", "tiny_bert_config", "tiny_encoder", "tiny_masked_lm"],
    "tokenizer": ["BPE_SPECIAL_TOKENS", "SPECIAL_TOKENS", "train_byte_bpe", "train_wordpiece"],
    "tiny": ["build_or_load", "fit_pools", "lm_stats"],
    "train": ["TrainConfig", "TrainingReport", "fit", "train_loop"],
})
