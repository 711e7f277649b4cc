"""Glue between the paperdag engine and the milco method: synthesize -> train_teacher -> align -> distill (one
stage per variant) -> index (pruning levels + baselines) -> retrieve -> evaluate.

The method lives in paperdag.methods.milco; these functions turn tables into token ids, models into directories
and rankings into metrics.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from matplotlib.figure import Figure
from pydantic import NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt
from rich.progress import track
from threadpoolctl import threadpool_limits

from paperdag._lazy import when_imported
from paperdag.engine.params import Fraction, PositiveFraction
from paperdag.methods.milco import InvertedIndex, active_dims, build_world, learn_dictionary, prune_by_mass, real_parallel_names, translate
from paperdag.retrieval import ndcg_at_k_per_query, recall_at_k_per_query

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from paperdag.methods.milco import Milco

# torch, transformers, the tiny encoders, the Milco model and the dense / BM25 baselines are imported inside the
# functions that use them, so that importing this module (every milco stage process does) stays cheap for synthesize
# and evaluate (tests/engine/test_imports.py).

# one intra-op thread, set when a stage first imports torch (the engine's base.numerics, set up after, still decide
# under `paperdag stage`): on 2 cores shared with other jobs, a 2-thread tiny model ran 4-6x slower per step (measured)
when_imported("torch", lambda torch: torch.set_num_threads(1))

VARIANTS = ("milco", "no_echo", "no_connector", "no_align")  # the model variants, one distill stage each
SPARSE_BASELINES = ("bm25", "translate_bm25")
K = 100  # rankings are cut at this depth (Recall@100)


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
class ModelParams:
    encoder: str  # "" = a tiny BERT trained from scratch on this world's text; else a local checkpoint directory
    src_vocab_size: PositiveInt
    en_vocab_size: PositiveInt
    hidden_size: PositiveInt
    teacher_hidden_size: PositiveInt
    num_layers: PositiveInt
    num_heads: PositiveInt
    intermediate_size: PositiveInt
    max_length: PositiveInt


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
    import torch

    from paperdag.lm import TrainConfig, load_encoder_and_tokenizer, tiny_bert_config, tiny_masked_lm, train_wordpiece
    from paperdag.methods.milco import Groups, tokenize, train_english_teacher

    p = params
    english_texts = corpus["english"].to_list() + parallel["english"].to_list()
    en_tok = train_wordpiece(english_texts, p.en_vocab_size)
    if p.encoder:
        _, src_tok = load_encoder_and_tokenizer(p.encoder)
    else:
        src_tok = train_wordpiece(corpus["text"].to_list() + queries["text"].to_list() + parallel["source"].to_list()
                                  + english_texts, p.src_vocab_size)

    start = time.perf_counter()
    groups = _dense_teacher_groups(p, corpus, queries)
    dense_s = time.perf_counter() - start

    torch.manual_seed(p.seed)
    teacher = tiny_masked_lm(tiny_bert_config(len(en_tok), p.teacher_hidden_size, p.num_layers, p.num_heads,
                                              p.intermediate_size, p.max_length))
    train_queries = queries.filter(pl.col("split") == "train").sort("query_id")
    data = Groups(
        query_ids=tokenize(en_tok, train_queries["english"].to_list(), p.max_length),
        passage_ids=tokenize(en_tok, corpus.sort("doc_id")["english"].to_list(), p.max_length),
        groups=np.array(groups["doc_ids"].to_list()), teacher_scores=np.array(groups["teacher_scores"].to_list()),
    )
    start = time.perf_counter()
    history = train_english_teacher(
        teacher, tokenize(en_tok, english_texts, p.max_length), data,
        TrainConfig(steps=p.warmup_steps, lr=p.lr, warmup_steps=p.warmup_steps // 10, seed=p.seed),
        TrainConfig(steps=p.distill_steps, lr=p.lr, warmup_steps=p.distill_steps // 10, seed=p.seed + 1),
        p.batch, p.group_batch, p.lambda_q, p.lambda_d, en_tok.pad_token_id, en_tok.all_special_ids,
    )
    stats = {"en_vocab": len(en_tok), "src_vocab": len(src_tok), "dense_teacher_s": dense_s,
             "train_s": time.perf_counter() - start, "loss": _summary(history["warmup"] + history["distill"]),
             "warmup_loss_last": history["warmup"][-1], "distill_loss_last": history["distill"][-1]}

    def write_teacher(path: Path) -> None:
        teacher.save_pretrained(path)
        en_tok.save_pretrained(path)

    return {"teacher": write_teacher, "tokenizer": src_tok, "groups": groups, "teacher_stats": stats}


def _dense_teacher_groups(p: TeacherParams, corpus: pl.DataFrame, queries: pl.DataFrame) -> pl.DataFrame:
    """Per train query: its document first, then group_size - 1 negatives drawn from the dense teacher's top
    hard_negative_pool non-relevant documents; scores are cosine / temperature on the English translations."""
    from paperdag.retrieval import encode, load_encoder

    docs = corpus.sort("doc_id")
    train = queries.filter(pl.col("split") == "train").sort("query_id")
    model = load_encoder(p.dense_teacher)
    with threadpool_limits(limits=2):
        d = encode(model, docs["english"].to_list())
        q = encode(model, train["english"].to_list())
    sims = q @ d.T  # (m, n) cosine
    rng = np.random.default_rng(p.seed)
    rows = []
    for i, (qid, doc, relevant) in enumerate(zip(train["query_id"], train["doc_id"], train["relevant"], strict=True)):
        order = np.argsort(-sims[i], kind="stable")
        pool = [int(j) for j in order[: p.hard_negative_pool + len(relevant)] if j not in set(relevant)][: p.hard_negative_pool]
        negatives = rng.choice(pool, size=p.group_size - 1, replace=False).tolist()
        ids = [int(doc)] + negatives
        rows.append({"query_id": int(qid), "doc_ids": ids, "teacher_scores": (sims[i, ids] / p.temperature).tolist()})
    return pl.DataFrame(rows, schema={"query_id": pl.Int64, "doc_ids": pl.List(pl.Int64), "teacher_scores": pl.List(pl.Float64)})


def _summary(history: list[float]) -> dict[str, float]:
    n = max(1, len(history) // 10)
    return {"steps": len(history), "first": float(np.mean(history[:n])), "last": float(np.mean(history[-n:]))}


# ---------------------------------------------------------------- align (stage 1) and distill (stage 2), one stage per variant


@dataclass(frozen=True)
class VariantParams:
    variant: str  # name of the model variant (milco, no_echo, no_connector, no_align)
    connector: bool  # Z = GELU(W H); False: the English head reads H directly
    echo: bool  # LexEcho head


@dataclass(frozen=True)
class AlignParams(ModelParams, VariantParams):
    steps: PositiveInt
    lr: PositiveFloat
    batch: PositiveInt
    seed: int


def _student(p: ModelParams, v: VariantParams, teacher: PreTrainedModel, tokenizer_dir: Path, seed: int) -> Milco:
    """A fresh student: the encoder (tiny from config, or the local checkpoint), connector, the teacher's head copied."""
    import torch
    from transformers import AutoTokenizer

    from paperdag.lm import load_encoder_and_tokenizer, tiny_bert_config, tiny_encoder
    from paperdag.methods.milco import Milco

    torch.manual_seed(seed)
    if p.encoder:
        encoder, tokenizer = load_encoder_and_tokenizer(p.encoder)
    else:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        encoder = tiny_encoder(tiny_bert_config(len(tokenizer), p.hidden_size, p.num_layers, p.num_heads,
                                                p.intermediate_size, p.max_length))
    return Milco.from_teacher(encoder, tokenizer, teacher, connector=v.connector, echo=v.echo)


def _load_teacher(path: Path) -> tuple[PreTrainedModel, Any]:
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    return AutoModelForMaskedLM.from_pretrained(path, local_files_only=True).eval(), AutoTokenizer.from_pretrained(path)


def align(params: AlignParams, parallel: pl.DataFrame, teacher: Path, tokenizer: Path) -> dict[str, object]:
    """Stage 1, sparse alignment pretraining: SMSE(m, e) + SMSE(me, e) against the frozen English teacher."""
    from paperdag.lm import TrainConfig
    from paperdag.methods.milco import align as align_stage1, tokenize

    p = params
    en_model, en_tok = _load_teacher(teacher)
    student = _student(p, p, en_model, tokenizer, p.seed)
    src_tok = student.tokenizer
    start = time.perf_counter()
    history = align_stage1(
        student, en_model,
        foreign=tokenize(src_tok, parallel["source"].to_list(), p.max_length),
        english_student=tokenize(src_tok, parallel["english"].to_list(), p.max_length),
        english_teacher=tokenize(en_tok, parallel["english"].to_list(), p.max_length),
        config=TrainConfig(steps=p.steps, lr=p.lr, warmup_steps=p.steps // 10, seed=p.seed),
        batch=p.batch, teacher_pad_id=en_tok.pad_token_id,
    )
    stats = {"variant": p.variant, "pairs": parallel.height, "train_s": time.perf_counter() - start, "loss": _summary(history)}
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
    from paperdag.lm import TrainConfig
    from paperdag.methods.milco import Groups, distill as distill_stage2, tokenize

    train = queries.filter(pl.col("split") == "train").sort("query_id")
    if train["query_id"].to_list() != groups["query_id"].to_list():
        raise ValueError("groups.parquet does not match the train queries of queries.parquet: rerun milco train_teacher")
    tok = student.tokenizer
    data = Groups(
        query_ids=tokenize(tok, train["text"].to_list(), p.max_length),
        passage_ids=tokenize(tok, corpus.sort("doc_id")["text"].to_list(), p.max_length),
        groups=np.array(groups["doc_ids"].to_list()), teacher_scores=np.array(groups["teacher_scores"].to_list()),
    )
    start = time.perf_counter()
    history = distill_stage2(student, data, TrainConfig(steps=p.steps, lr=p.lr, warmup_steps=p.steps // 10, seed=p.seed),
                             p.batch, p.lambda_q, p.lambda_d)
    stats = {"variant": p.variant, "connector": p.connector, "echo": p.echo, "train_s": time.perf_counter() - start,
             "loss": _summary(history)}
    return {"model": student, "distill_stats": stats}


def distill(params: DistillParams, corpus: pl.DataFrame, queries: pl.DataFrame, groups: pl.DataFrame,
            aligned: Path) -> dict[str, object]:
    """Stage 2 from an aligned student: KL distillation of the dense teacher's group scores + FLOPS."""
    import torch

    from paperdag.methods.milco import Milco

    student = Milco.from_pretrained(aligned)
    if isinstance(student.connector, torch.nn.Identity) == params.connector:
        raise ValueError(f"milco variant {params.variant}: connector={params.connector} but its `aligned` dep was aligned with "
                         "the other setting; point the stage's aligned dep at the matching align stage in pipelines/milco.yaml")
    return _distill(params, student.with_echo(params.echo), corpus, queries, groups)  # stage 1 never trains LexEcho


def distill_no_align(params: DistillParams, corpus: pl.DataFrame, queries: pl.DataFrame, groups: pl.DataFrame,
                     teacher: Path, tokenizer: Path) -> dict[str, object]:
    """The no-alignment ablation: stage 2 straight from a fresh student (the teacher's head, no stage 1)."""
    en_model, _ = _load_teacher(teacher)
    return _distill(params, _student(params, params, en_model, tokenizer, params.seed), corpus, queries, groups)


# ---------------------------------------------------------------- index: sparse inverted indexes at every pruning level, baselines


@dataclass(frozen=True)
class IndexParams:
    rhos: list[PositiveFraction]
    dense_encoder: str
    bm25_k1: NonNegativeFloat
    bm25_b: Fraction
    max_length: PositiveInt


def index(params: IndexParams, corpus: pl.DataFrame, parallel: pl.DataFrame, model_milco: Path, model_no_echo: Path,
          model_no_connector: Path, model_no_align: Path) -> dict[str, object]:
    """Per variant: encode the documents, mass-prune at each rho, build an inverted index. Baselines: BM25 on the
    source text, translate-then-BM25 (dictionary learned from the parallel text), dense MiniLM (exact, flat)."""
    from paperdag.methods.milco import Milco, encode_sparse, tokenize
    from paperdag.retrieval import AnnIndex, BM25Index, encode, load_encoder

    p = params
    if any(not 0 < r <= 1 for r in p.rhos) or 1.0 not in p.rhos:
        raise ValueError("params.yaml milco.index.rhos: each pruning mass must be in (0, 1], and 1.0 (no pruning) is required")
    docs = corpus.sort("doc_id")
    stats: dict[str, Any] = {"n_docs": docs.height, "sparse": []}
    built: dict[str, Any] = {}
    for variant, path in zip(VARIANTS, (model_milco, model_no_echo, model_no_connector, model_no_align), strict=True):
        model = Milco.from_pretrained(path)
        start = time.perf_counter()
        matrix = encode_sparse(model, tokenize(model.tokenizer, docs["text"].to_list(), p.max_length),
                               description=f"milco index: encode {variant}")
        encode_s = time.perf_counter() - start
        for rho in sorted(p.rhos):
            pruned = prune_by_mass(matrix, rho)
            inverted = InvertedIndex.build(pruned)
            pivot_dims = float(pruned[:, : model.en_vocab_size].getnnz(axis=1).mean())
            built[f"{variant}/rho_{rho:g}"] = inverted
            stats["sparse"].append({"variant": variant, "rho": rho, "active_dims": active_dims(pruned), "pivot_dims": pivot_dims,
                                    "echo_dims": active_dims(pruned) - pivot_dims, "index_bytes": inverted.nbytes,
                                    "encode_s": encode_s})
    start = time.perf_counter()
    with threadpool_limits(limits=2):
        vectors = encode(load_encoder(p.dense_encoder), docs["text"].to_list())
    dense = AnnIndex.build(vectors, kind="flat", metric="ip")
    stats["dense"] = {"dim": dense.dim, "index_bytes": int(vectors.nbytes), "encode_s": time.perf_counter() - start}
    bm25 = BM25Index.build(docs["text"].to_list(), k1=p.bm25_k1, b=p.bm25_b, stopwords=None)
    dictionary = learn_dictionary(zip(parallel["source"], parallel["english"], strict=True))
    translated = [translate(t, dictionary) for t in docs["text"]]
    translate_bm25 = BM25Index.build(translated, k1=p.bm25_k1, b=p.bm25_b, stopwords="en")
    stats["translate"] = {"dictionary_entries": len(dictionary)}

    def write(path: Path) -> None:
        for name, inverted in built.items():
            inverted.save(path / name)
        dense.save(path / "dense")
        bm25.save(path / "bm25")
        translate_bm25.save(path / "translate_bm25")
        (path / "translate_bm25" / "dictionary.json").write_text(json.dumps(dictionary, ensure_ascii=False, sort_keys=True) + "\n")

    return {"indexes": write, "index_stats": stats}


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
    import faiss

    from paperdag.methods.milco import Milco, encode_sparse, tokenize
    from paperdag.retrieval import AnnIndex, BM25Index, encode, load_encoder

    p = params
    test = queries.filter(pl.col("split") == "test").sort("query_id")
    texts, qids = test["text"].to_list(), test["query_id"].to_list()
    runs: list[pl.DataFrame] = []
    latency: dict[str, Any] = {}

    def record(method: str, variant: str, rho: float | None, ids: np.ndarray, search_s: np.ndarray, encode_s: float) -> None:
        runs.append(pl.DataFrame({"method": method, "variant": variant, "rho": rho, "query_id": qids,
                                  "ranking": [row[row >= 0].tolist() for row in ids], "search_ms": search_s * 1e3},
                                 schema_overrides={"rho": pl.Float64, "ranking": pl.List(pl.Int64)}))
        latency[f"{variant}" if rho is None else f"{variant}/rho_{rho:g}"] = {
            "search_ms_mean": float(search_s.mean() * 1e3), "search_ms_median": float(np.median(search_s) * 1e3),
            "encode_ms_per_query": encode_s * 1e3 / max(1, len(texts))}

    for variant, path in zip(VARIANTS, (model_milco, model_no_echo, model_no_connector, model_no_align), strict=True):
        model = Milco.from_pretrained(path)
        start = time.perf_counter()
        q = encode_sparse(model, tokenize(model.tokenizer, texts, p.max_length))
        encode_s = time.perf_counter() - start
        for sub in sorted((indexes / variant).iterdir()):
            inverted = InvertedIndex.load(sub)
            rho = float(sub.name.removeprefix("rho_"))
            qp = prune_by_mass(q, rho) if p.prune_queries else q
            rows = [(qp.indices[qp.indptr[i] : qp.indptr[i + 1]], qp.data[qp.indptr[i] : qp.indptr[i + 1]]) for i in range(len(texts))]
            ids, search_s = _timed_search(lambda i, inv=inverted, rows=rows: inv.search_one(*rows[i], K)[1][None, :],
                                          len(texts), p.latency_repeats)
            record("milco", variant, rho, ids, search_s, encode_s)
            latency[f"{variant}/rho_{rho:g}"]["query_active_dims"] = active_dims(qp)

    start = time.perf_counter()
    with threadpool_limits(limits=2):
        qv = encode(load_encoder(p.dense_encoder), texts, progress=False)
    encode_s = time.perf_counter() - start
    dense = AnnIndex.load(indexes / "dense")
    faiss.omp_set_num_threads(1)
    ids, search_s = _timed_search(lambda i: dense.search(qv[i : i + 1], K)[1], len(texts), p.latency_repeats)
    record("dense", "dense", None, ids, search_s, encode_s)

    bm25 = BM25Index.load(indexes / "bm25")
    ids, search_s = _timed_search(lambda i: bm25.search([texts[i]], K)[1], len(texts), 1)
    record("bm25", "bm25", None, ids, search_s, 0.0)
    dictionary = json.loads((indexes / "translate_bm25" / "dictionary.json").read_text())
    translated = [translate(t, dictionary) for t in texts]
    tbm25 = BM25Index.load(indexes / "translate_bm25")
    ids, search_s = _timed_search(lambda i: tbm25.search([translated[i]], K)[1], len(texts), 1)
    record("translate_bm25", "translate_bm25", None, ids, search_s, 0.0)
    return {"runs": pl.concat(runs), "latency": latency}


def _timed_search(search_one, n: int, repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids (n, K) and the fastest of `repeats` wall times per query, one BLAS / OpenMP thread."""
    ids = np.full((n, K), -1, dtype=np.int64)
    best = np.full(n, np.inf)
    with threadpool_limits(limits=1):
        for _ in range(repeats):
            for i in range(n):
                start = time.perf_counter()
                found = search_one(i)
                best[i] = min(best[i], time.perf_counter() - start)
                ids[i, : found.shape[1]] = found[0]
    return ids, best


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    headline_rho: PositiveFraction


def evaluate(params: EvaluateParams, queries: pl.DataFrame, runs: pl.DataFrame, index_stats: dict[str, Any],
             latency: dict[str, Any]) -> dict[str, object]:
    """nDCG@10 and Recall@100 per (method, variant, rho) on the cross-lingual and proper-noun test queries; index
    bytes, active dimensions and latency beside them; the headline the claims read; the pruning curve."""
    p = params
    test = queries.filter(pl.col("split") == "test").sort("query_id")
    kinds = dict(zip(test["query_id"], test["kind"], strict=True))
    relevant = dict(zip(test["query_id"], test["relevant"].to_list(), strict=True))
    sparse_stats = {(r["variant"], r["rho"]): r for r in index_stats["sparse"]}
    table = []
    for (method, variant, rho), rows in runs.group_by("method", "variant", "rho", maintain_order=True):
        row: dict[str, Any] = {"method": method, "variant": variant, "rho": rho}
        for kind in ("crosslingual", "propernoun"):
            mine = rows.filter(pl.col("query_id").map_elements(kinds.get, return_dtype=pl.String) == kind)
            ranked = _padded(mine["ranking"].to_list())
            rel = [relevant[q] for q in mine["query_id"]]
            row[f"ndcg10_{kind}"] = float(np.nanmean(ndcg_at_k_per_query(ranked, rel, 10)))
            row[f"recall100_{kind}"] = float(np.nanmean(recall_at_k_per_query(ranked, rel, K)))
        if method == "milco":
            s = sparse_stats[(variant, rho)]
            row |= {"active_dims": s["active_dims"], "pivot_dims": s["pivot_dims"], "echo_dims": s["echo_dims"],
                    "index_bytes": s["index_bytes"]}
            lat = latency[f"{variant}/rho_{rho:g}"]
        else:
            dense = index_stats["dense"]
            row |= {"active_dims": dense["dim"] if method == "dense" else None, "index_bytes": dense["index_bytes"] if method == "dense" else None}
            lat = latency[variant]
        row |= {"latency_ms": lat["search_ms_mean"], "encode_ms_per_query": lat["encode_ms_per_query"]}
        row["ndcg10"], row["recall100"] = row["ndcg10_crosslingual"], row["recall100_crosslingual"]
        table.append(row)
    headline = _headline(p, table)
    return {"metrics": {"headline": headline, "table": table},
            "pruning_curve": _pruning_plot(table, p.headline_rho)}


def _padded(rankings: list[list[int]]) -> np.ndarray:
    out = np.full((len(rankings), K), -1, dtype=np.int64)
    for i, r in enumerate(rankings):
        out[i, : len(r)] = r[:K]
    return out


def _row(table: list[dict], variant: str, rho: float | None = None) -> dict:
    for r in table:
        if r["variant"] == variant and (rho is None or r["rho"] == rho):
            return r
    raise ValueError(f"no evaluated run for {variant} at rho={rho}: is it in params.yaml milco.index.rhos?")


def _headline(p: EvaluateParams, table: list[dict]) -> dict[str, Any]:
    full, pruned = _row(table, "milco", 1.0), _row(table, "milco", p.headline_rho)
    dense, no_echo = _row(table, "dense"), _row(table, "no_echo", 1.0)
    return {
        "queries": "ndcg10_* on cross-lingual test queries (query language != document language) unless named _propernoun",
        "ndcg10_milco": full["ndcg10_crosslingual"],
        "ndcg10_milco_pruned": pruned["ndcg10_crosslingual"],
        "ndcg10_bm25": _row(table, "bm25")["ndcg10_crosslingual"],
        "ndcg10_translate_bm25": _row(table, "translate_bm25")["ndcg10_crosslingual"],
        "ndcg10_dense": dense["ndcg10_crosslingual"],
        "ndcg10_no_align": _row(table, "no_align", 1.0)["ndcg10_crosslingual"],
        "ndcg10_no_connector": _row(table, "no_connector", 1.0)["ndcg10_crosslingual"],
        "ndcg10_no_echo_crosslingual": no_echo["ndcg10_crosslingual"],
        "ndcg10_milco_propernoun": full["ndcg10_propernoun"],
        "ndcg10_no_echo": no_echo["ndcg10_propernoun"],
        "ndcg10_milco_pruned_propernoun": pruned["ndcg10_propernoun"],
        # the comparisons the claims test, each as one number (method - baseline, nDCG@10)
        "ndcg10_milco_minus_bm25": full["ndcg10_crosslingual"] - _row(table, "bm25")["ndcg10_crosslingual"],
        "ndcg10_milco_minus_dense": full["ndcg10_crosslingual"] - dense["ndcg10_crosslingual"],
        "ndcg10_milco_minus_no_echo_propernoun": full["ndcg10_propernoun"] - no_echo["ndcg10_propernoun"],
        "ndcg10_milco_pruned_minus_dense": pruned["ndcg10_crosslingual"] - dense["ndcg10_crosslingual"],
        "headline_rho": p.headline_rho,
        "active_dims_unpruned": full["active_dims"],
        "active_dims_pruned": pruned["active_dims"],
        "index_bytes_milco_pruned": pruned["index_bytes"],
        "index_bytes_dense": dense["index_bytes"],
        "index_size_ratio_dense_over_milco": dense["index_bytes"] / pruned["index_bytes"],
        "latency_ms_milco_pruned": pruned["latency_ms"],
        "latency_ms_dense": dense["latency_ms"],
        "latency_ratio_dense_over_milco": dense["latency_ms"] / pruned["latency_ms"],
        "latency_note": "search only (query encoding excluded), one query at a time, one thread, fastest of "
                        "milco.retrieve.latency_repeats runs per query, mean over test queries; dense = exact faiss flat "
                        "inner product over 384-d MiniLM vectors, milco = inverted index at headline_rho; same retrieve run",
    }


_STYLE = {"milco": ("tab:blue", "o"), "no_echo": ("tab:orange", "s"), "no_connector": ("tab:green", "^"), "no_align": ("tab:red", "v")}
_FLAT = {"dense": ("black", "-"), "bm25": ("tab:gray", "--"), "translate_bm25": ("tab:purple", ":")}


def _pruning_plot(table: list[dict], headline_rho: float) -> Figure:
    """nDCG@10 against average active dimensions per document (mass-pruning curve) per variant, on both query sets;
    baselines as horizontal lines (dense labelled with its 384 dimensions)."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, kind, title in zip(axes, ("crosslingual", "propernoun"), ("cross-lingual queries", "proper-noun queries (same language)"), strict=True):
        for variant, (color, marker) in _STYLE.items():
            curve = sorted((r for r in table if r["variant"] == variant), key=lambda r: r["active_dims"])
            ax.plot([r["active_dims"] for r in curve], [r[f"ndcg10_{kind}"] for r in curve], color=color, marker=marker,
                    markersize=4, label=variant)
            for r in curve:
                if r["rho"] == headline_rho and variant == "milco":
                    ax.scatter(r["active_dims"], r[f"ndcg10_{kind}"], s=110, facecolors="none", edgecolors=color, zorder=3,
                               label=f"milco at rho={headline_rho:g} (headline)")
        for variant, (color, style) in _FLAT.items():
            r = _row(table, variant)
            label = f"{variant} ({r['active_dims']} dims)" if variant == "dense" else variant
            ax.axhline(r[f"ndcg10_{kind}"], color=color, linestyle=style, linewidth=1.2, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("average active dimensions per document (after mass pruning)")
        ax.set_ylabel("nDCG@10")
        ax.set_title(title, fontsize=10, loc="left")
        ax.grid(alpha=0.3, which="both")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=4, fontsize=8)
    return fig
