"""Glue between the paperdag engine and the rot method: synthesize -> build_graph -> train (x replicate) -> infer
(x replicate) -> evaluate. The world, the thought graph, the traversal, the protocol, the metrics and the figures
live in paperdag.methods.rot; the tiny LM in paperdag.lm; the encoder in paperdag.retrieval; intervals in
paperdag.stats. These functions read inputs, call them and return their outputs."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import Annotated

import numpy as np
import polars as pl
from pydantic import Field, NonNegativeFloat, PositiveInt

from paperdag.engine import Item
from paperdag.lm import TinyLMConfig
from paperdag.methods.rot import (RoTConfig, build_graph as thought_graph, check_splits, graph_from_rows, headline, make_splits,
                                  path_figure, problems_table, replicate_scores, tradeoff_figure)

Unit = Annotated[float, Field(ge=0, le=1)]

# torch, transformers and the encoder are imported inside the stage functions: importing this module stays cheap.


@dataclass(frozen=True)
class SynthesizeParams:
    store_per_window: PositiveInt  # solved problems per stored window (the store the thought graph is built from)
    train_per_window: PositiveInt  # LM training problems per window (every window: the model learns the whole task)
    val_per_window: PositiveInt  # validation problems per window (learnability check, static baseline's key)
    test_per_window: PositiveInt  # test problems per window (seen: a stored window; new: any other)
    min_store_length: PositiveInt  # stored windows: chain suffixes at least this long
    min_length: PositiveInt  # the shortest window of train / val / test
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Problems with their solution traces in four splits; every text unique across splits; counts met or raise."""
    p = params
    counts = {"store": p.store_per_window, "train": p.train_per_window, "val": p.val_per_window, "test": p.test_per_window}
    table = problems_table(make_splits(counts, p.min_store_length, p.min_length, random.Random(p.seed)))
    check_splits(table, "synthesize")
    return {"problems": table}


@dataclass(frozen=True)
class BuildGraphParams:
    encoder: str  # sentence encoder (packaged MiniLM or a local directory)
    tau: Unit  # semantic edge threshold on g = (cos + 1) / 2


def build_graph(params: BuildGraphParams, problems: pl.DataFrame) -> dict[str, object]:
    """The thought graph of the stored solutions: a node per step, sequential and semantic edges; every node text,
    stored problem and stored template encoded once (static retrieval's keys)."""
    from paperdag.retrieval import encode, load_encoder

    start = time.perf_counter()
    store = problems.filter(pl.col("split") == "store").sort("id")
    templates = [list(t) for t in store["template"]]
    encoder = load_encoder(params.encoder)
    node_emb = encode(encoder, [s for t in templates for s in t])  # (n, d)
    graph = thought_graph(templates, node_emb, RoTConfig(tau=params.tau))
    nodes = pl.DataFrame({"node": range(len(graph.texts)), "template": graph.template, "problem": store["id"].to_numpy()[graph.template],
                          "position": graph.position, "text": graph.texts})
    edges = pl.DataFrame(graph.edge_rows(), schema={"source": pl.Int64, "target": pl.Int64, "kind": pl.String, "weight": pl.Float64})
    keys = {"problem": encode(encoder, store["text"].to_list()), "template": encode(encoder, [" ".join(t) for t in templates])}
    stats = {"nodes": nodes.height, "templates": len(templates), "edges": edges.group_by("kind").len().sort("kind").to_dicts(),
             "seconds": time.perf_counter() - start}
    return {"nodes": nodes, "edges": edges, "node_embeddings": node_emb, "store_keys": keys, "graph_stats": stats}


@dataclass(frozen=True)
class TrainParams(TinyLMConfig):
    mixture: dict[str, NonNegativeFloat]  # share of steps: "none" (from scratch) and "template" (template in prefix)
    max_new_tokens: PositiveInt
    min_val_accuracy: Unit  # the accuracy without template on the validation split the model must reach
    item: Item  # the matrix element: item.replicate (its own seed)


def train(params: TrainParams, problems: pl.DataFrame) -> dict[str, object]:
    """A byte-level BPE tokenizer and a tiny Llama trained from scratch on the store and training problems, each with
    and without its template in the prefix; its accuracy without template on the validation split is checked."""
    from paperdag.lm import build_or_load, checkpoint_writer, fit_pools, lm_stats
    from paperdag.methods.rot.training import accuracy_without_template, training_pools
    from paperdag.methods.rot.task import prompt, target
    from paperdag.methods.rot.world import problem_of

    check_splits(problems, "train")
    start = time.perf_counter()
    rows = problems.filter(pl.col("split").is_in(["store", "train"])).to_dicts()
    texts = [prompt(r["text"], None) + target(problem_of(r), False) for r in rows]
    model, tokenizer = build_or_load(params, texts, max_positions=512)
    report = fit_pools(model, training_pools(tokenizer, rows), params.mixture, params, tokenizer.pad_token_id, f"rot train {params.item}")
    val_acc = accuracy_without_template(model, tokenizer, problems.filter(pl.col("split") == "val").to_dicts(), params.max_new_tokens, 64)
    if val_acc < params.min_val_accuracy:
        raise ValueError(f"rot train {params.item}: accuracy without template on the validation split is {val_acc:.3f} < "
                         f"train.min_val_accuracy = {params.min_val_accuracy}: the model did not learn the task; raise "
                         "train.steps or the model size")
    stats = {"replicate": params.item.replicate, "val_accuracy_no_template": val_acc,
             **lm_stats(model, tokenizer, params, report.losses["loss"], time.perf_counter() - start)}
    return {"model": checkpoint_writer(model, tokenizer), "train_stats": stats}


@dataclass(frozen=True)
class InferParams(RoTConfig):
    encoder: str = ""
    alpha_grid: list[Unit] = dc_field(default_factory=list)  # start weights tried on the validation split ([]: alpha as given)
    theta_grid: list[Unit] = dc_field(default_factory=list)  # stop thresholds tried on the validation split ([]: theta as given)
    max_new_tokens: PositiveInt = 200
    threads: PositiveInt = 1
    item: Item | None = None  # the matrix element: item.replicate


def infer(params: InferParams, model: Path, problems: pl.DataFrame, nodes: pl.DataFrame, edges: pl.DataFrame,
          node_embeddings: np.ndarray, store_keys: dict[str, np.ndarray]) -> dict[str, object]:
    """The static baseline's key and RoT's alpha and theta tuned on the validation split; then per test problem the
    three arms, interleaved, each timed from query encoding to the last generated token."""
    import torch

    from paperdag.lm import load_causal_lm
    from paperdag.methods.rot.protocol import StaticIndex, run_arms, tune_rot, tune_static
    from paperdag.methods.rot.query import VIEWS, encode_queries
    from paperdag.retrieval import encode, load_encoder

    torch.set_num_threads(params.threads)
    check_splits(problems, "infer")
    lm, tokenizer = load_causal_lm(model)
    encoder = load_encoder(params.encoder)

    def embed(texts: list[str]) -> np.ndarray:
        return encode(encoder, texts, progress=False)  # (k, d)

    store = problems.filter(pl.col("split") == "store").sort("id")
    nodes = nodes.sort("node")
    static = StaticIndex([list(t) for t in store["template"]], store_keys, node_embeddings, nodes["template"].to_numpy())
    graph = graph_from_rows(nodes.to_dicts(), edges.to_dicts())
    val = problems.filter(pl.col("split") == "val").sort("id")
    val_queries, val_templates = encode_queries(embed, val["text"].to_list(), VIEWS), [list(t) for t in val["template"]]
    key, rates = tune_static(val_queries, val_templates, static)
    config, tuning = tune_rot(val_queries, val_templates, graph, node_embeddings, params, params.alpha_grid, params.theta_grid)
    tests = problems.filter(pl.col("split") == "test").sort("id").to_dicts()
    embed([tests[0]["text"]])  # warm-up: the first call pays one-off costs
    start = time.perf_counter()

    def progress(done: int) -> None:
        if done % 25 == 0 or done == len(tests):
            print(f"rot infer {params.item}: {done}/{len(tests)} problems, {time.perf_counter() - start:.0f} s", flush=True)

    rows = run_arms(lm, tokenizer, embed, tests, graph, node_embeddings, static, key, config, params.max_new_tokens, progress)
    stats = {"replicate": params.item.replicate, "static_key": key, "static_val_hit_rate": rates, "rot_tuning": tuning,
             "seconds": time.perf_counter() - start}
    return {"predictions": pl.DataFrame(rows), "infer_stats": stats}


@dataclass(frozen=True)
class EvaluateParams:
    """None: the thresholds are the tests of pipelines/rot.yaml's claims."""


def evaluate(params: EvaluateParams, predictions: dict[Item, pl.DataFrame], infer_stats: dict[Item, dict],
             train_stats: dict[Item, dict], problems: pl.DataFrame, nodes: pl.DataFrame) -> dict[str, object]:
    """Per replicate the arms' accuracy, output tokens and latency; the headline over replicates; the trade-off plot
    and one drawn RoT path (the first new-window test problem of the first replicate whose RoT template is right)."""
    scores = {str(i): replicate_scores(p) for i, p in predictions.items()}
    metrics = {"headline": headline(list(scores.values())), "per_replicate": scores,
               "static_key": {str(i): s["static_key"] for i, s in infer_stats.items()},
               "rot_tuning": {str(i): s["rot_tuning"] for i, s in infer_stats.items()},
               "val_accuracy_no_template": {str(i): s["val_accuracy_no_template"] for i, s in train_stats.items()}}
    first = next(iter(predictions.values())).filter(pl.col("arm") == "rot").sort(pl.col("path").list.len() == 0, "problem")
    pick = first.filter((pl.col("kind") == "new") & pl.col("template_exact") & (pl.col("path").list.len() > 1))
    row = (pick if pick.height else first).row(0, named=True)
    problem = problems.filter(pl.col("id") == row["problem"]).row(0, named=True)
    path = path_figure(problem["text"], list(problem["template"]), nodes.sort("node").to_dicts(), list(row["path"]), row["stop"])
    return {"metrics": metrics, "tradeoff": tradeoff_figure(list(scores.values())), "thought_path": path}
