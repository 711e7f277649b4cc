"""Where TokMem's misroutes go and what they answer, from the predictions dvc.lock records (read only; no stage runs).

    .venv/bin/python benchmarks/tokmem_routing.py [--data data/tokmem]

Per replicate: of the first round's test queries, how many still route to their own token after the last round and
give the same output as after the first round (the rows and the backbone are frozen, so only routing can change an
answer), how many route elsewhere, and how many of those the other token answers right (and their own token did after
round 1). Over every test query after the last round: misroutes, those landing on a procedure of the same rule family,
those answered right, and those both.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from paperdag.methods.tokmem.metrics import exact_match


def replicate_rows(data: Path, replicate: str, family: dict[int, str]) -> tuple[dict[str, int], dict[str, int]]:
    """The first round's queries after the first and the last round; every query's misroute after the last."""
    tokmem = pl.read_parquet(data / f"memory_predictions/{replicate}.parquet").filter(pl.col("method") == "tokmem")
    last = tokmem["round"].max()
    first = tokmem.filter(pl.col("round") == 1).select("query", "procedure", "answer", pl.col("prediction").alias("before"),
                                                     pl.col("routed").alias("routed_before"))
    after = tokmem.filter(pl.col("round") == last).select("query", "prediction", "routed")
    joined = first.join(after, on="query", how="inner", validate="1:1")
    own = joined.filter(pl.col("routed") == pl.col("procedure"))
    moved = joined.filter(pl.col("routed") != pl.col("procedure"))
    round1 = {"queries": joined.height, "own_route": own.height, "own_route_same_output": int((own["before"] == own["prediction"]).sum()),
              "misrouted": moved.height,
              "misrouted_right_after": sum(exact_match(p, a) for p, a in zip(moved["prediction"], moved["answer"], strict=True)),
              "misrouted_right_before": sum(exact_match(p, a) for p, a in zip(moved["before"], moved["answer"], strict=True))}
    wrong = tokmem.filter((pl.col("round") == last) & (pl.col("routed") != pl.col("procedure")))
    right = [exact_match(p, a) for p, a in zip(wrong["prediction"], wrong["answer"], strict=True)]
    same = [family.get(r) == family[p] for r, p in zip(wrong["routed"], wrong["procedure"], strict=True)]
    misroutes = {"queries": tokmem.filter(pl.col("round") == last).height, "misroutes": wrong.height, "same_family": sum(same),
                 "right": sum(right), "right_same_family": sum(r and s for r, s in zip(right, same, strict=True))}
    return round1, misroutes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data/tokmem"))
    args = parser.parse_args()
    procedures = pl.read_parquet(args.data / "procedures.parquet")
    family = dict(zip(procedures["id"].to_list(), procedures["family"].to_list(), strict=True))
    replicates = sorted(p.stem for p in (args.data / "memory_predictions").glob("*.parquet"))
    totals: dict[str, int] = {}
    for r in replicates:
        round1, misroutes = replicate_rows(args.data, r, family)
        print(f"replicate {r}: round-1 queries {round1}")
        totals = {k: totals.get(k, 0) + v for k, v in misroutes.items()}
    print(f"after the last round, all replicates: {totals}")


if __name__ == "__main__":
    main()
