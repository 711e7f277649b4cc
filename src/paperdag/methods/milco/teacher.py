"""The English teacher of the students: the dense teacher's training groups: per train query its document, then hard negatives from the dense encoder's
ranking, scored by the encoder's cosine over the English translations; and the SPLADE-like teacher trained on them."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import polars as pl
import torch
from threadpoolctl import threadpool_limits

from paperdag.lm import (
    TrainConfig,
    load_encoder_and_tokenizer,
    tiny_bert_config,
    tiny_masked_lm,
    train_wordpiece,
)
from paperdag.methods.milco.training import (
    groups_data,
    loss_summary,
    tokenize,
    train_english_teacher,
)
from paperdag.retrieval import encode, load_encoder


def dense_teacher_groups(encoder: str, corpus: pl.DataFrame, queries: pl.DataFrame, group_size: int, hard_negative_pool: int,
                         temperature: float, seed: int) -> pl.DataFrame:
    """Per train query: its document first, then group_size - 1 negatives drawn from the dense teacher's top
    hard_negative_pool non-relevant documents; scores are cosine / temperature on the English translations."""
    docs = corpus.sort("doc_id")
    train = queries.filter(pl.col("split") == "train").sort("query_id")
    model = load_encoder(encoder)
    with threadpool_limits(limits=2):
        d = encode(model, docs["english"].to_list())
        q = encode(model, train["english"].to_list())
    sims = q @ d.T  # (m, n) cosine
    rng = np.random.default_rng(seed)
    rows = []
    for i, (qid, doc, relevant) in enumerate(zip(train["query_id"], train["doc_id"], train["relevant"], strict=True)):
        order = np.argsort(-sims[i], kind="stable")
        pool = [int(j) for j in order[: hard_negative_pool + len(relevant)] if j not in set(relevant)][:hard_negative_pool]
        negatives = rng.choice(pool, size=group_size - 1, replace=False).tolist()
        ids = [int(doc)] + negatives
        rows.append({"query_id": int(qid), "doc_ids": ids, "teacher_scores": (sims[i, ids] / temperature).tolist()})
    return pl.DataFrame(rows, schema={"query_id": pl.Int64, "doc_ids": pl.List(pl.Int64), "teacher_scores": pl.List(pl.Float64)})


def source_tokenizer_texts(corpus: pl.DataFrame, queries: pl.DataFrame, parallel: pl.DataFrame) -> list[str]:
    """What the multilingual tokenizer is trained on: the documents (what is indexed), the train queries and both
    sides of the parallel text; never a test query (no leak into the vocabulary)."""
    train_queries = queries.filter(pl.col("split") == "train")["text"].to_list()
    return [*corpus["text"], *train_queries, *parallel["source"], *corpus["english"], *parallel["english"]]


def train_teacher(p: Any, corpus: pl.DataFrame, queries: pl.DataFrame, parallel: pl.DataFrame) -> tuple[Any, Any, Any, pl.DataFrame, dict]:
    """Multilingual + English tokenizers, the dense teacher's (all-MiniLM-L6-v2 on the English side) group scores,
    and the English SPLADE-like teacher trained on English text: (teacher, English tokenizer, multilingual
    tokenizer, groups, stats). `p`: the milco.model and milco.train_teacher params."""
    english_texts = corpus["english"].to_list() + parallel["english"].to_list()
    en_tok = train_wordpiece(english_texts, p.en_vocab_size)
    if p.encoder:
        _, src_tok = load_encoder_and_tokenizer(p.encoder)
    else:
        src_tok = train_wordpiece(source_tokenizer_texts(corpus, queries, parallel), p.src_vocab_size)

    start = time.perf_counter()
    groups = dense_teacher_groups(p.dense_teacher, corpus, queries, p.group_size, p.hard_negative_pool, p.temperature, p.seed)
    dense_s = time.perf_counter() - start

    torch.manual_seed(p.seed)
    teacher = tiny_masked_lm(tiny_bert_config(len(en_tok), p.teacher_hidden_size, p.num_layers, p.num_heads,
                                              p.intermediate_size, p.max_length))
    train_queries = queries.filter(pl.col("split") == "train").sort("query_id")
    data = groups_data(en_tok, train_queries["english"].to_list(), corpus.sort("doc_id")["english"].to_list(), groups["doc_ids"].to_list(),
                       groups["teacher_scores"].to_list(), p.max_length)
    start = time.perf_counter()
    history = train_english_teacher(
        teacher, tokenize(en_tok, english_texts, p.max_length), data,
        TrainConfig(steps=p.warmup_steps, lr=p.lr, warmup_steps=p.warmup_steps // 10, seed=p.seed),
        TrainConfig(steps=p.distill_steps, lr=p.lr, warmup_steps=p.distill_steps // 10, seed=p.seed + 1),
        p.batch, p.group_batch, p.lambda_q, p.lambda_d, en_tok.pad_token_id, en_tok.all_special_ids,
    )
    stats = {"en_vocab": len(en_tok), "src_vocab": len(src_tok), "dense_teacher_s": dense_s,
             "train_s": time.perf_counter() - start, "loss": loss_summary(history["warmup"] + history["distill"]),
             "warmup_loss_last": history["warmup"][-1], "distill_loss_last": history["distill"][-1]}

    return teacher, en_tok, src_tok, groups, stats
