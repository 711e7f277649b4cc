"""DeepRAG's three trainings on one tiny LM:

1. the knowledge boundary (train_lm): the LM memorises a random subset M of the world's facts closed-book
   (q_t <par> -> a_t) and learns to read retrieved passages on the `reading` people only, so for every other fact
   it has no parametric knowledge: its boundary is M, known exactly;
2. imitation (paper eq. 4): maximise log pi(decision_t, a_t | s_t) along the minimal-retrieval paths, the retrieved
   documents D_t masked out of the loss;
3. chain of calibration (paper eq. 5, DPO): per step of those paths, chosen = the path's decision, rejected = the
   opposite one, against the imitation model as the reference, beta = 0.4.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from paperdag.lm.causal import Example, target_loss
from paperdag.lm.dpo import dpo_loss, sequence_logps
from paperdag.lm.factworld import invented_names
from paperdag.lm.train import TrainConfig, TrainingReport, fit
from paperdag.methods.deeprag.policy import Retriever, Steps, answer, collate_labelled, labelled, matches
from paperdag.methods.deeprag.search import PARAMETRIC, RETRIEVE
from paperdag.methods.deeprag.world import document, subquery


def choose_memorised(facts: Sequence[tuple[str, str]], fraction: float, seed: int) -> set[tuple[str, str]]:
    """The knowledge boundary: round(fraction * |facts|) facts drawn uniformly without replacement."""
    rng = random.Random(seed)
    ordered = sorted(facts)
    return set(rng.sample(ordered, round(fraction * len(ordered))))


def base_pools(steps: Steps, top_k: int, facts: dict[tuple[str, str], str], memorised: set[tuple[str, str]],
               reading: set[tuple[str, str]], copies: int, seed: int, fresh_names: bool = True) -> dict[str, list[Example]]:
    """closed: every memorised fact asked closed-book; reading: every reading-person fact answered from BM25's top_k
    passage for its subquery, in `copies` copies of the reading people's knowledge base, each with the reading
    people renamed anew (fresh_names: newly invented names, none of the world's; else a permutation of their own)
    and the passage retrieved from that copy. A reading answer then cannot be learnt by heart (the mentor of X
    differs in every copy): the LM must copy it from the passage, as it must for a question person's fact it never
    memorised."""
    rng = random.Random(seed)
    closed = [steps.answer_example(subquery(r, e), PARAMETRIC, "", facts[(e, r)]) for e, r in sorted(memorised)]
    keys = sorted(reading)
    names = sorted({e for e, _ in keys})
    taken = {e for e, _ in facts} | set(facts.values())
    reads = []
    for _ in range(copies):
        new = invented_names(len(names), rng, exclude=taken) if fresh_names else rng.sample(names, len(names))
        rename = dict(zip(names, new, strict=True))
        renamed = {(rename[e], r): rename.get(facts[(e, r)], facts[(e, r)]) for e, r in keys}
        asked = sorted(renamed)
        retriever = Retriever([document(r, e, v) for (e, r), v in sorted(renamed.items())], top_k)
        queries = [subquery(r, e) for e, r in asked]
        for q, passage, k in zip(queries, retriever(queries), asked, strict=True):
            reads.append(steps.answer_example(q, RETRIEVE, passage, renamed[k]))
    return {"closed": closed, "reading": reads}


def answer_accuracy(model: PreTrainedModel, steps: Steps, retriever: Retriever, facts: dict[tuple[str, str], str],
                    keys: Sequence[tuple[str, str]], d: str, max_new_tokens: int, batch_size: int) -> float:
    """Share of facts `keys` the model answers right under decision d (closed-book recall, or reading)."""
    if not keys:
        return float("nan")
    queries = [subquery(r, e) for e, r in keys]
    q_ids = steps.encode(queries)
    c_ids = steps.encode(retriever(queries)) if d == RETRIEVE else [[] for _ in queries]
    prompts = [steps.answer_prompt(q, d, c) for q, c in zip(q_ids, c_ids, strict=True)]
    answers, _ = answer(model, steps, prompts, max_new_tokens, batch_size)
    return sum(matches(a, facts[k]) for a, k in zip(answers, keys, strict=True)) / len(keys)


def check_boundary(stats: dict, min_recall: float, max_heldout_recall: float, min_reading: float) -> None:
    """The comparison needs a real boundary: memorised facts recalled, the others near chance, passages read."""
    for key, bound, ok in (("recall_memorised", "min_recall", stats["recall_memorised"] >= min_recall),
                           ("recall_held_out", "max_heldout_recall", stats["recall_held_out"] <= max_heldout_recall),
                           ("reading_accuracy", "min_reading", stats["reading_accuracy"] >= min_reading)):
        if not ok:
            raise ValueError(f"deeprag train_lm: {key} = {stats[key]:.3f} breaks train_lm.{bound}: the LM's knowledge boundary "
                             "is not what the comparison needs; raise train_lm.steps or the model size")


def imitation_rows(steps: Steps, path_steps: Sequence[dict]) -> list[tuple[list[int], list[int]]]:
    """(ids, labels) per step of the minimal-retrieval paths: rows of {subquery, decision, context, answer}."""
    return [labelled(steps.segments(s["subquery"], s["decision"], s["context"], s["answer"])) for s in path_steps]


def rehearsal_rows(steps: Steps, facts: dict[tuple[str, str], str], memorised: set[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """(ids, labels) of every memorised fact asked closed-book, `q_t <par> a_t` as train_lm taught it, the loss on the
    answer and eos only: rehearsed among the path steps, they keep a tiny LM from forgetting what imitation does not
    revisit (the facts of people no training question asks about), and teach no decision (<par> is input, not
    target)."""
    return [labelled([(p, False), (t, True)])
            for p, t in (steps.answer_example(subquery(r, e), PARAMETRIC, "", facts[(e, r)]) for e, r in sorted(memorised))]


def imitate(model: PreTrainedModel, steps: Steps, rows: Sequence[tuple[list[int], list[int]]], config: TrainConfig,
            batch_size: int) -> TrainingReport:
    """Imitation learning: next-token cross-entropy on the labelled tokens (decision, answer) of path steps."""
    if not rows:
        raise ValueError("deeprag imitate: no path steps to imitate (the search found no correct path)")
    draw = random.Random(config.seed)
    model.train()

    def step(_: int) -> dict[str, torch.Tensor]:
        return {"loss": target_loss(model, collate_labelled(draw.choices(rows, k=batch_size), steps.pad))}

    report = fit(model.parameters(), step, config, description="deeprag imitation")
    model.eval()
    return report


def calibrate(model: PreTrainedModel, steps: Steps, chosen: Sequence[Example], rejected: Sequence[Example], beta: float,
              config: TrainConfig, batch_size: int) -> TrainingReport:
    """Chain of calibration: DPO on (chosen, rejected) decision pairs; the reference pi_ref is the model as given
    (the imitation model), its log-probabilities computed once before the first step."""
    from paperdag.lm.causal import collate

    if not chosen:
        raise ValueError("deeprag calibrate: no preference pairs (the search found no correct path)")
    model.eval()
    with torch.inference_mode():
        ref_w = torch.cat([sequence_logps(model, collate(chosen[i : i + 256], steps.pad)) for i in range(0, len(chosen), 256)])
        ref_l = torch.cat([sequence_logps(model, collate(rejected[i : i + 256], steps.pad)) for i in range(0, len(rejected), 256)])
    draw = random.Random(config.seed)
    model.train()

    def step(_: int) -> dict[str, torch.Tensor]:
        rows = draw.choices(range(len(chosen)), k=batch_size)
        pi_w = sequence_logps(model, collate([chosen[i] for i in rows], steps.pad))
        pi_l = sequence_logps(model, collate([rejected[i] for i in rows], steps.pad))
        return dpo_loss(pi_w, pi_l, ref_w[rows], ref_l[rows], beta)

    report = fit(model.parameters(), step, config, description="deeprag calibration (DPO)")
    model.eval()
    return report
