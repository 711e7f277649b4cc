"""Distill-SynthKG: a small causal LM that emits a whole page's KG in one pass, trained on the teacher's
(page, KG) pairs. The KG is linearised compactly, one triple a line, the relation as its short key:

    <page text>\n=>\nAlaric Venmoor | born | Quellstad\nAlaric Venmoor | works | Drennic Holdings\n<eos>

Loss on the triples only (paperdag.lm.causal's (prompt, target) examples). torch is imported inside the functions."""

from __future__ import annotations

from collections.abc import Sequence

from paperdag.methods.synthkg.world import REL

SEPARATOR = "\n=>\n"
Triple = tuple[str, str, str]  # (source, relation key, target)


def prompt_text(page: str) -> str:
    return page + SEPARATOR


def linearise(triples: Sequence[Triple]) -> str:
    return "".join(f"{s} | {r} | {t}\n" for s, r, t in triples)


def parse(text: str) -> list[Triple]:
    """The well-formed lines of a generation (three fields, a known relation key), duplicates dropped."""
    out: list[Triple] = []
    for line in text.split("\n"):
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) == 3 and parts[1] in REL and parts[0] and parts[2] and tuple(parts) not in out:
            out.append((parts[0], parts[1], parts[2]))
    return out


def examples(tokenizer, pages: Sequence[str], kgs: Sequence[Sequence[Triple]]) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, target ids + eos) per page."""
    eos = tokenizer.eos_token_id
    return [(tokenizer(prompt_text(p))["input_ids"], tokenizer(linearise(kg))["input_ids"] + [eos]) for p, kg in zip(pages, kgs, strict=True)]


def predict(model, tokenizer, pages: Sequence[str], max_new_tokens: int, batch_size: int) -> list[list[Triple]]:
    """Greedy one-pass KGs of `pages`."""
    from paperdag.lm import generate_batches

    prompts = [tokenizer(prompt_text(p))["input_ids"] for p in pages]
    out = generate_batches(model, [prompts], tokenizer.pad_token_id, tokenizer.eos_token_id, batch_size, max_new_tokens=max_new_tokens)
    return [parse(tokenizer.decode(t)) for t in out.tokens]


def triple_f1(predicted: Sequence[Sequence[Triple]], reference: Sequence[Sequence[Triple]]) -> float:
    """Micro F1 of exact triples, summed over pages (the distilled model against the teacher it imitates)."""
    tp = sum(len(set(p) & set(r)) for p, r in zip(predicted, reference, strict=True))
    n_pred, n_ref = sum(len(set(p)) for p in predicted), sum(len(set(r)) for r in reference)
    return 0.0 if tp == 0 else 2 * tp / (n_pred + n_ref)
