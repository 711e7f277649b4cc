"""Can deeprag's tiny LM read a bridge name (mentor, friend) out of BM25's passage? A probe of the knowledge-base
format and the passage size, outside the pipeline (the recorded run reads bridges 0 %: README, deeprag).

  bm25   no training: for every fact's subquery, whether BM25's top-k holds its document and whether it ranks first,
         bridges and attributes apart. Plain documents ("The mentor of X is Y.") tie with the one where X is the
         value ("The mentor of W is X."): bag-of-words cannot tell subject from object. Titled documents ("X: The
         mentor of X is Y.", a passage headed by its subject, as an encyclopaedia's) rank the subject's own first.
  read   train_lm's training (params.yaml deeprag.train_lm: closed-book memorised facts + reading the reading
         people's facts) on replicate 0's world, with its document format, passage size, steps, vocabulary, width
         changed, or its reading examples in renamed copies of the reading people (names permuted anew in each, or
         with --fresh newly invented names), then reading accuracy per relation on the question people's facts (what
         train_lm's check reads).

    .venv/bin/python benchmarks/deeprag_reading.py bm25
    .venv/bin/python benchmarks/deeprag_reading.py read --format titled --top-k 1 --copies 4 [--fresh] [--vocab 320] [--hidden 128]

One torch thread; native numerics; minutes per `read` on this 2-core machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from paperdag.methods.deeprag.world import ALL_RELATIONS, BRIDGES, make_world, subquery

ROOT = Path(__file__).resolve().parents[1]
FORMATS: dict[str, Callable[[str, str, str], str]] = {
    "plain": lambda e, r, v: ALL_RELATIONS[r].document.format(e=e, v=v),  # the pipeline's (world.document)
    "titled": lambda e, r, v: f"{e}: " + ALL_RELATIONS[r].document.format(e=e, v=v),
}
BRIDGE_NAMES = {b.name for b in BRIDGES}


def section() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())["deeprag"]


def world_facts(seed: int) -> tuple[dict[tuple[str, str], str], dict[str, list[str]]]:
    w = make_world(section()["synthesize"]["people"], seed)
    return w.facts, w.people


def run_bm25(args: argparse.Namespace) -> None:
    from paperdag.methods.deeprag.policy import Retriever

    facts, _ = world_facts(args.seed)
    keys = sorted(facts)
    for name, fmt in FORMATS.items():
        docs = [fmt(e, r, facts[(e, r)]) for e, r in keys]
        for k in args.top_k:
            got = Retriever(docs, k).documents_for([subquery(r, e) for e, r in keys])
            for kind in ("bridge", "attribute"):
                idx = [i for i, (_, r) in enumerate(keys) if (r in BRIDGE_NAMES) == (kind == "bridge")]
                held = sum(docs[i] in got[i] for i in idx) / len(idx)
                first = sum(bool(got[i]) and got[i][0] == docs[i] for i in idx) / len(idx)
                print(f"{name:7s} top-{k} {kind:9s}: its document in the passage {held:.3f}, ranked first {first:.3f}")


def renamed_reading(steps, fmt: Callable[[str, str, str], str], top_k: int, facts: dict[tuple[str, str], str],
                    reading: set[tuple[str, str]], copies: int, seed: int, fresh: bool = False) -> list:
    """Reading examples in `copies` copies of the reading people's knowledge base, the reading people renamed anew
    in each (a permutation of their names, or with fresh: newly invented names, none of the world's) and the passage
    BM25's top_k in that copy: no reading answer can be learnt by heart."""
    import random

    from paperdag.lm.factworld import invented_names
    from paperdag.methods.deeprag import RETRIEVE, Retriever

    rng = random.Random(seed)
    keys = sorted(reading)
    names = sorted({e for e, _ in keys})
    taken = {e for e, _ in facts} | set(facts.values())
    reads = []
    for _ in range(copies):
        new = invented_names(len(names), rng, exclude=taken) if fresh else rng.sample(names, len(names))
        rename = dict(zip(names, new, strict=True))
        renamed = {(rename[e], r): rename.get(facts[(e, r)], facts[(e, r)]) for e, r in keys}
        asked = sorted(renamed)
        retriever = Retriever([fmt(e, r, v) for (e, r), v in sorted(renamed.items())], top_k)
        queries = [subquery(r, e) for e, r in asked]
        passages = retriever(queries)
        reads += [steps.answer_example(q, RETRIEVE, c, renamed[k]) for q, c, k in zip(queries, passages, asked, strict=True)]
    return reads


def run_read(args: argparse.Namespace) -> None:
    import torch

    from paperdag.lm import build_or_load, fit_pools
    from paperdag.methods.deeprag import RETRIEVE, SPECIAL_TOKENS, Retriever, Steps, answer, base_pools, choose_memorised, matches
    from paperdag.methods.deeprag.settings import TrainLMSettings

    torch.set_num_threads(1)
    p = dict(section()["train_lm"])
    p.update(steps=args.steps, top_k=args.top_k[0], threads=1, **({"vocab_size": args.vocab} if args.vocab else {}),
             **({"hidden_size": args.hidden, "intermediate_size": 4 * args.hidden} if args.hidden else {}))
    config = TrainLMSettings(**p, seed=args.seed)
    facts, people = world_facts(args.seed)
    fmt = FORMATS[args.format]
    keys = sorted(facts)
    docs = [fmt(e, r, facts[(e, r)]) for e, r in keys]
    reading_people = set(people["reading"])
    world = [(e, r) for e, r in keys if e not in reading_people]
    reading = {(e, r) for e, r in keys if e in reading_people}
    memorised = choose_memorised(world, config.memorised_fraction, config.seed)
    retriever = Retriever(docs, config.top_k)
    model, tokenizer = build_or_load(config, docs, special_tokens=list(SPECIAL_TOKENS))
    steps = Steps(tokenizer)
    pools = base_pools(steps, retriever, facts, memorised, reading, config.reading_orders, config.seed)
    if args.copies:
        pools["reading"] = renamed_reading(steps, fmt, config.top_k, facts, reading, args.copies, config.seed, args.fresh)
    start = time.perf_counter()
    fit_pools(model, pools, {"closed": 1 - config.reading_weight, "reading": config.reading_weight}, config, steps.pad, "deeprag probe")
    model.eval()
    print(f"{args.format} documents, top-{config.top_k}, {config.steps} steps, vocabulary {len(tokenizer)}, width {config.hidden_size}, "
          f"{args.copies} renamed reading copies{' (fresh names)' if args.fresh else ''}, "
          f"{time.perf_counter() - start:.0f} s; reading accuracy on the question people's facts:")
    for relation in sorted({r for _, r in world}):
        chosen = [k for k in world if k[1] == relation]
        queries = [subquery(r, e) for e, r in chosen]
        passages = steps.encode(retriever(queries))
        prompts = [steps.answer_prompt(q, RETRIEVE, c) for q, c in zip(steps.encode(queries), passages, strict=True)]
        said, _ = answer(model, steps, prompts, config.max_new_tokens, config.eval_batch_size)
        right = sum(matches(a, facts[k]) for a, k in zip(said, chosen, strict=True)) / len(chosen)
        subject = sum(matches(a, e) for a, (e, _) in zip(said, chosen, strict=True)) / len(chosen)
        split = {m: [matches(a, facts[k]) for a, k in zip(said, chosen, strict=True) if (k in memorised) == m] for m in (True, False)}
        print(f"  {relation:10s} {right:.3f}  ({len(chosen)} facts; memorised {sum(split[True]) / max(1, len(split[True])):.3f}, "
              f"not {sum(split[False]) / max(1, len(split[False])):.3f}; answered with the subject's own name {subject:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    for name in ("bm25", "read"):
        s = sub.add_parser(name)
        s.add_argument("--seed", type=int, default=0, help="the world's and the LM's seed")
        s.add_argument("--top-k", type=int, nargs="+", default=[1, 3])
        if name == "read":
            s.add_argument("--steps", type=int, default=3000)
            s.add_argument("--vocab", type=int, default=0, help="BPE vocabulary (default: deeprag.train_lm.vocab_size)")
            s.add_argument("--hidden", type=int, default=0, help="model width (MLP 4x; default: deeprag.train_lm's)")
            s.add_argument("--format", choices=sorted(FORMATS), default="titled")
            s.add_argument("--copies", type=int, default=0, help="reading examples in this many renamed copies (0: the pipeline's)")
            s.add_argument("--fresh", action="store_true", help="rename with newly invented names, not a permutation")
    args = parser.parse_args()
    if getattr(args, "fresh", False) and not args.copies:
        parser.error("--fresh renames the reading copies: give --copies N as well")
    {"bm25": run_bm25, "read": run_read}[args.what](args)


if __name__ == "__main__":
    main()
