"""Glue between the paperdag engine and the milco method, one replicate per matrix element (`item.replicate`):
synthesize -> train_teacher -> train (MILCO and its ablations) | train_dense (the fair dense baseline, tuned on
validation) -> index (pruning levels + baselines) -> retrieve; evaluate gathers every replicate.

The method lives in paperdag.methods.milco (params types: paperdag.methods.milco.config); these functions turn
tables into token ids, models into directories and rankings into metrics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from paperdag._lazy import when_imported
from paperdag.engine import Item
from paperdag.methods.milco import build_world, real_parallel_names
from paperdag.methods.milco.config import (
    EvaluateParams,
    IndexParams,
    RetrieveParams,
    SynthesizeParams,
    TrainDenseParams,
    TrainParams,
    TrainTeacherParams,
)

# torch, transformers, the tiny encoders, the Milco model and the dense / BM25 baselines are imported inside the
# functions that use them, so that importing this module (every milco stage process does) stays cheap for synthesize
# and evaluate (tests/engine/test_imports.py).

# one intra-op thread, set when a stage first imports torch (the engine's base.numerics, set up after, still decide
# under `paperdag stage`): on 2 cores shared with other jobs, a 2-thread tiny model ran 4-6x slower per step (measured)
when_imported("torch", lambda torch: torch.set_num_threads(1))


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """The corpus (one language per document), train/test queries with relevant ids, parallel text (+ real names)."""
    p = params
    world = build_world(p.languages, p.n_docs, p.twin_fraction, p.twin_size, p.n_parallel, p.n_train_queries,
                        p.n_test_crosslingual, p.n_test_propernoun, p.query_terms, p.synonym_rate, p.train_fraction, p.seed,
                        forms_per_word=p.forms_per_word, homonym_rate=p.homonym_rate, n_suffixes=p.n_suffixes,
                        compound_languages=p.compound_languages, shuffle_order=p.shuffle_order)
    real = real_parallel_names(p.real_name_locales)
    corpus = pl.DataFrame([{k: v for k, v in d.items() if k != "slots"} for d in world.docs])
    queries = pl.DataFrame(world.queries, schema_overrides={"relevant": pl.List(pl.Int64)})
    parallel = pl.DataFrame(world.parallel + real, schema={"lang": pl.String, "source": pl.String, "english": pl.String})
    if p.real_name_locales and not real:
        print("milco synthesize: babel / pycountry are not installed; synthetic parallel text only")
    return {"corpus": corpus, "queries": queries, "parallel": parallel}


def train_teacher(params: TrainTeacherParams, corpus: pl.DataFrame, queries: pl.DataFrame, parallel: pl.DataFrame) -> dict[str, object]:
    """Multilingual + English tokenizers (trained on documents, train queries and parallel text: never a test query),
    the dense teacher's (all-MiniLM-L6-v2 on the English side) group scores, and the English SPLADE-like teacher."""
    from paperdag.methods.milco.teacher import train_teacher as train

    teacher, en_tok, src_tok, groups, stats = train(params, corpus, queries, parallel)

    def write_teacher(path: Path) -> None:
        teacher.save_pretrained(path)
        en_tok.save_pretrained(path)

    return {"teacher": write_teacher, "tokenizer": src_tok, "groups": groups, "teacher_stats": stats}


def train(params: TrainParams, corpus: pl.DataFrame, queries: pl.DataFrame, parallel: pl.DataFrame, groups: pl.DataFrame,
          teacher: Path, tokenizer: Path) -> dict[str, object]:
    """MILCO and each ablation (stage 1 SMSE on the parallel text, stage 2 KL + FLOPS on the teacher's groups), one
    directory each under `models`."""
    from paperdag.methods.milco.variants import train_variants

    models, stats = train_variants(params, corpus, queries, parallel, groups, teacher, tokenizer)

    def write(path: Path) -> None:
        for name, model in models.items():
            model.save_pretrained(path / name)

    return {"models": write, "train_stats": stats}


def train_dense(params: TrainDenseParams, corpus: pl.DataFrame, queries: pl.DataFrame, parallel: pl.DataFrame, groups: pl.DataFrame,
                tokenizer: Path) -> dict[str, object]:
    """The fair dense baseline (MILCO's size, data, teacher groups and step budget) at its best stage-1 learning rate,
    temperature and stage-2 steps on a validation share of the train queries; the grid's scores in `dense_stats`."""
    from paperdag.methods.milco.dense import tune_dense

    model, stats = tune_dense(params, corpus, queries, parallel, groups, tokenizer)
    return {"dense": model.save_pretrained, "dense_stats": stats}


def index(params: IndexParams, corpus: pl.DataFrame, parallel: pl.DataFrame, queries: pl.DataFrame, models: Path,
          dense: Path) -> dict[str, object]:
    """Per variant: encode the documents, mass-prune at each rho, build an inverted index. Baselines: the fair dense
    baseline and the packaged MiniLM (exact, flat), BM25 on the source text, translate-then-BM25 (dictionary learned
    from the parallel text, k1 and b tuned on the train queries)."""
    from paperdag.methods.milco.dense import DenseEncoder
    from paperdag.methods.milco.search import Indexes, baseline_indexes, sparse_indexes
    from paperdag.methods.milco.variants import load_models

    p = params
    docs = corpus.sort("doc_id")["text"].to_list()
    loaded = load_models(models, sorted(sub.name for sub in models.iterdir() if sub.is_dir()))
    stats: dict[str, Any] = {"n_docs": len(docs), "sparse": []}
    built: dict[str, Any] = {}
    for variant in loaded:
        indexes, rows = sparse_indexes(loaded[variant], variant, docs, p.rhos, p.max_length)
        built |= indexes
        stats["sparse"] += rows
    tuning = queries.filter(pl.col("split") == "train").sort("query_id")
    trained = DenseEncoder.from_pretrained(dense)
    baselines, baseline_stats = baseline_indexes(docs, parallel, tuning, p.dense_encoder, trained, p.bm25_k1, p.bm25_b, p.max_length)
    return {"indexes": Indexes(built, **baselines).save, "index_stats": stats | baseline_stats}


def retrieve(params: RetrieveParams, queries: pl.DataFrame, indexes: Path, models: Path, dense: Path) -> dict[str, object]:
    """Top-100 rankings of the test queries for each (variant, rho) and baseline; search latency per query measured
    one query at a time on one thread (query encoding excluded: it is reported separately per method). With
    prune_queries, query vectors are mass-pruned at the same rho as the documents."""
    from paperdag.methods.milco.dense import DenseEncoder
    from paperdag.methods.milco.search import Indexes, Runs
    from paperdag.methods.milco.variants import load_models

    p = params
    test = queries.filter(pl.col("split") == "test").sort("query_id")
    texts = test["text"].to_list()
    loaded = load_models(models, sorted(sub.name for sub in models.iterdir() if sub.is_dir()))
    variants = list(loaded)
    built = Indexes.load(indexes, variants)
    runs = Runs(test["query_id"].to_list())
    for variant in variants:
        runs.sparse(loaded[variant], variant, built.pruned(variant), texts, p.max_length, p.latency_repeats, p.prune_queries)
    runs.baselines(texts, p.dense_encoder, DenseEncoder.from_pretrained(dense), p.max_length, built, p.latency_repeats)
    return {"runs": pl.concat(runs.frames), "latency": runs.latency}


def evaluate(params: EvaluateParams, queries: dict[Item, pl.DataFrame], runs: dict[Item, pl.DataFrame], index_stats: dict[Item, dict],
             latency: dict[Item, dict]) -> dict[str, object]:
    """Per replicate: nDCG@10 and Recall@100 per (method, variant, rho) on the cross-lingual and proper-noun test
    queries, index bytes, active dimensions and latency beside them. Over replicates: the headline the claims read
    (paired differences at the pruned operating point, 95 % t intervals); the pruning curve."""
    from paperdag.methods.milco.evaluation import replicated
    from paperdag.methods.milco.figures import pruning_curve

    metrics = replicated(queries, runs, index_stats, latency, params.headline_rho)
    return {"metrics": metrics, "pruning_curve": pruning_curve(metrics["table"], params.headline_rho)}
