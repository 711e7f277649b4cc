"""The formal side: a small typed language of linear integer arithmetic with forward proof steps, and its checker.

A theorem is one statement line and its proof, one step a line:

    theorem (x : int) (n : nat) (h1 : x >= 2) (h2 : n = x + 3) : n >= 5
    have s1 := add h1 h2
    exact s1

Types: `int` and `nat` for variables (a nat is >= 0), and Prop for hypotheses and steps (a fact `e REL e`, REL one of
<= < = >= >, e a linear expression over declared variables with integer coefficients). Rules (each step's fact is
computed by the checker, never written by the prover, as a Lean tactic state is):

    add hA hB     (lA + lB) REL (rA + rB): both lower bounds (>=, >), both upper bounds (<=, <), or one an equation
    mul k hA      (k lA) REL (k rA) for a positive numeral k
    subst hE hB   hE : v = e (v a variable alone on the left): v replaced by e in hB
    nonneg v      v >= 0 for a variable v of type nat
    exact s       closes the goal when s states the same integer constraint as the goal (after normalisation)

The checker is the ground truth of the pipeline: `check` returns the proof states (the formal encoder's input) or the
first error with its line, rule and what was expected (`CheckError`, the repair round's feedback).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

RELATIONS = ("<=", "<", "=", ">=", ">")
LOWER, UPPER = (">=", ">"), ("<=", "<")
TYPES = ("int", "nat")
RULES = ("add", "mul", "subst", "nonneg", "exact")
SEP = " [SEP] "  # joins the proof states of the formal encoder's input (paper)

_TOKEN = re.compile(r"\s*(?:(:=)|(<=|>=|[<>=+\-*():])|(\d+)|([A-Za-z_][A-Za-z0-9_]*))")


class CheckError(ValueError):
    """A rejected theorem: `line` (1 = the statement), `rule` (the rule or syntax element at fault) and a message
    saying what was expected; str() is the one-line feedback a repair round sees."""

    def __init__(self, line: int, rule: str, message: str) -> None:
        self.line, self.rule, self.message = line, rule, message
        super().__init__(f"line {line}: {rule}: {message}")


@dataclass(frozen=True)
class Linear:
    """sum_v coef[v] * v + const, coefficients as a sorted tuple of (variable, nonzero int)."""

    coef: tuple[tuple[str, int], ...]
    const: int

    @staticmethod
    def of(coef: dict[str, int], const: int) -> Linear:
        return Linear(tuple(sorted((v, c) for v, c in coef.items() if c)), const)

    def __add__(self, other: Linear) -> Linear:
        d = dict(self.coef)
        for v, c in other.coef:
            d[v] = d.get(v, 0) + c
        return Linear.of(d, self.const + other.const)

    def scale(self, k: int) -> Linear:
        return Linear.of({v: k * c for v, c in self.coef}, k * self.const)

    def __sub__(self, other: Linear) -> Linear:
        return self + other.scale(-1)

    def variables(self) -> set[str]:
        return {v for v, _ in self.coef}

    def substitute(self, var: str, by: Linear) -> Linear:
        d = dict(self.coef)
        c = d.pop(var, 0)
        return Linear.of(d, self.const) + by.scale(c)


@dataclass(frozen=True)
class Fact:
    """lhs REL rhs, each side linear; `text` is how it is written."""

    lhs: Linear
    rel: str
    rhs: Linear

    @property
    def text(self) -> str:
        return f"{render(self.lhs)} {self.rel} {render(self.rhs)}"

    def kind(self) -> str:
        return "eq" if self.rel == "=" else "lower" if self.rel in LOWER else "upper"

    def key(self) -> tuple:
        """The integer constraint the fact states, normalised: two facts with one key are the same constraint
        over the integers (x > 4 and x >= 5; 2 x <= 6 and x <= 3)."""
        d = self.lhs - self.rhs  # d REL 0
        if self.rel == "=":
            g = math.gcd(*(c for _, c in d.coef)) if d.coef else 0
            if g == 0:
                return ("const", d.const == 0)
            if d.const % g:
                return ("const", False)
            sign = 1 if d.coef[0][1] > 0 else -1
            return ("eq", tuple((v, sign * c // g) for v, c in d.coef), sign * d.const // g)
        ge = {">=": d, ">": d + Linear((), -1), "<=": d.scale(-1), "<": d.scale(-1) + Linear((), -1)}[self.rel]  # ge >= 0
        if not ge.coef:
            return ("const", ge.const >= 0)
        g = math.gcd(*(c for _, c in ge.coef))
        return ("ge", tuple((v, c // g) for v, c in ge.coef), math.floor(ge.const / g))


def render(e: Linear) -> str:
    """A linear expression as written: variables in order, then the constant ("2 * x + y - 3", "0")."""
    parts: list[str] = []
    for v, c in e.coef:
        term = v if abs(c) == 1 else f"{abs(c)} * {v}"
        parts.append(("- " if c < 0 else "+ ") + term if parts else ("-" if c < 0 else "") + term)
    if e.const or not parts:
        parts.append(f"{'-' if e.const < 0 else '+'} {abs(e.const)}" if parts else str(e.const))
    return " ".join(parts)


def normal_form(fact: Fact) -> Fact:
    """Variables on the left, the constant on the right (how a derived step is shown in a proof state)."""
    d = fact.lhs - fact.rhs
    return Fact(Linear(d.coef, 0), fact.rel, Linear((), -d.const))


# ---- parsing -------------------------------------------------------------------------------------------------------


def _tokens(text: str, line: int, what: str) -> list[str]:
    out, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise CheckError(line, "syntax", f"unexpected character {text[pos].strip() or 'space'!r} in {what}")
        out.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
    return out


class _Cursor:
    def __init__(self, tokens: list[str], line: int, what: str) -> None:
        self.t, self.i, self.line, self.what = tokens, 0, line, what

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise CheckError(self.line, "syntax", f"expected {expected or 'a token'!r} in {self.what}, got {tok or 'end of line'!r}")
        self.i += 1
        return tok


def _expression(cur: _Cursor, variables: dict[str, str]) -> Linear:
    """term (("+" | "-") term)*, a term `k`, `v` or `k * v`, the first one optionally negated."""
    coef: dict[str, int] = {}
    const, sign = 0, 1
    if cur.peek() == "-":
        cur.take()
        sign = -1
    while True:
        tok = cur.peek()
        if tok is None or tok in RELATIONS or tok in ("(", ")", ":", "+", "-", "*"):
            raise CheckError(cur.line, "syntax", f"expected a term in {cur.what}, got {tok or 'end of line'!r}")
        if tok.isdigit():
            k = int(cur.take())
            if cur.peek() == "*":
                cur.take()
                v = cur.take()
                _variable(v, variables, cur)
                coef[v] = coef.get(v, 0) + sign * k
            else:
                const += sign * k
        else:
            v = cur.take()
            _variable(v, variables, cur)
            coef[v] = coef.get(v, 0) + sign
        if cur.peek() not in ("+", "-"):
            return Linear.of(coef, const)
        sign = 1 if cur.take() == "+" else -1


def _variable(name: str, variables: dict[str, str], cur: _Cursor) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise CheckError(cur.line, "syntax", f"expected a variable in {cur.what}, got {name!r}")
    if name not in variables:
        raise CheckError(cur.line, "type", f"unknown identifier {name!r} in {cur.what} (declared variables: {', '.join(variables) or 'none'})")


def _fact(cur: _Cursor, variables: dict[str, str]) -> Fact:
    lhs = _expression(cur, variables)
    rel = cur.take()
    if rel not in RELATIONS:
        raise CheckError(cur.line, "syntax", f"expected a relation ({' '.join(RELATIONS)}) in {cur.what}, got {rel!r}")
    return Fact(lhs, rel, _expression(cur, variables))


@dataclass
class Statement:
    variables: dict[str, str]  # name -> int | nat, in declaration order
    hypotheses: dict[str, Fact]  # name -> fact, in order
    goal: Fact

    @property
    def text(self) -> str:
        binders = [f"({v} : {t})" for v, t in self.variables.items()] + [f"({h} : {f.text})" for h, f in self.hypotheses.items()]
        return f"theorem {' '.join(binders)} : {self.goal.text}"


def parse_statement(line_text: str) -> Statement:
    """The statement line: `theorem (binder)* : goal`, a binder `(name : int|nat)` or `(name : fact)`; variables
    before the hypotheses that use them."""
    cur = _Cursor(_tokens(line_text, 1, "the statement"), 1, "the statement")
    cur.take("theorem")
    variables: dict[str, str] = {}
    hypotheses: dict[str, Fact] = {}
    while cur.peek() == "(":
        cur.take("(")
        name = cur.take()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in RULES or name == "theorem":
            raise CheckError(1, "syntax", f"expected a binder name, got {name!r}")
        if name in variables or name in hypotheses:
            raise CheckError(1, "binder", f"{name!r} is declared twice")
        cur.take(":")
        if cur.t[cur.i + 1 : cur.i + 2] == [")"] and (cur.peek() or "").isidentifier() and cur.peek() not in variables:
            if cur.peek() not in TYPES:
                raise CheckError(1, "type", f"{cur.peek()!r} is not a type (expected {' or '.join(TYPES)}) in binder {name}")
            if hypotheses:
                raise CheckError(1, "binder", f"variable {name!r} is declared after a hypothesis; declare variables first")
            variables[name] = cur.take()
        else:
            cur.what = f"hypothesis {name}"
            hypotheses[name] = _fact(cur, variables)
            cur.what = "the statement"
        cur.take(")")
    cur.take(":")
    cur.what = "the goal"
    goal = _fact(cur, variables)
    if cur.peek() is not None:
        raise CheckError(1, "syntax", f"unexpected {cur.peek()!r} after the goal")
    if not variables:
        raise CheckError(1, "binder", "the theorem declares no variable")
    return Statement(variables, hypotheses, goal)


# ---- checking ------------------------------------------------------------------------------------------------------


@dataclass
class Checked:
    statement: Statement
    steps: list[tuple[str, Fact]] = field(default_factory=list)  # (name, derived fact in normal form) per have

    def states(self) -> list[str]:
        """The proof states after each step: the fact it adds (the goal stays the statement's), then `no goals`
        (with the statement, what the formal encoder reads, joined by SEP)."""
        return [*(f"{n} : {f.text}" for n, f in self.steps), "no goals"]


def _premise(name: str, context: dict[str, Fact], variables: dict[str, str], line: int, rule: str, position: str) -> Fact:
    if name in variables:
        raise CheckError(line, rule, f"{position} argument {name!r} has type {variables[name]}, expected a proof (Prop)")
    if name not in context:
        raise CheckError(line, rule, f"unknown proof {name!r} ({position} argument; in scope: {', '.join(context) or 'none'})")
    return context[name]


def apply_rule(rule: str, args: list[str], context: dict[str, Fact], variables: dict[str, str], line: int) -> Fact:
    """The fact a rule derives from its arguments, or the CheckError saying why it does not apply."""
    arity = {"add": 2, "mul": 2, "subst": 2, "nonneg": 1}
    if rule not in arity:
        raise CheckError(line, "rule", f"unknown rule {rule!r} (expected one of {', '.join(r for r in RULES if r != 'exact')})")
    if len(args) != arity[rule]:
        raise CheckError(line, rule, f"expected {arity[rule]} arguments, got {len(args)}")
    if rule == "add":
        a = _premise(args[0], context, variables, line, rule, "first")
        b = _premise(args[1], context, variables, line, rule, "second")
        kinds = {a.kind(), b.kind()} - {"eq"}
        if len(kinds) > 1:
            raise CheckError(line, rule, f"cannot add {args[0]} : {a.text} ({a.kind()} bound) and {args[1]} : {b.text} "
                                         f"({b.kind()} bound); expected bounds of one direction or an equation")
        rels = {a.rel, b.rel}
        if not kinds:
            rel = "="
        elif kinds == {"lower"}:
            rel = ">" if ">" in rels else ">="
        else:
            rel = "<" if "<" in rels else "<="
        return normal_form(Fact(a.lhs + b.lhs, rel, a.rhs + b.rhs))
    if rule == "mul":
        if not args[0].isdigit() or int(args[0]) < 1:
            raise CheckError(line, rule, f"first argument must be a positive numeral, got {args[0]!r}")
        k = int(args[0])
        a = _premise(args[1], context, variables, line, rule, "second")
        return normal_form(Fact(a.lhs.scale(k), a.rel, a.rhs.scale(k)))
    if rule == "subst":
        e = _premise(args[0], context, variables, line, rule, "first")
        b = _premise(args[1], context, variables, line, rule, "second")
        if e.rel != "=" or len(e.lhs.coef) != 1 or e.lhs.coef[0][1] != 1 or e.lhs.const:
            raise CheckError(line, rule, f"{args[0]} : {e.text} is not an equation 'v = e' with a variable alone on the left")
        v = e.lhs.coef[0][0]
        if v not in (b.lhs.variables() | b.rhs.variables()):
            raise CheckError(line, rule, f"variable {v!r} of {args[0]} does not occur in {args[1]} : {b.text}")
        return normal_form(Fact(b.lhs.substitute(v, e.rhs), b.rel, b.rhs.substitute(v, e.rhs)))
    v = args[0]  # nonneg
    if v not in variables:
        if v in context:
            raise CheckError(line, rule, f"argument {v!r} is a proof, expected a variable of type nat")
        raise CheckError(line, rule, f"unknown identifier {v!r}")
    if variables[v] != "nat":
        raise CheckError(line, rule, f"{v!r} has type {variables[v]}, expected nat")
    return Fact(Linear(((v, 1),), 0), ">=", Linear((), 0))


def check(text: str) -> Checked:
    """Check a theorem (statement line, then `have NAME := RULE ARGS` lines, then `exact NAME`); the proof states,
    or the first CheckError."""
    lines = [ln for ln in text.strip().split("\n")]
    if not lines or not lines[0].strip():
        raise CheckError(1, "syntax", "empty theorem")
    statement = parse_statement(lines[0])
    context: dict[str, Fact] = dict(statement.hypotheses)
    checked = Checked(statement)
    for number, raw in enumerate(lines[1:], start=2):
        tokens = raw.split()
        if not tokens:
            raise CheckError(number, "syntax", "empty line")
        if tokens[0] == "exact":
            if len(tokens) != 2:
                raise CheckError(number, "exact", f"expected one argument, got {len(tokens) - 1}")
            fact = _premise(tokens[1], context, statement.variables, number, "exact", "the")
            if fact.key() != statement.goal.key():
                raise CheckError(number, "exact", f"{tokens[1]} : {fact.text} does not match the goal {statement.goal.text}")
            if number != len(lines):
                raise CheckError(number + 1, "syntax", "nothing may follow exact (the goal is closed)")
            return checked
        if tokens[0] != "have" or len(tokens) < 4 or tokens[2] != ":=":
            raise CheckError(number, "syntax", "expected 'have NAME := RULE ARGS' or 'exact NAME'")
        name = tokens[1]
        if name in context or name in statement.variables:
            raise CheckError(number, "have", f"name {name!r} is already used")
        context[name] = apply_rule(tokens[3], tokens[4:], context, statement.variables, number)
        checked.steps.append((name, context[name]))
    raise CheckError(len(lines) + 1, "exact", f"the proof ends without exact: goal {statement.goal.text} is not closed")


def check_error(text: str) -> str | None:
    """None when the theorem checks (type-correct), else the checker's one-line error."""
    try:
        check(text)
        return None
    except CheckError as e:
        return str(e)
