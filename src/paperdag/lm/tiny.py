"""One tiny-LM lifecycle for every pipeline that trains one: build or load (TinyLMConfig.model_path) -> fit on
pools of (prompt, target) examples -> the stats every training stage reports.

    model, tokenizer = build_or_load(config, texts)          # BPE tokenizer learnt from texts + tiny Llama, or a
    report = fit_pools(model, pools, mixture, config, ...)   #   local checkpoint; a TrainingReport of named losses
    stats = {**own_numbers, **lm_stats(model, tokenizer, config, report.losses["loss"], seconds)}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import torch
from transformers import PreTrainedModel
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from paperdag.lm.causal import Example, fit_causal_lm, load_causal_lm, tiny_causal_lm, tiny_llama_config
from paperdag.lm.config import TinyLMConfig
from paperdag.lm.tokenizer import train_byte_bpe
from paperdag.lm.train import TrainConfig, TrainingReport


def build_or_load(
    config: TinyLMConfig,
    texts: Iterable[str],
    *,
    add_bos: bool = False,
    model_max_length: int = 512,
    special_tokens: Sequence[str] = (),
    max_positions: int | Callable[[PreTrainedTokenizerBase], int] = 256,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """With config.model_path: that local checkpoint and its tokenizer (texts unused; never the hub, no remote code).
    Else a byte-level BPE tokenizer learnt from `texts` and a tiny Llama of the config's sizes, initialised from
    torch's seed config.seed. `special_tokens` are added to either tokenizer (and the embeddings resized for them);
    `max_positions` may be computed from the new tokenizer (the longest encoded example, say)."""
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    if config.model_path:
        model, tokenizer = load_causal_lm(config.model_path)
        if special_tokens and tokenizer.add_tokens(list(special_tokens), special_tokens=True):
            model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
        return model, tokenizer
    tokenizer = train_byte_bpe(texts, config.vocab_size, add_bos=add_bos, model_max_length=model_max_length)
    if special_tokens:
        tokenizer.add_tokens(list(special_tokens), special_tokens=True)
    positions = max_positions(tokenizer) if callable(max_positions) else max_positions
    llama = tiny_llama_config(len(tokenizer), config.hidden_size, config.num_layers, config.num_heads, config.num_kv_heads,
                              config.intermediate_size, max_position_embeddings=positions,
                              pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                              eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(config.seed)
    return tiny_causal_lm(llama), tokenizer


def fit_pools(model: PreTrainedModel, pools: Mapping[str, Sequence[Example]], mixture: Mapping[str, float], config: TinyLMConfig,
              pad_id: int, description: str, steps: int | None = None, seed: int | None = None) -> TrainingReport:
    """fit_causal_lm with the config's optimiser settings (AdamW, warm-up, no weight decay): batches drawn from the
    pools by mixture weight, loss on the targets. `steps` and `seed` replace the config's (a curriculum phase)."""
    train = TrainConfig(steps=config.steps if steps is None else steps, lr=config.lr, warmup_steps=config.warmup_steps,
                        weight_decay=0.0, seed=config.seed if seed is None else seed)
    history = fit_causal_lm(model, pools, mixture, train, config.batch_size, pad_id, description=description)
    return TrainingReport(losses={"loss": history}, steps=len(history))


def lm_stats(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, config: TinyLMConfig, history: list[float],
             seconds: float) -> dict[str, object]:
    """What every tiny-LM training stage reports about its model: size, vocabulary, origin, loss history, time."""
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "model": config.model_path or "tiny Llama from scratch",
        "steps": config.steps,
        "final_loss": TrainingReport({"loss": history}).final(),
        "loss": history,
        "train_seconds": seconds,
    }
