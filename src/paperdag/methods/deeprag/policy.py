"""The LM side of DeepRAG: the step formats, the retriever, answering a subquery with or without retrieved text,
the atomic decision, the tree expansion the search reads, imitation examples with retrieved tokens out of the loss,
and the chain-of-calibration preference pairs.

One step is one sequence:  q_t <par> " a_t" <eos>          (parametric: answer from memory)
                      or:  q_t <ret> <doc> D_t </doc> " a_t" <eos>   (retrieve: D_t = BM25's top-k documents for q_t)
The policy predicts the decision token after q_t, then a_t. The tiny LM of train_lm learns the two answering formats
(memorised facts closed-book; reading on the `reading` people only), never the decision token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from transformers import PreTrainedModel
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from paperdag.lm.causal import IGNORE, Example, collate
from paperdag.lm.factworld import normalize_answer
from paperdag.lm.generate import generate, left_pad
from paperdag.methods.deeprag.search import PARAMETRIC, RETRIEVE, all_prefixes
from paperdag.methods.deeprag.world import subquery

PAR, RET, DOC, END_DOC = "<par>", "<ret>", "<doc>", "</doc>"
SPECIAL_TOKENS = (PAR, RET, DOC, END_DOC)
Segment = tuple[list[int], bool]  # token ids, in the loss or not


class Retriever:
    """BM25 (paperdag.retrieval.BM25Index) over the knowledge base's documents: the top-k joined as one passage."""

    def __init__(self, documents: Sequence[str], k: int) -> None:
        from paperdag.retrieval import BM25Index

        self.documents, self.k = list(documents), k
        self.index = BM25Index.build(self.documents)

    def documents_for(self, queries: Sequence[str]) -> list[list[str]]:
        """The top-k documents per query, best first (fewer where fewer share a term with it)."""
        if not queries:
            return []
        _, ids = self.index.search(list(queries), k=self.k)  # (m, k), -1 for no hit
        return [[self.documents[i] for i in row if i >= 0] for row in ids.tolist()]

    def __call__(self, queries: Sequence[str]) -> list[str]:
        return [" ".join(docs) for docs in self.documents_for(queries)]


class Steps:
    """Token ids of the step formats for one tokenizer."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        ids = tokenizer.convert_tokens_to_ids(list(SPECIAL_TOKENS))
        self.par, self.ret, self.doc, self.end_doc = ids
        self.eos, self.pad = tokenizer.eos_token_id, tokenizer.pad_token_id

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return self.tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []

    def decision(self, d: str) -> int:
        return self.par if d == PARAMETRIC else self.ret

    def segments(self, query: str, d: str, context: str, answer: str) -> list[Segment]:
        """One step as segments: q_t (no loss), the decision (loss), the retrieved passage (no loss: the environment
        wrote it, the policy did not), the answer and eos (loss)."""
        q, a = self.encode([query, " " + answer])
        out: list[Segment] = [(q, False), ([self.decision(d)], True)]
        if d == RETRIEVE:
            out.append(([self.doc, *self.encode([context])[0], self.end_doc], False))
        out.append(([*a, self.eos], True))
        return out

    def answer_prompt(self, query_ids: list[int], d: str, context_ids: list[int] | None) -> list[int]:
        if d == PARAMETRIC:
            return [*query_ids, self.par]
        return [*query_ids, self.ret, self.doc, *(context_ids or []), self.end_doc]

    def answer_example(self, query: str, d: str, context: str, answer: str) -> Example:
        """(prompt, target) of answering q_t under decision d (train_lm's two formats)."""
        q, c, a = self.encode([query, context, " " + answer])
        return self.answer_prompt(q, d, c), [*a, self.eos]


def labelled(segments: Sequence[Segment]) -> tuple[list[int], list[int]]:
    """(ids, labels) of a sequence of segments: a token's label is itself where its segment is in the loss, else
    IGNORE (prompt, retrieved documents)."""
    ids: list[int] = []
    labels: list[int] = []
    for tokens, in_loss in segments:
        ids += tokens
        labels += tokens if in_loss else [IGNORE] * len(tokens)
    return ids, labels


def collate_labelled(rows: Sequence[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded (B, T) input_ids, attention_mask and labels (IGNORE on padding) of (ids, labels) rows."""
    length = max(len(ids) for ids, _ in rows)
    batch = {"input_ids": torch.full((len(rows), length), pad_id, dtype=torch.long),
             "attention_mask": torch.zeros((len(rows), length), dtype=torch.long),
             "labels": torch.full((len(rows), length), IGNORE, dtype=torch.long)}
    for r, (ids, labels) in enumerate(rows):
        batch["input_ids"][r, : len(ids)] = torch.tensor(ids)
        batch["attention_mask"][r, : len(ids)] = 1
        batch["labels"][r, : len(ids)] = torch.tensor(labels)
    return batch


@torch.inference_mode()
def answer(model: PreTrainedModel, steps: Steps, prompts: Sequence[list[int]], max_new_tokens: int,
           batch_size: int) -> tuple[list[str], list[float]]:
    """Greedy answers to answer prompts and each answer's confidence: the smallest probability of a generated token
    (FLARE's test: retrieve when some token falls below theta), 0 for an empty answer."""
    texts, confidences = [], []
    for lo in range(0, len(prompts), batch_size):
        chunk = prompts[lo : lo + batch_size]
        probs: list[torch.Tensor] = []

        def capture(logits: Sequence[torch.Tensor]) -> torch.Tensor:
            probs.append(logits[0].softmax(-1).max(-1).values)  # (B,) the greedy token's probability
            return logits[0]

        out = generate(model, [chunk], steps.pad, steps.eos, rule=capture, max_new_tokens=max_new_tokens)
        table = torch.stack(probs, 1) if probs else torch.zeros(len(chunk), 0)  # (B, steps)
        for row, tokens in enumerate(out.tokens):
            texts.append(steps.tokenizer.decode(tokens, skip_special_tokens=True).strip())
            confidences.append(float(table[row, : len(tokens)].min()) if tokens else 0.0)
    return texts, confidences


@torch.inference_mode()
def retrieve_probability(model: PreTrainedModel, steps: Steps, queries: Sequence[list[int]], batch_size: int) -> list[float]:
    """P(<ret> | q_t) renormalised over the two decision tokens, per query."""
    out: list[float] = []
    for lo in range(0, len(queries), batch_size):
        ids, mask = left_pad(queries[lo : lo + batch_size], steps.pad)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1).logits[:, -1]  # (B, V)
        two = logits[:, [steps.par, steps.ret]].float().softmax(-1)  # (B, 2)
        out += two[:, 1].tolist()
    return out


def expand_tree(model: PreTrainedModel, steps: Steps, retriever: Retriever, questions: Sequence[dict], max_new_tokens: int,
                batch_size: int, progress: Callable[[str], None] = lambda _: None) -> list[dict]:
    """Every node of every question's binary tree, answered by `model`: per node the question id, the decision
    prefix, the person asked about, the relation, q_t, the retrieved passage (R nodes), a_t and its confidence.
    Subqueries repeat across the tree (both children of a node ask the same q_t): each distinct (q_t, d) is
    answered once."""
    nodes: dict[tuple[str, str], dict] = {}
    depth = max((q["hops"] for q in questions), default=0)
    for t in range(depth):
        level = []
        for q in questions:
            if q["hops"] <= t:
                continue
            for prefix in (p for p in all_prefixes(t + 1) if len(p) == t + 1):
                entity = q["head"] if t == 0 else nodes[(q["id"], prefix[:-1])]["answer"]
                level.append({"question": q["id"], "prefix": prefix, "depth": t, "entity": entity, "relation": q["chain"][t],
                              "subquery": subquery(q["chain"][t], entity), "decision": prefix[-1]})
        keys = sorted({(n["subquery"], n["decision"]) for n in level})
        queries = sorted({s for s, _ in keys})
        contexts = dict(zip(queries, retriever(queries), strict=True))
        query_ids = dict(zip(queries, steps.encode(queries), strict=True))
        context_ids = dict(zip(queries, steps.encode([contexts[s] for s in queries]), strict=True))
        prompts = [steps.answer_prompt(query_ids[s], d, context_ids[s]) for s, d in keys]
        answers, confidences = answer(model, steps, prompts, max_new_tokens, batch_size)
        done = {k: (a, c) for k, a, c in zip(keys, answers, confidences, strict=True)}
        for n in level:
            n["context"] = contexts[n["subquery"]] if n["decision"] == RETRIEVE else ""
            n["answer"], n["confidence"] = done[(n["subquery"], n["decision"])]
            nodes[(n["question"], n["prefix"])] = n
        progress(f"depth {t + 1}: {len(level)} nodes, {len(keys)} distinct answers")
    return list(nodes.values())


def matches(prediction: str, gold: str) -> bool:
    """Exact match after normalisation (lower case, punctuation and articles removed)."""
    return normalize_answer(prediction) == normalize_answer(gold)


def decision_pairs(steps: Steps, queries: Sequence[str], chosen: Sequence[str]) -> tuple[list[Example], list[Example]]:
    """Chain of calibration: per step of a minimal-retrieval path, (q_t -> the path's decision) as chosen and
    (q_t -> the opposite decision) as rejected."""
    ids = steps.encode(queries)
    other = {PARAMETRIC: RETRIEVE, RETRIEVE: PARAMETRIC}
    return ([(q, [steps.decision(d)]) for q, d in zip(ids, chosen, strict=True)],
            [(q, [steps.decision(other[d])]) for q, d in zip(ids, chosen, strict=True)])


def pair_batches(chosen: Sequence[Example], rejected: Sequence[Example], pad_id: int) -> tuple[dict, dict]:
    return collate(chosen, pad_id), collate(rejected, pad_id)
