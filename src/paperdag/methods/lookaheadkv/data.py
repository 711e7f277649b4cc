"""Long-context key-value retrieval tasks in three splits (lookaheadkv.md, "synthesize").

A context is a list of pairs `key value1 value2 ;` with distinct keys; every key and value symbol is one word, so
one token once the tokenizer has learned the words. The splits differ only in where the question stands:

    question_after   <pairs> ? kq :             -> v1 v2          the last prompt token already retrieves (SnapKV-friendly)
    question_before  ? kq : <pairs>             -> kq v1 v2       the prompt's suffix is list text: it carries no information
    two_hop          <pairs with `ka kb ;`> & ka :  -> kb v1 v2   the second key kb appears only in ka's value

The answer's value tokens are generated after the prompt's KV cache has been evicted: a method that dropped the pair
the answer lives in cannot produce it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, get_args

SPLITS = ("question_after", "question_before", "two_hop")
Kind = Literal["question_after", "question_before", "two_hop", "drill"]  # an LM training row's kind (a mixture key)
KINDS: tuple[str, ...] = get_args(Kind)
# the eviction methods compared (eviction.prepare runs each); here, without torch, for the stages that only read results
METHODS = ("full", "streaming", "h2o", "snapkv", "draft", "lookahead", "oracle")


@dataclass(frozen=True)
class TaskSizes:
    keys: int  # key symbols kaa, kab, ... (at most 676); a context draws `pairs` distinct ones
    values: int  # value symbols vaa, vab, ... (at most 676); a value is two of them
    pairs: int  # pairs per context

    def __post_init__(self) -> None:
        if self.pairs < 2:
            raise ValueError(f"pairs must be at least 2 (two_hop needs a link pair and its target); got {self.pairs}")
        if not 0 < self.values <= 676 or self.keys > 676:
            raise ValueError(f"keys and values are two-letter symbols: at most 676 each; got {self.keys}, {self.values}")
        if self.keys < self.pairs + 1:
            raise ValueError(f"keys ({self.keys}) must exceed pairs ({self.pairs}): keys in one context are distinct")


def _letters(i: int) -> str:
    """i as two letters (aa, ab, ..., zz): byte-level BPE splits letters from digits, so symbols are letters only."""
    return chr(97 + i // 26 % 26) + chr(97 + i % 26)


def key_word(i: int) -> str:
    return "k" + _letters(i)


def value_word(i: int) -> str:
    return "v" + _letters(i)


def vocabulary_text(texts: list[str], repeats: int = 4) -> list[str]:
    """Every distinct word of `texts`, space-prefixed, `repeats` times: what a byte-level BPE tokenizer needs to learn
    each key and value symbol as one token (prompts are encoded with a leading space, see encode)."""
    words = sorted({w for text in texts for w in text.split()})
    return [" " + " ".join(words)] * repeats


def make_example(split: str, sizes: TaskSizes, rng: random.Random) -> dict[str, str]:
    """One example of `split`: prompt text, gold response text (without eos), the queried key."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {SPLITS}")
    keys = [key_word(i) for i in rng.sample(range(sizes.keys), sizes.pairs + (split == "two_hop"))]
    values = [(value_word(rng.randrange(sizes.values)), value_word(rng.randrange(sizes.values))) for _ in range(sizes.pairs)]
    pairs = [f"{k} {a} {b} ;" for k, (a, b) in zip(keys, values)]
    q = rng.randrange(sizes.pairs)
    query, (a, b) = keys[q], values[q]
    if split == "question_after":
        return {"prompt": " ".join(pairs) + f" ? {query} :", "response": f"{a} {b}", "query": query}
    if split == "question_before":
        return {"prompt": f"? {query} : " + " ".join(pairs), "response": f"{query} {a} {b}", "query": query}
    link = keys[-1]  # a key of its own whose value is the queried pair's key: `link query ;`
    pairs.insert(rng.randrange(len(pairs) + 1), f"{link} {query} ;")
    return {"prompt": " ".join(pairs) + f" & {link} :", "response": f"{query} {a} {b}", "query": link}


def encode(tokenizer, example: dict[str, str]) -> tuple[list[int], list[int]]:
    """(prompt ids, gold response ids + eos). A leading space makes every word its own (space-prefixed) BPE token."""
    prompt = tokenizer(" " + example["prompt"])["input_ids"]
    response = tokenizer(" " + example["response"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt, response


def make_drill(sizes: TaskSizes, rng: random.Random, queries: int) -> dict[str, str]:
    """A language-model training example only (not a split): the pair list, then `queries` pairs recalled in
    random order (`? k v1 v2 ; k' v1' v2' ; ...`). Many retrievals per context give the tiny model a dense signal
    for learning to look pairs up (multi-query associative recall); the key it recalls is unpredictable, its value
    is not."""
    keys = [key_word(i) for i in rng.sample(range(sizes.keys), sizes.pairs)]
    values = [(value_word(rng.randrange(sizes.values)), value_word(rng.randrange(sizes.values))) for _ in range(sizes.pairs)]
    pairs = [f"{k} {a} {b} ;" for k, (a, b) in zip(keys, values)]
    asked = rng.sample(range(sizes.pairs), min(queries, sizes.pairs))
    return {"prompt": " ".join(pairs) + " ?", "response": " ".join(pairs[i] for i in asked), "query": ""}


def make_rows(keys: int, values: int, pairs: int, min_train_pairs: int, lm_examples: int, drill_examples: int,
              drill_queries: int, lookahead_examples: int, eval_examples: int, rng: random.Random) -> list[dict]:
    """Every example of every set: the LM's training rows (splits and recall drills, contexts of min_train_pairs to
    `pairs` pairs), the lookahead training rows and the evaluation rows (contexts of exactly `pairs` pairs)."""
    full = TaskSizes(keys, values, pairs)
    rows = []
    for split in (*SPLITS, "drill"):
        for _ in range(drill_examples if split == "drill" else lm_examples):
            sizes = TaskSizes(keys, values, rng.randint(min_train_pairs, pairs))
            made = make_drill(sizes, rng, drill_queries) if split == "drill" else make_example(split, sizes, rng)
            rows.append({"set": "lm", "split": split, "pairs": sizes.pairs, **made})
    rows += [{"set": name, "split": s, "pairs": pairs, **make_example(s, full, rng)}
             for name, n in (("lookahead", lookahead_examples), ("eval", eval_examples)) for s in SPLITS for _ in range(n)]
    return rows
