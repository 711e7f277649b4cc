"""deeprag's knobs, as the params types its stages extend with their matrix element (light: pydantic, no torch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field, PositiveFloat, PositiveInt

from paperdag.lm.config import TinyLMConfig

Fraction = Annotated[float, Field(ge=0, le=1)]


@dataclass(frozen=True, kw_only=True)
class SynthesizeSettings:
    people: dict[str, PositiveInt]  # per group: train / val / test question heads, reading (teaches reading only)
    questions: dict[str, PositiveInt]  # per split
    hops: Annotated[list[Annotated[int, Field(ge=2, le=3)]], Field(min_length=1)]
    seed: int


@dataclass(frozen=True, kw_only=True)
class TrainLMSettings(TinyLMConfig):
    memorised_fraction: Fraction  # share of the question people's facts the LM memorises (its knowledge boundary)
    reading_weight: Fraction  # share of steps on reading examples (the rest: closed-book memorised facts)
    reading_copies: PositiveInt  # copies of the reading people's facts, each with their names permuted anew
    top_k: PositiveInt  # BM25 documents per retrieval
    min_recall: Fraction  # closed-book recall of memorised facts the LM must reach, else an error
    max_heldout_recall: Fraction  # closed-book recall of facts it never saw must stay below (near chance)
    min_reading: Fraction  # reading accuracy on question people's facts it must reach
    max_new_tokens: PositiveInt
    eval_batch_size: PositiveInt


@dataclass(frozen=True, kw_only=True)
class SearchSettings:
    depth_limit: PositiveInt  # most subqueries a path may have
    unsolved_as_retrieval: bool  # smoke only: a question with no correct path imitates all-retrieve (paper: dropped)
    top_k: PositiveInt
    max_new_tokens: PositiveInt
    eval_batch_size: PositiveInt


@dataclass(frozen=True, kw_only=True)
class TuneSettings:
    steps: PositiveInt
    batch_size: PositiveInt
    lr: PositiveFloat
    warmup_steps: int
    threads: PositiveInt
    seed: int


@dataclass(frozen=True, kw_only=True)
class ImitateSettings(TuneSettings):
    rehearse: bool  # rehearse the base LM's memorised facts closed-book among the path steps (answer in the loss only)


@dataclass(frozen=True, kw_only=True)
class CalibrateSettings(TuneSettings):
    beta: PositiveFloat  # DPO temperature (paper: 0.4)


@dataclass(frozen=True, kw_only=True)
class InferSettings:
    top_k: PositiveInt
    thetas: Annotated[list[Annotated[float, Field(ge=0)]], Field(min_length=1)]  # threshold grid (FLARE), tuned on val
    classifier_cs: Annotated[list[PositiveFloat], Field(min_length=1)]  # logistic regression C grid, tuned on val
    max_new_tokens: PositiveInt
    eval_batch_size: PositiveInt
    threads: PositiveInt
    seed: int
