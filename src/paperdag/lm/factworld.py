"""A synthetic fact world for knowledge and RAG experiments: invented people (entities), relations with their value
pools, one value per (entity, relation), question and statement templates, and contexts built from statements.

make_fact_world(n_entities, seed) -> FactWorld; world.question(e, r, k), world.statement(e, r, value, k),
world.context(e, r, value, rng, distractors) -> text; normalize_answer / contains_answer for scoring.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass, field

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "st", "tr", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "eo")
_CODAS = ("", "", "", "n", "r", "s", "l")


@dataclass(frozen=True)
class Relation:
    name: str
    questions: tuple[str, ...]  # "{e}" is the entity
    statements: tuple[str, ...]  # "{e}" the entity, "{v}" the value
    values: tuple[str, ...]  # the value pool


RELATIONS: tuple[Relation, ...] = (
    Relation(
        "birthplace",
        ("Where was {e} born?", "In which city was {e} born?"),
        ("{e} was born in {v}.", "The birthplace of {e} is {v}."),
        (),  # invented city names, filled by make_fact_world
    ),
    Relation(
        "colour",
        ("What is the favourite colour of {e}?", "Which colour does {e} like best?"),
        ("The favourite colour of {e} is {v}.", "{e} likes {v} best."),
        ("red", "blue", "green", "yellow", "purple", "orange", "black", "white", "grey", "pink", "brown", "violet",
         "indigo", "teal", "amber", "crimson", "silver", "golden", "maroon", "olive", "navy", "beige", "coral", "ivory"),
    ),
    Relation(
        "instrument",
        ("Which instrument does {e} play?", "What instrument is played by {e}?"),
        ("{e} plays the {v}.", "The instrument played by {e} is the {v}."),
        ("piano", "violin", "cello", "flute", "guitar", "drums", "trumpet", "harp", "oboe", "clarinet", "banjo", "organ",
         "bassoon", "tuba", "saxophone", "ukulele", "mandolin", "accordion", "trombone", "lute", "sitar", "fiddle",
         "xylophone", "bagpipes"),
    ),
    Relation(
        "sport",
        ("Which sport does {e} practise?", "What sport is {e} known for?"),
        ("{e} practises {v}.", "{e} is known for {v}."),
        ("tennis", "rugby", "cricket", "hockey", "golf", "rowing", "fencing", "boxing", "cycling", "skiing", "sailing",
         "archery", "judo", "karate", "polo", "squash", "surfing", "diving", "climbing", "wrestling", "baseball",
         "handball", "badminton", "curling"),
    ),
    Relation(
        "pet",
        ("What pet does {e} own?", "Which animal is the pet of {e}?"),
        ("{e} owns a {v}.", "The pet of {e} is a {v}."),
        ("cat", "dog", "parrot", "rabbit", "hamster", "turtle", "goldfish", "ferret", "lizard", "snake", "pony",
         "goat", "duck", "owl", "hedgehog", "frog", "canary", "mouse", "tortoise", "gecko", "llama", "alpaca",
         "pigeon", "chinchilla"),
    ),
    Relation(
        "language",
        ("Which language does {e} speak?", "What language is spoken by {e}?"),
        ("{e} speaks {v}.", "The language spoken by {e} is {v}."),
        ("French", "German", "Spanish", "Italian", "Dutch", "Polish", "Greek", "Turkish", "Swedish", "Finnish",
         "Czech", "Hungarian", "Danish", "Portuguese", "Romanian", "Welsh", "Irish", "Latvian", "Estonian",
         "Icelandic", "Maltese", "Basque", "Catalan", "Slovak"),
    ),
)


def invented_names(count: int, rng: random.Random, syllables: tuple[int, int] = (2, 3), exclude: set[str] | None = None) -> list[str]:
    """`count` distinct capitalised pronounceable names (e.g. "Bralimo"), none in `exclude`."""
    seen = set(exclude or ())
    names: list[str] = []
    while len(names) < count:
        n = rng.randint(*syllables)
        name = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n)) + rng.choice(_CODAS)
        name = name.capitalize()
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


@dataclass
class FactWorld:
    entities: list[str]
    relations: dict[str, Relation]
    facts: dict[tuple[str, str], str] = field(default_factory=dict)  # (entity, relation) -> value

    def value(self, entity: str, relation: str) -> str:
        return self.facts[(entity, relation)]

    def question(self, entity: str, relation: str, template: int = 0) -> str:
        questions = self.relations[relation].questions
        return questions[template % len(questions)].format(e=entity)

    def statement(self, entity: str, relation: str, value: str, template: int = 0) -> str:
        statements = self.relations[relation].statements
        return statements[template % len(statements)].format(e=entity, v=value)

    def other_value(self, relation: str, value: str, rng: random.Random) -> str:
        """A value of the relation's pool different from `value` (a counterfactual)."""
        pool = [v for v in self.relations[relation].values if v != value]
        return rng.choice(pool)

    def context(self, entity: str, relation: str, value: str, rng: random.Random, distractors: int = 1) -> str:
        """A passage stating `value` for (entity, relation), shuffled among `distractors` true statements of other
        (entity, relation) pairs of the world."""
        sentences = [self.statement(entity, relation, value, rng.randrange(2))]
        keys = list(self.facts)
        for _ in range(distractors):
            e, r = rng.choice(keys)
            while (e, r) == (entity, relation):
                e, r = rng.choice(keys)
            sentences.append(self.statement(e, r, self.facts[(e, r)], rng.randrange(2)))
        rng.shuffle(sentences)
        return " ".join(sentences)

    def add_entities(self, names: list[str], rng: random.Random) -> None:
        """Give each new entity a uniformly drawn value for every relation."""
        for entity in names:
            self.entities.append(entity)
            for name, relation in self.relations.items():
                self.facts[(entity, name)] = rng.choice(relation.values)


def make_fact_world(
    n_entities: int,
    seed: int,
    relations: tuple[Relation, ...] = RELATIONS,
    n_cities: int = 24,
) -> FactWorld:
    """A world of n_entities invented people, each with one uniformly drawn value per relation."""
    rng = random.Random(seed)
    cities = tuple(invented_names(n_cities, rng, syllables=(2, 2)))
    filled = {r.name: (Relation(r.name, r.questions, r.statements, cities) if not r.values else r) for r in relations}
    world = FactWorld(entities=[], relations=filled)
    world.add_entities(invented_names(n_entities, rng, exclude=set(cities)), rng)
    return world


_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")


def normalize_answer(text: str) -> str:
    """Lower case, punctuation and articles removed, whitespace collapsed (SQuAD-style)."""
    text = _PUNCT.sub(" ", text.lower())
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def contains_answer(prediction: str, gold: str) -> bool:
    """True when the normalised gold string occurs in the normalised prediction, on word boundaries."""
    g = normalize_answer(gold)
    return bool(g) and f" {g} " in f" {normalize_answer(prediction)} "
