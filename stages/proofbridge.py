"""Glue between the paperdag engine and the proofbridge method: synthesize -> train_embed (x replicate) -> train_gen
(x replicate) -> repair (x replicate) -> evaluate. The formal language and its checker, the z3 judge, the world, the
joint embedding, the prompts and repair chains, the metrics and figures live in paperdag.methods.proofbridge; the
tiny LM in paperdag.lm; MiniLM in paperdag.retrieval; intervals in paperdag.stats."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import polars as pl
from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from paperdag.engine import Item
from paperdag.lm import TinyLMConfig
from paperdag.methods.proofbridge import (ARMS, assign_families, check_world, generation_scores, headline, make_split, pass_figure,
                                          recall_figure, retrieval_scores, theorems_table)

Unit = Annotated[float, Field(ge=0, le=1)]

# torch, transformers, z3 and the encoder are imported inside the stage functions: importing this module stays cheap.


@dataclass(frozen=True)
class SynthesizeParams:
    per_family: dict[str, PositiveInt]  # theorems per family of each split: train, val, test
    test_families: list[str]  # held-out families (skeleton:direction), never trained on
    val_families: list[str]  # validation families: learnability check, temperature and frozen-view tuning
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Theorems of every family with formal statement, proof, proof states and NL, split by family; counts met or raise."""
    families = assign_families(params.test_families, params.val_families)
    table = theorems_table(make_split(families, params.per_family, random.Random(params.seed)))
    check_world(table, params.per_family, families, "synthesize")
    return {"theorems": table}


@dataclass(frozen=True)
class TrainEmbedParams:
    encoder: str  # NL encoder (packaged MiniLM or a local sentence-transformers directory)
    nl_top_layers: PositiveInt  # MiniLM layers that train (the rest frozen)
    formal_hidden: PositiveInt  # byte-level formal encoder width
    formal_layers: PositiveInt
    formal_heads: PositiveInt
    formal_top_layers: PositiveInt  # formal encoder layers that train in the joint phase
    max_bytes: PositiveInt  # formal text cut (bytes)
    mlm_steps: PositiveInt  # masked-byte pretraining of the formal encoder on training theorems
    mlm_batch: PositiveInt
    mlm_lr: PositiveFloat
    steps: PositiveInt  # InfoNCE steps
    batch: PositiveInt  # pairs per step (in-batch negatives)
    lr: PositiveFloat
    tau: PositiveFloat  # InfoNCE temperature (paper: 0.07)
    proj_hidden: PositiveInt
    proj_dim: PositiveInt
    dropout: Unit
    context_k: PositiveInt  # retrieved examples per theorem for generation (paper: 5)
    threads: PositiveInt
    item: Item
    seed: int


def train_embed(params: TrainEmbedParams, theorems: pl.DataFrame) -> dict[str, object]:
    """The joint embedding trained on the training theorems; gold ranks of the joint embedding and of frozen MiniLM
    (its formal view chosen on val) for the val and test queries among their split's theorems; the top-k training
    theorems retrieved for every theorem (a training theorem: from other families only)."""
    import torch

    from paperdag.methods.proofbridge.embed import byte_ids, embed_rows, gold_ranks, pretrain_formal, side, top_k, train_joint
    from paperdag.retrieval import encode, load_encoder

    torch.set_num_threads(params.threads)
    torch.manual_seed(params.seed)
    p, start = params, time.perf_counter()
    rows = theorems.sort("id")
    split = rows["split"].to_numpy()
    train_rows = [i for i in range(rows.height) if split[i] == "train"]
    st = load_encoder(p.encoder)
    bert = st[0].auto_model
    tok = st.tokenizer(rows["nl"].to_list(), padding=True, truncation=True, max_length=128, return_tensors="pt")
    nl = side(bert, bert.encoder.layer, tok["input_ids"], tok["attention_mask"], p.nl_top_layers, p.proj_hidden, p.proj_dim, p.dropout)
    formal_texts = rows["formal_states"].to_list()
    encoder, mlm_loss = pretrain_formal([formal_texts[i] for i in train_rows], p.formal_hidden, p.formal_layers, p.formal_heads,
                                        p.max_bytes, p.mlm_steps, p.mlm_batch, p.mlm_lr, p.seed)
    ids, mask = byte_ids(formal_texts, p.max_bytes)
    fl = side(encoder, encoder.encoder.layer, ids, mask, p.formal_top_layers, p.proj_hidden, p.proj_dim, p.dropout)
    loss = train_joint(nl, fl, train_rows, p.steps, p.batch, p.lr, p.tau, p.seed)
    everything = list(range(rows.height))
    z_nl, z_fl = embed_rows(nl, everything), embed_rows(fl, everything)

    ranks, val_frozen = [], {}
    views = ("statement", "formal_states", "formal")
    for part in ("val", "test"):
        sel = [i for i in everything if split[i] == part]
        ids_part = rows["id"].to_numpy()[sel]
        ranks.append(pl.DataFrame({"split": part, "retriever": "joint", "theorem": ids_part, "gold_rank": gold_ranks(z_nl[sel], z_fl[sel])}))
        q = encode(st, [rows["nl"][i] for i in sel], progress=False)
        frozen = {v: gold_ranks(q, encode(st, [rows[v][i] for i in sel], progress=False)) for v in views}
        if part == "val":
            val_frozen = {v: float((r == 1).mean()) for v, r in frozen.items()}
            view = max(views, key=lambda v: (val_frozen[v], -views.index(v)))
        ranks.append(pl.DataFrame({"split": part, "retriever": "frozen", "theorem": ids_part, "gold_rank": frozen[view]}))

    family = rows["family"].to_numpy()
    exclude = family[:, None] == family[np.array(train_rows)][None, :]  # a training theorem never sees its own family
    exclude[split != "train"] = False  # val / test families are not in the corpus anyway
    order = top_k(z_nl, z_fl[train_rows], p.context_k, exclude)
    contexts = pl.DataFrame({"id": rows["id"], "examples": [[int(rows["id"][train_rows[j]]) for j in o] for o in order]},
                            schema={"id": pl.Int64, "examples": pl.List(pl.Int64)})
    weights = {f"nl.{k}": v for k, v in nl.modules().state_dict().items()} | {f"formal.{k}": v for k, v in fl.modules().state_dict().items()}
    weights |= {f"formal_encoder.{k}": v for k, v in encoder.state_dict().items()}
    ranks_table = pl.concat(ranks)
    stats = {"replicate": p.item.replicate, "frozen_view": view, "frozen_val_recall1": val_frozen,
             "joint_val_recall1": float((ranks_table.filter((pl.col("split") == "val") & (pl.col("retriever") == "joint"))["gold_rank"] == 1).mean()),
             "mlm_loss": mlm_loss, "loss": loss, "seconds": time.perf_counter() - start}
    return {"embedding": {k: v.detach().contiguous() for k, v in weights.items()}, "retrieval": ranks_table, "contexts": contexts,
            "embed_stats": stats}


@dataclass(frozen=True)
class TrainGenParams(TinyLMConfig):
    mixture: dict[str, NonNegativeFloat]  # share of steps per prompt kind (gen.ARMS)
    near_misses: PositiveInt  # corrupted attempts per training theorem (repair pools)
    max_new_tokens: PositiveInt
    holdout_per_family: PositiveInt  # training theorems per training family kept out of the generator's training: the learnability check
    min_holdout_type_correct: Unit  # greedy type correctness without retrieval on those held-out theorems the model must reach
    item: Item


def _formal_of(theorems: pl.DataFrame) -> dict[int, str]:
    return dict(zip(theorems["id"].to_list(), theorems["formal"].to_list(), strict=True))


def _contexts(theorems: pl.DataFrame, contexts: pl.DataFrame) -> dict[int, list[str]]:
    """Each theorem's retrieved examples as the generator sees them: their proofs (the structure retrieval supplies;
    the statement is translated from the NL itself)."""
    proof = {i: f.split("\n", 1)[1] for i, f in _formal_of(theorems).items()}
    return {i: [proof[j] for j in ex] for i, ex in zip(contexts["id"].to_list(), contexts["examples"].to_list(), strict=True)}


def _greedy_scores(model, tokenizer, rows: list[dict], contexts: dict[int, list[str]], retrieval: bool, max_new_tokens: int) -> dict[str, float]:
    from paperdag.methods.proofbridge.equiv import equivalent
    from paperdag.methods.proofbridge.gen import run_chains, sampler

    chains = run_chains(sampler(model, tokenizer, 0.0, 0, 64, max_new_tokens), [r["nl"] for r in rows],
                        [contexts[r["id"]] if retrieval else [] for r in rows], 1, 0)
    finals = [c[0][-1] for c in chains]
    typ = [a.error is None for a in finals]
    sem = [t and equivalent(a.text.split("\n")[0], r["statement"]) for a, t, r in zip(finals, typ, rows)]
    return {"type_correct": float(np.mean(typ)), "semantic": float(np.mean(sem))}


def _holdout(theorems: pl.DataFrame, per_family: int) -> tuple[list[dict], list[dict]]:
    """The generator's training theorems and the held-out ones: the first `per_family` (by id) of every training
    family, which the generator never trains on (the retrieval corpus keeps them)."""
    train = theorems.filter(pl.col("split") == "train").sort("id").with_columns(pl.int_range(pl.len()).over("family").alias("_k"))
    short = train.group_by("family").len().filter(pl.col("len") <= per_family)
    if short.height:
        raise ValueError(f"proofbridge train_gen: train_gen.holdout_per_family = {per_family} leaves no training theorem in "
                         f"families {sorted(short['family'])}; lower it or raise synthesize.per_family.train")
    held = pl.col("_k") < per_family
    return train.filter(~held).drop("_k").to_dicts(), train.filter(held).drop("_k").to_dicts()


def train_gen(params: TrainGenParams, theorems: pl.DataFrame, contexts: pl.DataFrame) -> dict[str, object]:
    """A byte-level BPE tokenizer and a tiny Llama trained on the training theorems, with and without their retrieved
    examples, and on near-miss repairs; greedy type correctness on held-out theorems of the training families checked
    (learnability: it learned the formal language), greedy scores on the unseen val families recorded."""
    from paperdag.lm import build_or_load, checkpoint_writer, fit_pools, lm_stats
    from paperdag.methods.proofbridge.gen import near_misses, prompt, target, training_pools

    start = time.perf_counter()
    ctx = _contexts(theorems, contexts)
    train, holdout = _holdout(theorems, params.holdout_per_family)
    draw = random.Random(params.seed)
    near = {r["id"]: near_misses(r["formal"], draw, params.near_misses) for r in train}
    texts = [prompt(r["nl"]) + target(r["formal"]) for r in train] + [e for r in train for bad, err in near[r["id"]] for e in (bad, err)]
    model, tokenizer = build_or_load(params, texts, max_positions=1024, model_max_length=1024)
    pools = training_pools(tokenizer, train, ctx, near)
    longest = max(len(p) + len(t) for pool in pools.values() for p, t in pool)
    if longest > model.config.max_position_embeddings:
        raise ValueError(f"proofbridge train_gen: an example has {longest} tokens > {model.config.max_position_embeddings} positions")
    report = fit_pools(model, pools, params.mixture, params, tokenizer.pad_token_id, f"proofbridge train_gen {params.item}")
    val = theorems.filter(pl.col("split") == "val").sort("id").to_dicts()
    scores = {arm: _greedy_scores(model, tokenizer, val, ctx, arm == "rag", params.max_new_tokens) for arm in ("plain", "rag")}
    held = _greedy_scores(model, tokenizer, holdout, ctx, False, params.max_new_tokens)
    if held["type_correct"] < params.min_holdout_type_correct:
        raise ValueError(f"proofbridge train_gen {params.item}: greedy type correctness without retrieval on {len(holdout)} held-out "
                         f"theorems of the training families is {held['type_correct']:.3f} < train_gen.min_holdout_type_correct = "
                         f"{params.min_holdout_type_correct}: the generator did not learn the formal language; raise train_gen.steps "
                         "or the model size")
    stats = {"replicate": params.item.replicate, "val_greedy": scores, "holdout_greedy": held, "holdout": len(holdout),
             "longest_example": longest,
             "pool_sizes": {k: len(v) for k, v in pools.items()},
             **lm_stats(model, tokenizer, params, report.losses["loss"], time.perf_counter() - start)}
    return {"generator": checkpoint_writer(model, tokenizer), "gen_stats": stats}


@dataclass(frozen=True)
class RepairParams:
    samples: PositiveInt  # n samples per theorem and arm (pass@k for k <= n)
    temperatures: list[NonNegativeFloat]  # tuned per arm on val (semantic pass@n), the same choices for every arm
    rounds: NonNegativeInt  # repair rounds with the checker's error fed back (paper: up to 5)
    batch_size: PositiveInt
    max_new_tokens: PositiveInt
    threads: PositiveInt
    item: Item
    seed: int


def _run_arm(model, tokenizer, rows: list[dict], ctx: dict[int, list[str]], arm: str, temperature: float, p: RepairParams,
             seed: int) -> pl.DataFrame:
    from paperdag.methods.proofbridge.equiv import equivalent
    from paperdag.methods.proofbridge.gen import run_chains, sampler, uses_repair, uses_retrieval

    chains = run_chains(sampler(model, tokenizer, temperature, seed, p.batch_size, p.max_new_tokens), [r["nl"] for r in rows],
                        [ctx[r["id"]] if uses_retrieval(arm) else [] for r in rows], p.samples, p.rounds if uses_repair(arm) else 0)
    out = []
    for r, per in zip(rows, chains, strict=True):
        for j, chain in enumerate(per):
            last = chain[-1]
            typ = last.error is None
            out.append({"theorem": r["id"], "family": r["family"], "arm": arm, "sample": j, "attempts": len(chain), "text": last.text,
                        "first_error": chain[0].error, "type_correct": typ,
                        "semantic": bool(typ and equivalent(last.text.split("\n")[0], r["statement"]))})
    return pl.DataFrame(out, schema_overrides={"first_error": pl.String})


def repair(params: RepairParams, generator: Path, theorems: pl.DataFrame, contexts: pl.DataFrame) -> dict[str, object]:
    """Per arm, its sampling temperature chosen on val (semantic pass@n); then on every test theorem n sampled chains
    per arm (repair arms: up to `rounds` regenerations with the checker's error), each final attempt checked and judged."""
    import torch

    from paperdag.lm import load_causal_lm

    torch.set_num_threads(params.threads)
    start = time.perf_counter()
    model, tokenizer = load_causal_lm(generator)
    ctx = _contexts(theorems, contexts)
    val = theorems.filter(pl.col("split") == "val").sort("id").to_dicts()
    test = theorems.filter(pl.col("split") == "test").sort("id").to_dicts()
    tuning: dict[str, dict[str, float]] = {}
    chosen: dict[str, float] = {}
    for a, arm in enumerate(ARMS):
        scores = {}
        for t, temp in enumerate(params.temperatures):
            if len(params.temperatures) == 1:
                break
            got = _run_arm(model, tokenizer, val, ctx, arm, temp, params, params.seed + 1000 * a + t)
            scores[str(temp)] = float(got.group_by("theorem").agg(pl.col("semantic").any())["semantic"].mean())
        tuning[arm] = scores
        chosen[arm] = float(params.temperatures[0] if not scores else max(params.temperatures, key=lambda x: (scores[str(x)], -x)))
    # every arm samples the test theorems from the same seed: paired draws as far as the arms' prompts allow
    attempts = pl.concat([_run_arm(model, tokenizer, test, ctx, arm, chosen[arm], params, params.seed + 7) for arm in ARMS])
    stats = {"replicate": params.item.replicate, "temperature": chosen, "val_semantic_pass_n": tuning, "seconds": time.perf_counter() - start}
    return {"attempts": attempts, "repair_stats": stats}


@dataclass(frozen=True)
class EvaluateParams:
    k: PositiveInt  # pass@k of the claims (<= repair.samples)
    recall_ks: list[PositiveInt]  # Recall@k curve


def evaluate(params: EvaluateParams, retrieval: dict[Item, pl.DataFrame], attempts: dict[Item, pl.DataFrame],
             embed_stats: dict[Item, dict], gen_stats: dict[Item, dict], repair_stats: dict[Item, dict]) -> dict[str, object]:
    """Per replicate Recall@k / MRR of both retrievers on the unseen test families and pass@k of each arm; the
    headline over replicates (paired); the Recall@k and pass@k figures."""
    per = {}
    for item in retrieval:
        per[str(item)] = {**retrieval_scores(retrieval[item], "test", params.recall_ks), **generation_scores(attempts[item], params.k)}
    scores = list(per.values())
    metrics = {"headline": headline(scores, params.k), "per_replicate": per,
               "frozen_view": {str(i): s["frozen_view"] for i, s in embed_stats.items()},
               "val_greedy": {str(i): s["val_greedy"] for i, s in gen_stats.items()},
               "holdout_greedy": {str(i): s["holdout_greedy"] for i, s in gen_stats.items()},
               "temperature": {str(i): s["temperature"] for i, s in repair_stats.items()}}
    return {"metrics": metrics, "recall_at_k": recall_figure(scores, params.recall_ks), "pass_at_k": pass_figure(scores)}
