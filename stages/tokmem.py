"""Glue between the paperdag engine and the tokmem method: synthesize -> train_backbone -> (train_memory, baselines)
-> evaluate.

The memory bank and its training rule live in paperdag.methods.tokmem; the tiny LM, tokenizer, training loop and
generation in paperdag.lm; MiniLM retrieval in paperdag.retrieval. These functions turn tables into token sequences,
train round by round, and score every method's predictions after every round.
"""

from __future__ import annotations

import copy
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
from matplotlib.figure import Figure
from pydantic import NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt
from rich.progress import track

from paperdag.engine.params import Fraction
from paperdag.methods.tokmem import (
    LETTERS,
    atomic_examples,
    call_examples,
    call_text,
    described_prompt,
    exact_match,
    forgetting,
    make_procedures,
    multiset_f1,
    procedures_from,
    procedures_table,
    query_prompt,
    response,
    rouge_l,
)

if TYPE_CHECKING:
    import torch

# torch, peft, the tiny LM, the memory bank and retrieval are imported inside the functions that use them, so that
# importing this module (every tokmem stage process does) stays cheap for synthesize and evaluate
# (tests/engine/test_imports.py).

PROC_TOKEN = "<proc_{}>"  # the backbone's own procedure tokens (pretraining only)

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
    letters: PositiveInt
    input_length: list[PositiveInt]
    arg_length: list[PositiveInt]
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Procedures (backbone / memory / tool splits, rounds) and examples: atomic queries per procedure and
    compositional tool-call queries (backbone tools for pretraining, new tools for the calls track)."""
    p = params
    rng = random.Random(p.seed)
    if not 2 <= p.letters <= len(LETTERS):
        raise ValueError(f"params.yaml tokmem.synthesize.letters must be 2..{len(LETTERS)}; got {p.letters}")
    alphabet = LETTERS[: p.letters]
    procs = make_procedures({"backbone": p.backbone_procedures, "memory": p.memory_procedures, "tool": p.tools},
                            {"memory": p.round_size, "tool": p.tool_round_size}, rng, alphabet)
    length, arg_length = tuple(p.input_length), tuple(p.arg_length)
    by_split = {s: [q for q in procs if q.split == s] for s in ("backbone", "memory", "tool")}
    rows = atomic_examples(by_split["backbone"] + by_split["memory"], {"train": p.train_queries, "test": p.test_queries}, length, rng,
                           alphabet)
    rows += call_examples(by_split["backbone"], p.backbone_calls, "train", arg_length, rng, alphabet)
    if by_split["tool"]:
        rows += call_examples(by_split["tool"], p.tool_train_calls, "train", arg_length, rng, alphabet)
        rows += call_examples(by_split["tool"], p.tool_test_calls, "test", arg_length, rng, alphabet)
    split_of = {q.id: q.split for q in procs}
    examples = pl.DataFrame(rows).with_columns(
        pl.col("tools").map_elements(lambda t: split_of[t[0]], return_dtype=pl.String).alias("set"))
    return {"procedures": procedures_table(procs), "examples": examples}


# ---------------------------------------------------------------- shared glue


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _calls_target(tokenizer, token_of: dict[int, int], tools: list[int], args: list[str]) -> list[int]:
    out: list[int] = []
    for tool, arg in zip(tools, args, strict=True):
        out += [token_of[tool], *_ids(tokenizer, call_text(arg))]
    return out + [tokenizer.eos_token_id]


def _generate(model, tokenizer, prompts: list[list[int]], max_new_tokens: int, batch_size: int, rule=None) -> list[list[int]]:
    """Greedy generations in batches, with the step rule `rule` (None: paperdag.lm.plain)."""
    from paperdag.lm import generate, plain

    rule = plain if rule is None else rule
    out: list[list[int]] = []
    for lo in range(0, len(prompts), batch_size):
        out += generate(model, [prompts[lo : lo + batch_size]], tokenizer.pad_token_id, tokenizer.eos_token_id, rule=rule,
                        max_new_tokens=max_new_tokens).tokens
    return out


def _text(tokenizer, tokens: list[int]) -> str:
    return tokenizer.decode([t for t in tokens if t < len(tokenizer)], skip_special_tokens=True).strip()


def _check_sets(examples: pl.DataFrame, procedures: pl.DataFrame, stage: str) -> None:
    need = {"track", "split", "procedure", "query", "answer", "tools", "args", "set"}
    if missing := need - set(examples.columns):
        raise ValueError(f"tokmem {stage}: examples.parquet lacks columns {sorted(missing)}; rerun synthesize")
    if procedures.filter(pl.col("split") == "memory").is_empty():
        raise ValueError(f"tokmem {stage}: procedures.parquet has no memory procedures (synthesize.memory_procedures = 0)")


def _rounds(procedures: pl.DataFrame, split: str) -> list[list[int]]:
    table = procedures.filter(pl.col("split") == split).sort("id")
    return [table.filter(pl.col("round") == r)["id"].to_list() for r in sorted(table["round"].unique().to_list())]


def _prediction_rows(method: str, rnd: int, n_procs: int, tests: pl.DataFrame, texts: list[str], routes: list[int]) -> pl.DataFrame:
    return tests.select("procedure", "query", "answer").with_columns(
        pl.lit(method).alias("method"), pl.lit(rnd).alias("round"), pl.lit(n_procs).alias("n_procedures"),
        pl.Series("prediction", texts, dtype=pl.String), pl.Series("routed", routes, dtype=pl.Int64))


# ---------------------------------------------------------------- train_backbone


@dataclass(frozen=True)
class TrainBackboneParams:
    vocab_size: PositiveInt
    hidden_size: PositiveInt
    num_layers: PositiveInt
    num_heads: PositiveInt
    num_kv_heads: PositiveInt
    intermediate_size: PositiveInt
    steps: PositiveInt
    batch_size: PositiveInt
    lr: PositiveFloat
    warmup_steps: NonNegativeInt
    mixture: dict[str, NonNegativeFloat]
    max_new_tokens: PositiveInt
    threads: PositiveInt
    seed: int


def train_backbone(params: TrainBackboneParams, procedures: pl.DataFrame, examples: pl.DataFrame) -> dict[str, object]:
    """A byte-level BPE tokenizer and a tiny Llama trained from scratch on the backbone procedures only, in three
    formats: reading a description (the RAG format), its own procedure token between query and response (emitted,
    then followed), and chains of tool calls. The model is frozen from here on."""
    import torch

    from paperdag.lm import TrainConfig, checkpoint_writer, fit_causal_lm, tiny_causal_lm, tiny_llama_config, train_byte_bpe

    torch.set_num_threads(params.threads)
    _check_sets(examples, procedures, "train_backbone")
    unknown = sorted(set(params.mixture) - {"described", "token", "calls"})
    if unknown:
        raise ValueError(f"params.yaml tokmem.train_backbone.mixture: unknown pools {unknown}; use described, token, calls")
    start = time.perf_counter()
    backbone = procedures.filter(pl.col("split") == "backbone")
    desc = dict(zip(backbone["id"], backbone["description"], strict=True))
    mine = examples.filter(pl.col("set") == "backbone")
    texts = [described_prompt(q, desc[t[0]]) + response(a) for q, a, t in mine.select("query", "answer", "tools").iter_rows()]
    tokenizer = train_byte_bpe(texts, params.vocab_size)
    tokenizer.add_tokens([PROC_TOKEN.format(i) for i in backbone["id"]], special_tokens=True)
    token_of = {i: tokenizer.convert_tokens_to_ids(PROC_TOKEN.format(i)) for i in backbone["id"]}
    config = tiny_llama_config(len(tokenizer), params.hidden_size, params.num_layers, params.num_heads, params.num_kv_heads,
                               params.intermediate_size, pad_token_id=tokenizer.pad_token_id,
                               bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(params.seed)
    model = tiny_causal_lm(config)
    eos = [tokenizer.eos_token_id]
    atomic = {s: mine.filter((pl.col("track") == "atomic") & (pl.col("split") == s)) for s in ("train", "test")}

    def described(rows: pl.DataFrame) -> list:
        return [(_ids(tokenizer, described_prompt(q, desc[p])), _ids(tokenizer, response(a)) + eos) for q, a, p in rows.select("query", "answer", "procedure").iter_rows()]

    def token(rows: pl.DataFrame) -> list:
        return [(_ids(tokenizer, query_prompt(q)), [token_of[p], *_ids(tokenizer, response(a))] + eos) for q, a, p in rows.select("query", "answer", "procedure").iter_rows()]

    calls = mine.filter(pl.col("track") == "calls")
    pools = {"described": described(atomic["train"]), "token": token(atomic["train"]),
             "calls": [(_ids(tokenizer, query_prompt(q)), _calls_target(tokenizer, token_of, t, a)) for q, t, a in calls.select("query", "tools", "args").iter_rows()]}
    history = fit_causal_lm(model, pools, params.mixture, TrainConfig(params.steps, params.lr, params.warmup_steps, 0.0, seed=params.seed),
                            params.batch_size, tokenizer.pad_token_id, description="tokmem backbone")
    stats: dict[str, object] = {}
    for name, pool in (("described", described(atomic["test"])), ("token", token(atomic["test"]))):
        outs = _generate(model, tokenizer, [p for p, _ in pool], params.max_new_tokens + 1, 256)
        if name == "token":  # the model routes itself: emitted procedure token, then the response
            stats["token_routing_acc"] = sum(o[:1] == t[:1] for o, (_, t) in zip(outs, pool, strict=True)) / len(pool)
            outs = [o[1:] for o in outs]
        texts_out = [_text(tokenizer, o) for o in outs]
        stats[f"{name}_em"] = sum(exact_match(o, a) for o, a in zip(texts_out, atomic["test"]["answer"], strict=True)) / len(pool)
    stats.update({"parameters": sum(p.numel() for p in model.parameters()), "vocab_size": len(tokenizer),
                  "procedure_tokens": len(token_of), "steps": params.steps,
                  "final_loss": sum(history[-50:]) / max(1, len(history[-50:])), "loss": history,
                  "train_seconds": time.perf_counter() - start})
    return {"model": checkpoint_writer(model, tokenizer), "backbone_stats": stats}


# ---------------------------------------------------------------- train_memory


@dataclass(frozen=True)
class TrainMemoryParams:
    steps_per_round: PositiveInt
    batch_size: PositiveInt
    lr: PositiveFloat
    tool_steps_per_round: PositiveInt
    tool_lr: PositiveFloat
    tool_lora: bool
    lora_r: PositiveInt
    lora_alpha: PositiveInt
    renormalise: bool
    max_new_tokens: PositiveInt
    max_call_tokens: PositiveInt
    eval_batch_size: PositiveInt
    threads: PositiveInt
    seed: int


def _procedure_rows(model, tokenizer) -> torch.Tensor:
    """The backbone's own procedure-token rows: the inactive rows the first round's new rows are renormalised to."""
    ids = [i for t, i in tokenizer.get_added_vocab().items() if t.startswith("<proc_")]
    return model.get_input_embeddings().weight[ids].detach()


def train_memory(params: TrainMemoryParams, model: Path, procedures: pl.DataFrame, examples: pl.DataFrame) -> dict[str, object]:
    """TokMem: one memory token per memory procedure, added in rounds; after each round every procedure seen so far
    is tested (routing read from the emitted token). Then the calls track: tool tokens (first round with a LoRA)."""
    import torch

    from paperdag.lm import TrainConfig, load_causal_lm
    from paperdag.methods.tokmem import MemoryBank, fit_bank, routed

    torch.set_num_threads(params.threads)
    _check_sets(examples, procedures, "train_memory")
    start = time.perf_counter()
    backbone, tokenizer = load_causal_lm(model)
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    fallback = _procedure_rows(backbone, tokenizer)
    bank = MemoryBank(backbone, emit=True)
    vocab, eos = bank.vocab, [tokenizer.eos_token_id]
    atomic = examples.filter(pl.col("track") == "atomic")
    order: list[int] = []  # bank index -> procedure id
    frames, losses = [], []
    rounds = _rounds(procedures, "memory")
    for rnd, procs in enumerate(rounds, start=1):
        ids = bank.add(len(procs), bank.inactive_norm(fallback), seed=params.seed + rnd)
        token_of = dict(zip(procs, ids, strict=True))
        order += procs
        train = atomic.filter((pl.col("split") == "train") & pl.col("procedure").is_in(procs))
        pool = [(_ids(tokenizer, query_prompt(q)), [token_of[p], *_ids(tokenizer, response(a))] + eos) for q, a, p in train.select("query", "answer", "procedure").iter_rows()]
        config = TrainConfig(params.steps_per_round, params.lr, 0, 0.0, seed=params.seed + rnd)
        losses.append(fit_bank(bank, pool, config, params.batch_size, tokenizer.pad_token_id, params.renormalise, fallback,
                               f"tokmem memory round {rnd}/{len(rounds)}"))
        tests = atomic.filter((pl.col("split") == "test") & pl.col("procedure").is_in(order))
        outs = _generate(bank.materialise(), tokenizer, [_ids(tokenizer, query_prompt(q)) for q in tests["query"]],
                         params.max_new_tokens, params.eval_batch_size)
        routes = [order[r] if 0 <= (r := routed(o, vocab)) < len(order) else -1 for o in outs]
        frames.append(_prediction_rows("tokmem", rnd, len(order), tests, [_text(tokenizer, o[1:] if routed(o, vocab) >= 0 else o) for o in outs], routes))
    unchanged = all(torch.equal(before[k], v) for k, v in backbone.state_dict().items())
    tool_rows, calls, tool_losses, lora_params = _train_tools(params, backbone, tokenizer, procedures, examples, fallback)
    stats = {"backbone_unchanged": unchanged, "trainable_per_procedure": int(bank.rows().shape[1]),
             "trainable_tokmem": int(bank.rows().numel()), "trainable_tool_rows": int(tool_rows.numel()),
             "trainable_tool_lora": lora_params, "rounds": len(rounds), "procedures": len(order),
             "loss_per_round": losses, "tool_loss_per_round": tool_losses, "train_seconds": time.perf_counter() - start}
    return {"memory": {"rows": bank.rows().detach(), "tool_rows": tool_rows},
            "memory_predictions": pl.concat([*frames, calls], how="diagonal_relaxed"), "memory_stats": stats}


def _train_tools(params: TrainMemoryParams, backbone, tokenizer, procedures: pl.DataFrame, examples: pl.DataFrame,
                 fallback: torch.Tensor) -> tuple[torch.Tensor, pl.DataFrame, list[list[float]], int]:
    """The calls track on a copy of the backbone: tool tokens added in rounds; the first round also trains a LoRA
    (q/v) that is frozen afterwards. Tested once after the last round: the chain of (tool, argument) calls."""
    import torch
    from peft import LoraConfig, get_peft_model

    from paperdag.lm import TrainConfig
    from paperdag.methods.tokmem import MemoryBank, fit_bank, split_at_memory

    rounds = _rounds(procedures, "tool")
    calls = examples.filter((pl.col("track") == "calls") & (pl.col("set") == "tool"))
    if not rounds or calls.is_empty():
        return torch.zeros(0), pl.DataFrame(), [], 0
    bank = MemoryBank(copy.deepcopy(backbone), emit=True)
    order: list[int] = []
    losses, lora_params = [], 0
    for rnd, procs in enumerate(rounds, start=1):
        bank.add(len(procs), bank.inactive_norm(fallback), seed=params.seed + 100 + rnd)
        order += procs
        if rnd == 1 and params.tool_lora:
            get_peft_model(bank.model, LoraConfig(r=params.lora_r, lora_alpha=params.lora_alpha, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
            lora_params = sum(p.numel() for p in bank.model.parameters() if p.requires_grad)
        token_of = {p: bank.vocab + order.index(p) for p in order}
        seen = set(order)
        train = calls.filter((pl.col("split") == "train") & pl.col("tools").list.eval(pl.element().is_in(list(seen))).list.all())
        pool = [(_ids(tokenizer, query_prompt(q)), _calls_target(tokenizer, token_of, t, a)) for q, t, a in train.select("query", "tools", "args").iter_rows()]
        if not pool:
            raise ValueError(f"tokmem train_memory: no training calls use only the tools of rounds 1..{rnd}; raise synthesize.tool_train_calls")
        config = TrainConfig(params.tool_steps_per_round, params.tool_lr, 0, 0.0, seed=params.seed + 100 + rnd)
        losses.append(fit_bank(bank, pool, config, params.batch_size, tokenizer.pad_token_id, params.renormalise, fallback,
                               f"tokmem tools round {rnd}/{len(rounds)}"))
        bank.model.requires_grad_(False)  # the first-round LoRA is frozen afterwards
    tests = calls.filter(pl.col("split") == "test")
    outs = _generate(bank.materialise(), tokenizer, [_ids(tokenizer, query_prompt(q)) for q in tests["query"]],
                     params.max_call_tokens, params.eval_batch_size)
    pred_tools, pred_args = [], []
    for o in outs:
        steps = [(i, _text(tokenizer, t)) for i, t in split_at_memory(o, bank.vocab) if i >= 0]
        pred_tools.append([order[i] if i < len(order) else -1 for i, _ in steps])
        pred_args.append([m.group(1) if (m := re.search(r'"arg":\s*"([^"]*)"', s)) else "" for _, s in steps])
    frame = tests.select("query", "answer", "tools", "args").with_columns(
        pl.lit("tokmem_calls").alias("method"), pl.lit(len(rounds)).alias("round"), pl.lit(len(order)).alias("n_procedures"),
        pl.Series("pred_tools", pred_tools, dtype=pl.List(pl.Int64)), pl.Series("pred_args", pred_args, dtype=pl.List(pl.String)))
    return bank.rows().detach(), frame, losses, lora_params


# ---------------------------------------------------------------- baselines


@dataclass(frozen=True)
class BaselinesParams:
    encoder: str
    steps_per_round: PositiveInt
    batch_size: PositiveInt
    prompt_tokens: PositiveInt
    prompt_lr: PositiveFloat
    lora_r: PositiveInt
    lora_alpha: PositiveInt
    lora_lr: PositiveFloat
    replay_fraction: Fraction
    max_new_tokens: PositiveInt
    eval_batch_size: PositiveInt
    threads: PositiveInt
    seed: int


def baselines(params: BaselinesParams, model: Path, procedures: pl.DataFrame, examples: pl.DataFrame) -> dict[str, object]:
    """RAG (MiniLM retrieves a description into the prompt), prompt tuning (one soft prompt per procedure, routed by
    the same retrieval), sequential LoRA without and with replay; each tested after every round like TokMem."""
    import torch
    from peft import LoraConfig, get_peft_model

    from paperdag.lm import TrainConfig, fit_causal_lm, load_causal_lm
    from paperdag.methods.tokmem import MemoryBank, fit_bank
    from paperdag.retrieval import AnnIndex, encode, load_encoder

    torch.set_num_threads(params.threads)
    _check_sets(examples, procedures, "baselines")
    start = time.perf_counter()
    backbone, tokenizer = load_causal_lm(model)
    backbone.requires_grad_(False)
    eos = [tokenizer.eos_token_id]
    rounds = _rounds(procedures, "memory")
    memory = procedures.filter(pl.col("split") == "memory").sort("id")
    pids, descriptions = memory["id"].to_list(), memory["description"].to_list()
    atomic = examples.filter(pl.col("track") == "atomic")
    tests_all = atomic.filter((pl.col("split") == "test") & pl.col("procedure").is_in(pids))
    encoder = load_encoder(params.encoder)
    index = AnnIndex.build(encode(encoder, descriptions, progress=False), kind="flat", metric="ip")
    query_vectors = encode(encoder, tests_all["query"].to_list(), progress=False)
    position = {q: i for i, q in enumerate(tests_all["query"].to_list())}
    frames, seconds, trainable = [], {}, {}

    seen: list[int] = []
    retrieved_by_round = []
    for procs in rounds:  # retrieval among the descriptions of the procedures added so far
        seen += procs
        tests = tests_all.filter(pl.col("procedure").is_in(seen))
        _, hits = index.search(query_vectors[[position[q] for q in tests["query"]]], 1, subset=[pids.index(p) for p in seen])
        retrieved_by_round.append((tests, [pids[h] for h in hits[:, 0]], len(seen)))

    t0 = time.perf_counter()
    desc = dict(zip(pids, descriptions, strict=True))
    for rnd, (tests, retrieved, n_seen) in enumerate(track(retrieved_by_round, description="tokmem RAG"), start=1):
        prompts = [_ids(tokenizer, described_prompt(q, desc[r])) for q, r in zip(tests["query"], retrieved, strict=True)]
        outs = _generate(backbone, tokenizer, prompts, params.max_new_tokens, params.eval_batch_size)
        frames.append(_prediction_rows("rag", rnd, n_seen, tests, [_text(tokenizer, o) for o in outs], retrieved))
    seconds["rag"], trainable["rag"] = time.perf_counter() - t0, 0

    t0 = time.perf_counter()
    bank = MemoryBank(backbone, emit=False)  # prompt tuning: input-only rows, prepended
    vocab_norm = float(backbone.get_input_embeddings().weight.norm(dim=-1).mean())
    prompt_of: dict[int, list[int]] = {}
    for rnd, procs in enumerate(rounds, start=1):
        ids = list(bank.add(len(procs) * params.prompt_tokens, vocab_norm, seed=params.seed + rnd))
        prompt_of |= {p: ids[i * params.prompt_tokens : (i + 1) * params.prompt_tokens] for i, p in enumerate(procs)}
        train = atomic.filter((pl.col("split") == "train") & pl.col("procedure").is_in(procs))
        pool = [(prompt_of[p] + _ids(tokenizer, query_prompt(q)), _ids(tokenizer, response(a)) + eos) for q, a, p in train.select("query", "answer", "procedure").iter_rows()]
        fit_bank(bank, pool, TrainConfig(params.steps_per_round, params.prompt_lr, 0, 0.0, seed=params.seed + rnd), params.batch_size,
                 tokenizer.pad_token_id, False, bank.rows(), f"tokmem prompt tuning round {rnd}/{len(rounds)}")
        tests, retrieved, n_seen = retrieved_by_round[rnd - 1]
        prompts = [prompt_of[r] + _ids(tokenizer, query_prompt(q)) for q, r in zip(tests["query"], retrieved, strict=True)]
        vocab = bank.vocab
        outs = _generate(bank.materialise(), tokenizer, prompts, params.max_new_tokens, params.eval_batch_size,
                         rule=lambda logits: logits[0][:, :vocab])  # soft-prompt rows are never emitted
        frames.append(_prediction_rows("prompt_tuning", rnd, n_seen, tests, [_text(tokenizer, o) for o in outs], retrieved))
    seconds["prompt_tuning"], trainable["prompt_tuning"] = time.perf_counter() - t0, int(bank.rows().numel())

    for method, replay in (("lora_seq", 0.0), ("lora_replay", params.replay_fraction)):
        t0 = time.perf_counter()
        lm = copy.deepcopy(backbone)
        get_peft_model(lm, LoraConfig(r=params.lora_r, lora_alpha=params.lora_alpha, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
        trainable[method] = sum(p.numel() for p in lm.parameters() if p.requires_grad)
        done: list[int] = []
        for rnd, procs in enumerate(rounds, start=1):
            def pool_of(ps: list[int]) -> list:
                rows = atomic.filter((pl.col("split") == "train") & pl.col("procedure").is_in(ps))
                return [(_ids(tokenizer, query_prompt(q)), _ids(tokenizer, response(a)) + eos) for q, a in rows.select("query", "answer").iter_rows()]

            pools, mixture = {"current": pool_of(procs)}, {"current": 1.0}
            if replay > 0 and done:
                pools["replay"], mixture = pool_of(done), {"current": 1.0 - replay, "replay": replay}
            fit_causal_lm(lm, pools, mixture, TrainConfig(params.steps_per_round, params.lora_lr, 0, 0.0, seed=params.seed + rnd),
                          params.batch_size, tokenizer.pad_token_id, description=f"tokmem {method} round {rnd}/{len(rounds)}")
            done += procs
            tests = tests_all.filter(pl.col("procedure").is_in(done))
            outs = _generate(lm, tokenizer, [_ids(tokenizer, query_prompt(q)) for q in tests["query"]], params.max_new_tokens,
                             params.eval_batch_size)
            frames.append(_prediction_rows(method, rnd, len(done), tests, [_text(tokenizer, o) for o in outs], [-1] * len(outs)))
        seconds[method] = time.perf_counter() - t0
    stats = {"trainable": trainable, "seconds": seconds, "prompt_tokens": params.prompt_tokens, "encoder": params.encoder,
             "total_seconds": time.perf_counter() - start}
    return {"baseline_predictions": pl.concat(frames, how="diagonal_relaxed"), "baseline_stats": stats}


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    """None: the thresholds the evaluation is judged by are the tests of pipelines/tokmem.yaml's claims."""


METHODS = ("tokmem", "rag", "prompt_tuning", "lora_seq", "lora_replay")


def score_table(predictions: pl.DataFrame) -> list[dict]:
    """EM, ROUGE-L and routing accuracy (percent) per (method, round), over every procedure seen so far and over the
    round-1 procedures alone."""
    round1 = set(predictions.filter(pl.col("round") == 1)["procedure"].to_list())
    table = []
    for (method, rnd), group in sorted(predictions.group_by("method", "round"), key=lambda kv: (METHODS.index(kv[0][0]), kv[0][1])):
        em = [exact_match(p, a) for p, a in zip(group["prediction"], group["answer"], strict=True)]
        first = [e for e, p in zip(em, group["procedure"], strict=True) if p in round1]
        routes = group["routed"].to_list()
        table.append({"method": method, "round": rnd, "n_procedures": int(group["n_procedures"][0]), "queries": len(em),
                      "em": 100 * sum(em) / len(em),
                      "rouge_l": 100 * sum(rouge_l(p, a) for p, a in zip(group["prediction"], group["answer"], strict=True)) / len(em),
                      "routing_acc": None if all(r == -1 for r in routes) and method.startswith("lora") else
                      100 * sum(r == p for r, p in zip(routes, group["procedure"], strict=True)) / len(em),
                      "em_round1": 100 * sum(first) / len(first)})
    return table


def evaluate(params: EvaluateParams, memory_predictions: pl.DataFrame, baseline_predictions: pl.DataFrame,
             memory_stats: dict, baseline_stats: dict) -> dict[str, object]:
    """Per method and round: EM, ROUGE-L, routing, round-1 EM (forgetting); the calls track's tool-selection and
    argument F1; trainable parameter counts; the headline (the numbers pipelines/tokmem.yaml's claims read) and the two plots."""
    atomic = pl.concat([memory_predictions.filter(pl.col("method") == "tokmem"), baseline_predictions], how="diagonal_relaxed")
    atomic = atomic.select("method", "round", "n_procedures", "procedure", "answer", "prediction", "routed")
    table = score_table(atomic)
    last = {r["method"]: r for r in table if r["round"] == max(t["round"] for t in table)}
    curve = {m: [r for r in table if r["method"] == m] for m in METHODS}
    calls = memory_predictions.filter(pl.col("method") == "tokmem_calls")
    tool_f1 = 100 * multiset_f1(calls["pred_tools"].to_list(), calls["tools"].to_list()) if not calls.is_empty() else None
    arg_f1 = 100 * multiset_f1(calls["pred_args"].to_list(), calls["args"].to_list()) if not calls.is_empty() else None
    forgot = {m: forgetting([r["em_round1"] for r in curve[m]]) for m in METHODS}
    headline = {
        "n_procedures": last["tokmem"]["n_procedures"],
        **{f"em_{m}": last[m]["em"] for m in METHODS},
        **{f"rouge_l_{m}": last[m]["rouge_l"] for m in METHODS},
        "routing_acc_tokmem": last["tokmem"]["routing_acc"],
        "routing_acc_retrieval": last["rag"]["routing_acc"],
        **{f"forgetting_{m}": forgot[m] for m in METHODS},
        "tool_f1_tokmem": tool_f1,
        "arg_f1_tokmem": arg_f1,
        "trainable_tokmem": memory_stats["trainable_tokmem"],
        "trainable_per_procedure_tokmem": memory_stats["trainable_per_procedure"],
        "trainable_tool_lora": memory_stats["trainable_tool_lora"],
        **{f"trainable_{m}": baseline_stats["trainable"][m] for m in METHODS[1:]},
        "backbone_unchanged": memory_stats["backbone_unchanged"],
        # the comparisons the claims test, each as one number (method - baseline, points)
        "em_tokmem_minus_rag": last["tokmem"]["em"] - last["rag"]["em"],
        "forgetting_lora_seq_minus_tokmem": forgot["lora_seq"] - forgot["tokmem"],
        "units": "EM, ROUGE-L, routing accuracy, F1 and forgetting in percent points; trainable = parameter counts",
    }
    metrics = {"headline": headline, "table": table}
    return {"metrics": metrics, "em_vs_procedures": _plot(curve, "em", "exact match, all procedures so far (%)"),
            "forgetting": _plot(curve, "em_round1", "exact match on round-1 procedures (%)")}


def _plot(curve: dict[str, list[dict]], key: str, label: str) -> Figure:
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.subplots()
    for method, rows in curve.items():
        ax.plot([r["n_procedures"] for r in rows], [r[key] for r in rows], marker="o", label=method)
    ax.set_xlabel("procedures added (memory rounds)")
    ax.set_ylabel(label)
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title(f"tokmem: {label} vs number of procedures", fontsize=9, loc="left")
    return fig
