"""Can deeprag's tiny LM read a name (mentor, friend) out of BM25's passage? A probe of the knowledge-base format,
the passage size and train_lm's reading examples, outside the pipeline.

  bm25   no training: for every fact's subquery, whether BM25's top-k holds its document and whether it ranks first,
         bridges and attributes apart. Plain documents ("The mentor of X is Y.") tie with the one where X is the
         value ("The mentor of W is X."): bag-of-words cannot tell subject from object. Titled documents ("X: The
         mentor of X is Y.", a passage headed by its subject, as an encyclopaedia's; world.document) rank the
         subject's own first.
  read   train_lm's training (params.yaml deeprag.train_lm: closed-book memorised facts + reading the reading
         people's facts in renamed copies, paperdag.methods.deeprag.base_pools) on the world of seed --seed, with
         its steps, vocabulary, width, passage size or copies changed, or with --permute the copies renamed by a
         permutation of the reading people's own names instead of newly invented ones; then reading accuracy per
         relation on the question people's facts (what train_lm's check reads).

  recorded  no training: the recorded run's base LMs (data/deeprag/tree/<replicate>.parquet, every node of every
         training question's tree), per relation: accuracy answering with retrieval and closed-book, where the fact
         is memorised and where it is not (over the facts some tree asks: nodes whose earlier hops were right).

  boundary  no training: whether the recorded run's models know their knowledge boundary. Per replicate and group
         of people (train: the people the training questions ask about; val, test: people no training question
         touches), how well P(<ret> | q_t) of the base LM, the imitation model and the calibrated model separates
         facts not memorised from memorised ones (ROC AUC; MCC of the decision P > 0.5), over every fact of the group.

  imitate  imitation (the imitate stage's training, paperdag.methods.deeprag.imitate) from each recorded base LM
         on its recorded minimal-retrieval paths, for every number of steps and learning rate asked, each from the
         base LM; then DeepRAG's own walk (run_policy) on the val and test questions: EM, retrievals per question,
         and ROC AUC of P(<ret> | q_t) against the true boundary over the steps it took. Does the imitate stage's
         setting (400 steps at lr 1e-3, loss ~0.02: it overfits) explain the decision's failure to transfer?

    .venv/bin/python benchmarks/deeprag_reading.py bm25
    .venv/bin/python benchmarks/deeprag_reading.py recorded
    .venv/bin/python benchmarks/deeprag_reading.py boundary
    .venv/bin/python benchmarks/deeprag_reading.py imitate [--steps 10 25 50 100 200 400] [--lr 1e-3 3e-4]
    .venv/bin/python benchmarks/deeprag_reading.py read [--seed N] [--steps 3000] [--vocab 1000] [--copies 4] [--permute]

One torch thread; native numerics; minutes per `read` (~13 CPU-minutes at 6000 steps) on this 2-core machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from paperdag.methods.deeprag.world import ALL_RELATIONS, BRIDGES, document, make_world, subquery

ROOT = Path(__file__).resolve().parents[1]
FORMATS: dict[str, Callable[[str, str, str], str]] = {
    "plain": lambda e, r, v: ALL_RELATIONS[r].document.format(e=e, v=v),
    "titled": lambda e, r, v: document(r, e, v),  # the pipeline's
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


def run_read(args: argparse.Namespace) -> None:
    import torch

    from paperdag.lm import build_or_load, fit_pools
    from paperdag.methods.deeprag import RETRIEVE, SPECIAL_TOKENS, Retriever, Steps, answer, base_pools, choose_memorised, matches
    from paperdag.methods.deeprag.settings import TrainLMSettings

    torch.set_num_threads(1)
    p = dict(section()["train_lm"])
    changed = {"steps": args.steps, "vocab_size": args.vocab, "reading_copies": args.copies, "hidden_size": args.hidden,
               "intermediate_size": 4 * args.hidden if args.hidden else None, "top_k": args.top_k}
    p.update({k: v for k, v in changed.items() if v}, threads=1)
    config = TrainLMSettings(**p, seed=args.seed)
    facts, people = world_facts(args.seed)
    keys = sorted(facts)
    docs = [document(r, e, facts[(e, r)]) for e, r in keys]
    reading_people = set(people["reading"])
    world = [(e, r) for e, r in keys if e not in reading_people]
    reading = {(e, r) for e, r in keys if e in reading_people}
    memorised = choose_memorised(world, config.memorised_fraction, config.seed)
    retriever = Retriever(docs, config.top_k)
    model, tokenizer = build_or_load(config, docs, special_tokens=list(SPECIAL_TOKENS))
    steps = Steps(tokenizer)
    pools = base_pools(steps, config.top_k, facts, memorised, reading, config.reading_copies, config.seed, fresh_names=not args.permute)
    start = time.perf_counter()
    fit_pools(model, pools, {"closed": 1 - config.reading_weight, "reading": config.reading_weight}, config, steps.pad, "deeprag probe")
    model.eval()
    print(f"top-{config.top_k}, {config.steps} steps, vocabulary {len(tokenizer)}, width {config.hidden_size}, "
          f"{config.reading_copies} reading copies ({'permuted' if args.permute else 'fresh'} names), "
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


def run_recorded(args: argparse.Namespace) -> None:
    import polars as pl

    from paperdag.methods.deeprag import PARAMETRIC, RETRIEVE, fact_dict, matches, memorised_set

    data = ROOT / "data" / "deeprag"
    facts = fact_dict(pl.read_parquet(data / "facts.parquet"))
    for tree in sorted((data / "tree").glob("*.parquet"), key=lambda f: int(f.stem)):
        memorised = memorised_set(pl.read_parquet(data / "memorised" / tree.name))
        nodes = pl.read_parquet(tree).select("entity", "relation", "decision", "answer").unique().iter_rows()
        cells: dict[tuple[str, str, bool], list[bool]] = {}
        for e, r, d, a in nodes:
            if (e, r) in facts:
                cells.setdefault((r, d, (e, r) in memorised), []).append(matches(a, facts[(e, r)]))
        print(f"replicate {tree.stem}: accuracy (facts asked) with retrieval | closed-book, memorised / not memorised")
        for relation in sorted({r for r, _, _ in cells}):
            row = [cells.get((relation, d, m), []) for d in (RETRIEVE, PARAMETRIC) for m in (True, False)]
            print(f"  {relation:10s} " + "  ".join(f"{sum(c) / max(1, len(c)):.3f} ({len(c):4d})" for c in row))


def run_boundary(args: argparse.Namespace) -> None:
    import polars as pl
    import torch
    from sklearn.metrics import roc_auc_score

    from paperdag.lm import load_causal_lm
    from paperdag.methods.deeprag import Steps, mcc, memorised_set, retrieve_probability

    torch.set_num_threads(1)
    data = ROOT / "data" / "deeprag"
    rows = pl.read_parquet(data / "facts.parquet").select("entity", "relation", "group").rows()
    print("P(<ret> | q_t) against the true boundary (fact not memorised): ROC AUC / MCC at 0.5, per group of people")
    for memorised in sorted((data / "memorised").glob("*.parquet"), key=lambda f: int(f.stem)):
        known, replicate = memorised_set(pl.read_parquet(memorised)), memorised.stem
        for model in ("lm", "imitation", "calibrated"):
            lm, tokenizer = load_causal_lm(data / model / replicate)
            steps = Steps(tokenizer)
            cells = []
            for group in ("train", "val", "test"):
                keys = [(e, r) for e, r, g in rows if g == group]
                p = retrieve_probability(lm, steps, steps.encode([subquery(r, e) for e, r in keys]), 200)
                unknown = [k not in known for k in keys]
                cells.append(f"{group} {roc_auc_score(unknown, p):.3f} / {mcc([x > 0.5 for x in p], unknown):+.3f}")
            print(f"  replicate {replicate} {model:10s} " + "   ".join(cells))


def run_imitate(args: argparse.Namespace) -> None:
    import polars as pl
    import torch
    from sklearn.metrics import roc_auc_score

    from paperdag.lm import TrainConfig, load_causal_lm
    from paperdag.methods.deeprag import Retriever, Steps, fact_dict, imitate, imitation_rows, memorised_set, questions_of, run_policy

    torch.set_num_threads(1)
    data, stage, infer = ROOT / "data" / "deeprag", section()["imitate"], section()["infer"]
    facts = pl.read_parquet(data / "facts.parquet")
    questions = pl.read_parquet(data / "questions.parquet")
    fd, asked = fact_dict(facts), {s: questions_of(questions, s) for s in ("val", "test")}
    retriever = Retriever(pl.read_parquet(data / "documents.parquet")["text"].to_list(), infer["top_k"])
    print("imitation from the recorded base LM: final loss; per split EM / retrievals per question / decision AUC")
    for paths in sorted((data / "paths").glob("*.parquet"), key=lambda f: int(f.stem)):
        known, rows = memorised_set(pl.read_parquet(data / "memorised" / paths.name)), pl.read_parquet(paths).to_dicts()
        for lr in args.lr:
            for n in args.steps:
                lm, tokenizer = load_causal_lm(data / "lm" / paths.stem)
                steps = Steps(tokenizer)
                config = TrainConfig(steps=n, lr=lr, warmup_steps=min(n // 2, stage["warmup_steps"]), weight_decay=0.0, seed=0)
                report = imitate(lm, steps, imitation_rows(steps, rows), config, stage["batch_size"])
                cells = []
                for split, qs in asked.items():
                    predictions, walk = run_policy("probe", lm, steps, retriever, qs, fd, known, infer["max_new_tokens"],
                                                   infer["eval_batch_size"])
                    scored = [r for r in walk if r["unknown"] is not None]
                    auc = roc_auc_score([r["unknown"] for r in scored], [r["p_retrieve"] for r in scored])
                    em = 100 * sum(p["correct"] for p in predictions) / len(predictions)
                    ret = sum(p["retrievals"] for p in predictions) / len(predictions)
                    cells.append(f"{split} {em:5.1f} / {ret:.2f} / {auc:.3f}")
                print(f"  replicate {paths.stem} lr {lr:g} steps {n:4d} loss {report.final():.3f}   " + "   ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    bm25 = sub.add_parser("bm25")
    bm25.add_argument("--seed", type=int, default=0, help="the world's seed")
    bm25.add_argument("--top-k", type=int, nargs="+", default=[1, 3])
    read = sub.add_parser("read", help="every option defaults to params.yaml deeprag.train_lm's")
    read.add_argument("--seed", type=int, default=0, help="the world's and the LM's seed")
    read.add_argument("--top-k", type=int, default=0, help="BM25 documents per passage")
    read.add_argument("--steps", type=int, default=0)
    read.add_argument("--vocab", type=int, default=0, help="BPE vocabulary")
    read.add_argument("--hidden", type=int, default=0, help="model width (MLP 4x)")
    read.add_argument("--copies", type=int, default=0, help="renamed copies of the reading people's facts")
    read.add_argument("--permute", action="store_true", help="rename by permuting their own names, not with invented ones")
    sub.add_parser("recorded")
    sub.add_parser("boundary")
    imitation = sub.add_parser("imitate")
    imitation.add_argument("--steps", type=int, nargs="+", default=[10, 25, 50, 100, 200, 400])
    imitation.add_argument("--lr", type=float, nargs="+", default=[1e-3, 3e-4])
    args = parser.parse_args()
    {"bm25": run_bm25, "read": run_read, "recorded": run_recorded, "boundary": run_boundary, "imitate": run_imitate}[args.what](args)


if __name__ == "__main__":
    main()
