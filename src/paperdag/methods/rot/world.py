"""The synthetic problem world: multi-step problems on a running integer (arithmetic word problems, unit
conversions, small algebra), each step one of STEP_TYPES, solved by a trace = plan (the steps' abstract texts, the
thought template) + the computation line by line.

Step types follow one another along three family chains (CHAINS); a problem's steps are a contiguous window of
its family chain. The store holds long windows (the solved problems the thought graph is built from); the test
set mixes problems whose window is a stored one (a stored template fits) with problems whose window is new
(shorter, starting and ending elsewhere: the stored steps reused in an order no stored solution has), so a static
top-1 template is not enough."""

from __future__ import annotations

import random
from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class StepType:
    name: str
    family: str
    op: str  # "+", "-", "*", "/": v <- v op operand
    operands: tuple[int, ...]  # the operand drawn per problem
    sentence: str  # how the problem states it ({k}: the operand)
    text: str  # the abstract step of the solution template: a thought-graph node
    event: str  # the problem's opening names its first event ("before the harvest")


STEP_TYPES: tuple[StepType, ...] = (  # each step has its own keyword: a query names the steps it needs
    StepType("harvest", "word", "+", tuple(range(2, 6)), "The harvest adds {k}.", "Harvest: add the harvest.", "the harvest"),
    StepType("fox", "word", "-", tuple(range(2, 6)), "The fox steals {k}.", "Fox: subtract what the fox steals.", "the fox"),
    StepType("gift", "word", "*", (2,), "The gift doubles them.", "Gift: double them for the gift.", "the gift"),
    StepType("baskets", "word", "/", (2, 3), "The baskets: share into {k} baskets, keep one basket.", "Baskets: divide evenly into the baskets.", "the baskets"),
    StepType("market", "word", "-", tuple(range(2, 6)), "The market sells {k}.", "Market: subtract what the market sells.", "the market"),
    StepType("crate", "word", "+", tuple(range(2, 6)), "The crate brings {k}.", "Crate: add what the crate brings.", "the crate"),
    StepType("feet", "units", "*", (3,), "Feet: measure it in feet, three per yard.", "Feet: multiply by three for feet.", "the feet"),
    StepType("scissors", "units", "-", tuple(range(2, 6)), "The scissors snip off {k}.", "Scissors: subtract what the scissors snip.", "the scissors"),
    StepType("parts", "units", "/", (2, 3), "The parts: cut it into {k} equal parts, keep one part.", "Parts: divide into the equal parts.", "the parts"),
    StepType("ribbon", "units", "+", tuple(range(2, 6)), "The ribbon adds {k}.", "Ribbon: add the ribbon.", "the ribbon"),
    StepType("folding", "units", "*", (2,), "The folding doubles the pieces.", "Folding: double for the folding.", "the folding"),
    StepType("tailor", "units", "-", tuple(range(2, 6)), "The tailor loses {k}.", "Tailor: subtract what the tailor loses.", "the tailor"),
    StepType("offset", "algebra", "+", tuple(range(2, 6)), "The offset is {k}: add it.", "Offset: add the offset.", "the offset"),
    StepType("coefficient", "algebra", "*", (2, 3), "The coefficient is {k}: multiply by it.", "Coefficient: multiply by the coefficient.", "the coefficient"),
    StepType("penalty", "algebra", "-", tuple(range(2, 6)), "The penalty is {k}: subtract it.", "Penalty: subtract the penalty.", "the penalty"),
    StepType("divisor", "algebra", "/", (2, 3), "The divisor is {k}: divide by it.", "Divisor: divide by the divisor.", "the divisor"),
    StepType("bonus", "algebra", "+", tuple(range(2, 6)), "The bonus is {k}: add it.", "Bonus: add the bonus.", "the bonus"),
    StepType("discount", "algebra", "-", tuple(range(2, 6)), "The discount is {k}: take it away.", "Discount: take away the discount.", "the discount"),
)
TYPES = {t.name: t for t in STEP_TYPES}
FAMILIES = ("word", "units", "algebra")
CHAINS = {f: tuple(t.name for t in STEP_TYPES if t.family == f) for f in FAMILIES}  # the order steps follow
OPENERS = {"word": "First comes {event}; a farmer has {s} apples.", "units": "First comes {event}; a rope is {s} yards.",
           "algebra": "First comes {event}; the number is {s}."}
QUESTION = {"word": "How many now?", "units": "How long now?", "algebra": "Result?"}
MAX_VALUE = 40  # every intermediate value stays in 0..MAX_VALUE: arithmetic a tiny LM learns in minutes


@dataclass(frozen=True)
class Problem:
    family: str
    steps: tuple[str, ...]  # step type names, a window of CHAINS[family]
    start: int
    operands: tuple[int, ...]

    def values(self) -> list[int]:
        """The running value after each step (first: the start)."""
        out = [self.start]
        for name, k in zip(self.steps, self.operands, strict=True):
            v, op = out[-1], TYPES[name].op
            out.append(v + k if op == "+" else v - k if op == "-" else v * k if op == "*" else v // k)
        return out

    @property
    def answer(self) -> int:
        return self.values()[-1]

    @property
    def text(self) -> str:
        said = [TYPES[n].sentence.format(k=k) for n, k in zip(self.steps, self.operands, strict=True)]
        return " ".join([OPENERS[self.family].format(s=self.start, event=TYPES[self.steps[0]].event), *said, QUESTION[self.family]])

    @property
    def template(self) -> list[str]:
        return [TYPES[n].text for n in self.steps]

    @property
    def computation(self) -> str:
        v = self.values()
        lines = [f"{num(a)} {TYPES[n].op} {num(k)} = {num(b)}" for n, k, a, b in zip(self.steps, self.operands, v[:-1], v[1:], strict=True)]
        return " ; ".join(lines) + f" ; answer {num(v[-1])}"


def num(n: int) -> str:
    """A number digit by digit ("4 2"): every digit one token, so the tiny LM's arithmetic is digit arithmetic."""
    return " ".join(str(n))


def valid(values: list[int], steps: tuple[str, ...], operands: tuple[int, ...]) -> bool:
    if any(v < 0 or v > MAX_VALUE for v in values):
        return False
    return all(TYPES[n].op != "/" or a % k == 0 for n, k, a in zip(steps, operands, values[:-1], strict=True))


def draw_problem(family: str, steps: tuple[str, ...], rng: random.Random, tries: int = 2000) -> Problem:
    """Start value and operands for a window, every value in range and every division exact."""
    for _ in range(tries):
        p = Problem(family, steps, rng.randint(2, 20), tuple(rng.choice(TYPES[n].operands) for n in steps))
        if valid(p.values(), steps, p.operands):
            return p
    raise ValueError(f"rot synthesize: no valid numbers for steps {steps} in {tries} tries; widen the operand ranges")


def windows(lengths: range | list[int]) -> list[tuple[str, tuple[str, ...]]]:
    """Every (family, contiguous window of its chain) of the given lengths."""
    out = []
    for f, chain in CHAINS.items():
        for n in lengths:
            out += [(f, chain[i : i + n]) for i in range(len(chain) - n + 1)]
    return out


SPLITS = ("store", "train", "val", "test")


def store_windows(min_length: int) -> list[tuple[str, tuple[str, ...]]]:
    """The stored solutions' step sequences: every suffix of a family chain at least min_length long."""
    return [(f, c[i:]) for f, c in CHAINS.items() for i in range(len(c) - min_length + 1)]


def make_splits(counts: dict[str, int], min_store_length: int, min_length: int, rng: random.Random,
                tries: int = 200) -> list[dict[str, object]]:
    """counts[split] problems per window: the store over the stored windows, train / val / test over every window of
    length >= min_length (test rows tagged seen: a stored window, or new). Every problem's text is unique across all
    splits (no test problem is a stored or training one); a count that cannot be met raises."""
    stored = store_windows(min_store_length)
    every = windows(range(min_length, max(len(c) for c in CHAINS.values()) + 1))
    texts: set[str] = set()
    rows: list[dict[str, object]] = []
    for split in SPLITS:
        for family, steps in stored if split == "store" else every:
            for _ in range(counts[split]):
                for _ in range(tries):
                    p = draw_problem(family, steps, rng)
                    if p.text not in texts:
                        break
                else:
                    raise ValueError(f"rot synthesize: cannot draw {counts[split]} distinct {split} problems for {steps} "
                                     f"({tries} tries); lower synthesize.{split}_per_window")
                texts.add(p.text)
                kind = ("seen" if (family, steps) in stored else "new") if split == "test" else ""
                rows.append({"id": len(rows), "split": split, "kind": kind, "family": family, "steps": list(steps),
                             "start": p.start, "operands": list(p.operands), "text": p.text, "template": p.template,
                             "answer": p.answer})
    return rows


def problem_of(row: dict) -> Problem:
    return Problem(row["family"], tuple(row["steps"]), int(row["start"]), tuple(int(k) for k in row["operands"]))


def problems_table(rows: list[dict[str, object]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"id": pl.Int64, "split": pl.String, "kind": pl.String, "family": pl.String,
                                      "steps": pl.List(pl.String), "start": pl.Int64, "operands": pl.List(pl.Int64),
                                      "text": pl.String, "template": pl.List(pl.String), "answer": pl.Int64})


def check_splits(problems: pl.DataFrame, where: str) -> None:
    """No test or validation problem is in the store or the training data; every split present."""
    missing = set(SPLITS) - set(problems["split"].unique().to_list())
    if missing:
        raise ValueError(f"rot {where}: problems.parquet lacks splits {sorted(missing)}; rerun rot:synthesize")
    seen = set(problems.filter(pl.col("split").is_in(["store", "train"]))["text"])
    leaked = problems.filter(pl.col("split").is_in(["val", "test"]) & pl.col("text").is_in(list(seen))).height
    if leaked or problems["text"].n_unique() != problems.height:
        raise ValueError(f"rot {where}: {leaked} evaluation problems appear in the store or training data")
