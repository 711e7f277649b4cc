"""Glue between the paperdag engine and the DeepRAG method: synthesize -> train_lm -> search -> imitate -> calibrate
-> infer -> evaluate (train_lm to infer per replicate). The MDP, the tree search, the trainings, the baselines and
the scores live in paperdag.methods.deeprag; these functions read inputs and call them."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from paperdag.engine import Item
from paperdag.methods.deeprag.settings import (CalibrateSettings, ImitateSettings, InferSettings, SearchSettings, SynthesizeSettings,
                                               TrainLMSettings)


def synthesize(params: SynthesizeSettings) -> dict[str, object]:
    """The fact world (one KB document per fact) and 2-3-hop questions with their gold decompositions."""
    from paperdag.methods.deeprag import check_questions, documents_table, facts_table, make_questions, make_world

    world = make_world(params.people, params.seed)
    questions = make_questions(world, params.questions, params.hops, params.seed + 1)
    check_questions(questions, world.group_of())
    facts = facts_table(world)
    return {"facts": facts, "documents": documents_table(facts), "questions": pl.DataFrame(questions)}


@dataclass(frozen=True)
class TrainLMParams(TrainLMSettings):
    item: Item


def train_lm(params: TrainLMParams, facts: pl.DataFrame, documents: pl.DataFrame) -> dict[str, object]:
    """A tiny Llama memorising a random subset of the question people's facts and reading the reading people's;
    its boundary checked: recall of memorised facts high, of the others near chance, reading accurate."""
    from paperdag.lm import build_or_load, checkpoint_writer, fit_pools
    from paperdag.methods.deeprag import (PARAMETRIC, RETRIEVE, SPECIAL_TOKENS, Retriever, Steps, answer_accuracy, base_pools,
                                          check_boundary, choose_memorised, fact_dict)

    start = time.perf_counter()
    world = [(e, r) for e, r, g in facts.select("entity", "relation", "group").iter_rows() if g != "reading"]
    reading = {(e, r) for e, r, g in facts.select("entity", "relation", "group").iter_rows() if g == "reading"}
    memorised, fd = choose_memorised(world, params.memorised_fraction, params.seed), fact_dict(facts)
    retriever = Retriever(documents["text"].to_list(), params.top_k)
    model, tokenizer = build_or_load(params, documents["text"].to_list(), special_tokens=list(SPECIAL_TOKENS))
    steps = Steps(tokenizer)
    pools = base_pools(steps, params.top_k, fd, memorised, reading, params.reading_copies, params.seed)
    report = fit_pools(model, pools, {"closed": 1 - params.reading_weight, "reading": params.reading_weight}, params, steps.pad, "deeprag LM")
    held = sorted(set(world) - memorised)
    check = (params.max_new_tokens, params.eval_batch_size)
    stats = {"replicate": params.item.replicate, "memorised": len(memorised), "held_out": len(held),
             "recall_memorised": answer_accuracy(model, steps, retriever, fd, sorted(memorised), PARAMETRIC, *check),
             "recall_held_out": answer_accuracy(model, steps, retriever, fd, held, PARAMETRIC, *check),
             "reading_accuracy": answer_accuracy(model, steps, retriever, fd, sorted(world), RETRIEVE, *check),
             "parameters": sum(p.numel() for p in model.parameters()), "final_loss": report.final(), "loss": report.losses["loss"]}
    check_boundary(stats, params.min_recall, params.max_heldout_recall, params.min_reading)
    stats["train_seconds"] = time.perf_counter() - start
    table = pl.DataFrame([{"entity": e, "relation": r, "memorised": (e, r) in memorised} for e, r in sorted(world)])
    return {"model": checkpoint_writer(model, tokenizer), "memorised": table, "lm_stats": stats}


@dataclass(frozen=True)
class SearchParams(SearchSettings):
    item: Item


def _expand(model: Path, documents: pl.DataFrame, questions: list[dict], top_k: int, max_new_tokens: int, batch: int, what: str):
    from paperdag.lm import load_causal_lm
    from paperdag.methods.deeprag import Retriever, Steps, by_question, expand_tree

    lm, tokenizer = load_causal_lm(model)
    steps = Steps(tokenizer)
    nodes = expand_tree(lm, steps, Retriever(documents["text"].to_list(), top_k), questions, max_new_tokens, batch,
                        progress=lambda m: print(f"deeprag {what}: {m}", flush=True))
    return lm, steps, nodes, by_question(nodes)


def search(params: SearchParams, model: Path, documents: pl.DataFrame, questions: pl.DataFrame) -> dict[str, object]:
    """Binary tree search on the training questions with the base LM: every node answered, then per question the
    minimal-retrieval correct path."""
    from paperdag.methods.deeprag import best_paths, path_steps, questions_of, retrievals

    train = questions_of(questions, "train")
    _, _, nodes, trees = _expand(model, documents, train, params.top_k, params.max_new_tokens, params.eval_batch_size, "search")
    paths = best_paths(trees, train, params.depth_limit)
    solved = len(paths)
    if params.unsolved_as_retrieval:
        paths.update({q["id"]: "R" * q["hops"] for q in train if q["id"] not in paths})
    counts = [retrievals(p) for p in paths.values()]
    stats = {"replicate": params.item.replicate, "questions": len(train), "solved": solved, "imitated": len(paths), "nodes": len(nodes),
             "retrievals_per_path": {str(k): counts.count(k) for k in sorted(set(counts))}}
    return {"tree": pl.DataFrame(nodes), "paths": pl.DataFrame(path_steps(paths, trees)), "search_stats": stats}


@dataclass(frozen=True)
class CalibrateParams(CalibrateSettings):
    item: Item


def _tune(params: ImitateParams | CalibrateParams, model: Path, paths: pl.DataFrame, train) -> dict[str, object]:
    import torch

    from paperdag.lm import TrainConfig, checkpoint_writer, load_causal_lm
    from paperdag.methods.deeprag import Steps, check_disjoint

    torch.set_num_threads(params.threads)
    check_disjoint(paths.to_dicts(), "train", "training")
    start = time.perf_counter()
    lm, tokenizer = load_causal_lm(model)
    config = TrainConfig(steps=params.steps, lr=params.lr, warmup_steps=params.warmup_steps, weight_decay=0.0, seed=params.seed)
    report = train(lm, Steps(tokenizer), paths.to_dicts(), config)
    stats = {"replicate": params.item.replicate, "pairs_or_rows": paths.height, "final": {k: report.final(k) for k in report.losses},
             "loss": report.losses["loss"], "train_seconds": time.perf_counter() - start}
    return {"model": checkpoint_writer(lm, tokenizer), "stats": stats}


@dataclass(frozen=True)
class ImitateParams(ImitateSettings):
    item: Item


def imitate(params: ImitateParams, model: Path, paths: pl.DataFrame, facts: pl.DataFrame, memorised: pl.DataFrame) -> dict[str, object]:
    """Imitation learning on the minimal-retrieval paths (decision and answer tokens; retrieved text masked), with
    the base LM's memorised facts rehearsed among them when params.rehearse."""
    from paperdag.methods.deeprag import fact_dict, imitate as fit_imitation, imitation_rows, memorised_set, rehearsal_rows

    def train(lm, steps, rows, config):
        rehearsed = rehearsal_rows(steps, fact_dict(facts), memorised_set(memorised)) if params.rehearse else []
        return fit_imitation(lm, steps, imitation_rows(steps, rows) + rehearsed, config, params.batch_size)

    out = _tune(params, model, paths, train)
    return {"imitation_model": out["model"], "imitate_stats": out["stats"]}


def calibrate(params: CalibrateParams, imitation_model: Path, paths: pl.DataFrame) -> dict[str, object]:
    """Chain of calibration: DPO on each path step's decision (chosen) against the opposite (rejected)."""
    from paperdag.methods.deeprag import calibrate as fit_dpo, decision_pairs

    def train(lm, steps, rows, config):
        chosen, rejected = decision_pairs(steps, [r["subquery"] for r in rows], [r["decision"] for r in rows])
        return fit_dpo(lm, steps, chosen, rejected, params.beta, config, params.batch_size)

    out = _tune(params, imitation_model, paths, train)
    return {"calibrated_model": out["model"], "calibrate_stats": out["stats"]}


@dataclass(frozen=True)
class InferParams(InferSettings):
    item: Item


def infer(params: InferParams, model: Path, imitation_model: Path, calibrated_model: Path, documents: pl.DataFrame,
          facts: pl.DataFrame, questions: pl.DataFrame, memorised: pl.DataFrame, tree: pl.DataFrame) -> dict[str, object]:
    """Every arm on the test questions: DeepRAG and imitation-only live; never / always / threshold / classifier /
    oracle on the base LM's answered val and test trees (threshold and C tuned on val, classifier fit on train)."""
    import torch

    from paperdag.lm import load_causal_lm
    from paperdag.methods.deeprag import Retriever, by_question, fact_dict, memorised_set, questions_of, run_baselines, run_policy

    torch.set_num_threads(params.threads)
    start = time.perf_counter()
    train, val, test = (questions_of(questions, s) for s in ("train", "val", "test"))
    fd, known = fact_dict(facts), memorised_set(memorised)
    base, steps, _, trees = _expand(model, documents, val + test, params.top_k, params.max_new_tokens, params.eval_batch_size, "infer")
    trees.update(by_question(tree.to_dicts()))
    predictions, rows, tuning = run_baselines(base, steps, trees, train, val, test, fd, known, params.thetas, params.classifier_cs,
                                              params.eval_batch_size, params.seed, progress=lambda m: print(f"deeprag infer: {m}", flush=True))
    retriever = Retriever(documents["text"].to_list(), params.top_k)
    for arm, path in (("imitation_only", imitation_model), ("deeprag", calibrated_model)):
        lm, _ = load_causal_lm(path)
        p, r = run_policy(arm, lm, steps, retriever, test, fd, known, params.max_new_tokens, params.eval_batch_size)
        predictions, rows = predictions + p, rows + r
    stats = {"replicate": params.item.replicate, **tuning, "infer_seconds": time.perf_counter() - start}
    return {"predictions": pl.DataFrame(predictions), "steps": pl.DataFrame(rows), "infer_stats": stats}


@dataclass(frozen=True)
class EvaluateParams:
    """None: the claims' thresholds are the tests of pipelines/deeprag.yaml."""


def evaluate(params: EvaluateParams, predictions: dict[Item, pl.DataFrame], steps: dict[Item, pl.DataFrame],
             lm_stats: dict[Item, dict]) -> dict[str, object]:
    """Per replicate and arm: EM, retrievals per question, boundary MCC; the headline over replicates (paired on the
    same test questions); the plots."""
    from paperdag.methods.deeprag import ARMS, arm_scores, decision_heatmap, decision_matrix, em_vs_retrievals, headline, mcc_bars, replicated

    scores = {str(i): arm_scores(predictions[i], steps[i]) for i in predictions}
    heads = [headline(s) for s in scores.values()]
    summary = replicated(heads)
    first = next(iter(steps))
    matrix = decision_matrix(steps[first])
    boundary = {k: [s[k] for s in lm_stats.values()] for k in ("recall_memorised", "recall_held_out", "reading_accuracy")}
    metrics = {"headline": summary, "per_replicate": scores, "lm_boundary": boundary, "decision_matrix": matrix}
    half = [(summary[f"mcc_{a}"]["ci95_high"] - summary[f"mcc_{a}"]["mean"]) if summary[f"mcc_{a}"]["ci95_high"] is not None else 0.0
            for a in ARMS]
    return {"metrics": metrics,
            "em_vs_retrievals": em_vs_retrievals({a: [(h[f"retrievals_{a}"], h[f"em_{a}"]) for h in heads] for a in ARMS}),
            "mcc": mcc_bars(list(ARMS), [summary[f"mcc_{a}"]["mean"] for a in ARMS], half, [[h[f"mcc_{a}"] for h in heads] for a in ARMS]),
            "decision_matrix": decision_heatmap(matrix, list(ARMS))}
