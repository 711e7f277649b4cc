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

  probe  no training of the LM: is the boundary in the recorded base LM's hidden states, where the decision is
         taken (the last token of q_t) and one token later (after <par>, where the closed-book answer starts)? Per
         replicate, layer and position, a logistic regression (scikit-learn) on the train people's facts (memorised
         or not), its ROC AUC on the val and test people's; beside it the closed-book answer's own confidence (the
         threshold arm's signal). If the decision position holds the boundary linearly, a decision learnt with the
         LM's features kept could transfer to new people where imitation's full fine-tuning does not.

  walks  no training: the recorded test walks (data/deeprag/steps/<replicate>.parquet) per replicate and arm: how
         often a step's answer is right closed-book where the fact is memorised and with retrieval, the retrieve
         rate on either side of the boundary, the decision's ROC AUC (DeepRAG, imitation only), and how many steps
         carry no boundary label (an earlier hop answered no person of the world: left out of the MCC).

  decide  train_lm with the decision token learnt in pretraining, as an LLM's self-knowledge would be: memorised
         facts as `q_t <par> a_t` with <par> in the loss, and --people reading people under their own names with a
         random half of their facts memorised so and the other half taught as `q_t <ret>` (the decision only, so
         nothing is learnt by heart). Then P(<ret> | q_t) against the boundary on the question people, who are
         never seen with <ret>: does a decision learnt on many people's facts transfer to new facts?

  imitate  imitation (the imitate stage's training, paperdag.methods.deeprag.imitate) from each recorded base LM
         on its recorded minimal-retrieval paths, for every number of steps and learning rate asked, each from the
         base LM; then DeepRAG's own walk (run_policy) on the val and test questions: EM, retrievals per question,
         and ROC AUC of P(<ret> | q_t) against the true boundary over the steps it took. Does the imitate stage's
         setting (400 steps at lr 1e-3, loss ~0.02: it overfits) explain the decision's failure to transfer?

    .venv/bin/python benchmarks/deeprag_reading.py bm25
    .venv/bin/python benchmarks/deeprag_reading.py recorded
    .venv/bin/python benchmarks/deeprag_reading.py boundary
    .venv/bin/python benchmarks/deeprag_reading.py imitate [--steps 10 25 50 100 200 400] [--lr 1e-3 3e-4]
    .venv/bin/python benchmarks/deeprag_reading.py probe
    .venv/bin/python benchmarks/deeprag_reading.py walks
    .venv/bin/python benchmarks/deeprag_reading.py decide [--seed N] [--people 100] [--decide-weight 0.1]
    .venv/bin/python benchmarks/deeprag_reading.py calibrate [--steps 25 50 100 200] [--lr 5e-4 1e-4 2e-5]
    .venv/bin/python benchmarks/deeprag_reading.py read [--seed N] [--steps 3000] [--vocab 1000] [--copies 4] [--permute]

  calibrate  the chain of calibration (DPO on the decision pairs, beta from params.yaml) from each recorded
         imitation model for every number of steps and learning rate asked; then DeepRAG's walk on val and test
         (EM / retrievals / decision AUC) and the closed-book accuracy of its parametric steps on memorised facts.
         Does the calibrate stage's setting (200 steps at lr 5e-4) cost the answers, and would validation pick
         another?

One torch thread; native numerics; minutes per `read` (~13 CPU-minutes at 6000 steps) on this 2-core machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

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


def base_setup(seed: int, changed: dict) -> SimpleNamespace:
    """What train_lm starts from (params.yaml deeprag.train_lm with `changed`'s non-empty values, seed `seed`): the
    world, the memorised facts, the retriever and an untrained LM with its step formats."""
    from paperdag.lm import build_or_load
    from paperdag.methods.deeprag import SPECIAL_TOKENS, Retriever, Steps, choose_memorised
    from paperdag.methods.deeprag.settings import TrainLMSettings

    p = dict(section()["train_lm"])
    p.update({k: v for k, v in changed.items() if v}, threads=1)
    config = TrainLMSettings(**p, seed=seed)
    facts, people = world_facts(seed)
    keys = sorted(facts)
    docs = [document(r, e, facts[(e, r)]) for e, r in keys]
    reading_people = set(people["reading"])
    world = [(e, r) for e, r in keys if e not in reading_people]
    model, tokenizer = build_or_load(config, docs, special_tokens=list(SPECIAL_TOKENS))
    return SimpleNamespace(config=config, facts=facts, people=people, reading_people=reading_people, world=world,
                           reading={(e, r) for e, r in keys if e in reading_people},
                           memorised=choose_memorised(world, config.memorised_fraction, config.seed),
                           retriever=Retriever(docs, config.top_k), model=model, steps=Steps(tokenizer), tokenizer=tokenizer)


def run_read(args: argparse.Namespace) -> None:
    import torch

    from paperdag.lm import fit_pools
    from paperdag.methods.deeprag import RETRIEVE, answer, base_pools, matches

    torch.set_num_threads(1)
    changed = {"steps": args.steps, "vocab_size": args.vocab, "reading_copies": args.copies, "hidden_size": args.hidden,
               "intermediate_size": 4 * args.hidden if args.hidden else None, "top_k": args.top_k}
    b = base_setup(args.seed, changed)
    config, facts, world, memorised, retriever, model, tokenizer, steps = (b.config, b.facts, b.world, b.memorised, b.retriever,
                                                                           b.model, b.tokenizer, b.steps)
    reading = b.reading
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


def run_walks(args: argparse.Namespace) -> None:
    import polars as pl
    from sklearn.metrics import roc_auc_score

    from paperdag.methods.deeprag import fact_dict, matches

    data = ROOT / "data" / "deeprag"
    facts = fact_dict(pl.read_parquet(data / "facts.parquet"))
    print("test walks per arm: closed-book right where memorised | with retrieval right | retrieve rate known / unknown "
          "| decision AUC | steps without a boundary label")
    for path in sorted((data / "steps").glob("*.parquet"), key=lambda f: int(f.stem)):
        steps = pl.read_parquet(path)
        print(f"  replicate {path.stem}")
        for arm in steps["arm"].unique(maintain_order=True):
            rows = steps.filter(pl.col("arm") == arm).to_dicts()
            known = [r for r in rows if r["unknown"] is False]
            unknown = [r for r in rows if r["unknown"] is True]

            def right(rs: list[dict]) -> str:
                if not rs:
                    return "  -   (   0)"
                return f"{sum(matches(r['answer'], facts[(r['entity'], r['relation'])]) for r in rs) / len(rs):.3f} ({len(rs):4d})"

            rate = [sum(r["retrieve"] for r in rs) / max(1, len(rs)) for rs in (known, unknown)]
            labelled = known + unknown
            p = [r["p_retrieve"] for r in labelled]
            auc = f"{roc_auc_score([r['unknown'] for r in labelled], p):.3f}" if p and p[0] == p[0] else "  -  "
            print(f"    {arm:16s} {right([r for r in known if not r['retrieve']])}  {right([r for r in labelled if r['retrieve']])}"
                  f"  {rate[0]:.2f} / {rate[1]:.2f}  {auc}  {len(rows) - len(labelled):4d} of {len(rows)}")


def run_decide(args: argparse.Namespace) -> None:
    """train_lm with the decision token in the pretraining loss: memorised facts as `q_t <par> a_t` (the <par> learnt),
    and `--people` reading people under their own names, a random half of their facts memorised the same way and
    the other half as `q_t <ret>` (decision only: nothing to learn by heart). Then the boundary of P(<ret> | q_t)
    on the question people, per group (none of them ever seen with <ret>)."""
    import torch
    from sklearn.metrics import roc_auc_score

    from paperdag.lm import fit_pools
    from paperdag.methods.deeprag import PARAMETRIC, RETRIEVE, answer_accuracy, base_pools, choose_memorised, mcc, retrieve_probability

    torch.set_num_threads(1)
    b = base_setup(args.seed, {"steps": args.steps})
    config, facts, people, world, memorised, retriever, model, steps = (b.config, b.facts, b.people, b.world, b.memorised,
                                                                        b.retriever, b.model, b.steps)
    boundary_people = set(sorted(b.reading_people)[: args.people])
    boundary = sorted(k for k in b.reading if k[0] in boundary_people)
    known = choose_memorised(boundary, config.memorised_fraction, config.seed + 1)
    pools = base_pools(steps, config.top_k, facts, memorised, b.reading, config.reading_copies, config.seed)
    q = {k: steps.encode([subquery(k[1], k[0])])[0] for k in [*world, *boundary]}
    pools["closed"] = [(q[k], [steps.par, *steps.encode([" " + facts[k]])[0], steps.eos]) for k in [*sorted(memorised), *sorted(known)]]
    pools["decide"] = [(q[k], [steps.ret]) for k in boundary if k not in known]
    mixture = {"closed": 1 - config.reading_weight - args.decide_weight, "reading": config.reading_weight, "decide": args.decide_weight}
    start = time.perf_counter()
    fit_pools(model, pools, mixture, config, steps.pad, "deeprag decide probe")
    model.eval()
    check = (config.max_new_tokens, config.eval_batch_size)
    held = sorted(set(world) - memorised)
    print(f"{config.steps} steps, {args.people} boundary people, decide weight {args.decide_weight}, {time.perf_counter() - start:.0f} s: "
          f"recall memorised {answer_accuracy(model, steps, retriever, facts, sorted(memorised), PARAMETRIC, *check):.3f}, "
          f"held out {answer_accuracy(model, steps, retriever, facts, held, PARAMETRIC, *check):.3f}, "
          f"reading {answer_accuracy(model, steps, retriever, facts, world, RETRIEVE, *check):.3f}")
    for group in ("train", "val", "test"):
        ks = [k for k in world if k[0] in set(people[group])]
        pr = retrieve_probability(model, steps, [q[k] for k in ks], 200)
        unknown = [k not in memorised for k in ks]
        print(f"  {group}: P(<ret> | q_t) AUC {roc_auc_score(unknown, pr):.3f}, MCC at 0.5 {mcc([x > 0.5 for x in pr], unknown):+.3f}")


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


def run_probe(args: argparse.Namespace) -> None:
    import numpy as np
    import polars as pl
    import torch
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    from paperdag.lm import load_causal_lm
    from paperdag.lm.generate import left_pad
    from paperdag.methods.deeprag import PARAMETRIC, Steps, answer, memorised_set

    torch.set_num_threads(1)
    data = ROOT / "data" / "deeprag"
    rows = pl.read_parquet(data / "facts.parquet").select("entity", "relation", "group").rows()
    groups = {g: [(e, r) for e, r, gg in rows if gg == g] for g in ("train", "val", "test")}
    print("linear probe of 'not memorised' on the base LM's hidden states, trained on the train people's facts: "
          "ROC AUC on val / test people; then the closed-book answer's confidence (AUC of 1 - confidence)")
    for memorised in sorted((data / "memorised").glob("*.parquet"), key=lambda f: int(f.stem)):
        known, replicate = memorised_set(pl.read_parquet(memorised)), memorised.stem
        lm, tokenizer = load_causal_lm(data / "lm" / replicate)
        steps = Steps(tokenizer)
        feats: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        labels = {g: np.array([k not in known for k in keys]) for g, keys in groups.items()}
        for g, keys in groups.items():
            q_ids = steps.encode([subquery(r, e) for e, r in keys])
            for where, prompts in (("q_t", q_ids), ("<par>", [[*q, steps.par] for q in q_ids])):
                ids, mask = left_pad(prompts, steps.pad)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                with torch.inference_mode():
                    hidden = lm(input_ids=ids, attention_mask=mask, position_ids=positions, output_hidden_states=True).hidden_states
                for layer, h in enumerate(hidden):
                    feats.setdefault((where, str(layer)), {})[g] = h[:, -1].float().numpy()
        cells = []
        for (where, layer), x in sorted(feats.items()):
            probe = LogisticRegression(C=1.0, max_iter=2000).fit(x["train"], labels["train"])
            fit = roc_auc_score(labels["train"], probe.decision_function(x["train"]))
            out = [roc_auc_score(labels[g], probe.decision_function(x[g])) for g in ("val", "test")]
            cells.append(f"    {where:5s} layer {layer}: train {fit:.3f}  val {out[0]:.3f}  test {out[1]:.3f}")
        conf = []
        for g in ("val", "test"):
            q_ids = steps.encode([subquery(r, e) for e, r in groups[g]])
            _, c = answer(lm, steps, [steps.answer_prompt(q, PARAMETRIC, None) for q in q_ids], 8, 200)
            conf.append(roc_auc_score(labels[g], [1 - x for x in c]))
        print(f"  replicate {replicate}:\n" + "\n".join(cells) + f"\n    answer confidence: val {conf[0]:.3f}  test {conf[1]:.3f}")


def recorded_world() -> tuple[dict, dict[str, list[dict]], object]:
    """The recorded run's facts (a dict), val and test questions, and the infer stage's retriever."""
    import polars as pl

    from paperdag.methods.deeprag import Retriever, fact_dict, questions_of

    data = ROOT / "data" / "deeprag"
    questions = pl.read_parquet(data / "questions.parquet")
    asked = {s: questions_of(questions, s) for s in ("val", "test")}
    documents = pl.read_parquet(data / "documents.parquet")["text"].to_list()
    return fact_dict(pl.read_parquet(data / "facts.parquet")), asked, Retriever(documents, section()["infer"]["top_k"])


def walk_cells(lm, steps, retriever, asked: dict[str, list[dict]], fd: dict, known: set) -> list[str]:
    """DeepRAG's own walk (run_policy) with `lm` per split: EM / retrievals per question / the decision's ROC AUC
    against the boundary / closed-book right on memorised facts, over the steps it took."""
    from sklearn.metrics import roc_auc_score

    from paperdag.methods.deeprag import matches, run_policy

    infer, cells = section()["infer"], []
    for split, qs in asked.items():
        predictions, walk = run_policy("probe", lm, steps, retriever, qs, fd, known, infer["max_new_tokens"], infer["eval_batch_size"])
        scored = [r for r in walk if r["unknown"] is not None]
        auc = roc_auc_score([r["unknown"] for r in scored], [r["p_retrieve"] for r in scored])
        closed = [matches(r["answer"], fd[(r["entity"], r["relation"])]) for r in scored if r["unknown"] is False and not r["retrieve"]]
        em = 100 * sum(p["correct"] for p in predictions) / len(predictions)
        ret = sum(p["retrievals"] for p in predictions) / len(predictions)
        cells.append(f"{split} {em:5.1f} / {ret:.2f} / {auc:.3f} / {sum(closed) / max(1, len(closed)):.2f}")
    return cells


def run_imitate(args: argparse.Namespace) -> None:
    import polars as pl
    import torch

    from paperdag.lm import TrainConfig, load_causal_lm
    from paperdag.methods.deeprag import (
        Steps,
        imitate,
        imitation_rows,
        memorised_set,
        rehearsal_rows,
    )

    torch.set_num_threads(1)
    data, stage, (fd, asked, retriever) = ROOT / "data" / "deeprag", section()["imitate"], recorded_world()
    print("imitation from the recorded base LM: final loss; per split EM / retrievals per question / decision AUC / "
          "closed-book right on memorised facts" + (" (memorised facts rehearsed)" if args.replay else ""))
    for paths in sorted((data / "paths").glob("*.parquet"), key=lambda f: int(f.stem)):
        if args.replicates and int(paths.stem) not in args.replicates:
            continue
        known, rows = memorised_set(pl.read_parquet(data / "memorised" / paths.name)), pl.read_parquet(paths).to_dicts()
        for lr in args.lr:
            for n in args.steps:
                lm, tokenizer = load_causal_lm(data / "lm" / paths.stem)
                steps = Steps(tokenizer)
                config = TrainConfig(steps=n, lr=lr, warmup_steps=min(n // 2, stage["warmup_steps"]), weight_decay=0.0, seed=0)
                replay = rehearsal_rows(steps, fd, known) if args.replay else []
                report = imitate(lm, steps, imitation_rows(steps, rows) + replay, config, stage["batch_size"])
                cells = walk_cells(lm, steps, retriever, asked, fd, known)
                print(f"  replicate {paths.stem} lr {lr:g} steps {n:4d} loss {report.final():.3f}   " + "   ".join(cells), flush=True)


def run_calibrate(args: argparse.Namespace) -> None:
    import polars as pl
    import torch

    from paperdag.lm import TrainConfig, load_causal_lm
    from paperdag.methods.deeprag import (
        Steps,
        calibrate,
        decision_pairs,
        memorised_set,
    )

    torch.set_num_threads(1)
    data, stage, (fd, asked, retriever) = ROOT / "data" / "deeprag", section()["calibrate"], recorded_world()
    print("calibration from the recorded imitation model: per split EM / retrievals per question / decision AUC / "
          "closed-book right on memorised facts")
    for paths in sorted((data / "paths").glob("*.parquet"), key=lambda f: int(f.stem)):
        if args.replicates and int(paths.stem) not in args.replicates:
            continue
        known, rows = memorised_set(pl.read_parquet(data / "memorised" / paths.name)), pl.read_parquet(paths).to_dicts()
        for lr in [0.0, *args.lr]:
            for n in args.steps if lr else [0]:
                lm, tokenizer = load_causal_lm(data / "imitation" / paths.stem)
                steps = Steps(tokenizer)
                if n:
                    chosen, rejected = decision_pairs(steps, [r["subquery"] for r in rows], [r["decision"] for r in rows])
                    config = TrainConfig(steps=n, lr=lr, warmup_steps=min(n // 2, stage["warmup_steps"]), weight_decay=0.0, seed=0)
                    calibrate(lm, steps, chosen, rejected, stage["beta"], config, stage["batch_size"])
                cells = walk_cells(lm, steps, retriever, asked, fd, known)
                label = "imitation model (no DPO)" if not n else f"lr {lr:g} steps {n:4d}"
                print(f"  replicate {paths.stem} {label:24s} " + "   ".join(cells), flush=True)


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
    decide = sub.add_parser("decide", help="train_lm with the decision token learnt in pretraining (see run_decide)")
    decide.add_argument("--seed", type=int, default=0)
    decide.add_argument("--steps", type=int, default=0)
    decide.add_argument("--people", type=int, default=100, help="reading people whose own facts teach the boundary")
    decide.add_argument("--decide-weight", type=float, default=0.1)
    sub.add_parser("recorded")
    cal = sub.add_parser("calibrate")
    cal.add_argument("--steps", type=int, nargs="+", default=[25, 50, 100, 200])
    cal.add_argument("--lr", type=float, nargs="+", default=[5e-4, 1e-4, 2e-5])
    cal.add_argument("--replicates", type=int, nargs="*", default=[], help="only these (default: every recorded one)")
    sub.add_parser("boundary")
    sub.add_parser("probe")
    sub.add_parser("walks")
    imitation = sub.add_parser("imitate")
    imitation.add_argument("--steps", type=int, nargs="+", default=[10, 25, 50, 100, 200, 400])
    imitation.add_argument("--lr", type=float, nargs="+", default=[1e-3, 3e-4])
    imitation.add_argument("--replay", action="store_true", help="rehearse the memorised facts closed-book among the path steps")
    imitation.add_argument("--replicates", type=int, nargs="*", default=[], help="only these (default: every recorded one)")
    args = parser.parse_args()
    commands = {"bm25": run_bm25, "read": run_read, "decide": run_decide, "recorded": run_recorded, "boundary": run_boundary,
                "probe": run_probe, "walks": run_walks, "imitate": run_imitate, "calibrate": run_calibrate}
    commands[args.what](args)


if __name__ == "__main__":
    main()
