"""The reasoning format the tiny LM learns, and where a thought template enters it.

    no template:   "Q: <problem>\nPlan:"                          -> " <step texts>\nWork: <lines> ; answer N" <eos>
    template T:    "Q: <problem>\nPlan: <T's step texts>\nWork:"  -> " <lines> ; answer N" <eos>

The template is put into the model's reasoning prefix (RoT section 3.3): the plan it would otherwise write is already
there, so it generates only the work. Numbers are written digit by digit (world.num)."""

from __future__ import annotations

import re

from paperdag.methods.rot.world import Problem

ANSWER = re.compile(r"answer((?: \d)+)\s*$")


def plan_text(template: list[str]) -> str:
    return " ".join(template)


def prompt(problem_text: str, template: list[str] | None) -> str:
    """The reasoning prefix: the problem, then the plan (a template's steps) when one is given."""
    head = f"Q: {problem_text}\nPlan:"
    return head if template is None else f"{head} {plan_text(template)}\nWork:"


def target(problem: Problem, with_template: bool) -> str:
    """What the model is trained to generate after prompt(problem.text, template or None)."""
    work = " " + problem.computation
    return work if with_template else f" {plan_text(problem.template)}\nWork:{work}"


def parse_answer(generated: str) -> int | None:
    """The integer after the last 'answer' of a generation, or None when it ends otherwise."""
    m = ANSWER.search(generated.strip())
    return None if m is None else int(m.group(1).replace(" ", ""))
