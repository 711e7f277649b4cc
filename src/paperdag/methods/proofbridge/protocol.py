"""ProofBridge's experimental protocol over tables: the joint embedding trained and both retrievers ranked (frozen
MiniLM's formal view chosen on val), the retrieved examples of every theorem, the generator trained with its
learnability check on held-out theorems of the training families, and each arm's sampled repair chains on the test
families (temperatures tuned per arm on val). Every function takes rows or polars frames and models; the stage
module only reads and writes them. The encoder comes in as an argument (paperdag.retrieval loads it)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from paperdag.methods.proofbridge.equiv import equivalent
from paperdag.methods.proofbridge.gen import ARMS, near_misses, prompt, run_chains, sampler, target, training_pools, uses_repair, uses_retrieval

FROZEN_VIEWS = ("statement", "formal_states", "formal")  # what frozen MiniLM may read of a formal theorem (chosen on val)


# ---- retrieval ------------------------------------------------------------------------------------------------------

def joint_retrieval(theorems: pl.DataFrame, st: Any, encode: Any, p: Any) -> dict[str, object]:
    """The joint embedding trained on the training theorems (`p`: train_embed's settings; `st` the NL
    sentence-transformer, `encode(st, texts)` its frozen vectors); gold ranks of the joint embedding and of frozen
    MiniLM (its view chosen on val) for the val and test queries among their split's theorems; the top-k training
    theorems retrieved for every theorem (a training theorem: from other families only). Returns the weights,
    the ranks, the contexts and the stats."""
    from paperdag.methods.proofbridge.embed import byte_ids, embed_rows, gold_ranks, pretrain_formal, side, top_k, train_joint

    start = time.perf_counter()
    rows = theorems.sort("id")
    split = rows["split"].to_numpy()
    train_rows = [i for i in range(rows.height) if split[i] == "train"]
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
    for part in ("val", "test"):
        sel = [i for i in everything if split[i] == part]
        ids_part = rows["id"].to_numpy()[sel]
        ranks.append(pl.DataFrame({"split": part, "retriever": "joint", "theorem": ids_part, "gold_rank": gold_ranks(z_nl[sel], z_fl[sel])}))
        q = encode(st, [rows["nl"][i] for i in sel])
        frozen = {v: gold_ranks(q, encode(st, [rows[v][i] for i in sel])) for v in FROZEN_VIEWS}
        if part == "val":
            val_frozen = {v: float((r == 1).mean()) for v, r in frozen.items()}
            view = max(FROZEN_VIEWS, key=lambda v: (val_frozen[v], -FROZEN_VIEWS.index(v)))
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


def example_proofs(theorems: pl.DataFrame, contexts: pl.DataFrame) -> dict[int, list[str]]:
    """Each theorem's retrieved examples as the generator sees them: their proofs (the structure retrieval supplies;
    the statement is translated from the NL itself)."""
    proof = {i: f.split("\n", 1)[1] for i, f in zip(theorems["id"].to_list(), theorems["formal"].to_list(), strict=True)}
    return {i: [proof[j] for j in ex] for i, ex in zip(contexts["id"].to_list(), contexts["examples"].to_list(), strict=True)}


# ---- the generator --------------------------------------------------------------------------------------------------

def greedy_scores(model: Any, tokenizer: Any, rows: list[dict], contexts: dict[int, list[str]], retrieval: bool,
                  max_new_tokens: int) -> dict[str, float]:
    """Greedy type correctness and semantic correctness of one attempt per theorem (no repair)."""
    chains = run_chains(sampler(model, tokenizer, 0.0, 0, 64, max_new_tokens), [r["nl"] for r in rows],
                        [contexts[r["id"]] if retrieval else [] for r in rows], 1, 0)
    finals = [c[0][-1] for c in chains]
    typ = [a.error is None for a in finals]
    sem = [t and equivalent(a.text.split("\n")[0], r["statement"]) for a, t, r in zip(finals, typ, rows)]
    return {"type_correct": float(np.mean(typ)), "semantic": float(np.mean(sem))}


def holdout_split(theorems: pl.DataFrame, per_family: int) -> tuple[list[dict], list[dict]]:
    """The generator's training theorems and the held-out ones: the first `per_family` (by id) of every training
    family, which the generator never trains on (the retrieval corpus keeps them)."""
    train = theorems.filter(pl.col("split") == "train").sort("id").with_columns(pl.int_range(pl.len()).over("family").alias("_k"))
    short = train.group_by("family").len().filter(pl.col("len") <= per_family)
    if short.height:
        raise ValueError(f"proofbridge train_gen: train_gen.holdout_per_family = {per_family} leaves no training theorem in "
                         f"families {sorted(short['family'])}; lower it or raise synthesize.per_family.train")
    held = pl.col("_k") < per_family
    return train.filter(~held).drop("_k").to_dicts(), train.filter(held).drop("_k").to_dicts()


def train_generator(theorems: pl.DataFrame, contexts: pl.DataFrame, p: Any, build: Callable[[list[str]], tuple[Any, Any]],
                    fit: Callable[[Any, Any, dict], list[float]]) -> tuple[Any, Any, dict[str, object], list[float]]:
    """A model and tokenizer built by `build(texts)` (texts: the training targets and near misses), trained by
    `fit(model, tokenizer, pools)` (returns its losses) on the training theorems with and without their retrieved
    examples and on near-miss repairs (`p`: train_gen's settings); greedy scores on the unseen val families and, the
    learnability check, on held-out theorems of the training families (an error below p.min_holdout_type_correct).
    Returns (model, tokenizer, stats, losses)."""
    ctx = example_proofs(theorems, contexts)
    train, holdout = holdout_split(theorems, p.holdout_per_family)
    draw = random.Random(p.seed)
    near = {r["id"]: near_misses(r["formal"], draw, p.near_misses) for r in train}
    texts = [prompt(r["nl"]) + target(r["formal"]) for r in train] + [e for r in train for bad, err in near[r["id"]] for e in (bad, err)]
    model, tokenizer = build(texts)
    pools = training_pools(tokenizer, train, ctx, near)
    longest = max(len(q) + len(t) for pool in pools.values() for q, t in pool)
    if longest > model.config.max_position_embeddings:
        raise ValueError(f"proofbridge train_gen: an example has {longest} tokens > {model.config.max_position_embeddings} positions")
    losses = fit(model, tokenizer, pools)
    val = theorems.filter(pl.col("split") == "val").sort("id").to_dicts()
    scores = {arm: greedy_scores(model, tokenizer, val, ctx, arm == "rag", p.max_new_tokens) for arm in ("plain", "rag")}
    held = greedy_scores(model, tokenizer, holdout, ctx, False, p.max_new_tokens)
    if held["type_correct"] < p.min_holdout_type_correct:
        raise ValueError(f"proofbridge train_gen {p.item}: greedy type correctness without retrieval on {len(holdout)} held-out "
                         f"theorems of the training families is {held['type_correct']:.3f} < train_gen.min_holdout_type_correct = "
                         f"{p.min_holdout_type_correct}: the generator did not learn the formal language; raise train_gen.steps "
                         "or the model size")
    stats = {"replicate": p.item.replicate, "val_greedy": scores, "holdout_greedy": held, "holdout": len(holdout),
             "longest_example": longest, "pool_sizes": {k: len(v) for k, v in pools.items()}}
    return model, tokenizer, stats, losses


# ---- repair ---------------------------------------------------------------------------------------------------------

def run_arm(model: Any, tokenizer: Any, rows: list[dict], ctx: dict[int, list[str]], arm: str, temperature: float, p: Any,
            seed: int) -> pl.DataFrame:
    """`p.samples` sampled chains per theorem of one arm (`p`: repair's settings), each final attempt checked and
    judged against the theorem's statement."""
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


def repair_arms(model: Any, tokenizer: Any, theorems: pl.DataFrame, contexts: pl.DataFrame, p: Any) -> tuple[pl.DataFrame, dict[str, object]]:
    """Per arm, its sampling temperature chosen on val (semantic pass@n); then on every test theorem n sampled chains
    per arm, from one seed for every arm (paired draws as far as the arms' prompts allow). Returns the attempts and
    {temperature, val_semantic_pass_n}."""
    ctx = example_proofs(theorems, contexts)
    val = theorems.filter(pl.col("split") == "val").sort("id").to_dicts()
    test = theorems.filter(pl.col("split") == "test").sort("id").to_dicts()
    tuning: dict[str, dict[str, float]] = {}
    chosen: dict[str, float] = {}
    for a, arm in enumerate(ARMS):
        scores = {}
        for t, temp in enumerate(p.temperatures):
            if len(p.temperatures) == 1:
                break
            got = run_arm(model, tokenizer, val, ctx, arm, temp, p, p.seed + 1000 * a + t)
            scores[str(temp)] = float(got.group_by("theorem").agg(pl.col("semantic").any())["semantic"].mean())
        tuning[arm] = scores
        chosen[arm] = float(p.temperatures[0] if not scores else max(p.temperatures, key=lambda x: (scores[str(x)], -x)))
    attempts = pl.concat([run_arm(model, tokenizer, test, ctx, arm, chosen[arm], p, p.seed + 7) for arm in ARMS])
    return attempts, {"temperature": chosen, "val_semantic_pass_n": tuning}
