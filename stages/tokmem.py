"""Glue between the paperdag engine and the tokmem method: synthesize -> train_backbone -> (train_memory, baselines)
-> evaluate. The memory bank, the continual rounds, the calls track and the baselines live in
paperdag.methods.tokmem, the tiny LM's lifecycle in paperdag.lm: these functions read inputs and call them."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import polars as pl
from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from paperdag.engine import Item
from paperdag.lm import TinyLMConfig
from paperdag.methods.tokmem import (CALL_METHODS, LETTERS, METHODS, BaselineSettings, MemorySettings, budget, calls_table,
                                     headline, make_world, metric_vs_procedures, procedures_table, replicated_headline,
                                     score_table)

# torch, peft, the tiny LM, the memory bank and retrieval are imported inside the stage functions: importing this
# module stays cheap (tests/engine/test_imports.py).

# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams:
    backbone_procedures: PositiveInt
    memory_procedures: PositiveInt
    tools: PositiveInt
    round_size: PositiveInt
    tool_round_size: PositiveInt
    train_queries: PositiveInt
    test_queries: PositiveInt
    backbone_calls: NonNegativeInt
    tool_train_calls: PositiveInt
    tool_test_calls: PositiveInt
    letters: Annotated[int, Field(ge=2, le=len(LETTERS))]  # the alphabet's first `letters` letters
    input_length: Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]  # [shortest, longest] input
    arg_length: Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]  # [shortest, longest] call argument
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Procedures (backbone / memory / tool splits, rounds) and examples: atomic queries per procedure and
    compositional tool-call queries (backbone tools for pretraining, new tools for the calls track)."""
    p = params
    procs, examples = make_world({"backbone": p.backbone_procedures, "memory": p.memory_procedures, "tool": p.tools},
                                 {"memory": p.round_size, "tool": p.tool_round_size}, {"train": p.train_queries, "test": p.test_queries},
                                 {"backbone": p.backbone_calls, "tool_train": p.tool_train_calls, "tool_test": p.tool_test_calls},
                                 tuple(p.input_length), tuple(p.arg_length), random.Random(p.seed), LETTERS[: p.letters])
    return {"procedures": procedures_table(procs), "examples": examples}


# ---------------------------------------------------------------- train_backbone


@dataclass(frozen=True)
class TrainBackboneParams(TinyLMConfig):
    mixture: dict[Literal["described", "token", "calls", "described_calls"], NonNegativeFloat]  # the four training formats
    calls_distractors: Annotated[list[NonNegativeInt], Field(min_length=2, max_length=2)]  # [fewest, most] extra
    # descriptions in a reading-format calls prompt (what a retriever's top-k brings besides the gold tools)
    max_new_tokens: PositiveInt
    max_call_tokens: PositiveInt  # generation length of the held-out calls check
    min_described_em: Annotated[float, Field(ge=0, le=1)]  # held-out EM reading a description the backbone must reach


def train_backbone(params: TrainBackboneParams, procedures: pl.DataFrame, examples: pl.DataFrame) -> dict[str, object]:
    """A byte-level BPE tokenizer and a tiny Llama trained from scratch on the backbone procedures only, in four
    formats: reading a description (the RAG format), its own procedure token between query and response (emitted,
    then followed), chains of tool calls after its own tokens, and chains of named calls reading the tools'
    descriptions (the calls track's RAG format). The model is frozen from here on."""
    from paperdag.lm import build_or_load, checkpoint_writer, fit_pools
    from paperdag.methods.tokmem import PROC_TOKEN, backbone_pools, backbone_scores, backbone_texts, check_sets

    check_sets(examples, procedures, "train_backbone")
    start = time.perf_counter()
    backbone = procedures.filter(pl.col("split") == "backbone")
    model, tokenizer = build_or_load(params, backbone_texts(backbone, examples),
                                     special_tokens=[PROC_TOKEN.format(i) for i in backbone["id"]])
    train, test, expected = backbone_pools(tokenizer, backbone, examples, tuple(params.calls_distractors), random.Random(params.seed),
                                           set(procedures["name"]))
    report = fit_pools(model, train, params.mixture, params, tokenizer.pad_token_id, "tokmem backbone")
    stats: dict[str, object] = backbone_scores(model, tokenizer, backbone, test, expected, params.max_new_tokens, params.max_call_tokens)
    if stats["described_em"] < params.min_described_em:  # every comparison downstream rests on a backbone that reads
        raise ValueError(f"tokmem train_backbone: held-out EM reading a description is {stats['described_em']:.3f} < "
                         f"train_backbone.min_described_em = {params.min_described_em}: the backbone did not learn its "
                         "task; raise train_backbone.steps or the model size")
    stats.update({"parameters": sum(p.numel() for p in model.parameters()), "vocab_size": len(tokenizer),
                  "procedure_tokens": backbone.height, "steps": params.steps, "final_loss": report.final(),
                  "loss": report.losses["loss"], "train_seconds": time.perf_counter() - start})
    return {"model": checkpoint_writer(model, tokenizer), "backbone_stats": stats}


# ---------------------------------------------------------------- train_memory


@dataclass(frozen=True)
class TrainMemoryParams(MemorySettings):
    threads: PositiveInt
    item: Item  # the matrix element: item.replicate (its own seed)


def train_memory(params: TrainMemoryParams, model: Path, procedures: pl.DataFrame, examples: pl.DataFrame) -> dict[str, object]:
    """TokMem: one memory token per memory procedure, added in rounds; after each round every procedure seen so far
    is tested (routing read from the emitted token). Then the calls track: tool tokens (first round with a LoRA)."""
    import torch

    from paperdag.lm import load_causal_lm
    from paperdag.methods.tokmem import check_sets, memory_rounds, procedure_rows, tool_track

    torch.set_num_threads(params.threads)
    check_sets(examples, procedures, "train_memory")
    start = time.perf_counter()
    backbone, tokenizer = load_causal_lm(model)
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    fallback = procedure_rows(backbone, tokenizer)
    bank, order, frames, losses = memory_rounds(backbone, tokenizer, procedures, examples, fallback, params)
    unchanged = all(torch.equal(before[k], v) for k, v in backbone.state_dict().items())
    tool_rows, calls, tool_losses, lora_params = tool_track(backbone, tokenizer, procedures, examples, fallback, params)
    stats = {"replicate": params.item.replicate, "backbone_unchanged": unchanged, "trainable_per_procedure": int(bank.rows().shape[1]),
             "trainable_tokmem": int(bank.rows().numel()), "trainable_tool_rows": int(tool_rows.numel()),
             "trainable_tool_lora": lora_params, "rounds": len(losses), "procedures": len(order), "budget": budget(params),
             "loss_per_round": losses, "tool_loss_per_round": tool_losses, "train_seconds": time.perf_counter() - start}
    return {"memory": {"rows": bank.rows().detach(), "tool_rows": tool_rows},
            "memory_predictions": pl.concat([*frames, calls], how="diagonal_relaxed"), "memory_stats": stats}


# ---------------------------------------------------------------- baselines


@dataclass(frozen=True)
class BaselinesParams(BaselineSettings):
    threads: PositiveInt
    item: Item  # the matrix element: item.replicate (its own seed)


def baselines(params: BaselinesParams, model: Path, procedures: pl.DataFrame, examples: pl.DataFrame) -> dict[str, object]:
    """RAG (MiniLM retrieves a description into the prompt; paraphrased and named queries), prompt tuning (one soft
    prompt per procedure, routed by the same retrieval), sequential LoRA (all linear layers, learning rate tuned on
    round 1) without and with replay; each tested after every round like TokMem. Then the calls track's RAG and
    sequential LoRA fine-tuning on TokMem's tools, rounds and budget, tested after the last round like TokMem's."""
    import torch

    from paperdag.lm import load_causal_lm
    from paperdag.methods.tokmem import check_sets, run_baselines
    from paperdag.retrieval import load_encoder

    torch.set_num_threads(params.threads)
    check_sets(examples, procedures, "baselines")
    start = time.perf_counter()
    backbone, tokenizer = load_causal_lm(model)
    frames, seconds, trainable, tuning = run_baselines(backbone, tokenizer, procedures, examples, load_encoder(params.encoder), params)
    stats = {"replicate": params.item.replicate, "trainable": trainable, "seconds": seconds, "lora_tuning": tuning,
             "prompt_tokens": params.prompt_tokens, "encoder": params.encoder, "budget": budget(params),
             "total_seconds": time.perf_counter() - start}
    return {"baseline_predictions": pl.concat(frames, how="diagonal_relaxed"), "baseline_stats": stats}


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    """None: the thresholds the evaluation is judged by are the tests of pipelines/tokmem.yaml's claims."""


def evaluate(params: EvaluateParams, memory_predictions: dict[Item, pl.DataFrame], baseline_predictions: dict[Item, pl.DataFrame],
             memory_stats: dict[Item, dict], baseline_stats: dict[Item, dict]) -> dict[str, object]:
    """Per replicate, method and round: EM, ROUGE-L, routing, round-1 EM (forgetting); per calls-track method
    (TokMem, RAG, fine-tuning): tool-selection and argument F1; trainable parameter counts. The headline (the numbers pipelines/tokmem.yaml's
    claims read) over replicates, with intervals; the two plots from the first replicate's curves."""
    tables, call_tables, headlines = {}, {}, []
    for item, memory in memory_predictions.items():
        rows = pl.concat([memory, baseline_predictions[item]], how="diagonal_relaxed")
        cols = ["method", "round", "n_procedures", "procedure", "answer", "prediction", "routed", "backbone_route"]
        tables[str(item)] = score_table(rows.filter(pl.col("method").is_in(METHODS)).select(cols))
        calls = rows.filter(pl.col("method").is_in(CALL_METHODS))
        call_tables[str(item)] = calls_table(calls)
        headlines.append(headline(tables[str(item)], calls, memory_stats[item], baseline_stats[item]))
    table = next(iter(tables.values()))
    curve = {m: [r for r in table if r["method"] == m] for m in METHODS}
    lora_lr = {str(i): s["lora_tuning"] for i, s in baseline_stats.items()}
    metrics = {"headline": replicated_headline(headlines), "per_replicate": dict(zip(tables, headlines, strict=True)),
               "lora_tuning": lora_lr, "table": tables, "calls_table": call_tables}
    return {"metrics": metrics, "em_vs_procedures": metric_vs_procedures(curve, "em", "exact match, all procedures so far (%)"),
            "forgetting": metric_vs_procedures(curve, "em_round1", "exact match on round-1 procedures (%)")}
