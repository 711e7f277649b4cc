"""The semantic-equivalence judge (z3): does a generated statement say what the gold one says?

Two statements over the same variable names are equivalent when their premises are (H' <-> H, the type of each
variable included: a nat is >= 0) and their goals are under the types alone (T -> (G' <-> G)), both valid over the
integers. A proved theorem is true, so comparing whole implications H -> G, or goals under the premises, would call
every proved statement with the right premises equivalent; premises and goal are compared apart, as the paper
compares a translation with its gold statement, not its truth value.
"""

from __future__ import annotations

from functools import lru_cache

from paperdag.methods.proofbridge.logic import CheckError, Fact, Linear, Statement, parse_statement


def _z3_linear(e: Linear, names: dict):
    import z3

    return z3.Sum([c * names[v] for v, c in e.coef] + [z3.IntVal(e.const)])


def _z3_fact(f: Fact, names: dict):
    a, b = _z3_linear(f.lhs, names), _z3_linear(f.rhs, names)
    return {"<=": a <= b, "<": a < b, "=": a == b, ">=": a >= b, ">": a > b}[f.rel]


def _types(s: Statement, names: dict) -> list:
    return [names[v] >= 0 for v, t in s.variables.items() if t == "nat"]


def _premises(s: Statement, names: dict):
    import z3

    return z3.And(_types(s, names) + [_z3_fact(f, names) for f in s.hypotheses.values()])


def _valid(formula, timeout_ms: int) -> bool:
    import z3

    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(z3.Not(formula))
    result = solver.check()
    if result == z3.unknown:
        raise TimeoutError(f"z3 gave no answer within {timeout_ms} ms on {formula}")
    return result == z3.unsat


@lru_cache(maxsize=100_000)
def equivalent(generated: str, gold: str, timeout_ms: int = 2000) -> bool:
    """Whether the statement lines `generated` and `gold` are semantically equivalent (False when `generated`
    does not parse). Variables are matched by name; one that only one side declares is unconstrained there."""
    import z3

    try:
        g, s = parse_statement(generated), parse_statement(gold)
    except CheckError:
        return False
    names = {v: z3.Int(v) for v in {*g.variables, *s.variables}}
    hg, hs = _premises(g, names), _premises(s, names)
    types = z3.And(_types(g, names) + _types(s, names))
    return _valid(hg == hs, timeout_ms) and _valid(z3.Implies(types, _z3_fact(g.goal, names) == _z3_fact(s.goal, names)), timeout_ms)
