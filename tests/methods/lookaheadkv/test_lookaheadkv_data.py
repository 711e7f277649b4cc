"""The LM's data and vocabulary: copy drills repeat a stretch of their own symbols, every set gets the rows asked
for, the word-level tokenizer gives one token per task word (a prompt of T words is T tokens) and survives a
save / reload, and the curriculum refuses a phase that has no rows to draw."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import polars as pl
import pytest
from transformers import AutoTokenizer

from paperdag.lm import TinyLMConfig
from paperdag.methods.lookaheadkv import (
    TaskSizes,
    build_lm,
    encode,
    make_copy,
    make_example,
    make_rows,
    question_tokens,
    task_words,
    train_curriculum,
    word_tokenizer,
)

SIZES = TaskSizes(keys=8, values=8, fillers=6, pairs=4, value_tokens=2, context_tokens=44)


def _rows(copy_examples: int = 7) -> list[dict]:
    return make_rows(SIZES, 2, [12, 24, 44], 5, 4, 3, 2, 3, 6, random.Random(0), copy_examples, 10, 6)


def test_a_copy_drill_repeats_a_stretch_of_its_own_symbols() -> None:
    """The response is `stretch` consecutive symbols of the prompt, starting at a random place (both ends occur)."""
    words = task_words(SIZES)[:-3]
    rng = random.Random(1)
    starts = set()
    for _ in range(200):
        row = make_copy(words, 10, 6, rng)
        drawn, copied = row["prompt"].split(), row["response"].split()
        assert len(drawn) == 10 and len(copied) == 6 and set(drawn) <= set(words)
        starts |= {i for i in range(5) if drawn[i : i + 6] == copied}
    assert {0, 4} <= starts
    with pytest.raises(ValueError, match="stretch shorter"):
        make_copy(words, 6, 6, rng)


@pytest.mark.parametrize("split", ["question_after", "question_before"])
def test_a_question_asks_for_several_records_and_the_response_recalls_them_in_its_order(split: str) -> None:
    """`asked` distinct keys in the question; the response is each asked record (its key and values, as the context
    holds them), in the question's order, `;` between them; the prompt is exactly T words either way."""
    sizes = TaskSizes(keys=10, values=30, fillers=6, pairs=6, value_tokens=3, context_tokens=60, asked=3)
    rng = random.Random(2)
    for _ in range(50):
        row = make_example(split, sizes, rng)
        words = row["prompt"].split()
        question = words[-question_tokens(3):] if split == "question_after" else words[: question_tokens(3)]
        asked = question[1:-1]
        assert question[0] == "?" and question[-1] == ":" and asked == row["query"].split() and len(set(asked)) == 3
        context = words[: -question_tokens(3)] if split == "question_after" else words[question_tokens(3):]
        assert len(context) == 60 and len(row["response"].split()) == sizes.response_tokens - 1
        records = [r.split() for r in row["response"].split(" ; ")]
        assert [r[0] for r in records] == asked
        for record in records:
            at = context.index(record[0])
            assert context[at : at + 5] == [*record, ";"]
    with pytest.raises(ValueError, match="asked must lie"):
        TaskSizes(keys=10, values=30, fillers=6, pairs=6, value_tokens=3, context_tokens=60, asked=7)


def test_every_set_gets_the_rows_asked_for() -> None:
    """LM rows: lm_examples per split, drill_examples drills, copy_examples copies (context_tokens = copy_tokens);
    lookahead, validation and eval rows per split with `pairs` records in the full context."""
    frame = pl.DataFrame(_rows())
    counts = Counter(zip(frame["set"], frame["split"], strict=True))
    assert counts == {("lm", "question_after"): 5, ("lm", "question_before"): 5, ("lm", "drill"): 4, ("lm", "copy"): 7,
                      ("lookahead", "question_after"): 2, ("lookahead", "question_before"): 2, ("validation", "question_after"): 3,
                      ("validation", "question_before"): 3, ("eval", "question_after"): 6, ("eval", "question_before"): 6}
    assert frame.filter(pl.col("split") == "copy")["context_tokens"].unique().to_list() == [10]
    held_out = frame.filter(pl.col("set") != "lm")
    assert held_out["pairs"].unique().to_list() == [4] and held_out["context_tokens"].unique().to_list() == [44]


def test_copy_drills_leave_the_other_rows_as_they_were() -> None:
    """Copy drills are drawn last: adding them changes no split, drill or evaluation row."""
    without = _rows(0)
    assert [r for r in _rows(7) if r["split"] != "copy"] == without


def test_word_tokenizer_gives_one_token_per_word_and_reloads(tmp_path) -> None:
    """Every task word is one token: an evaluation prompt is bos + its words; the gold response its words + eos;
    the tokenizer saved and reloaded (AutoTokenizer) encodes and decodes alike."""
    rows = _rows()
    tok = word_tokenizer(task_words(SIZES))
    assert len(tok) == len(task_words(SIZES)) + 4 and (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
    row = next(r for r in rows if r["set"] == "eval")
    prompt, response = encode(tok, row)
    assert prompt[0] == tok.bos_token_id and len(prompt) == 1 + len(row["prompt"].split()) == 1 + 3 + SIZES.context_tokens
    assert response[-1] == tok.eos_token_id and tok.decode(response[:-1]) == row["response"]
    assert tok.unk_token_id not in prompt + response
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert encode(again, row) == (prompt, response)


def _config(**kw) -> TinyLMConfig:
    base = {"vocab_size": 64, "hidden_size": 16, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2, "intermediate_size": 32,
            "steps": 4, "batch_size": 2, "lr": 1e-3, "warmup_steps": 0, "threads": 1, "seed": 0}
    return TinyLMConfig(**(base | kw))


def test_build_lm_refuses_a_vocabulary_above_vocab_size() -> None:
    """The word-level vocabulary must fit train_lm.vocab_size; the model's embedding has exactly its rows."""
    model, tok = build_lm(_config(), task_words(SIZES), max_positions=64)
    assert model.get_input_embeddings().weight.shape[0] == len(tok)
    with pytest.raises(ValueError, match=r"raise train_lm\.vocab_size"):
        build_lm(_config(vocab_size=10), task_words(SIZES), max_positions=64)


@dataclass(frozen=True)
class Phase:
    steps: int
    contexts: int
    mixture: dict = field(default_factory=dict)
    batch_size: int | None = None
    lr: float | None = None
    until_em: float | None = None
    max_rounds: int = 1


def test_curriculum_runs_its_phases_and_refuses_one_without_rows() -> None:
    """Each phase trains its own steps (the loss history is their sum); a phase whose kinds have no rows within its
    contexts is an error naming the phase and what to change."""
    model, tok = build_lm(_config(), task_words(SIZES), max_positions=96)
    lm_rows = pl.DataFrame(_rows()).filter(pl.col("set") == "lm")
    phases = [Phase(2, 12, {"copy": 1.0}, 4), Phase(3, 44, {"drill": 1.0, "question_before": 1.0})]
    history, rounds = train_curriculum(model, tok, lm_rows, phases, _config())
    assert len(history) == 5 and rounds == []
    with pytest.raises(ValueError, match="phase 1 draws 'drill' rows with contexts of at most 8 tokens"):
        train_curriculum(model, tok, lm_rows, [Phase(1, 12, {"copy": 1.0}), Phase(1, 8, {"drill": 1.0})], _config())


def test_a_phase_with_until_em_repeats_until_the_validation_rows_are_solved_or_max_rounds() -> None:
    """until_em: after each round the validation rows' full-cache exact match decides; a bar any model clears (0 %)
    ends the phase after one round, one a 3-step model cannot clear (100 %) runs max_rounds rounds, each recorded
    with its exact match; such a phase without validation rows is an error."""
    model, tok = build_lm(_config(), task_words(SIZES), max_positions=96)
    table = pl.DataFrame(_rows())
    lm_rows, validation = table.filter(pl.col("set") == "lm"), table.filter(pl.col("set") == "validation")
    history, rounds = train_curriculum(model, tok, lm_rows, [Phase(3, 44, {"question_before": 1.0}, until_em=0.0, max_rounds=3)],
                                       _config(), validation=validation)
    assert len(history) == 3 and [r["round"] for r in rounds] == [0]
    history, rounds = train_curriculum(model, tok, lm_rows, [Phase(3, 44, {"question_before": 1.0}, lr=1e-4, until_em=100.0, max_rounds=3)],
                                       _config(), validation=validation)
    assert len(history) == 9 and [r["round"] for r in rounds] == [0, 1, 2]
    assert all(set(r["validation_exact_match"]) == set(validation["split"]) and min(r["validation_exact_match"].values()) < 100
               for r in rounds)
    with pytest.raises(ValueError, match="phase 0 repeats until .* no validation rows"):
        train_curriculum(model, tok, lm_rows, [Phase(1, 44, {"question_before": 1.0}, until_em=50.0)], _config())
