"""The synthetic theorem world: linear-arithmetic theorems in families, each with its formal statement and proof
(checked by logic.check) and an NL rendering drawn from paraphrase templates.

A family is a proof skeleton (SKELETONS: which hypotheses, which rule steps) and a direction (lower bounds >= / >,
or upper bounds <= / <). Families sharing a skeleton share their proof structure, as similar theorems do; the
train / val / test split is by family, so a test theorem's family was never trained on, while its skeleton may have
been seen in the other direction (what a retrieved example can supply). Per theorem: variable names, types (int or
nat), constants, strictness, the order of the hypotheses (the proof refers to them by name) and every NL template
are drawn at random; the goal is what the skeleton's proof derives, written in one of its equivalent forms.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from paperdag.methods.proofbridge.logic import SEP, Fact, Linear, apply_rule, check

NAMES = ("x", "y", "z")  # variables by role: names carry nothing a lexical matcher could pair up
SPLITS = ("train", "val", "test")

# ---- NL ------------------------------------------------------------------------------------------------------------

RELATION_NL = {
    ">=": ("is at least", "is no less than", "is greater than or equal to"),
    ">": ("is greater than", "exceeds", "is strictly more than"),
    "<=": ("is at most", "does not exceed", "is less than or equal to"),
    "<": ("is less than", "is below", "is strictly smaller than"),
    "=": ("equals", "is equal to"),
}
TYPE_NL = {"int": ("an integer", "integers"), "nat": ("a natural number", "natural numbers")}
PREAMBLES = ("Let {decls}.", "Fix {decls}.", "Consider {decls}.")
HYPOTHESES = ("Assume that {hyps}.", "Suppose {hyps}.", "We are given that {hyps}.")
GOALS = ("Show that {goal}.", "Prove that {goal}.", "Then {goal}.")


ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def number_nl(n: int) -> str:
    """A number in words, as a mathematician writes small constants in prose ("twenty-three", "minus four")."""
    if n < 0:
        return f"minus {number_nl(-n)}"
    if n >= 100:
        raise ValueError(f"number_nl: {n} is out of the world's range (< 100)")
    if n < 20:
        return ONES[n]
    return TENS[n // 10] + (f"-{ONES[n % 10]}" if n % 10 else "")


def expression_nl(e: Linear, rng: random.Random) -> str:
    terms = [v if c == 1 else f"{number_nl(c)} times {v}" for v, c in e.coef]
    if e.const:
        terms.append(number_nl(e.const))
    if not terms:
        return "0"
    if len(terms) == 1:
        return terms[0]
    if rng.random() < 0.5:
        return " plus ".join(terms)
    return f"the sum of {', '.join(terms[:-1])} and {terms[-1]}"


def fact_nl(f: Fact, rng: random.Random) -> str:
    return f"{expression_nl(f.lhs, rng)} {rng.choice(RELATION_NL[f.rel])} {expression_nl(f.rhs, rng)}"


def theorem_nl(variables: dict[str, str], hypotheses: list[Fact], goal: Fact, rng: random.Random) -> str:
    decls = [f"{v} be {TYPE_NL[t][0]}" for v, t in variables.items()]
    decl = decls[0] if len(decls) == 1 else ", ".join(decls[:-1]) + " and " + decls[-1]
    template = rng.choice(PREAMBLES)
    if template != PREAMBLES[0]:
        decl = decl.replace(" be ", " as ")
    hyps = [fact_nl(h, rng) for h in hypotheses]
    hyp = hyps[0] if len(hyps) == 1 else ", ".join(hyps[:-1]) + " and " + hyps[-1]
    return " ".join([template.format(decls=decl), rng.choice(HYPOTHESES).format(hyps=hyp), rng.choice(GOALS).format(goal=fact_nl(goal, rng))])


# ---- skeletons -----------------------------------------------------------------------------------------------------


def var(v: str, k: int = 1) -> Linear:
    return Linear(((v, k),), 0)


def num(c: int) -> Linear:
    return Linear((), c)


@dataclass(frozen=True)
class Skeleton:
    """Hypotheses by role (a builder from variables, direction and rng) and the proof's rule steps over roles and
    earlier steps ("s1", ...), the last step being the goal."""

    name: str
    variables: int  # how many variables (x, y, z roles, in order)
    directions: tuple[str, ...]
    hypotheses: Callable[[list[str], str, random.Random, int], dict[str, Fact]]  # (variables, direction, rng, k)
    steps: tuple[tuple[str, ...], ...]  # (rule, arg, ...): args are roles, step names or numerals "k"


def _rel(direction: str, rng: random.Random) -> str:
    return rng.choice((">=", ">") if direction == "lower" else ("<=", "<"))


def _bound(v: str, direction: str, rng: random.Random, lo: int = 1, hi: int = 9) -> Fact:
    return Fact(var(v), _rel(direction, rng), num(rng.randint(lo, hi)))


def _shift(y: str, x: str, rng: random.Random, hi: int = 9) -> Fact:
    return Fact(var(y), "=", var(x) + num(rng.randint(1, hi)))


def _subst_pair(v: list[str], d: str, rng: random.Random, k: int) -> dict[str, Fact]:
    eq = _shift(v[1], v[0], rng)
    return {"eq": eq, "by": Fact(var(v[1]), _rel(d, rng), num(eq.rhs.const + rng.randint(1, 9)))}


SKELETONS: tuple[Skeleton, ...] = (
    Skeleton("sum2", 2, ("lower", "upper"), lambda v, d, r, k: {"bx": _bound(v[0], d, r), "by": _bound(v[1], d, r)},
             (("add", "bx", "by"),)),
    Skeleton("sum3", 3, ("lower", "upper"), lambda v, d, r, k: {"bx": _bound(v[0], d, r), "by": _bound(v[1], d, r), "bz": _bound(v[2], d, r)},
             (("add", "bx", "by"), ("add", "s1", "bz"))),
    Skeleton("scale", 1, ("lower", "upper"), lambda v, d, r, k: {"bx": _bound(v[0], d, r)}, (("mul", "k", "bx"),)),
    Skeleton("shift", 2, ("lower", "upper"), lambda v, d, r, k: {"bx": _bound(v[0], d, r), "eq": _shift(v[1], v[0], r)},
             (("add", "bx", "eq"),)),
    Skeleton("times", 2, ("lower", "upper"), lambda v, d, r, k: {"bx": _bound(v[0], d, r), "eq": Fact(var(v[1]), "=", var(v[0], k))},
             (("mul", "k", "bx"), ("add", "s1", "eq"))),
    Skeleton("subst", 2, ("lower", "upper"), _subst_pair, (("subst", "eq", "by"),)),
    Skeleton("scalesum", 2, ("lower", "upper"), lambda v, d, r, k: {"bx": _bound(v[0], d, r), "by": _bound(v[1], d, r)},
             (("mul", "k", "bx"), ("add", "s1", "by"))),
    Skeleton("shiftsum", 3, ("lower", "upper"), lambda v, d, r, k: {"bx": _bound(v[0], d, r), "eq": _shift(v[1], v[0], r), "bz": _bound(v[2], d, r)},
             (("add", "bx", "eq"), ("add", "s1", "bz"))),
    Skeleton("substscale", 2, ("lower", "upper"), _subst_pair, (("subst", "eq", "by"), ("mul", "k", "s1"))),
    Skeleton("natshift", 2, ("lower",), lambda v, d, r, k: {"eq": _shift(v[1], v[0], r, 40)}, (("nonneg", "x"), ("add", "s1", "eq"))),
)
BY_NAME = {s.name: s for s in SKELETONS}
FAMILIES = tuple(f"{s.name}:{d}" for s in SKELETONS for d in s.directions)


@dataclass(frozen=True)
class Theorem:
    family: str
    nl: str
    statement: str  # the statement line
    proof: str  # the proof lines
    states: tuple[str, ...]  # the checker's proof states

    @property
    def formal(self) -> str:
        """What the generator writes: the statement line and the proof."""
        return f"{self.statement}\n{self.proof}"

    @property
    def formal_states(self) -> str:
        """What the formal encoder reads: the statement and the proof states, joined by SEP."""
        return SEP.join((self.statement, *self.states))


def _goal_form(f: Fact, rng: random.Random) -> Fact:
    """The derived fact (normal form) or its other integer form (x > 4 as x >= 5; x <= 3 as x < 4), at random."""
    if f.rel == "=" or rng.random() < 0.5:
        return f
    c = f.rhs.const
    rel, c = {">": (">=", c + 1), ">=": (">", c - 1), "<": ("<=", c - 1), "<=": ("<", c + 1)}[f.rel]
    return Fact(f.lhs, rel, num(c))


def draw_theorem(family: str, rng: random.Random) -> Theorem:
    """One theorem of `family` (skeleton:direction), checked by the checker before it is returned."""
    name, direction = family.split(":")
    sk = BY_NAME[name]
    names = list(NAMES[: sk.variables])
    types = {v: rng.choice(("int", "nat")) for v in names}
    if sk.name == "natshift":
        types[names[0]] = "nat"
    k = rng.randint(2, 4)  # the factor of mul steps (and of a times equation)
    roles = sk.hypotheses(names, direction, rng, k)
    order = list(roles)
    rng.shuffle(order)
    hyp_name = {role: f"h{i + 1}" for i, role in enumerate(order)}
    context = {hyp_name[r]: roles[r] for r in order}
    lines, fact = [], None
    for i, (rule, *args) in enumerate(sk.steps, start=1):
        real = [str(k) if a == "k" else names[0] if a == "x" else hyp_name.get(a, a) for a in args]
        fact = apply_rule(rule, real, context, types, i + 1)
        context[f"s{i}"] = fact
        lines.append(f"have s{i} := {rule} {' '.join(real)}")
    lines.append(f"exact s{len(sk.steps)}")
    goal = _goal_form(fact, rng)
    binders = [f"({v} : {types[v]})" for v in sorted(names)] + [f"({hyp_name[r]} : {roles[r].text})" for r in order]
    statement = f"theorem {' '.join(binders)} : {goal.text}"
    nl = theorem_nl({v: types[v] for v in sorted(names)}, [roles[r] for r in order], goal, rng)
    text = f"{statement}\n" + "\n".join(lines)
    checked = check(text)  # the world only emits theorems its own checker accepts
    return Theorem(family, nl, statement, "\n".join(lines), tuple(checked.states()))


def make_split(families: dict[str, str], counts: dict[str, int], rng: random.Random, tries: int = 200) -> list[tuple[str, Theorem]]:
    """counts[split] distinct theorems per family of each split (families: family -> split); every NL text and
    every statement unique over the whole world. Raises when a family cannot deliver its count."""
    out: list[tuple[str, Theorem]] = []
    seen_nl, seen_statement = set(), set()
    for family in sorted(families):
        split = families[family]
        got, attempts = 0, 0
        while got < counts[split]:
            attempts += 1
            if attempts > tries * counts[split]:
                raise ValueError(f"proofbridge synthesize: family {family} gave {got} distinct theorems of the "
                                 f"{counts[split]} asked for ({split}); lower synthesize.per_family.{split}")
            t = draw_theorem(family, rng)
            if t.nl in seen_nl or t.statement in seen_statement:
                continue
            seen_nl.add(t.nl)
            seen_statement.add(t.statement)
            out.append((split, t))
            got += 1
    return out


def assign_families(test: list[str], val: list[str]) -> dict[str, str]:
    """family -> split: the named test and val families, every other family trains. Every skeleton keeps a family
    in training (a held-out family's proof structure is seen in its other direction)."""
    unknown = [f for f in [*test, *val] if f not in FAMILIES]
    if unknown:
        raise ValueError(f"proofbridge synthesize: unknown families {unknown}; known: {', '.join(FAMILIES)}")
    if set(test) & set(val):
        raise ValueError(f"proofbridge synthesize: families {sorted(set(test) & set(val))} are both test and val")
    split = {f: "test" if f in test else "val" if f in val else "train" for f in FAMILIES}
    lost = [s.name for s in SKELETONS if not any(split[f"{s.name}:{d}"] == "train" for d in s.directions)]
    if lost:
        raise ValueError(f"proofbridge synthesize: skeletons {lost} have no training family; hold out one direction only")
    return split


def theorems_table(rows: list[tuple[str, Theorem]]) -> pl.DataFrame:
    return pl.DataFrame({
        "id": list(range(len(rows))),
        "split": [s for s, _ in rows],
        "family": [t.family for _, t in rows],
        "skeleton": [t.family.split(":")[0] for _, t in rows],
        "nl": [t.nl for _, t in rows],
        "statement": [t.statement for _, t in rows],
        "formal": [t.formal for _, t in rows],
        "formal_states": [t.formal_states for _, t in rows],
    })


def check_world(table: pl.DataFrame, counts: dict[str, int], families: dict[str, str], stage: str) -> None:
    """The composition the later stages rely on: each family in one split with its count, every theorem
    accepted by the checker, NL and statements unique, test families absent from train."""
    by = {s: set(table.filter(pl.col("split") == s)["family"]) for s in SPLITS}
    if by["train"] & (by["val"] | by["test"]) or by["val"] & by["test"]:
        raise ValueError(f"proofbridge {stage}: a family is in two splits: {by}")
    sizes = table.group_by("family", "split").len()
    for family, split, n in sizes.iter_rows():
        if families[family] != split or n != counts[split]:
            raise ValueError(f"proofbridge {stage}: family {family} has {n} {split} theorems, expected {counts[families[family]]} in {families[family]}")
    if table["nl"].n_unique() != table.height or table["statement"].n_unique() != table.height:
        raise ValueError(f"proofbridge {stage}: NL texts or statements repeat")
