"""TokMem's continual protocol (TokMem, ICLR 2026, arXiv 2510.00444) and its baselines, on a frozen backbone.

    backbone     a tiny LM pretrained on the backbone procedures in four formats: reading a description (RAG's
                 format), its own procedure token between query and response, chains of tool calls after its own
                 tokens, and chains of named calls reading the tools' descriptions (the calls track RAG's format)
    memory track one memory token per new procedure, added round by round; after every round every procedure seen
                 so far is tested, routing read from the emitted token (memory.py trains the bank)
    calls track  tool tokens added in rounds (the first round also trains a q/v LoRA, frozen afterwards); tested once
                 after the last round on chains of (tool, argument) calls
    baselines    RAG (MiniLM retrieves a description into the prompt), prompt tuning (a soft prompt per procedure,
                 routed by the same retrieval), sequential LoRA without and with replay; tested after every round
    calls        the calls track's baselines on the same tools, rounds, training calls and steps: RAG (the top-k tool
    baselines    descriptions in the prompt, k chosen on validation; and its perfect-reader bound) and sequential LoRA
                 fine-tuning (the official code's fine-tuning baseline: calls written out with the tool's name, rate
                 chosen on validation); tested once after the last round, as TokMem's calls track

Prediction rows: (procedure, query, answer, method, round, n_procedures, prediction, routed); calls rows: (query,
answer, tools, args, method, round, n_procedures, pred_tools, pred_args); metrics.py scores them.
"""

from __future__ import annotations

import copy
import random
import re
import time
from collections.abc import Callable
from typing import TypeVar

import polars as pl
import torch
from peft import LoraConfig, get_peft_model
from rich.progress import track

from paperdag.lm import TrainConfig, fit_causal_lm, generate_batches, plain
from paperdag.methods.tokmem.data import call_text, described_prompt, named_call_text, parse_named_calls, query_prompt, response
from paperdag.methods.tokmem.memory import MemoryBank, fit_bank, routed, split_at_memory
from paperdag.methods.tokmem.metrics import exact_match, multiset_f1
from paperdag.methods.tokmem.settings import BaselineSettings, MemorySettings

PROC_TOKEN = "<proc_{}>"  # the backbone's own procedure tokens (pretraining only)
Pool = list[tuple[list[int], list[int]]]  # (prompt ids, target ids) examples
T = TypeVar("T")


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def text(tokenizer, tokens: list[int]) -> str:
    """A generation as text, memory tokens (ids past the tokenizer's vocabulary) left out."""
    return tokenizer.decode([t for t in tokens if t < len(tokenizer)], skip_special_tokens=True).strip()


def calls_target(tokenizer, token_of: dict[int, int], tools: list[int], args: list[str]) -> list[int]:
    """The target of a calls query: each tool's token followed by its call text, then eos."""
    out: list[int] = []
    for tool, arg in zip(tools, args, strict=True):
        out += [token_of[tool], *ids(tokenizer, call_text(arg))]
    return out + [tokenizer.eos_token_id]


def named_calls_target(tokenizer, name_of: dict[int, str], tools: list[int], args: list[str]) -> list[int]:
    """The target of a calls query in text (no tool tokens): each call with its tool's name inside, then eos."""
    return ids(tokenizer, "".join(named_call_text(name_of[t], a) for t, a in zip(tools, args, strict=True))) + [tokenizer.eos_token_id]


def named_tools(generated: str, id_of: dict[str, int]) -> tuple[list[int], list[str]]:
    """The tools (ids; -1 for a name no tool has) and arguments of the named calls in a generation."""
    calls = parse_named_calls(generated)
    return [id_of.get(name, -1) for name, _ in calls], [arg for _, arg in calls]


def greedy(model, tokenizer, prompts: list[list[int]], max_new_tokens: int, batch_size: int, rule=plain) -> list[list[int]]:
    """Greedy generations in batches, with the step rule `rule`."""
    return generate_batches(model, [prompts], tokenizer.pad_token_id, tokenizer.eos_token_id, batch_size, rule=rule,
                            max_new_tokens=max_new_tokens).tokens


ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]  # every linear layer of a Llama block


def add_qv_lora(model, r: int, alpha: int, targets: tuple[str, ...] = ("q_proj", "v_proj")) -> int:
    """A LoRA on `targets` (default the attention's q and v projections, as TokMem's calls track), injected into
    `model` in place (peft); its trainable count (the model's other weights being frozen)."""
    get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, target_modules=list(targets), lora_dropout=0.0))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def check_sets(examples: pl.DataFrame, procedures: pl.DataFrame, stage: str) -> None:
    need = {"track", "split", "procedure", "query", "answer", "tools", "args", "set"}
    if missing := need - set(examples.columns):
        raise ValueError(f"tokmem {stage}: examples.parquet lacks columns {sorted(missing)}; rerun synthesize")
    if procedures.filter(pl.col("split") == "memory").is_empty():
        raise ValueError(f"tokmem {stage}: procedures.parquet has no memory procedures (synthesize.memory_procedures = 0)")


def rounds(procedures: pl.DataFrame, split: str) -> list[list[int]]:
    """The procedure ids each round adds, round by round."""
    table = procedures.filter(pl.col("split") == split).sort("id")
    return [table.filter(pl.col("round") == r)["id"].to_list() for r in sorted(table["round"].unique().to_list())]


def prediction_rows(method: str, rnd: int, n_procs: int, tests: pl.DataFrame, texts: list[str], routes: list[int]) -> pl.DataFrame:
    return tests.select("procedure", "query", "answer").with_columns(
        pl.lit(method).alias("method"), pl.lit(rnd).alias("round"), pl.lit(n_procs).alias("n_procedures"),
        pl.Series("prediction", texts, dtype=pl.String), pl.Series("routed", routes, dtype=pl.Int64))


# ---------------------------------------------------------------- backbone


def reading_lines(gold: list[int], others: list[int], extra: tuple[int, int], rng: random.Random) -> list[int]:
    """The procedures whose descriptions a calls prompt of the reading format lists: the gold tools and
    rng.randint(*extra) others (as a retriever's top-k brings distractors), shuffled (retrieval order is no cue)."""
    lines = gold + rng.sample([o for o in others if o not in gold], rng.randint(*extra))
    rng.shuffle(lines)
    return lines


def backbone_texts(procedures: pl.DataFrame, examples: pl.DataFrame) -> list[str]:
    """What the backbone's tokenizer learns from: its procedures' queries (both regimes) in the described format,
    with responses, and its calls in the reading format (every call's description, the named calls)."""
    desc = dict(zip(procedures["id"], procedures["description"], strict=True))
    name_of = dict(zip(procedures["id"], procedures["name"], strict=True))
    mine = examples.filter(pl.col("set") == "backbone")
    atomic, calls = mine.filter(pl.col("track") == "atomic"), mine.filter(pl.col("track") == "calls")
    return ([described_prompt(q, desc[t[0]]) + response(a) for col in ("query", "query_named")
             for q, a, t in atomic.select(col, "answer", "tools").iter_rows()]
            + [described_prompt(q, "\n".join(desc[i] for i in t))
               + "".join(named_call_text(name_of[i], x) for i, x in zip(t, a, strict=True))
               for col in ("query", "query_named") for q, t, a in calls.select(col, "tools", "args").iter_rows()])


def backbone_pools(tokenizer, procedures: pl.DataFrame, examples: pl.DataFrame, extra: tuple[int, int], rng: random.Random,
                   exclude: set[str]) -> tuple[dict[str, Pool], dict[str, Pool], dict[str, list]]:
    """The backbone's training pools (described, token, calls, described_calls), its held-out test pools (the same
    formats) and what each test item expects (answers; tool ids for the token-format calls, tool names for the
    reading format). `procedures`: the backbone procedures, each with its PROC_TOKEN in the tokenizer. The described
    formats are trained on both query regimes (RAG reads either), the token formats on paraphrased queries. A
    reading-format calls prompt lists the gold tools' descriptions and `extra` others (reading_lines), every tool
    under a fresh invented name (none in `exclude`, the world's names) drawn per example, in its description, the
    named query and the target: the name can only be read from the prompt, never recalled, so the backbone learns to
    read it, as RAG needs on tools it never saw. The last tenth of the backbone's calls (at most 100) are held out."""
    from paperdag.lm import invented_names

    desc = dict(zip(procedures["id"], procedures["description"], strict=True))
    name_of = dict(zip(procedures["id"], procedures["name"], strict=True))
    token_of = {i: tokenizer.convert_tokens_to_ids(PROC_TOKEN.format(i)) for i in procedures["id"]}
    others = procedures["id"].to_list()
    mine = examples.filter(pl.col("set") == "backbone")
    eos = [tokenizer.eos_token_id]
    atomic = {s: mine.filter((pl.col("track") == "atomic") & (pl.col("split") == s)) for s in ("train", "test")}
    every_call = mine.filter(pl.col("track") == "calls")
    held = min(100, every_call.height // 10)
    calls = {"train": every_call.head(every_call.height - held), "test": every_call.tail(held)}
    fresh_names = invented_names(max(2000, 4 * len(others)), rng, exclude=exclude)

    def described(rows: pl.DataFrame, columns: tuple[str, ...] = ("query",)) -> Pool:
        return [(ids(tokenizer, described_prompt(q, desc[p])), ids(tokenizer, response(a)) + eos)
                for col in columns for q, a, p in rows.select(col, "answer", "procedure").iter_rows()]

    def token(rows: pl.DataFrame) -> Pool:
        return [(ids(tokenizer, query_prompt(q)), [token_of[p], *ids(tokenizer, response(a))] + eos)
                for q, a, p in rows.select("query", "answer", "procedure").iter_rows()]

    def token_calls(rows: pl.DataFrame) -> Pool:
        return [(ids(tokenizer, query_prompt(q)), calls_target(tokenizer, token_of, t, a))
                for q, t, a in rows.select("query", "tools", "args").iter_rows()]

    def described_calls(rows: pl.DataFrame, columns: tuple[str, ...] = ("query",)) -> tuple[Pool, list[list[str]]]:
        pool, gold = [], []
        for col in columns:
            for q, t, a in rows.select(col, "tools", "args").iter_rows():
                lines = reading_lines(t, others, extra, rng)
                fresh = dict(zip(lines, rng.sample(fresh_names, len(lines)), strict=True))
                for i in t:  # the named regime names the tools: by their fresh names
                    q = re.sub(rf"\b{name_of[i]}\b", fresh[i], q)
                lines_text = "\n".join(fresh[i] + desc[i][len(name_of[i]):] for i in lines)
                pool.append((ids(tokenizer, described_prompt(q, lines_text)), named_calls_target(tokenizer, fresh, t, a)))
                gold.append([fresh[i] for i in t])
        return pool, gold

    reading_train, _ = described_calls(calls["train"], ("query", "query_named"))
    reading_test, reading_gold = described_calls(calls["test"])
    train = {"described": described(atomic["train"], ("query", "query_named")), "token": token(atomic["train"]),
             "calls": token_calls(calls["train"]), "described_calls": reading_train}
    test = {"described": described(atomic["test"]), "token": token(atomic["test"]), "calls": token_calls(calls["test"]),
            "described_calls": reading_test}
    answers = atomic["test"]["answer"].to_list()
    return train, test, {"described": answers, "token": answers, "calls": calls["test"]["tools"].to_list(), "described_calls": reading_gold}


def backbone_scores(model, tokenizer, procedures: pl.DataFrame, test: dict[str, Pool], expected: dict[str, list],
                    max_new_tokens: int, max_call_tokens: int) -> dict[str, float]:
    """Exact match reading a description and exact match after the model routes itself (its emitted procedure
    token, then the response), with that routing's accuracy; tool-selection F1 (percent) of the held-out calls
    after its own procedure tokens, and reading the tools' descriptions under fresh names (the names it wrote)."""
    stats: dict[str, float] = {}
    proc_of = {tokenizer.convert_tokens_to_ids(PROC_TOKEN.format(i)): i for i in procedures["id"]}
    for name, pool in test.items():
        if not pool:
            stats[f"{name}_tool_f1" if "calls" in name else f"{name}_em"] = 0.0
            continue
        calls = "calls" in name
        outs = greedy(model, tokenizer, [p for p, _ in pool], max_call_tokens if calls else max_new_tokens + 1, 256)
        if name == "calls":  # the procedures whose own tokens it emitted, in order
            stats["calls_tool_f1"] = 100 * multiset_f1([[proc_of[t] for t in o if t in proc_of] for o in outs], expected[name])
            continue
        if name == "described_calls":
            stats["described_calls_tool_f1"] = 100 * multiset_f1([[n for n, _ in parse_named_calls(text(tokenizer, o))] for o in outs],
                                                                   expected[name])
            continue
        if name == "token":  # the model routes itself: emitted procedure token, then the response
            stats["token_routing_acc"] = sum(o[:1] == t[:1] for o, (_, t) in zip(outs, pool, strict=True)) / len(pool)
            outs = [o[1:] for o in outs]
        texts = [text(tokenizer, o) for o in outs]
        stats[f"{name}_em"] = sum(exact_match(o, a) for o, a in zip(texts, expected[name], strict=True)) / len(pool)
    return stats


# ---------------------------------------------------------------- TokMem: memory and calls tracks


def procedure_ids(tokenizer) -> list[int]:
    """The ids of the backbone's own procedure tokens (PROC_TOKEN), trained in pretraining."""
    return sorted(i for t, i in tokenizer.get_added_vocab().items() if t.startswith("<proc_"))


def procedure_rows(model, tokenizer) -> torch.Tensor:
    """The backbone's own procedure-token rows: the inactive rows the first round's new rows are renormalised to."""
    return model.get_input_embeddings().weight[procedure_ids(tokenizer)].detach()


def memory_rounds(backbone, tokenizer, procedures: pl.DataFrame, examples: pl.DataFrame, fallback: torch.Tensor,
                  s: MemorySettings) -> tuple[MemoryBank, list[int], list[pl.DataFrame], list[list[float]]]:
    """The memory track: per round, one new memory token per procedure trained on its queries (seed + round), then
    every procedure seen so far tested. The bank, its procedure order (bank index -> id), predictions, losses.

    With s.mask_backbone_procedures the backbone's own procedure tokens are out of the routing softmax (training and
    generation); either way `backbone_route` records whether the unmasked first step would emit one of them."""
    backbone_ids = procedure_ids(tokenizer)
    bank = MemoryBank(backbone, emit=True, masked=backbone_ids if s.mask_backbone_procedures else ())
    vocab, eos = bank.vocab, [tokenizer.eos_token_id]
    atomic = examples.filter(pl.col("track") == "atomic")
    order: list[int] = []  # bank index -> procedure id
    frames, losses = [], []
    added = rounds(procedures, "memory")
    for rnd, procs in enumerate(added, start=1):
        token_of = dict(zip(procs, bank.add(len(procs), bank.inactive_norm(fallback), seed=s.seed + rnd), strict=True))
        order += procs
        train = atomic.filter((pl.col("split") == "train") & pl.col("procedure").is_in(procs))
        pool = [(ids(tokenizer, query_prompt(q)), [token_of[p], *ids(tokenizer, response(a))] + eos)
                for q, a, p in train.select("query", "answer", "procedure").iter_rows()]
        config = TrainConfig(s.steps_per_round, s.lr, 0, 0.0, seed=s.seed + rnd)
        losses.append(fit_bank(bank, pool, config, s.batch_size, tokenizer.pad_token_id, s.renormalise, fallback,
                               f"tokmem memory round {rnd}/{len(added)}"))
        tests = atomic.filter((pl.col("split") == "test") & pl.col("procedure").is_in(order))
        model, prompts = bank.materialise(), [ids(tokenizer, query_prompt(q)) for q in tests["query"]]
        outs = greedy(model, tokenizer, prompts, s.max_new_tokens, s.eval_batch_size, rule=bank.rule)
        first = set(backbone_ids)
        unmasked = [o[:1] for o in greedy(model, tokenizer, prompts, 1, s.eval_batch_size)]
        routes = [order[r] if 0 <= (r := routed(o, vocab)) < len(order) else -1 for o in outs]
        texts = [text(tokenizer, o[1:] if routed(o, vocab) >= 0 else o) for o in outs]
        frames.append(prediction_rows("tokmem", rnd, len(order), tests, texts, routes).with_columns(
            pl.Series("backbone_route", [bool(u) and u[0] in first for u in unmasked], dtype=pl.Boolean)))
    return bank, order, frames, losses


def round_calls(calls: pl.DataFrame, tools: list[int]) -> pl.DataFrame:
    """The calls that use only `tools` (the tools added so far): a round's training calls, for TokMem and its
    baselines alike."""
    return calls.filter(pl.col("tools").list.eval(pl.element().is_in(tools)).list.all())


def calls_rows(method: str, n_rounds: int, n_tools: int, tests: pl.DataFrame, pred_tools: list[list[int]],
               pred_args: list[list[str]], **extra: pl.Series) -> pl.DataFrame:
    """Prediction rows of the calls track: each test call's gold and predicted (tool, argument) chains."""
    return tests.select("query", "answer", "tools", "args").with_columns(
        pl.lit(method).alias("method"), pl.lit(n_rounds).alias("round"), pl.lit(n_tools).alias("n_procedures"),
        pl.Series("pred_tools", pred_tools, dtype=pl.List(pl.Int64)), pl.Series("pred_args", pred_args, dtype=pl.List(pl.String)),
        *extra.values())


def tool_track(backbone, tokenizer, procedures: pl.DataFrame, examples: pl.DataFrame, fallback: torch.Tensor,
               s: MemorySettings) -> tuple[torch.Tensor, pl.DataFrame, list[list[float]], int]:
    """The calls track on a copy of the backbone: tool tokens added in rounds (seed + 100 + round); with tool_lora, the
    first round also trains a LoRA (q/v) that is frozen afterwards. Tested once after the last round: the chain of
    (tool, argument) calls. The tool rows, predictions, losses per round and the LoRA's parameter count."""
    added = rounds(procedures, "tool")
    calls = examples.filter((pl.col("track") == "calls") & (pl.col("set") == "tool"))
    if not added or calls.is_empty():
        return torch.zeros(0), pl.DataFrame(), [], 0
    bank = MemoryBank(copy.deepcopy(backbone), emit=True, masked=procedure_ids(tokenizer) if s.mask_backbone_procedures else ())
    order: list[int] = []
    losses, lora_params = [], 0
    for rnd, procs in enumerate(added, start=1):
        bank.add(len(procs), bank.inactive_norm(fallback), seed=s.seed + 100 + rnd)
        order += procs
        if rnd == 1 and s.tool_lora:
            lora_params = add_qv_lora(bank.model, s.lora_r, s.lora_alpha)
        token_of = {p: bank.vocab + order.index(p) for p in order}
        train = round_calls(calls.filter(pl.col("split") == "train"), order)
        pool = [(ids(tokenizer, query_prompt(q)), calls_target(tokenizer, token_of, t, a))
                for q, t, a in train.select("query", "tools", "args").iter_rows()]
        if not pool:
            raise ValueError(f"tokmem train_memory: no training calls use only the tools of rounds 1..{rnd}; "
                             "raise synthesize.tool_train_calls")
        config = TrainConfig(s.tool_steps_per_round, s.tool_lr, 0, 0.0, seed=s.seed + 100 + rnd)
        losses.append(fit_bank(bank, pool, config, s.batch_size, tokenizer.pad_token_id, s.renormalise, fallback,
                               f"tokmem tools round {rnd}/{len(added)}"))
        bank.model.requires_grad_(False)  # the first-round LoRA is frozen afterwards
    tests = calls.filter(pl.col("split") == "test")
    outs = greedy(bank.materialise(), tokenizer, [ids(tokenizer, query_prompt(q)) for q in tests["query"]], s.max_call_tokens,
                  s.eval_batch_size, rule=bank.rule)
    pred_tools, pred_args = [], []
    for o in outs:
        steps = [(i, text(tokenizer, t)) for i, t in split_at_memory(o, bank.vocab) if i >= 0]
        pred_tools.append([order[i] if i < len(order) else -1 for i, _ in steps])
        pred_args.append([m.group(1) if (m := re.search(r'"arg":\s*"([^"]*)"', call)) else "" for _, call in steps])
    frame = calls_rows("tokmem_calls", len(added), len(order), tests, pred_tools, pred_args)
    return bank.rows().detach(), frame, losses, lora_params


# ---------------------------------------------------------------- baselines

Retrieved = list[tuple[pl.DataFrame, list[int], int]]  # per round: its test rows, the retrieved procedure per row, procedures seen


def description_index(encoder, descriptions: list[str]):
    """The descriptions' encoder vectors in an exact inner-product index (paperdag.retrieval), ids = list positions."""
    from paperdag.retrieval import AnnIndex, encode

    return AnnIndex.build(encode(encoder, descriptions, progress=False), kind="flat", metric="ip")


def retrieval_by_round(encoder, added: list[list[int]], pids: list[int], descriptions: list[str],
                       tests_all: pl.DataFrame, column: str = "query") -> Retrieved:
    """Per round, for every test query (its `column`: "query" paraphrased, "query_named" named) of the procedures
    added so far: the procedure whose description the encoder ranks first among those procedures' descriptions
    (exact inner-product search)."""
    from paperdag.retrieval import encode

    index = description_index(encoder, descriptions)
    query_vectors = encode(encoder, tests_all[column].to_list(), progress=False)  # (Q, D), tests_all's row order
    rows = tests_all.with_row_index("_row")
    seen: list[int] = []
    out: Retrieved = []
    for procs in added:
        seen += procs
        tests = rows.filter(pl.col("procedure").is_in(seen))
        _, hits = index.search(query_vectors[tests["_row"].to_numpy()], 1, subset=[pids.index(p) for p in seen])
        out.append((tests.drop("_row"), [pids[h] for h in hits[:, 0]], len(seen)))
    return out


def rag(backbone, tokenizer, retrieved: Retrieved, desc: dict[int, str], max_new_tokens: int,
        eval_batch_size: int, column: str = "query", method: str = "rag") -> tuple[list[pl.DataFrame], int]:
    """RAG: the retrieved procedure's description in the prompt (the backbone's described format) after the query's
    `column` (the regime retrieval used); nothing trained."""
    frames = []
    for rnd, (tests, hits, n_seen) in enumerate(track(retrieved, description=f"tokmem {method}"), start=1):
        prompts = [ids(tokenizer, described_prompt(q, desc[r])) for q, r in zip(tests[column], hits, strict=True)]
        outs = greedy(backbone, tokenizer, prompts, max_new_tokens, eval_batch_size)
        frames.append(prediction_rows(method, rnd, n_seen, tests, [text(tokenizer, o) for o in outs], hits))
    return frames, 0


def prompt_tuning(backbone, tokenizer, added: list[list[int]], atomic: pl.DataFrame, retrieved: Retrieved,
                  s: BaselineSettings) -> tuple[list[pl.DataFrame], int]:
    """Prompt tuning: s.prompt_tokens input-only rows per procedure, trained per round (seed + round), placed where
    the backbone reads a procedure token (between the query and the response: [query][P_i][response]); at test
    time the retrieved procedure's prompt is used. Predictions and trainable count."""
    bank = MemoryBank(backbone, emit=False)
    vocab_norm = float(backbone.get_input_embeddings().weight.norm(dim=-1).mean())
    eos = [tokenizer.eos_token_id]
    prompt_of: dict[int, list[int]] = {}
    frames = []
    for rnd, procs in enumerate(added, start=1):
        rows = list(bank.add(len(procs) * s.prompt_tokens, vocab_norm, seed=s.seed + rnd))
        prompt_of |= {p: rows[i * s.prompt_tokens : (i + 1) * s.prompt_tokens] for i, p in enumerate(procs)}
        train = atomic.filter((pl.col("split") == "train") & pl.col("procedure").is_in(procs))
        pool = [(ids(tokenizer, query_prompt(q)) + prompt_of[p], ids(tokenizer, response(a)) + eos)
                for q, a, p in train.select("query", "answer", "procedure").iter_rows()]
        fit_bank(bank, pool, TrainConfig(s.steps_per_round, s.prompt_lr, 0, 0.0, seed=s.seed + rnd), s.batch_size,
                 tokenizer.pad_token_id, False, bank.rows(), f"tokmem prompt tuning round {rnd}/{len(added)}")
        tests, hits, n_seen = retrieved[rnd - 1]
        prompts = [ids(tokenizer, query_prompt(q)) + prompt_of[r] for q, r in zip(tests["query"], hits, strict=True)]
        vocab = bank.vocab
        outs = greedy(bank.materialise(), tokenizer, prompts, s.max_new_tokens, s.eval_batch_size,
                      rule=lambda logits: logits[0][:, :vocab])  # soft-prompt rows are never emitted
        frames.append(prediction_rows("prompt_tuning", rnd, n_seen, tests, [text(tokenizer, o) for o in outs], hits))
    return frames, int(bank.rows().numel())


def lora_pool(tokenizer, atomic: pl.DataFrame, procs: list[int], split: str = "train") -> Pool:
    """The plain format's examples of `procs` ([query][response]<eos>): what LoRA fine-tuning learns from."""
    rows = atomic.filter((pl.col("split") == split) & pl.col("procedure").is_in(procs))
    return [(ids(tokenizer, query_prompt(q)), ids(tokenizer, response(a)) + [tokenizer.eos_token_id])
            for q, a in rows.select("query", "answer").iter_rows()]


def tune_lora_lr(backbone, tokenizer, round_pools: list[tuple[dict[str, Pool], dict[str, float]]], prompts: list[list[int]],
                 score: Callable[[list[list[int]]], float], lrs: list[float], steps: int, seed: int, max_new_tokens: int,
                 s: BaselineSettings, what: str) -> tuple[float, dict[str, float]]:
    """LoRA's learning rate at its best: per candidate in `lrs` a fresh LoRA run through the rounds it will run
    (sequential_lora on `round_pools`, `steps` per round, seed + round), its greedy generations of the validation
    `prompts` after the last round scored by `score` (validation items are held-out training items, never test
    ones). The best rate (ties: the first) and every candidate's score."""
    scores: dict[str, float] = {}
    for lr in lrs:
        def last(rnd: int, lm) -> float | None:
            return score(greedy(lm, tokenizer, prompts, max_new_tokens, s.eval_batch_size)) if rnd == len(round_pools) else None

        (scores[f"{lr:g}"],), _ = sequential_lora(backbone, tokenizer, round_pools, lr, steps, seed, last,
                                                  f"{what} LoRA lr {lr:g} (validation)", s)
    return max(lrs, key=lambda lr: scores[f"{lr:g}"]), scores


def sequential_lora(backbone, tokenizer, round_pools: list[tuple[dict[str, Pool], dict[str, float]]], lr: float, steps: int,
                    seed: int, after_round: Callable[[int, object], T | None], method: str, s: BaselineSettings) -> tuple[list[T], int]:
    """One LoRA (on s.lora_targets, at learning rate `lr`) on a copy of the backbone, trained round after round
    (`steps` steps, seed + round) on that round's pools drawn by their mixture; after each round `after_round(round,
    model)` tests it (None: no test that round). No routing: the LoRA answers every query itself. The tests' results
    and the LoRA's trainable count."""
    lm = copy.deepcopy(backbone)
    trainable = add_qv_lora(lm, s.lora_r, s.lora_alpha, tuple(s.lora_targets))
    results = []
    for rnd, (pools, mixture) in enumerate(round_pools, start=1):
        fit_causal_lm(lm, pools, mixture, TrainConfig(steps, lr, 0, 0.0, seed=seed + rnd), s.batch_size,
                      tokenizer.pad_token_id, description=f"tokmem {method} round {rnd}/{len(round_pools)}")
        if (result := after_round(rnd, lm)) is not None:
            results.append(result)
    return results, trainable


def atomic_lora(backbone, tokenizer, added: list[list[int]], atomic: pl.DataFrame, tests_all: pl.DataFrame,
                tuning: dict[str, object], s: BaselineSettings) -> Callable[[str, float], tuple[list[pl.DataFrame], int]]:
    """Sequential LoRA on the memory procedures' rounds: `run(method, replay)` trains it on each round's new
    procedures, with `replay` of each batch drawn from earlier rounds' (0: none), and tests every procedure seen so
    far after each round. Its rate is chosen once, on first use (into `tuning`): per procedure of round 1,
    s.validation_queries training queries held out and scored by EM."""
    train = atomic.filter((pl.col("split") == "train") & pl.col("procedure").is_in(added[0])).with_columns(
        (pl.int_range(pl.len()).over("procedure") < s.validation_queries).alias("_val"))
    fit_rows, val_rows = train.filter(~pl.col("_val")), train.filter(pl.col("_val"))
    if fit_rows.is_empty():
        raise ValueError(f"tokmem baselines: validation_queries = {s.validation_queries} leaves no round-1 training query to "
                         "tune LoRA on; lower baselines.validation_queries below synthesize.train_queries")

    def em(outs: list[list[int]]) -> float:
        return 100 * sum(exact_match(text(tokenizer, o), a) for o, a in zip(outs, val_rows["answer"], strict=True)) / len(outs)

    def run(method: str, replay: float) -> tuple[list[pl.DataFrame], int]:
        if "lr" not in tuning:  # round 1 alone, its one round seeded s.seed
            tuning["lr"], tuning["validation_em"] = tune_lora_lr(
                backbone, tokenizer, [({"current": lora_pool(tokenizer, fit_rows, added[0])}, {"current": 1.0})],
                [ids(tokenizer, query_prompt(q)) for q in val_rows["query"]], em, s.lora_lrs, s.steps_per_round, s.seed - 1,
                s.max_new_tokens, s, "atomic")
        round_pools, done = [], []
        for procs in added:
            pools, mixture = {"current": lora_pool(tokenizer, atomic, procs)}, {"current": 1.0}
            if replay > 0 and done:
                pools["replay"], mixture = lora_pool(tokenizer, atomic, done), {"current": 1.0 - replay, "replay": replay}
            round_pools.append((pools, mixture))
            done = done + procs

        def test(rnd: int, lm) -> pl.DataFrame:
            seen = [p for procs in added[:rnd] for p in procs]
            tests = tests_all.filter(pl.col("procedure").is_in(seen))
            outs = greedy(lm, tokenizer, [ids(tokenizer, query_prompt(q)) for q in tests["query"]], s.max_new_tokens, s.eval_batch_size)
            return prediction_rows(method, rnd, len(seen), tests, [text(tokenizer, o) for o in outs], [-1] * len(outs))

        return sequential_lora(backbone, tokenizer, round_pools, float(tuning["lr"]), s.steps_per_round, s.seed, test, method, s)

    return run


# ---------------------------------------------------------------- calls-track baselines


def rag_bound(tests: pl.DataFrame, hits, tids: list[int], n_rounds: int) -> pl.DataFrame:
    """RAG with a perfect reader (rag_bound_calls): of the retrieved tools (`hits`, rows of positions in `tids`) it
    calls exactly the gold ones, with their gold arguments, and nothing else: precision 1, recall the retriever's;
    no reader of the same retrieved descriptions scores higher. An upper bound, not a method."""
    pred_tools, pred_args = [], []
    for tools, args, row in zip(tests["tools"], tests["args"], hits.tolist(), strict=True):
        found = {tids[h] for h in row if h >= 0}
        pred_tools.append([t for t in tools if t in found])
        pred_args.append([a for t, a in zip(tools, args, strict=True) if t in found])
    retrieved = [[tids[h] for h in row if h >= 0] for row in hits.tolist()]
    return calls_rows("rag_bound_calls", n_rounds, len(tids), tests, pred_tools, pred_args,
                      retrieved=pl.Series("retrieved", retrieved, dtype=pl.List(pl.Int64)))


def calls_baselines(backbone, tokenizer, procedures: pl.DataFrame, examples: pl.DataFrame, encoder,
                    s: BaselineSettings) -> tuple[list[pl.DataFrame], dict[str, float], dict[str, int], dict[str, object]]:
    """The calls track's baselines, on TokMem's calls-track tools, rounds and training calls (round_calls), with its
    steps per round (s.tool_steps_per_round) and batch size, tested once after the last round on the same test calls:

    rag_calls        the top-k tool descriptions MiniLM ranks for the query in the prompt (the backbone's reading
                     format), the backbone writes the calls naming the tools; nothing trained
    rag_named_calls  the same on the named queries (each step names its tool): the retrieval ceiling
    rag_bound_calls  the largest k's retrieval read by a perfect reader (rag_bound): what no RAG with this
                     retriever exceeds, whatever reads its descriptions
    lora_calls       fine-tuning: one LoRA (s.lora_targets) trained round after round to write the calls naming the
                     tools (query -> named calls), as the official code's sequential fine-tuning baseline

    Settings at their best on a validation split of the training calls (the first s.tool_validation_calls, over
    every round's tools; never a test call), each scored as the method is tested, after the last round, by
    tool-selection F1: RAG's k among s.rag_top_ks (retrieving among every tool), the LoRA rate among
    s.tool_lora_lrs (each candidate run through both rounds on the other training calls: a rate that fits round 1
    can diverge in round 2). Predictions, seconds, trainable counts, the choices with every candidate's
    validation F1."""
    from paperdag.retrieval import encode

    added = rounds(procedures, "tool")
    calls = examples.filter((pl.col("track") == "calls") & (pl.col("set") == "tool"))
    if not added or calls.is_empty():
        return [], {}, {}, {}
    tools = procedures.filter(pl.col("split") == "tool").sort("id")
    tids, descriptions = tools["id"].to_list(), tools["description"].to_list()
    name_of, desc = dict(zip(tids, tools["name"], strict=True)), dict(zip(tids, descriptions, strict=True))
    id_of = {n: i for i, n in name_of.items()}
    train, tests = calls.filter(pl.col("split") == "train"), calls.filter(pl.col("split") == "test")
    val, fit = train.head(s.tool_validation_calls), train.slice(s.tool_validation_calls)

    def round_pools(rows: pl.DataFrame) -> list[tuple[dict[str, Pool], dict[str, float]]]:
        """Per round, its training calls (round_calls) in the named format."""
        out, seen = [], []
        for procs in added:
            seen = seen + procs
            pool = [(ids(tokenizer, query_prompt(q)), named_calls_target(tokenizer, name_of, t, a))
                    for q, t, a in round_calls(rows, seen).select("query", "tools", "args").iter_rows()]
            if not pool:
                raise ValueError(f"tokmem baselines: no training calls (less baselines.tool_validation_calls = "
                                 f"{s.tool_validation_calls} held out) use only the tools of rounds 1..{len(out) + 1}; raise "
                                 "synthesize.tool_train_calls or lower baselines.tool_validation_calls")
            out.append(({"current": pool}, {"current": 1.0}))
        return out

    index = description_index(encoder, descriptions)
    every = [tids.index(t) for procs in added for t in procs]

    def tool_f1(rows: pl.DataFrame, outs: list[list[int]]) -> float:
        return 100 * multiset_f1([named_tools(text(tokenizer, o), id_of)[0] for o in outs], rows["tools"].to_list())

    def rag(rows: pl.DataFrame, column: str, k: int, subset: list[int]) -> tuple[list[list[int]], list[list[int]]]:
        """Greedy generations reading the top-k descriptions (retrieval order) and the retrieved tools."""
        _, hits = index.search(encode(encoder, rows[column].to_list(), progress=False), min(k, len(subset)), subset=subset)
        retrieved = [[tids[h] for h in row if h >= 0] for row in hits.tolist()]
        prompts = [ids(tokenizer, described_prompt(q, "\n".join(desc[t] for t in r))) for q, r in zip(rows[column], retrieved, strict=True)]
        return greedy(backbone, tokenizer, prompts, s.max_call_tokens, s.eval_batch_size), retrieved

    frames, seconds, tuning = [], {}, {}

    def predicted(method: str, outs: list[list[int]], **extra: pl.Series) -> pl.DataFrame:
        texts = [text(tokenizer, o) for o in outs]
        parsed = [named_tools(t, id_of) for t in texts]
        return calls_rows(method, len(added), len(every), tests, [p[0] for p in parsed], [p[1] for p in parsed],
                          prediction=pl.Series("prediction", texts, dtype=pl.String), **extra)

    start = time.perf_counter()
    rag_f1 = {str(k): tool_f1(val, rag(val, "query", k, every)[0]) for k in s.rag_top_ks}
    k = max(s.rag_top_ks, key=lambda c: rag_f1[str(c)])
    tuning |= {"rag_top_k": k, "rag_validation_tool_f1": rag_f1}
    for method, column in (("rag_calls", "query"), ("rag_named_calls", "query_named")):
        outs, retrieved = rag(tests, column, k, every)
        frames.append(predicted(method, outs, retrieved=pl.Series("retrieved", retrieved, dtype=pl.List(pl.Int64))))
    frames.append(rag_bound(tests, index.search(encode(encoder, tests["query"].to_list(), progress=False),
                                                min(max(s.rag_top_ks), len(every)), subset=every)[1], tids, len(added)))
    seconds["rag_calls"] = time.perf_counter() - start

    start = time.perf_counter()
    tuning["lr"], tuning["validation_tool_f1"] = tune_lora_lr(
        backbone, tokenizer, round_pools(fit), [ids(tokenizer, query_prompt(q)) for q in val["query"]], lambda outs: tool_f1(val, outs),
        s.tool_lora_lrs, s.tool_steps_per_round, s.seed + 100, s.max_call_tokens, s, "calls")

    def test(rnd: int, lm) -> pl.DataFrame | None:
        if rnd < len(added):
            return None
        return predicted("lora_calls", greedy(lm, tokenizer, [ids(tokenizer, query_prompt(q)) for q in tests["query"]],
                                              s.max_call_tokens, s.eval_batch_size))

    made, lora_params = sequential_lora(backbone, tokenizer, round_pools(train), float(tuning["lr"]), s.tool_steps_per_round,
                                        s.seed + 100, test, "lora_calls", s)
    frames += made
    seconds["lora_calls"] = time.perf_counter() - start
    return frames, seconds, {"rag_calls": 0, "rag_named_calls": 0, "rag_bound_calls": 0, "lora_calls": lora_params}, tuning


def run_baselines(backbone, tokenizer, procedures: pl.DataFrame, examples: pl.DataFrame, encoder,
                  s: BaselineSettings) -> tuple[list[pl.DataFrame], dict[str, float], dict[str, int], dict[str, object]]:
    """RAG in both query regimes (paraphrased, named), prompt tuning, sequential LoRA without and with replay (its
    learning rate tuned first on a validation split of round 1) on the memory procedures' rounds, then the calls
    track's baselines (calls_baselines), in this order (each LoRA's initialisation draws from torch's generator as
    the runs before left it): their predictions, the seconds each took, its trainable parameter count, and the
    tuning (LoRA rate with validation EM per rate; under "calls", the calls track's choices)."""
    backbone.requires_grad_(False)
    added = rounds(procedures, "memory")
    memory = procedures.filter(pl.col("split") == "memory").sort("id")
    pids, descriptions = memory["id"].to_list(), memory["description"].to_list()
    atomic = examples.filter(pl.col("track") == "atomic")
    tests_all = atomic.filter((pl.col("split") == "test") & pl.col("procedure").is_in(pids))
    retrieved = retrieval_by_round(encoder, added, pids, descriptions, tests_all)
    named = retrieval_by_round(encoder, added, pids, descriptions, tests_all, "query_named")
    desc = dict(zip(pids, descriptions, strict=True))
    tuning: dict[str, object] = {}
    lora = atomic_lora(backbone, tokenizer, added, atomic, tests_all, tuning, s)

    runs = {"rag": lambda: rag(backbone, tokenizer, retrieved, desc, s.max_new_tokens, s.eval_batch_size),
            "rag_named": lambda: rag(backbone, tokenizer, named, desc, s.max_new_tokens, s.eval_batch_size, "query_named", "rag_named"),
            "prompt_tuning": lambda: prompt_tuning(backbone, tokenizer, added, atomic, retrieved, s),
            "lora_seq": lambda: lora("lora_seq", 0.0),
            "lora_replay": lambda: lora("lora_replay", s.replay_fraction)}
    frames, seconds, trainable = [], {}, {}
    for name, run in runs.items():
        start = time.perf_counter()
        made, trainable[name] = run()
        frames += made
        seconds[name] = time.perf_counter() - start
    made, call_seconds, call_trainable, tuning["calls"] = calls_baselines(backbone, tokenizer, procedures, examples, encoder, s)
    return frames + made, seconds | call_seconds, trainable | call_trainable, tuning
