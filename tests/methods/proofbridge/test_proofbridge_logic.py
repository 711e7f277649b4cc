"""The checker is the pipeline's ground truth: accepted proofs, rejected near misses with their exact line, rule and
message, normalisation of integer constraints; and the z3 judge of statement equivalence."""

from __future__ import annotations

import pytest

from paperdag.methods.proofbridge.equiv import equivalent
from paperdag.methods.proofbridge.logic import CheckError, check, check_error

SHIFT = "theorem (x : int) (y : nat) (h1 : x >= 2) (h2 : y = x + 3) : y >= 5\nhave s1 := add h1 h2\nexact s1"
TIMES = "theorem (x : int) (y : int) (h1 : x <= 3) (h2 : y = 2 * x) : y <= 6\nhave s1 := mul 2 h1\nhave s2 := add s1 h2\nexact s2"
SUBST = "theorem (x : int) (y : int) (h1 : y = x + 2) (h2 : y < 9) : x < 7\nhave s1 := subst h1 h2\nexact s1"
NAT = "theorem (x : nat) (y : int) (h1 : y = x + 4) : y >= 4\nhave s1 := nonneg x\nhave s2 := add s1 h1\nexact s2"


@pytest.mark.parametrize("text", [SHIFT, TIMES, SUBST, NAT])
def test_accepts_correct_proofs(text: str) -> None:
    """Each rule's correct use checks, and the proof states list every derived fact then `no goals`."""
    checked = check(text)
    assert checked.states()[-1] == "no goals" and len(checked.states()) == text.count("have") + 1


def test_states_show_the_derived_facts_in_normal_form() -> None:
    """add sums both sides and cancels: (x + y) <= (3 * 2 + 2 x) is shown as y <= 6; mul scales."""
    assert check(TIMES).states() == ["s1 : 2 * x <= 6", "s2 : y <= 6", "no goals"]
    assert check(SUBST).states() == ["s1 : x < 7", "no goals"]


def test_exact_accepts_the_same_integer_constraint_in_another_form() -> None:
    """x + y > 5 closes x + y >= 6 over the integers (and 2x <= 6 closes x <= 3), but not x + y >= 7."""
    base = "theorem (x : int) (y : int) (h1 : x > 2) (h2 : y > 3) : {goal}\nhave s1 := add h1 h2\nexact s1"
    assert check_error(base.format(goal="x + y >= 6")) is None
    assert check_error(base.format(goal="x + y > 5")) is None
    assert check_error(base.format(goal="x + y >= 7")) == "line 3: exact: s1 : x + y > 5 does not match the goal x + y >= 7"
    assert check_error("theorem (x : int) (h1 : x <= 3) : x <= 3\nhave s1 := mul 2 h1\nexact s1") is None


@pytest.mark.parametrize("text, line, rule, message", [
    (SHIFT.replace("y >= 5\n", "y >= 6\n"), 3, "exact", "s1 : y >= 5 does not match the goal y >= 6"),
    (SHIFT.replace("add h1 h2", "add h1 x"), 2, "add", "second argument 'x' has type int, expected a proof (Prop)"),
    (SHIFT.replace("add h1 h2", "add h1 h3"), 2, "add", "unknown proof 'h3' (second argument; in scope: h1, h2)"),
    (SHIFT.replace("add h1 h2", "ad h1 h2"), 2, "rule", "unknown rule 'ad' (expected one of add, mul, subst, nonneg)"),
    (SHIFT.replace("(h2 : y = x + 3)", "(h2 : y <= 3)"), 2, "add",
     "cannot add h1 : x >= 2 (lower bound) and h2 : y <= 3 (upper bound); expected bounds of one direction or an equation"),
    (SHIFT.replace("(h1 : x >= 2)", "(h1 : x <= 2)"), 3, "exact", "s1 : y <= 5 does not match the goal y >= 5"),
    (TIMES.replace("mul 2 h1", "mul 3 h1"), 4, "exact", "s2 : x + y <= 9 does not match the goal y <= 6"),
    (TIMES.replace("mul 2 h1", "mul h1 2"), 2, "mul", "first argument must be a positive numeral, got 'h1'"),
    (TIMES.replace("\nhave s1 := mul 2 h1", ""), 2, "add", "unknown proof 's1' (first argument; in scope: h1, h2)"),
    (TIMES.replace("\nexact s2", ""), 4, "exact", "the proof ends without exact: goal y <= 6 is not closed"),
    (TIMES + "\nexact s2", 5, "syntax", "nothing may follow exact (the goal is closed)"),
    (SUBST.replace("subst h1 h2", "subst h2 h1"), 2, "subst", "h2 : y < 9 is not an equation 'v = e' with a variable alone on the left"),
    (NAT.replace("(x : nat)", "(x : int)"), 2, "nonneg", "'x' has type int, expected nat"),
    (NAT.replace("nonneg x", "nonneg h1"), 2, "nonneg", "argument 'h1' is a proof, expected a variable of type nat"),
    (SHIFT.replace("(y : nat)", "(y : real)"), 1, "type", "'real' is not a type (expected int or nat) in binder y"),
    (SHIFT.replace("(y : nat) ", ""), 1, "type", "unknown identifier 'y' in hypothesis h2 (declared variables: x)"),
    (SHIFT.replace("(h1 : x >= 2)", "(h1 : x >= 2"), 1, "syntax", "expected ')' in the statement, got '('"),
    (SHIFT.replace("have s1 := add h1 h2", "have h1 := add h1 h2"), 2, "have", "name 'h1' is already used"),
])
def test_rejects_near_misses_with_line_rule_and_message(text: str, line: int, rule: str, message: str) -> None:
    """Each near miss of a correct proof is rejected at its line and rule, saying what was expected."""
    with pytest.raises(CheckError) as err:
        check(text)
    assert (err.value.line, err.value.rule, err.value.message) == (line, rule, message)


def test_equivalence_compares_premises_and_goal_not_truth() -> None:
    """Integer forms and implied nat constraints are equivalent; a different goal constant or a missing premise is
    not, although both statements are true theorems (y > 2 follows from the premises as y > 3 does)."""
    gold = "theorem (x : int) (y : int) (h1 : x > 2) (h2 : y = x + 1) : y > 3"
    assert equivalent("theorem (x : int) (y : int) (h2 : y = x + 1) (h1 : x >= 3) : y >= 4", gold)
    assert equivalent("theorem (x : nat) (y : int) (h1 : x > 2) (h2 : y = x + 1) : y > 3", gold)  # x > 2 implies x >= 0
    assert not equivalent("theorem (x : int) (y : int) (h1 : x > 2) (h2 : y = x + 1) : y > 2", gold)
    assert not equivalent("theorem (x : int) (y : int) (h1 : x > 2) : x > 2", gold)
    assert not equivalent("theorem (x : int) (y : nat) (h1 : x > -5) (h2 : y = x + 1) : y > -4",
                          "theorem (x : int) (y : int) (h1 : x > -5) (h2 : y = x + 1) : y > -4")  # y nat: a new premise
    assert not equivalent("theorem (x : int) (h1 : x > 2 : x > 2", gold)  # does not parse
