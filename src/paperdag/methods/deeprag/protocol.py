"""The evaluation protocol: every arm answers the same test questions; per question its final answer, retrievals
and path, per step its decision and the true boundary label. DeepRAG and its imitation-only ablation decide and
answer with their own (fine-tuned) LM, live; the baselines walk the base LM's answered tree (baselines.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from transformers import PreTrainedModel

from paperdag.methods.deeprag.baselines import (Tree, fit_classifier, question_features, strategy_labels, strategy_path,
                                                threshold_path, tune_threshold)
from paperdag.methods.deeprag.policy import Retriever, Steps, answer, matches, retrieve_probability
from paperdag.methods.deeprag.search import PARAMETRIC, RETRIEVE, retrievals
from paperdag.methods.deeprag.world import subquery


def record(arm: str, q: dict, path: str, entities: Sequence[str], answers: Sequence[str], facts: dict, memorised: set,
           probabilities: Sequence[float | None] | None = None) -> tuple[dict, list[dict]]:
    """The prediction row and step rows of one question's walk. unknown: the step's fact (person asked about,
    relation) is not memorised; None when the person is no person of the world (an earlier step answered garbage).
    p_retrieve: the policy's P(<ret> | q_t), NaN for a walk through the base LM's tree (a float column either way)."""
    final = answers[-1]
    prediction = {"arm": arm, "question": q["id"], "hops": q["hops"], "path": path, "prediction": final, "answer": q["answer"],
                  "correct": matches(final, q["answer"]), "retrievals": retrievals(path)}
    rows = []
    for t, (d, entity) in enumerate(zip(path, entities, strict=True)):
        key = (entity, q["chain"][t])
        rows.append({"arm": arm, "question": q["id"], "step": t, "entity": entity, "relation": q["chain"][t],
                     "retrieve": d == RETRIEVE, "unknown": (key not in memorised) if key in facts else None,
                     "p_retrieve": float("nan") if probabilities is None else probabilities[t], "answer": answers[t]})
    return prediction, rows


def tree_walk(arm: str, q: dict, tree: Tree, path: str, facts: dict, memorised: set) -> tuple[dict, list[dict]]:
    nodes = [tree[path[: t + 1]] for t in range(len(path))]
    return record(arm, q, path, [n["entity"] for n in nodes], [n["answer"] for n in nodes], facts, memorised)


def run_policy(arm: str, model: PreTrainedModel, steps: Steps, retriever: Retriever, questions: Sequence[dict], facts: dict,
               memorised: set, max_new_tokens: int, batch_size: int) -> tuple[list[dict], list[dict]]:
    """The policy's own walk, all questions step by step together: q_t from a_{t-1}; d_t = argmax over {<par>, <ret>}
    of the LM's next token (P(<ret>) > 0.5); a_t answered under d_t with BM25's passage when d_t = R."""
    state = {q["id"]: {"entities": [], "answers": [], "path": "", "p": []} for q in questions}
    for t in range(max((q["hops"] for q in questions), default=0)):
        active = [q for q in questions if q["hops"] > t]
        queries = [subquery(q["chain"][t], q["head"] if t == 0 else state[q["id"]]["answers"][-1]) for q in active]
        q_ids = steps.encode(queries)
        p_ret = retrieve_probability(model, steps, q_ids, batch_size)
        decisions = [RETRIEVE if p > 0.5 else PARAMETRIC for p in p_ret]
        wanted = [s for s, d in zip(queries, decisions, strict=True) if d == RETRIEVE]
        contexts = dict(zip(wanted, steps.encode(retriever(wanted)), strict=True))
        prompts = [steps.answer_prompt(i, d, contexts.get(s)) for i, s, d in zip(q_ids, queries, decisions, strict=True)]
        answers, _ = answer(model, steps, prompts, max_new_tokens, batch_size)
        for q, s, d, a, p in zip(active, queries, decisions, answers, p_ret, strict=True):
            st = state[q["id"]]
            st["entities"].append(q["head"] if t == 0 else st["answers"][-1])
            st["answers"].append(a)
            st["path"] += d
            st["p"].append(p)
    predictions, rows = [], []
    for q in questions:
        st = state[q["id"]]
        p, r = record(arm, q, st["path"], st["entities"], st["answers"], facts, memorised, st["p"])
        predictions.append(p)
        rows += r
    return predictions, rows


def run_baselines(model: PreTrainedModel, steps: Steps, trees: dict[str, Tree], train: Sequence[dict], val: Sequence[dict],
                  test: Sequence[dict], facts: dict, memorised: set, thetas: Sequence[float], cs: Sequence[float],
                  batch_size: int, seed: int, progress: Callable[[str], None] = lambda _: None) -> tuple[list[dict], list[dict], dict]:
    """never / always / tuned threshold / complexity classifier / oracle boundary on the test trees; the threshold
    and the classifier's C tuned on the validation trees, the classifier trained on the training trees' labels."""
    theta, theta_sweep = tune_threshold(trees, val, thetas)
    progress(f"threshold theta = {theta}")

    def routed_em(questions: Sequence[dict], strategies: list[str]) -> float:
        return sum(matches(trees[q["id"]][strategy_path(s, q["hops"])]["answer"], q["answer"])
                   for q, s in zip(questions, strategies, strict=True)) / max(1, len(questions))

    features = {name: question_features(model, steps, [q["question"] for q in qs], batch_size)
                for name, qs in (("train", train), ("val", val), ("test", test))}
    labels = strategy_labels(trees, train)
    predict, c, c_sweep = fit_classifier(features["train"], labels, features["val"], lambda s: routed_em(val, s), cs, seed)
    routed = predict(features["test"])
    progress(f"classifier C = {c}")
    paths: dict[str, Callable[[dict, int], str]] = {
        "always_retrieve": lambda q, _i: RETRIEVE * q["hops"],
        "never_retrieve": lambda q, _i: PARAMETRIC * q["hops"],
        "threshold": lambda q, _i: threshold_path(trees[q["id"]], q["hops"], theta),
        "classifier": lambda q, i: strategy_path(routed[i], q["hops"]),
    }
    predictions, rows = [], []
    for arm, path_of in paths.items():
        for i, q in enumerate(test):
            p, r = tree_walk(arm, q, trees[q["id"]], path_of(q, i), facts, memorised)
            predictions.append(p)
            rows += r
    for q in test:  # the oracle: retrieve exactly where the fact about the person asked about is not memorised
        tree, path = trees[q["id"]], ""
        for t in range(q["hops"]):
            entity = q["head"] if t == 0 else tree[path]["answer"]
            path += RETRIEVE if (entity, q["chain"][t]) not in memorised else PARAMETRIC
        p, r = tree_walk("oracle_boundary", q, tree, path, facts, memorised)
        predictions.append(p)
        rows += r
    label_counts = {s: labels.count(s) for s in ("A", "B", "C")}
    tuning = {"theta": theta, "theta_sweep": theta_sweep, "classifier_C": c, "classifier_sweep": c_sweep,
              "classifier_train_labels": label_counts, "classifier_test_routes": {s: routed.count(s) for s in ("A", "B", "C")}}
    return predictions, rows, tuning
