"""The theorem world, the near misses and repair chains, and the scores, on hand-made inputs."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from paperdag.methods.proofbridge.embed import gold_ranks, info_nce, top_k
from paperdag.methods.proofbridge.gen import ARMS, prompt, run_chains, near_misses
from paperdag.methods.proofbridge.logic import check, check_error
from paperdag.methods.proofbridge.metrics import generation_scores, pass_at_k
from paperdag.methods.proofbridge.world import (FAMILIES, SKELETONS, assign_families, check_world, draw_theorem, make_split,
                                                number_nl, theorems_table)

TEST = ["sum3:upper", "scale:upper", "subst:lower", "times:upper", "scalesum:lower"]
VAL = ["sum2:upper", "shiftsum:lower", "substscale:upper"]


def test_every_family_draws_checked_theorems_whose_proof_follows_its_skeleton() -> None:
    """Each family's theorem checks; its proof's rules are the skeleton's; the NL has no digit (numbers in words)."""
    rng = random.Random(0)
    for family in FAMILIES:
        t = draw_theorem(family, rng)
        check(t.formal)
        rules = [line.split()[3] for line in t.proof.split("\n")[:-1]]
        assert rules == [s[0] for s in next(s for s in SKELETONS if s.name == family.split(":")[0]).steps]
        assert not any(ch.isdigit() for ch in t.nl), t.nl


def test_number_words() -> None:
    assert [number_nl(n) for n in (0, 7, 13, 20, 36, -4)] == ["zero", "seven", "thirteen", "twenty", "thirty-six", "minus four"]


def test_split_is_by_family_with_the_counts_asked_for() -> None:
    """Test and val families never train; every family delivers its count; texts unique; an impossible count raises."""
    families = assign_families(TEST, VAL)
    counts = {"train": 5, "val": 3, "test": 4}
    table = theorems_table(make_split(families, counts, random.Random(1)))
    check_world(table, counts, families, "test")
    assert set(table.filter(pl.col("split") == "test")["family"]) == set(TEST)
    assert table.filter(pl.col("split") == "train").height == 5 * (len(FAMILIES) - len(TEST) - len(VAL))
    with pytest.raises(ValueError, match="natshift:lower gave"):
        make_split(families, {"train": 500, "val": 1, "test": 1}, random.Random(1), tries=2)
    with pytest.raises(ValueError, match="no training family"):
        assign_families(["scale:upper"], ["scale:lower"])


def test_near_misses_are_rejected_and_prompts_carry_the_error() -> None:
    """Every near miss fails the checker with the error it is paired with; the repair prompt holds error and attempt."""
    t = draw_theorem("times:lower", random.Random(2))
    misses = near_misses(t.formal, random.Random(3), 4)
    assert misses and all(check_error(bad) == err and err is not None for bad, err in misses)
    bad, err = misses[0]
    p = prompt(t.nl, ["EX1", "EX2"], err, bad)
    assert p.startswith("Example:\nEX1\nExample:\nEX2\nError: ") and f"Previous:\n{bad}\nNL: {t.nl}\nFormal:\n" in p


def test_repair_chains_stop_at_the_first_accepted_attempt() -> None:
    """A chain regenerates (seeing the error) while the checker rejects, at most `rounds` times."""
    good = draw_theorem("sum2:lower", random.Random(4)).formal
    seen: list[str] = []

    def sample(prompts: list[str]) -> list[str]:
        seen.extend(prompts)
        return [good if "Error:" in p else "theorem (x : int) : x" for p in prompts]

    chains = run_chains(sample, ["nl a", "nl b"], [[], []], 3, 5)
    assert [len(c) for per in chains for c in per] == [2] * 6 and all(per[-1][-1].error is None for per in chains)
    assert len(seen) == 12 and sum("Error: line 1: syntax" in p for p in seen) == 6
    assert [len(c) for per in run_chains(sample, ["nl"], [[]], 2, 0) for c in per] == [1, 1]


def test_pass_at_k_and_generation_scores() -> None:
    """The unbiased pass@k; per arm scores over the same theorems and sample counts."""
    assert pass_at_k(4, 0, 2) == 0 and pass_at_k(4, 4, 1) == 1 and pass_at_k(4, 1, 1) == 0.25 and pass_at_k(4, 1, 2) == 0.5
    rows = [{"theorem": t, "arm": a, "sample": s, "attempts": 1, "type_correct": True, "semantic": a == "rag_repair" and s == 0}
            for t in (0, 1) for a in ARMS for s in range(2)]
    scores = generation_scores(pl.DataFrame(rows), 2)
    assert scores["sem_passk_rag_repair"] == 1.0 and scores["sem_pass1_rag_repair"] == 0.5 and scores["sem_passk_rag"] == 0.0
    with pytest.raises(ValueError, match="sample counts"):
        generation_scores(pl.DataFrame(rows[:-1]), 2)


def test_ranks_retrieval_and_infonce() -> None:
    """Gold rank counts ties against the gold; top_k honours exclusions; InfoNCE is lower for aligned pairs."""
    import torch

    q = np.eye(3, dtype=np.float32)
    assert gold_ranks(q, q).tolist() == [1, 1, 1]
    assert gold_ranks(q, np.ones((3, 3), np.float32) / np.sqrt(3)).tolist() == [3, 3, 3]
    assert top_k(q, q, 1, exclude=np.eye(3, dtype=bool)).shape == (3, 1)
    z = torch.nn.functional.normalize(torch.randn(8, 16), dim=-1)
    assert info_nce(z, z, 0.07) < info_nce(z, z.roll(1, 0), 0.07)
