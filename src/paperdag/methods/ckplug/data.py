"""The ckplug reproduction's data on a synthetic fact world: what the tiny LM trains on and what it is tested on.

Training rows (kind):
  closed_book  "Q: {question}\\nA:" -> memorised value, for every fact of every known entity
  reading      context + question -> the context's value, on reading entities never seen closed-book (learn to copy)
  consistent   context agreeing with memory -> the value, on known entities
  conflict     counterfactual context on a known entity -> the context value or the memorised one, half each
               (so plain RAG lands mid-range in memory recall, as for real LLMs)
Test sets:
  counterfactual  known facts (never used with a context in training) under a counterfactual context
  adaptive        a mix: correct contexts on fresh entities and on known ones, counterfactual (noisy) contexts on known ones
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, get_args

import polars as pl

from paperdag.lm.factworld import FactWorld, invented_names, make_fact_world

Kind = Literal["closed_book", "reading", "consistent", "conflict"]  # a training row's kind (a mixture key)
KINDS: tuple[str, ...] = get_args(Kind)
ConflictRule = Literal["paper", "code"]  # when a decoding step is a conflict (decoding.is_conflict)


def parametric_prompt(question: str) -> str:
    """The prompt without context (p_par's view)."""
    return f"Q: {question}\nA:"


def context_prompt(context: str, question: str) -> str:
    """The prompt with the retrieved context (p_ctx's view); it ends exactly like parametric_prompt."""
    return f"Context: {context}\n{parametric_prompt(question)}"


@dataclass(frozen=True)
class WorldSizes:
    known_entities: int  # memorised: every fact trained closed-book
    reading_entities: int  # seen only with contexts in training
    fresh_entities: int  # never seen in training (adaptive set's correct contexts)
    test_facts: int  # counterfactual test items (known facts held out of context training)
    adaptive_items: int  # adaptive mixed-set items
    adaptive_noisy_fraction: float  # share of the adaptive set with a counterfactual context
    distractors: int  # extra true statements about other entities in each context
    conflict_items: int  # conflict training rows
    consistent_items: int  # consistent-context training rows


def build(sizes: WorldSizes, seed: int) -> tuple[FactWorld, dict[str, list[str]], pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(world, entity groups, training rows, counterfactual test set, adaptive set)."""
    rng = random.Random(seed)
    world = make_fact_world(sizes.known_entities, seed)
    known = list(world.entities)
    reading = invented_names(sizes.reading_entities, rng, exclude=set(known) | set(world.relations["birthplace"].values))
    world.add_entities(reading, rng)
    fresh = invented_names(sizes.fresh_entities, rng, exclude=set(world.entities) | set(world.relations["birthplace"].values))
    world.add_entities(fresh, rng)
    relations = list(world.relations)
    known_facts = [(e, r) for e in known for r in relations]
    held = set(rng.sample(known_facts, min(len(known_facts) // 2, sizes.test_facts + sizes.adaptive_items)))
    test_facts = sorted(held)[: sizes.test_facts]
    adaptive_known = sorted(held)[sizes.test_facts :]
    contextual = [f for f in known_facts if f not in held]  # known facts that may appear with a context in training

    rows = []

    def add(kind: str, entity: str, relation: str, context: str, answer: str) -> None:
        template = rng.randrange(2)
        rows.append({"kind": kind, "entity": entity, "relation": relation, "question": world.question(entity, relation, template),
                     "context": context, "answer": answer})

    for e, r in known_facts:
        for template in range(2):
            rows.append({"kind": "closed_book", "entity": e, "relation": r, "question": world.question(e, r, template), "context": "",
                         "answer": world.value(e, r)})
    for e in reading:
        for r in relations:
            add("reading", e, r, world.context(e, r, world.value(e, r), rng, sizes.distractors), world.value(e, r))
    for e, r in (rng.choice(contextual) for _ in range(sizes.consistent_items)):
        add("consistent", e, r, world.context(e, r, world.value(e, r), rng, sizes.distractors), world.value(e, r))
    for i, (e, r) in enumerate(rng.choice(contextual) for _ in range(sizes.conflict_items)):
        fake = world.other_value(r, world.value(e, r), rng)
        add("conflict", e, r, world.context(e, r, fake, rng, sizes.distractors), fake if i % 2 == 0 else world.value(e, r))
    train = pl.DataFrame(rows)

    def item(entity: str, relation: str, context_value: str, group: str) -> dict[str, str]:
        return {"group": group, "entity": entity, "relation": relation, "question": world.question(entity, relation, rng.randrange(2)),
                "context": world.context(entity, relation, context_value, rng, sizes.distractors),
                "memory_answer": world.value(entity, relation), "context_answer": context_value}

    counterfactual = pl.DataFrame([item(e, r, world.other_value(r, world.value(e, r), rng), "counterfactual") for e, r in test_facts])
    n_noisy = round(sizes.adaptive_items * sizes.adaptive_noisy_fraction)
    n_fresh = (sizes.adaptive_items - n_noisy + 1) // 2
    adaptive = [item(e, r, world.other_value(r, world.value(e, r), rng), "noisy_known") for e, r in adaptive_known[:n_noisy]]
    adaptive += [item(e, r, world.value(e, r), "correct_known") for e, r in adaptive_known[n_noisy : sizes.adaptive_items - n_fresh]]
    fresh_facts = [(e, r) for e in fresh for r in relations]
    adaptive += [item(e, r, world.value(e, r), "correct_fresh") for e, r in rng.sample(fresh_facts, min(n_fresh, len(fresh_facts)))]
    adaptive_set = pl.DataFrame(adaptive).with_columns(
        pl.when(pl.col("group") == "noisy_known").then(pl.col("memory_answer")).otherwise(pl.col("context_answer")).alias("gold")
    )
    groups = {"known": known, "reading": reading, "fresh": fresh}
    return world, groups, train, counterfactual, adaptive_set


def training_texts(train_rows: pl.DataFrame) -> list[str]:
    """The texts the tokenizer learns from: every training row as context prompt and answer."""
    return [f"{context_prompt(r['context'], r['question'])} {r['answer']}" for r in train_rows.iter_rows(named=True)]


def encode(tokenizer, row: dict) -> tuple[list[int], list[int]]:
    """A training row as (prompt ids, target ids): the answer after a space, then eos."""
    prompt = context_prompt(row["context"], row["question"]) if row["context"] else parametric_prompt(row["question"])
    target = tokenizer(" " + row["answer"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return tokenizer(prompt)["input_ids"], target


def training_pools(tokenizer, train_rows: pl.DataFrame) -> dict[str, list[tuple[list[int], list[int]]]]:
    """One pool of encoded rows per kind (the training mixture draws a pool per batch)."""
    return {kind: [encode(tokenizer, r) for r in train_rows.filter(pl.col("kind") == kind).iter_rows(named=True)] for kind in KINDS}
