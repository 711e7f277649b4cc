"""The stages' params types, read from params.yaml milco.*: the world, the encoder's sizes (or a local
checkpoint), the teacher, the variants' training, indexing, retrieval and evaluation. Every stage but evaluate is a
matrix element (`item.replicate`, its seed the engine's per element)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Len
from pydantic import AfterValidator, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from paperdag.engine import Item
from paperdag.engine.params import Fraction, PositiveFraction


def _with_unpruned(rhos: list[float]) -> list[float]:
    if 1.0 not in rhos:
        raise ValueError("1.0 (no pruning) is required: the unpruned index is the headline's reference")
    return rhos


@dataclass(frozen=True)
class SynthesizeParams:
    languages: list[str]
    n_docs: PositiveInt
    twin_fraction: Fraction
    twin_size: PositiveInt
    n_parallel: PositiveInt
    n_train_queries: PositiveInt
    n_test_crosslingual: PositiveInt
    n_test_propernoun: PositiveInt
    query_terms: PositiveInt
    synonym_rate: Fraction
    train_fraction: Fraction
    forms_per_word: PositiveInt
    homonym_rate: Fraction
    n_suffixes: NonNegativeInt
    compound_languages: NonNegativeInt
    shuffle_order: bool
    real_name_locales: list[str]
    item: Item
    seed: int


@dataclass(frozen=True)
class ModelParams:
    encoder: str  # "" = a tiny BERT trained from scratch on this world's text; else a local checkpoint directory
    src_vocab_size: PositiveInt
    en_vocab_size: PositiveInt
    hidden_size: PositiveInt
    teacher_hidden_size: PositiveInt
    num_layers: PositiveInt
    num_heads: PositiveInt
    intermediate_size: PositiveInt
    max_length: PositiveInt


@dataclass(frozen=True)
class TrainTeacherParams(ModelParams):
    dense_teacher: str
    temperature: PositiveFloat
    group_size: PositiveInt
    hard_negative_pool: PositiveInt
    warmup_steps: NonNegativeInt
    distill_steps: NonNegativeInt
    lr: PositiveFloat
    batch: PositiveInt
    group_batch: PositiveInt
    lambda_q: NonNegativeFloat
    lambda_d: NonNegativeFloat
    item: Item
    seed: int


@dataclass(frozen=True)
class VariantParams:
    connector: bool  # Z = GELU(W H); False: the English head reads H zero-padded to h_e
    echo: bool  # LexEcho head
    align: bool  # stage 1 (sparse alignment) before stage 2; False: the no-alignment ablation


@dataclass(frozen=True)
class TrainParams(ModelParams):
    variants: dict[str, VariantParams]  # MILCO and its ablations (the fair dense baseline: TrainDenseParams)
    align_steps: PositiveInt
    align_lr: PositiveFloat
    align_batch: PositiveInt
    align_soft_tau: NonNegativeFloat  # stage 1's pooling temperature at step 0, annealed to the paper's max (0)
    align_soft_steps: NonNegativeInt  # ... over this many steps (0: the max from the start), at most align_steps
    distill_steps: PositiveInt
    distill_lr: PositiveFloat
    distill_batch: PositiveInt
    lambda_q: NonNegativeFloat
    lambda_d: NonNegativeFloat
    min_train_ndcg10: Fraction  # learning check: MILCO must reach this on the cross-lingual train queries
    item: Item
    seed: int

    def __post_init__(self) -> None:
        if self.align_soft_steps > self.align_steps:
            raise ValueError("align_soft_steps", f"{self.align_soft_steps} > align_steps {self.align_steps}: stage 1 would end on "
                             "the soft pool while the model is used with the max")


@dataclass(frozen=True)
class TrainDenseParams(ModelParams):
    """The fair dense baseline: MILCO's encoder size, data, teacher groups and step budget, with its own learning rate
    and contrastive temperature for stage 1 and its own number of stage-2 steps, each chosen on a validation split
    of the cross-lingual train queries (held out of stage 2 while tuning; the final model is refit on all of them)."""

    align_steps: PositiveInt  # stage 1 (in-batch InfoNCE on the parallel text): MILCO's stage-1 steps
    align_lrs: Annotated[list[PositiveFloat], Len(min_length=1)]  # grid: stage-1 learning rate ...
    align_temperatures: Annotated[list[PositiveFloat], Len(min_length=1)]  # ... x InfoNCE temperature
    align_batch: PositiveInt
    distill_steps: PositiveInt  # stage 2 (MILCO's KL on the teacher's groups): at most MILCO's steps, the best of
    eval_every: PositiveInt  # ... every eval_every steps (0 included) on the validation queries
    distill_lr: PositiveFloat
    distill_batch: PositiveInt
    temperature: PositiveFloat  # stage 2's scores = cosine / temperature (the dense teacher's, as MILCO's scale)
    validation_fraction: PositiveFraction  # share of the cross-lingual train queries held out for the choice
    min_train_ndcg10: Fraction  # learning check, as MILCO's, on the cross-lingual train queries
    item: Item
    seed: int

    def __post_init__(self) -> None:
        if self.validation_fraction >= 1:
            raise ValueError("validation_fraction", f"{self.validation_fraction} leaves no train query for stage 2")


@dataclass(frozen=True)
class IndexParams:
    rhos: Annotated[list[PositiveFraction], AfterValidator(_with_unpruned)]
    dense_encoder: str
    bm25_k1: list[NonNegativeFloat]  # translate-then-BM25's k1 and b: the best on the train queries (its own tuning)
    bm25_b: list[Fraction]
    max_length: PositiveInt
    item: Item


@dataclass(frozen=True)
class RetrieveParams:
    dense_encoder: str
    max_length: PositiveInt
    latency_repeats: PositiveInt
    prune_queries: bool
    item: Item


@dataclass(frozen=True)
class EvaluateParams:
    headline_rho: PositiveFraction
