"""Tiny causal LMs built from a transformers config (Llama by default), trained from scratch on (prompt, target)
examples, saved as save_pretrained directories; the same loader reads a real local Hugging Face checkpoint.

tiny_llama_config(vocab_size) -> tiny_causal_lm -> fit_causal_lm(model, examples, TrainConfig) -> loss history
-> checkpoint_writer(model, tokenizer) (a DVC directory output) -> load_causal_lm(path).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedModel
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from paperdag.lm.train import TrainConfig, train_loop

IGNORE = -100  # label of a position that carries no loss (prompt, padding)
Example = tuple[list[int], list[int]]  # (prompt token ids, target token ids): the loss falls on the target only


def tiny_llama_config(
    vocab_size: int,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 512,
    max_position_embeddings: int = 256,
    pad_token_id: int = 0,
    bos_token_id: int = 1,
    eos_token_id: int = 2,
    attn_implementation: str = "sdpa",
) -> LlamaConfig:
    """A Llama config of the given sizes (grouped-query attention: num_heads a multiple of num_kv_heads).

    attn_implementation="eager" is needed when attention weights are read (output_attentions=True): sdpa returns none.
    """
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} must be a multiple of num_heads {num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads {num_heads} must be a multiple of num_kv_heads {num_kv_heads}")
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=pad_token_id,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        tie_word_embeddings=True,
        attn_implementation=attn_implementation,
    )


def tiny_causal_lm(config: LlamaConfig) -> LlamaForCausalLM:
    """A randomly initialised causal LM (Llama) of the config's sizes."""
    return LlamaForCausalLM(config)


def load_causal_lm(path: str | Path, attn_implementation: str | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A local checkpoint directory's causal LM and tokenizer (any architecture AutoModelForCausalLM knows), without
    network access or remote code. Works for this package's own checkpoints and for real Hugging Face ones."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    where = Path(path)
    if not where.is_dir():
        raise FileNotFoundError(f"causal LM checkpoint {path} is not a local directory (a save_pretrained output is expected)")
    extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
    model = AutoModelForCausalLM.from_pretrained(where, local_files_only=True, trust_remote_code=False, **extra)
    tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=True, trust_remote_code=False)
    if tokenizer.pad_token_id is None:  # many real checkpoints ship without a pad token; generation masks it anyway
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model.eval(), tokenizer


def checkpoint_writer(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> Callable[[Path], None]:
    """A writer(path) saving model and tokenizer into one save_pretrained directory (the engine's directory output)."""

    def write(path: Path) -> None:
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)

    return write


def collate(examples: Sequence[Example], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded input_ids, attention_mask and labels (IGNORE on prompt and padding) for a batch of examples."""
    length = max(len(p) + len(t) for p, t in examples)
    ids = torch.full((len(examples), length), pad_id, dtype=torch.long)  # (B, T)
    labels = torch.full((len(examples), length), IGNORE, dtype=torch.long)  # (B, T)
    mask = torch.zeros((len(examples), length), dtype=torch.long)  # (B, T)
    for row, (prompt, target) in enumerate(examples):
        n, m = len(prompt), len(target)
        ids[row, : n + m] = torch.tensor(prompt + target)
        labels[row, n : n + m] = torch.tensor(target)
        mask[row, : n + m] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def target_loss(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy over the target positions of a collated batch.

    The output head runs on the positions that predict a target token only (a few per row): with short targets after
    long prompts, that is most of the cost of a tiny model's step saved.
    """
    base = getattr(model, model.base_model_prefix)
    states = base(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state  # (B, T, C)
    targets = batch["labels"][:, 1:]  # position t predicts token t + 1
    keep = targets != IGNORE  # (B, T - 1)
    logits = model.get_output_embeddings()(states[:, :-1][keep])  # (N, V) for the N target tokens
    return torch.nn.functional.cross_entropy(logits.float(), targets[keep])


def fit_causal_lm(
    model: PreTrainedModel,
    pools: Mapping[str, Sequence[Example]],
    mixture: Mapping[str, float],
    config: TrainConfig,
    batch_size: int,
    pad_id: int,
    description: str = "causal LM",
    progress: bool = True,
) -> list[float]:
    """Train on batches each drawn (with replacement) from one pool of examples, the pool chosen by `mixture` weight;
    the loss on targets only. One pool per batch keeps rows of similar length together (little padding). Returns the
    loss of every step; seeded by config.seed (pool and batch draws, torch)."""
    names = [name for name in mixture if mixture[name] > 0]
    missing = [name for name in names if not pools.get(name)]
    if not names or missing:
        raise ValueError(f"fit_causal_lm: empty or missing pools {missing or list(mixture)}; every weighted pool needs examples")
    weights = [mixture[name] for name in names]
    draw = random.Random(config.seed)
    model.train()

    def loss_at_step(step: int) -> torch.Tensor:
        pool = pools[draw.choices(names, weights=weights)[0]]
        return target_loss(model, collate(draw.choices(pool, k=batch_size), pad_id))

    history = train_loop(model.parameters(), loss_at_step, config, description=description, progress=progress)
    model.eval()
    return history
