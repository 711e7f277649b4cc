"""Where milco's default scale comes from: three measurements on a replicate world the pipeline built
(data/milco/<replicate>/: synthesize and train_teacher must have run), each printed beside its alternative, on the
train split only (cross-lingual train queries, train documents): the test queries and documents are the claims'.

  translate  the translate-then-BM25 baseline's dictionary: IBM Model 1 (the pipeline's) vs Dice co-occurrence (its
             dictionary before): share of the queries' English words translated right, cross-lingual nDCG@10
  teacher    the English teacher's lexical warm-up length: its top-20 pivot terms' recall of a train document's
             content words (the target stage 1 aligns the student with), and its active dims
  stage1     stage 1 alone on a fresh student: pivot recall of the content words of train queries and documents (stage 1 reads
             neither, only the parallel text), with
             the paper's max pooling from the start vs the soft max annealed to it (milco.train.align_soft_*)

The fair dense baseline's settings are chosen by its own stage (milco train_dense, on validation queries; the grid's
scores in data/milco/<replicate>/dense_stats.json).

    .venv/bin/python benchmarks/milco_calibration.py translate --replicate 0
    .venv/bin/python benchmarks/milco_calibration.py teacher --warmup 100 400
    .venv/bin/python benchmarks/milco_calibration.py stage1 --steps 600 --soft-tau 0 3

One thread each (torch), native numerics; a few minutes per configuration on this 2-core machine.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import torch
import yaml

from paperdag.lm import TrainConfig, tiny_bert_config, tiny_masked_lm
from paperdag.methods.milco.student import load_teacher, new_student
from paperdag.methods.milco.training import align_on_parallel, collate, groups_data, teacher_pivot, tokenize, train_english_teacher
from paperdag.methods.milco.translate import learn_dictionary, translate
from paperdag.retrieval import BM25Index
from paperdag.retrieval.metrics import ndcg_at_k_per_query

ROOT = Path(__file__).resolve().parents[1]
FUNCTION_WORDS = {"is", "a", "an", "the", "who", "in", "every"}  # the English templates' words that carry no content


def world(replicate: int) -> tuple[Path, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    d = ROOT / "data" / "milco" / str(replicate)
    if not (d / "teacher").is_dir():
        raise SystemExit(f"{d}/teacher is missing: run `dvc repro milco-train_teacher@{replicate}` first")
    return d, pl.read_parquet(d / "corpus.parquet").sort("doc_id"), pl.read_parquet(d / "queries.parquet"), pl.read_parquet(d / "parallel.parquet")


def train_crosslingual(queries: pl.DataFrame) -> pl.DataFrame:
    """The cross-lingual train queries: what every measurement here reads (never a test query or document: the
    claims are judged on those)."""
    return queries.filter((pl.col("split") == "train") & (pl.col("kind") == "crosslingual")).sort("query_id")


def dice_dictionary(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The dictionary translate-then-BM25 used before: each source word -> the English word maximising Dice."""
    src, en, joint = Counter(), Counter(), Counter()
    for source, english in pairs:
        f_words, e_words = set(source.lower().split()), set(english.lower().split())
        src.update(f_words)
        en.update(e_words)
        joint.update((f, e) for f in f_words for e in e_words)
    best: dict[str, tuple[float, str]] = {}
    for (f, e), c in joint.items():
        dice = 2 * c / (src[f] + en[e])
        if f not in best or (dice, e) > best[f]:
            best[f] = (dice, e)
    return {f: e for f, (_, e) in best.items()}


def run_translate(args: argparse.Namespace) -> None:
    _, corpus, queries, parallel = world(args.replicate)
    asked = train_crosslingual(queries)
    pairs = list(zip(parallel["source"], parallel["english"], strict=True))
    print(f"replicate {args.replicate}: {len(asked)} cross-lingual train queries, {len(corpus)} documents, {len(pairs)} parallel rows")
    for name, learn in (("dice", dice_dictionary), ("ibm_model_1", learn_dictionary)):
        start = time.perf_counter()
        dictionary = learn(pairs)
        learn_s = time.perf_counter() - start
        right = total = 0
        for text, english in zip(asked["text"], asked["english"], strict=True):
            words = set(english.split())
            right += len(set(translate(text, dictionary).split()) & words)
            total += len(words)
        index = BM25Index.build([translate(t, dictionary) for t in corpus["text"]], k1=0.9, b=0.4, stopwords="en")
        ranked = index.search([translate(t, dictionary) for t in asked["text"]], 10)[1]
        ndcg = float(np.nanmean(ndcg_at_k_per_query(ranked, asked["relevant"].to_list(), 10)))
        print(f"  {name:12s} query words translated right {right / total:.3f}   nDCG@10 {ndcg:.3f}   ({learn_s:.1f} s to learn)")


def content_recall(pivots: torch.Tensor, english: list[str], vocab: dict[str, int], k: int = 20) -> float:
    """Share of the texts' content words (whole words of the English vocabulary) among their pivot's top-k terms."""
    inverse = {i: t for t, i in vocab.items()}
    hits = total = 0
    for row, text in zip(pivots, english, strict=True):
        top = {inverse[int(i)] for i in torch.topk(row, k).indices if row[i] > 0}
        words = [w for w in text.lower().split() if w not in FUNCTION_WORDS and w in vocab]
        hits += sum(w in top for w in words)
        total += len(words)
    return hits / max(total, 1)


def run_teacher(args: argparse.Namespace) -> None:
    d, corpus, queries, parallel = world(args.replicate)
    p = yaml.safe_load((ROOT / "params.yaml").read_text())["milco"]
    m, t = p["model"], p["train_teacher"]
    _, en_tok = load_teacher(d / "teacher")  # the run's English tokenizer; the teacher itself is trained afresh
    groups = pl.read_parquet(d / "groups.parquet")
    train = queries.filter(pl.col("split") == "train").sort("query_id")
    data = groups_data(en_tok, train["english"].to_list(), corpus["english"].to_list(), groups["doc_ids"].to_list(),
                       groups["teacher_scores"].to_list(), m["max_length"])
    sentences = tokenize(en_tok, corpus["english"].to_list() + parallel["english"].to_list(), m["max_length"])
    docs = corpus.filter(pl.col("split") == "train").head(args.docs)
    for warmup in args.warmup:
        torch.manual_seed(0)
        teacher = tiny_masked_lm(tiny_bert_config(len(en_tok), m["teacher_hidden_size"], m["num_layers"], m["num_heads"],
                                                  m["intermediate_size"], m["max_length"]))
        start = time.perf_counter()
        train_english_teacher(teacher, sentences, data, TrainConfig(steps=warmup, lr=t["lr"], warmup_steps=warmup // 10, seed=0),
                              TrainConfig(steps=t["distill_steps"], lr=t["lr"], warmup_steps=t["distill_steps"] // 10, seed=1),
                              t["batch"], t["group_batch"], t["lambda_q"], t["lambda_d"], en_tok.pad_token_id, en_tok.all_special_ids,
                              progress=False)
        with torch.no_grad():
            piv = teacher_pivot(teacher, *collate(tokenize(en_tok, docs["english"].to_list(), m["max_length"]), en_tok.pad_token_id))
        print(f"  warm-up {warmup:5d} + distill {t['distill_steps']}: content recall@20 {content_recall(piv, docs['english'].to_list(), en_tok.get_vocab()):.2f}"
              f"   active dims {(piv > 0).sum(1).float().mean():.0f}   ({time.perf_counter() - start:.0f} s)")


def run_stage1(args: argparse.Namespace) -> None:
    d, corpus, queries, parallel = world(args.replicate)
    p = yaml.safe_load((ROOT / "params.yaml").read_text())["milco"]
    model = SimpleNamespace(**{k: p["model"][k] for k in ("encoder", "hidden_size", "num_layers", "num_heads", "intermediate_size", "max_length")})
    train = p["train"]
    en_model, en_tok = load_teacher(d / "teacher")
    asked = train_crosslingual(queries).head(args.docs)
    docs = corpus.filter(pl.col("split") == "train").head(args.docs)
    for steps in args.steps:
        for tau in args.soft_tau:
            student = new_student(model, en_model, d / "tokenizer", 0, connector=True, echo=True)
            soft_steps = int(round(steps * args.soft_fraction)) if tau > 0 else 0
            start = time.perf_counter()
            align_on_parallel(student, en_model, en_tok, parallel, steps=steps, lr=train["align_lr"], batch=train["align_batch"],
                              max_length=model.max_length, seed=0, soft_tau=tau, soft_steps=soft_steps)
            student.eval()
            pad = student.tokenizer.pad_token_id
            with torch.no_grad():
                q = student(*collate(tokenize(student.tokenizer, asked["text"].to_list(), model.max_length), pad)).pivot
                dv = student(*collate(tokenize(student.tokenizer, docs["text"].to_list(), model.max_length), pad)).pivot
            vocab = en_tok.get_vocab()
            print(f"  {steps:5d} steps, soft tau {tau:g} over {soft_steps:4d}: content recall@20 train queries "
                  f"{content_recall(q, asked['english'].to_list(), vocab):.2f}, train documents {content_recall(dv, docs['english'].to_list(), vocab):.2f}"
                  f"   ({time.perf_counter() - start:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    for name in ("translate", "teacher", "stage1"):
        s = sub.add_parser(name)
        s.add_argument("--replicate", type=int, default=0)
        s.add_argument("--docs", type=int, default=150, help="train documents / queries the recall is measured on")
        if name == "teacher":
            s.add_argument("--warmup", type=int, nargs="+", default=[100, 400])
        if name == "stage1":
            s.add_argument("--steps", type=int, nargs="+", default=[600])
            s.add_argument("--soft-tau", type=float, nargs="+", default=[0.0, 3.0])
            s.add_argument("--soft-fraction", type=float, default=2 / 3, help="share of the steps the temperature anneals over")
    args = parser.parse_args()
    torch.set_num_threads(1)
    {"translate": run_translate, "teacher": run_teacher, "stage1": run_stage1}[args.what](args)


if __name__ == "__main__":
    main()
