"""The LM the lookup task trains: a word-level tokenizer over the task's closed vocabulary (one token per key, value,
filler and separator word, nothing else) and a tiny Llama of TinyLMConfig's sizes; or model_path's checkpoint.

Why not paperdag.lm's byte-level BPE: its 256-byte alphabet and merges leave ~260 rows of the tied embedding that no
example ever uses, and on this task they stalled the induction heads the lookup is made of (a random-stretch copy
drill on 64 symbols, 2 layers, width 64: solved in ~100 steps of batch 64 with a 67-row vocabulary, unsolved after
800 with 330 rows of which the same 64 are used; probes in params.yaml's lookaheadkv comment). A word-level vocabulary
has exactly the rows the task uses.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedModel, PreTrainedTokenizerFast
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from paperdag.lm import TinyLMConfig, build_or_load, tiny_causal_lm, tiny_llama_config

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")  # ids 0, 1, 2 (tiny_llama_config's pad / bos / eos), 3


def word_tokenizer(words: Iterable[str], model_max_length: int = 8192) -> PreTrainedTokenizerFast:
    """A whitespace-split word-level tokenizer: the special tokens, then the distinct `words` sorted (so the same
    words give the same ids); every encoding starts with <bos>, <eos> is appended by the caller (data.encode).
    Saved and reloaded like any transformers tokenizer (tokenizer.json; AutoTokenizer)."""
    vocab = [*SPECIAL_TOKENS, *sorted(set(words) - set(SPECIAL_TOKENS))]
    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(vocab)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A $B:1", special_tokens=[("<bos>", 1)])
    pad, bos, eos, unk = SPECIAL_TOKENS
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=pad, bos_token=bos, eos_token=eos, unk_token=unk,
                                   model_max_length=model_max_length)


def build_lm(config: TinyLMConfig, words: Iterable[str], max_positions: int) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """With config.model_path: that local checkpoint and its tokenizer (paperdag.lm.build_or_load; `words` unused).
    Else the word-level tokenizer of `words` and a tiny Llama of the config's sizes initialised from torch's seed
    config.seed, its positions up to max_positions."""
    if config.model_path:
        return build_or_load(config, [], max_positions=max_positions)
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    tokenizer = word_tokenizer(words)
    if len(tokenizer) > config.vocab_size:
        raise ValueError(f"lookaheadkv train_lm: the task's {len(tokenizer)} words (special tokens included) exceed vocab_size = "
                         f"{config.vocab_size}: raise train_lm.vocab_size")
    llama = tiny_llama_config(len(tokenizer), config.hidden_size, config.num_layers, config.num_heads, config.num_kv_heads,
                              config.intermediate_size, max_position_embeddings=max_positions,
                              pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                              eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(config.seed)
    return tiny_causal_lm(llama), tokenizer
