"""Glue between the paperdag engine and the milco method: synthesize -> train_teacher -> align -> distill (one
stage per variant) -> index (pruning levels + baselines) -> retrieve -> evaluate.

The method lives in paperdag.methods.milco; these functions turn tables into token ids, models into directories
and rankings into metrics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import polars as pl
from pydantic import AfterValidator, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from paperdag._lazy import when_imported
from paperdag.engine.params import Fraction, PositiveFraction
from paperdag.methods.milco import build_world, real_parallel_names
from paperdag.methods.milco.config import ModelParams, VariantParams

if TYPE_CHECKING:
    from paperdag.methods.milco import Milco

# torch, transformers, the tiny encoders, the Milco model and the dense / BM25 baselines are imported inside the
# functions that use them, so that importing this module (every milco stage process does) stays cheap for synthesize
# and evaluate (tests/engine/test_imports.py).

# one intra-op thread, set when a stage first imports torch (the engine's base.numerics, set up after, still decide
# under `paperdag stage`): on 2 cores shared with other jobs, a 2-thread tiny model ran 4-6x slower per step (measured)
when_imported("torch", lambda torch: torch.set_num_threads(1))

VARIANTS = ("milco", "no_echo", "no_connector", "no_align")  # the model variants, one distill stage each


def _with_unpruned(rhos: list[float]) -> list[float]:
    if 1.0 not in rhos:
        raise ValueError("1.0 (no pruning) is required: the unpruned index is the headline's reference")
    return rhos


# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams:
    languages: list[str]
    n_docs: PositiveInt
    twin_fraction: Fraction
    twin_size: PositiveInt
    n_parallel: PositiveInt
    n_train_queries: PositiveInt
    n_test_crosslingual: PositiveInt
    n_test_propernoun: PositiveInt
    query_terms: PositiveInt
    synonym_rate: Fraction
    train_fraction: Fraction
    real_name_locales: list[str]
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """The corpus (one language per document), train/test queries with relevant ids, parallel text (+ real names)."""
    p = params
    world = build_world(p.languages, p.n_docs, p.twin_fraction, p.twin_size, p.n_parallel, p.n_train_queries,
                        p.n_test_crosslingual, p.n_test_propernoun, p.query_terms, p.synonym_rate, p.train_fraction, p.seed)
    real = real_parallel_names(p.real_name_locales)
    corpus = pl.DataFrame([{k: v for k, v in d.items() if k != "slots"} for d in world.docs])
    queries = pl.DataFrame(world.queries, schema_overrides={"relevant": pl.List(pl.Int64)})
    parallel = pl.DataFrame(world.parallel + real, schema={"lang": pl.String, "source": pl.String, "english": pl.String})
    if p.real_name_locales and not real:
        print("milco synthesize: babel / pycountry are not installed; synthetic parallel text only")
    return {"corpus": corpus, "queries": queries, "parallel": parallel}


# ---------------------------------------------------------------- train_teacher: tokenizers, English SPLADE teacher, dense teacher scores


@dataclass(frozen=True)
class TeacherParams:
    dense_teacher: str
    temperature: PositiveFloat
    group_size: PositiveInt
    hard_negative_pool: PositiveInt
    warmup_steps: NonNegativeInt
    distill_steps: NonNegativeInt
    lr: PositiveFloat
    batch: PositiveInt
    group_batch: PositiveInt
    lambda_q: NonNegativeFloat
    lambda_d: NonNegativeFloat
    seed: int


@dataclass(frozen=True)
class TrainTeacherParams(ModelParams, TeacherParams):
    pass


def train_teacher(params: TrainTeacherParams, corpus: pl.DataFrame, queries: pl.DataFrame, parallel: pl.DataFrame) -> dict[str, object]:
    """Multilingual + English tokenizers, the dense teacher's (all-MiniLM-L6-v2 on the English side) group scores,
    and the English SPLADE-like teacher trained on English text."""
    from paperdag.methods.milco.teacher import train_teacher as train

    teacher, en_tok, src_tok, groups, stats = train(params, corpus, queries, parallel)

    def write_teacher(path: Path) -> None:
        teacher.save_pretrained(path)
        en_tok.save_pretrained(path)

    return {"teacher": write_teacher, "tokenizer": src_tok, "groups": groups, "teacher_stats": stats}


# ---------------------------------------------------------------- align (stage 1) and distill (stage 2), one stage per variant


@dataclass(frozen=True)
class AlignParams(ModelParams, VariantParams):
    steps: PositiveInt
    lr: PositiveFloat
    batch: PositiveInt
    seed: int


def align(params: AlignParams, parallel: pl.DataFrame, teacher: Path, tokenizer: Path) -> dict[str, object]:
    """Stage 1, sparse alignment pretraining: SMSE(m, e) + SMSE(me, e) against the frozen English teacher."""
    from paperdag.methods.milco import align_on_parallel, loss_summary
    from paperdag.methods.milco.student import load_teacher, new_student

    p = params
    en_model, en_tok = load_teacher(teacher)
    student = new_student(p, en_model, tokenizer, p.seed, connector=p.connector, echo=p.echo)
    start = time.perf_counter()
    history = align_on_parallel(student, en_model, en_tok, parallel, steps=p.steps, lr=p.lr, batch=p.batch, max_length=p.max_length,
                                seed=p.seed)
    stats = {"variant": p.variant, "pairs": parallel.height, "train_s": time.perf_counter() - start, "loss": loss_summary(history)}
    return {"aligned": student, "align_stats": stats}


@dataclass(frozen=True)
class DistillParams(ModelParams, VariantParams):
    steps: PositiveInt
    lr: PositiveFloat
    batch: PositiveInt
    lambda_q: NonNegativeFloat
    lambda_d: NonNegativeFloat
    seed: int


def _distill(p: DistillParams, student: Milco, corpus: pl.DataFrame, queries: pl.DataFrame, groups: pl.DataFrame) -> dict[str, object]:
    from paperdag.methods.milco import distill_on_groups, loss_summary

    start = time.perf_counter()
    history = distill_on_groups(student, corpus, queries, groups, steps=p.steps, lr=p.lr, batch=p.batch, lambda_q=p.lambda_q,
                                lambda_d=p.lambda_d, max_length=p.max_length, seed=p.seed)
    stats = {"variant": p.variant, "connector": p.connector, "echo": p.echo, "train_s": time.perf_counter() - start,
             "loss": loss_summary(history)}
    return {"model": student, "distill_stats": stats}


def distill(params: DistillParams, corpus: pl.DataFrame, queries: pl.DataFrame, groups: pl.DataFrame,
            aligned: Path) -> dict[str, object]:
    """Stage 2 from an aligned student: KL distillation of the dense teacher's group scores + FLOPS."""
    from paperdag.methods.milco import aligned_student

    student = aligned_student(aligned, params.variant, connector=params.connector, echo=params.echo)
    return _distill(params, student, corpus, queries, groups)


def distill_no_align(params: DistillParams, corpus: pl.DataFrame, queries: pl.DataFrame, groups: pl.DataFrame,
                     teacher: Path, tokenizer: Path) -> dict[str, object]:
    """The no-alignment ablation: stage 2 straight from a fresh student (the teacher's head, no stage 1)."""
    from paperdag.methods.milco.student import load_teacher, new_student

    en_model, _ = load_teacher(teacher)
    student = new_student(params, en_model, tokenizer, params.seed, connector=params.connector, echo=params.echo)
    return _distill(params, student, corpus, queries, groups)


# ---------------------------------------------------------------- index: sparse inverted indexes at every pruning level, baselines


@dataclass(frozen=True)
class IndexParams:
    rhos: Annotated[list[PositiveFraction], AfterValidator(_with_unpruned)]
    dense_encoder: str
    bm25_k1: NonNegativeFloat
    bm25_b: Fraction
    max_length: PositiveInt


def index(params: IndexParams, corpus: pl.DataFrame, parallel: pl.DataFrame, model_milco: Path, model_no_echo: Path,
          model_no_connector: Path, model_no_align: Path) -> dict[str, object]:
    """Per variant: encode the documents, mass-prune at each rho, build an inverted index. Baselines: BM25 on the
    source text, translate-then-BM25 (dictionary learned from the parallel text), dense MiniLM (exact, flat)."""
    from paperdag.methods.milco import Milco
    from paperdag.methods.milco.search import Indexes, baseline_indexes, sparse_indexes

    p = params
    docs = corpus.sort("doc_id")["text"].to_list()
    stats: dict[str, Any] = {"n_docs": len(docs), "sparse": []}
    built: dict[str, Any] = {}
    for variant, path in zip(VARIANTS, (model_milco, model_no_echo, model_no_connector, model_no_align), strict=True):
        indexes, rows = sparse_indexes(Milco.from_pretrained(path), variant, docs, p.rhos, p.max_length)
        built |= indexes
        stats["sparse"] += rows
    *baselines, baseline_stats = baseline_indexes(docs, parallel, p.dense_encoder, p.bm25_k1, p.bm25_b)
    return {"indexes": Indexes(built, *baselines).save, "index_stats": stats | baseline_stats}


# ---------------------------------------------------------------- retrieve: every method on the test queries, timed per query


@dataclass(frozen=True)
class RetrieveParams:
    dense_encoder: str
    max_length: PositiveInt
    latency_repeats: PositiveInt
    prune_queries: bool


def retrieve(params: RetrieveParams, queries: pl.DataFrame, indexes: Path, model_milco: Path, model_no_echo: Path,
             model_no_connector: Path, model_no_align: Path) -> dict[str, object]:
    """Top-100 rankings of the test queries for each (variant, rho) and baseline; search latency per query measured
    one query at a time on one thread (query encoding excluded: it is reported separately per method). With
    prune_queries, query vectors are mass-pruned at the same rho as the documents."""
    from paperdag.methods.milco import Milco
    from paperdag.methods.milco.search import Indexes, Runs

    p = params
    test = queries.filter(pl.col("split") == "test").sort("query_id")
    texts = test["text"].to_list()
    built = Indexes.load(indexes, VARIANTS)
    runs = Runs(test["query_id"].to_list())
    for variant, path in zip(VARIANTS, (model_milco, model_no_echo, model_no_connector, model_no_align), strict=True):
        runs.sparse(Milco.from_pretrained(path), variant, built.pruned(variant), texts, p.max_length, p.latency_repeats, p.prune_queries)
    runs.baselines(texts, p.dense_encoder, built, p.latency_repeats)
    return {"runs": pl.concat(runs.frames), "latency": runs.latency}


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    headline_rho: PositiveFraction


def evaluate(params: EvaluateParams, queries: pl.DataFrame, runs: pl.DataFrame, index_stats: dict[str, Any],
             latency: dict[str, Any]) -> dict[str, object]:
    """nDCG@10 and Recall@100 per (method, variant, rho) on the cross-lingual and proper-noun test queries; index
    bytes, active dimensions and latency beside them; the headline the claims read; the pruning curve."""
    from paperdag.methods.milco.evaluation import headline, score_runs
    from paperdag.methods.milco.figures import pruning_curve

    table = score_runs(queries, runs, index_stats, latency)
    return {"metrics": {"headline": headline(table, params.headline_rho), "table": table},
            "pruning_curve": pruning_curve(table, params.headline_rho)}
