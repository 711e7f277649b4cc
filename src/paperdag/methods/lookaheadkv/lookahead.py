"""LookaheadKV's learned part: n lookahead embeddings P appended to the prompt and a LoRA on the query and key
projections that is active on the lookahead rows only (lookaheadkv.md):

    Q = [X; P] W_q + [0; P] dW_q,    K = [X; P] W_k + [0; P] dW_k,    dW = (alpha / r) B A

The language model stays frozen. Because the LoRA is masked to the lookahead rows and attention is causal, the
prompt's hidden states, keys and values (and so its KV cache) are exactly those of the plain model: one prefill
serves both the prompt's cache and the importance prediction s_LKV[j] = mean over lookahead rows i of A_LKV[i, j].
Training minimises, averaged over layers and heads, KL(normalised s_GT || normalised s_LKV).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import PreTrainedModel

from paperdag.methods.lookaheadkv.scores import RowAttention

TARGETS = ("q_proj", "k_proj")  # the projections the LoRA adapts (the paper's W_q and W_k)


class LookaheadKV(nn.Module):
    """P (n, d) and one low-rank pair (A, B) per adapted projection; `rows` is how many trailing rows of the current
    forward pass are lookahead rows (0: the LoRA is off, the model is the plain one)."""

    def __init__(self, hidden_size: int, shapes: list[tuple[int, int]], n_tokens: int = 32, rank: int = 8, alpha: float = 32.0,
                 init_std: float = 0.02) -> None:
        super().__init__()
        self.config = {"hidden_size": hidden_size, "shapes": [list(s) for s in shapes], "n_tokens": n_tokens, "rank": rank,
                       "alpha": alpha}
        self.n_tokens, self.scale = n_tokens, alpha / rank
        self.embeddings = nn.Parameter(torch.randn(n_tokens, hidden_size) * init_std)  # P
        self.lora_A = nn.ParameterList(nn.Parameter(torch.randn(rank, d_in) / d_in**0.5) for d_in, _ in shapes)
        self.lora_B = nn.ParameterList(nn.Parameter(torch.zeros(d_out, rank)) for _, d_out in shapes)  # dW = 0 at start
        self.rows = 0

    @classmethod
    def for_model(cls, model: PreTrainedModel, n_tokens: int, rank: int, alpha: float) -> LookaheadKV:
        shapes = [(m.in_features, m.out_features) for m in _targets(model)]
        std = float(model.get_input_embeddings().weight.detach().std())
        return cls(model.config.hidden_size, shapes, n_tokens, rank, alpha, init_std=std)

    def delta(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """(alpha / r) B A x for the trailing lookahead rows of x (B, R, d_in) -> (B, R, d_out)."""
        return self.scale * (x @ self.lora_A[index].T) @ self.lora_B[index].T

    @contextlib.contextmanager
    def active(self, rows: int) -> Iterator[None]:
        """Within the block, the LoRA applies to the last `rows` positions of every forward pass."""
        previous, self.rows = self.rows, rows
        try:
            yield
        finally:
            self.rows = previous

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().contiguous() for k, v in self.state_dict().items()}, path / "lookahead.safetensors")
        (path / "lookahead_config.json").write_text(json.dumps(self.config, indent=1))

    @classmethod
    def load(cls, path: Path) -> LookaheadKV:
        config_file = Path(path) / "lookahead_config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"{config_file} missing: {path} is not a saved LookaheadKV module (train_lookahead's output)")
        c = json.loads(config_file.read_text())
        module = cls(c["hidden_size"], [tuple(s) for s in c["shapes"]], c["n_tokens"], c["rank"], c["alpha"])
        module.load_state_dict(load_file(Path(path) / "lookahead.safetensors"))
        return module


class _MaskedLoRALinear(nn.Module):
    """A frozen projection W plus the owner's low-rank delta on its lookahead rows only."""

    def __init__(self, base: nn.Linear, owner: LookaheadKV, index: int) -> None:
        super().__init__()
        self.base, self.index = base, index
        object.__setattr__(self, "owner", owner)  # a reference, not a submodule: the model's state dict stays its own

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x (B, T, d_in)
        y = self.base(x)
        rows = self.owner.rows
        if rows == 0:
            return y
        return torch.cat([y[:, :-rows], y[:, -rows:] + self.owner.delta(self.index, x[:, -rows:])], dim=1)


def _targets(model: PreTrainedModel) -> list[nn.Linear]:
    found = [getattr(layer.self_attn, name) for layer in getattr(model, model.base_model_prefix).layers for name in TARGETS]
    return [m.base if isinstance(m, _MaskedLoRALinear) else m for m in found]


def attach(model: PreTrainedModel, module: LookaheadKV) -> PreTrainedModel:
    """Wrap every layer's q_proj and k_proj so that `module`'s LoRA applies on lookahead rows; freezes the model."""
    layers = getattr(model, model.base_model_prefix).layers
    if len(module.lora_A) != len(layers) * len(TARGETS):
        raise ValueError(f"LookaheadKV module has {len(module.lora_A)} LoRA pairs; the model needs {len(layers) * len(TARGETS)}")
    for p in model.parameters():
        p.requires_grad_(False)
    index = 0
    for layer in layers:
        for name in TARGETS:
            current = getattr(layer.self_attn, name)
            base = current.base if isinstance(current, _MaskedLoRALinear) else current
            setattr(layer.self_attn, name, _MaskedLoRALinear(base, module, index))
            index += 1
    return model


def lookahead_forward(model: PreTrainedModel, module: LookaheadKV, ids: torch.Tensor, cache=None, logits: bool = False):
    """One pass over [prompt; P] and s_LKV (B, L, H, T): per layer, the mean attention of the n lookahead rows to
    the T prompt positions (only those rows are scored, RowAttention). With `cache`, it holds the prompt and the
    lookahead KV afterwards; with `logits`, the output carries the logits at the last prompt position."""
    t = ids.shape[1]
    embeds = model.get_input_embeddings()(ids)  # (B, T, d)
    x = torch.cat([embeds, module.embeddings.to(embeds.dtype).expand(ids.shape[0], -1, -1)], dim=1)  # (B, T + n, d)
    with module.active(module.n_tokens), RowAttention(model, first_row=t, chunk=module.n_tokens) as rows:
        if logits:
            out = model(inputs_embeds=x, cache=cache, use_cache=cache is not None, logits_to_keep=slice(t - 1, t))
        else:
            out = getattr(model, model.base_model_prefix)(inputs_embeds=x, cache=cache, use_cache=cache is not None)
    return out, torch.stack([s[..., :t] / module.n_tokens for s in rows.sums], dim=1)


def normalised(scores: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Scores over prompt positions (..., T) scaled to sum to 1."""
    return scores / scores.sum(-1, keepdim=True).clamp(min=eps)


def kl_per_layer_head(gt: torch.Tensor, predicted: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """KL(normalised s_GT || normalised s_LKV) for every (example, layer, head): (..., T) x (..., T) -> (...)."""
    p, q = normalised(gt, eps), normalised(predicted, eps)
    return (p * (torch.log(p + eps) - torch.log(q + eps))).sum(-1)


def lookahead_loss(model: PreTrainedModel, module: LookaheadKV, ids: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """The training objective: mean over examples, layers and heads of KL(s_GT || s_LKV); gt (B, L, H, T)."""
    _, predicted = lookahead_forward(model, module, ids)  # (B, L, H, T)
    return kl_per_layer_head(gt, predicted).mean()
