"""The ckplug reproduction's data on a synthetic fact world: what the tiny LM trains on and what it is tested on.

Training rows (kind):
  closed_book  "Q: {question}\\nA:" -> memorised value, for every fact of every known entity
  reading      context + question -> the context's value, on reading entities never seen closed-book (learn to copy)
  consistent   context agreeing with memory -> the value, on known entities
  conflict     counterfactual context on a known entity -> the context value or the memorised one, half each
               (so plain RAG lands mid-range in memory recall, as for real LLMs)
Test sets:
  counterfactual  known facts (never used with a context in training) under a counterfactual context
  adaptive        per noise level of the sweep, adaptive_items items: a share `noise` with a counterfactual (noisy)
                  context on known facts, the rest correct (half on fresh entities, half on known facts)
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
TrainingArm = Literal["conflict_rows", "training_free"]  # the train matrix's arms: with the conflict rows, or without them
EntropyOver = Literal["head", "vocab"]  # what CK-PLUG's entropies are taken over (decoding.ckplug_step)


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
    adaptive_items: int  # adaptive mixed-set items per noise level
    adaptive_noise: tuple[float, ...]  # the sweep: share of each level's items with a counterfactual (noisy) context
    distractors: int  # extra true statements about other entities in each context
    conflict_items: int  # conflict training rows
    consistent_items: int  # consistent-context training rows
    reading_copies: int = 1  # rows per reading (entity, relation); > 1: each copy states its own random value, so
    # the context is the only source of the answer and no (entity, relation) -> value map can be memorised


def level_counts(items: int, noise: float) -> dict[str, int]:
    """One noise level's composition: noisy_known = round(items x noise); the correct rest split between fresh
    entities (half, rounded up) and known ones."""
    noisy = round(items * noise)
    fresh = (items - noisy + 1) // 2
    return {"noisy_known": noisy, "correct_known": items - noisy - fresh, "correct_fresh": fresh}


def _take(pool: list, count: int, rng: random.Random, what: str) -> list:
    """`count` distinct items of `pool`, or a ValueError naming what could not be delivered (contract, section 8)."""
    if count > len(pool):
        raise ValueError(f"ckplug data: {what}: {count} requested, only {len(pool)} available; lower the request or "
                         "enlarge the world (known_entities / fresh_entities)")
    return rng.sample(pool, count)


def build(sizes: WorldSizes, seed: int) -> tuple[FactWorld, dict[str, list[str]], pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(world, entity groups, training rows, counterfactual test set, adaptive set: adaptive_items per noise level,
    column `noise`). Every requested count is delivered or a ValueError says which cannot be."""
    rng = random.Random(seed)
    world = make_fact_world(sizes.known_entities, seed)
    known = list(world.entities)
    reading = invented_names(sizes.reading_entities, rng, exclude=set(known) | set(world.relations["birthplace"].values))
    world.add_entities(reading, rng)
    fresh = invented_names(sizes.fresh_entities, rng, exclude=set(world.entities) | set(world.relations["birthplace"].values))
    world.add_entities(fresh, rng)
    relations = list(world.relations)
    known_facts = [(e, r) for e in known for r in relations]
    levels = {noise: level_counts(sizes.adaptive_items, noise) for noise in sizes.adaptive_noise}
    # known facts never shown with a context in training: the counterfactual items, then a pool each noise level
    # draws its known items from (levels are separate test sets; within one, items are distinct)
    pool_size = max((c["noisy_known"] + c["correct_known"] for c in levels.values()), default=0)
    needs_context = sizes.conflict_items + sizes.consistent_items > 0
    held = _take(known_facts, sizes.test_facts + pool_size, rng,
                 "known facts held out of context training (test_facts + the largest noise level's known items)")
    test_facts, adaptive_pool = sorted(held[: sizes.test_facts]), sorted(held[sizes.test_facts :])
    held_set = set(held)
    contextual = [f for f in known_facts if f not in held_set]  # known facts that may appear with a context in training
    if needs_context and not contextual:
        raise ValueError("ckplug data: no known fact is left for the consistent / conflict training rows; lower test_facts "
                         "or adaptive_items, or raise known_entities")

    rows = []

    def add(kind: str, entity: str, relation: str, context: str, answer: str) -> None:
        template = rng.randrange(2)
        rows.append({"kind": kind, "entity": entity, "relation": relation, "question": world.question(entity, relation, template),
                     "context": context, "answer": answer})

    for e, r in known_facts:
        for template in range(2):
            rows.append({"kind": "closed_book", "entity": e, "relation": r, "question": world.question(e, r, template), "context": "",
                         "answer": world.value(e, r)})
    if sizes.reading_copies < 1:
        raise ValueError(f"ckplug data: reading_copies must be >= 1; got {sizes.reading_copies}")
    for e in reading:
        for r in relations:
            for _ in range(sizes.reading_copies):
                value = rng.choice(world.relations[r].values) if sizes.reading_copies > 1 else world.value(e, r)
                add("reading", e, r, world.context(e, r, value, rng, sizes.distractors), value)
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
    fresh_facts = [(e, r) for e in fresh for r in relations]
    adaptive = []
    for noise, counts in levels.items():
        known_items = _take(adaptive_pool, counts["noisy_known"] + counts["correct_known"], rng, f"adaptive known items at noise {noise}")
        level = [item(e, r, world.other_value(r, world.value(e, r), rng), "noisy_known") for e, r in known_items[: counts["noisy_known"]]]
        level += [item(e, r, world.value(e, r), "correct_known") for e, r in known_items[counts["noisy_known"] :]]
        level += [item(e, r, world.value(e, r), "correct_fresh")
                  for e, r in _take(fresh_facts, counts["correct_fresh"], rng, f"adaptive fresh-entity items at noise {noise}")]
        adaptive += [{"noise": float(noise), **x} for x in level]
    adaptive_set = pl.DataFrame(adaptive, schema_overrides={"noise": pl.Float64}).with_columns(
        pl.when(pl.col("group") == "noisy_known").then(pl.col("memory_answer")).otherwise(pl.col("context_answer")).alias("gold")
    )
    composition = adaptive_set.group_by("noise", "group").len()
    for noise, counts in levels.items():
        for group, count in counts.items():
            got = composition.filter((pl.col("noise") == noise) & (pl.col("group") == group))["len"].sum()
            if got != count:  # a guard on the code above: a silent short set is what issue 17 found
                raise ValueError(f"ckplug data: adaptive set at noise {noise} has {got} {group} items, {count} requested")
    groups = {"known": known, "reading": reading, "fresh": fresh}
    return world, groups, train, counterfactual, adaptive_set


def training_arm(train_rows: pl.DataFrame, mixture: dict[str, float], arm: str) -> tuple[pl.DataFrame, dict[str, float]]:
    """The rows and mixture one training arm trains on: conflict_rows all of them; training_free without the conflict
    rows (as conflict_items = 0: the LM never sees a context labelled against memory, so no entropy rise on conflicts
    is taught; the paper's method needs no such training)."""
    if arm not in get_args(TrainingArm):
        raise ValueError(f"training arm {arm!r}: choose one of {get_args(TrainingArm)}")
    if arm == "conflict_rows":
        return train_rows, dict(mixture)
    return train_rows.filter(pl.col("kind") != "conflict"), {k: w for k, w in mixture.items() if k != "conflict"}


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
