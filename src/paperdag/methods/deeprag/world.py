"""The DeepRAG world: a knowledge base of atomic facts about invented people (paperdag.lm.factworld's names and value
pools), two bridge relations linking people to people (mentor, friend), and 2-3-hop questions whose decomposition
into atomic subqueries is known.

    "What is the favourite colour of the friend of the mentor of Bralimo?"
      q_1 "Who is the mentor of Bralimo?"          -> Kestra      (fact (Bralimo, mentor))
      q_2 "Who is the friend of Kestra?"           -> Zuno        (fact (Kestra, friend))
      q_3 "What is the favourite colour of Zuno?"  -> red         (fact (Zuno, colour))

People fall into groups (train / val / test heads, and `reading` people used only to teach the LM to read retrieved
text); a bridge relation never leaves its group, so every fact a test question touches belongs to test people and
no training question ever decides on it. The knowledge base holds one document per fact (all groups), headed by
its subject.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from paperdag.lm.factworld import RELATIONS, invented_names

GROUPS = ("train", "val", "test", "reading")  # question splits, then the people that only teach reading
QUESTION_SPLITS = GROUPS[:3]


@dataclass(frozen=True)
class Relation:
    name: str
    subquery: str  # the atomic question, "{e}" the person
    phrase: str  # the multi-hop question's outer template, "{e}" a noun phrase
    document: str  # the knowledge-base sentence, "{e}" the person, "{v}" the value (shares the subquery's keyword)
    bridge: bool = False  # the value is another person of the same group


_ATTRIBUTES = {  # factworld relation -> (subquery, multi-hop phrase, document)
    "birthplace": ("Where was {e} born?", "Where was {e} born?", "{e} was born in the city of {v}."),
    "colour": ("What is the favourite colour of {e}?", "What is the favourite colour of {e}?", "The favourite colour of {e} is {v}."),
    "instrument": ("Which instrument does {e} play?", "Which instrument does {e} play?", "The instrument played by {e} is the {v}."),
    "sport": ("Which sport does {e} practise?", "Which sport does {e} practise?", "The sport practised by {e} is {v}."),
    "pet": ("What pet does {e} own?", "What pet does {e} own?", "The pet owned by {e} is a {v}."),
    "language": ("Which language does {e} speak?", "Which language does {e} speak?", "The language spoken by {e} is {v}."),
}
BRIDGES = (
    Relation("mentor", "Who is the mentor of {e}?", "the mentor of {e}", "The mentor of {e} is {v}.", bridge=True),
    Relation("friend", "Who is the friend of {e}?", "the friend of {e}", "The friend of {e} is {v}.", bridge=True),
)
ATTRIBUTES = tuple(Relation(r, *_ATTRIBUTES[r]) for r in _ATTRIBUTES)
ALL_RELATIONS = {r.name: r for r in (*BRIDGES, *ATTRIBUTES)}


@dataclass
class World:
    people: dict[str, list[str]]  # group -> its people
    values: dict[str, tuple[str, ...]]  # attribute -> its value pool
    facts: dict[tuple[str, str], str]  # (person, relation) -> value

    def group_of(self) -> dict[str, str]:
        return {p: g for g, people in self.people.items() for p in people}


def subquery(relation: str, entity: str) -> str:
    return ALL_RELATIONS[relation].subquery.format(e=entity)


def document(relation: str, entity: str, value: str) -> str:
    """The fact's knowledge-base passage, headed by its subject as an encyclopaedia's is ("Bralimo: The mentor of
    Bralimo is Kestra."): BM25 then ranks the subject's own fact first; untitled, "The mentor of W is Bralimo" ties
    with it (bag of words cannot tell subject from value; benchmarks/deeprag_reading.py bm25)."""
    return f"{entity}: " + ALL_RELATIONS[relation].document.format(e=entity, v=value)


def question_text(head: str, chain: Sequence[str]) -> str:
    """chain = (bridge, ..., attribute), applied from the head outwards: the first relation is asked about the head."""
    phrase = head
    for bridge in chain[:-1]:
        phrase = ALL_RELATIONS[bridge].phrase.format(e=phrase)
    return ALL_RELATIONS[chain[-1]].phrase.format(e=phrase)


def make_world(people_per_group: dict[str, int], seed: int, n_cities: int = 24) -> World:
    """Invented people per group; every person has one value per attribute (uniform over the pool) and one mentor
    and one friend, another person of the same group."""
    rng = random.Random(seed)
    cities = tuple(invented_names(n_cities, rng, syllables=(2, 2)))
    pools = {r.name: (cities if r.name == "birthplace" else r.values) for r in RELATIONS if r.name in _ATTRIBUTES}
    total = sum(people_per_group.values())
    names = invented_names(total, rng, exclude=set(cities))
    people, facts, at = {}, {}, 0
    for group in GROUPS:
        n = people_per_group.get(group, 0)
        if n < 2:
            raise ValueError(f"deeprag world: group {group!r} needs at least 2 people (a mentor is another person); got {n}")
        members = names[at : at + n]
        at += n
        people[group] = members
        for person in members:
            for bridge in BRIDGES:
                facts[(person, bridge.name)] = rng.choice([p for p in members if p != person])
            for attribute in ATTRIBUTES:
                facts[(person, attribute.name)] = rng.choice(pools[attribute.name])
    return World(people=people, values=pools, facts=facts)


def chains(hops: int) -> list[tuple[str, ...]]:
    """Every relation chain of `hops` relations: hops - 1 bridges, then an attribute."""
    out: list[tuple[str, ...]] = [()]
    for _ in range(hops - 1):
        out = [c + (b.name,) for c in out for b in BRIDGES]
    return [c + (a.name,) for c in out for a in ATTRIBUTES]


def decompose(world: World, head: str, chain: Sequence[str]) -> list[dict[str, str]]:
    """The gold decomposition: per step the person asked about, the relation, the subquery and its answer."""
    steps, entity = [], head
    for relation in chain:
        value = world.facts[(entity, relation)]
        steps.append({"entity": entity, "relation": relation, "subquery": subquery(relation, entity), "answer": value})
        entity = value
    return steps


def make_questions(world: World, counts: dict[str, int], hops: Sequence[int], seed: int) -> list[dict[str, object]]:
    """`counts[split]` distinct questions per split, heads drawn from the split's people, hop counts uniform over
    `hops`. Raises when a split has fewer distinct (head, chain) questions than asked for."""
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    for split in QUESTION_SPLITS:
        pool = [(head, c) for head in world.people[split] for h in hops for c in chains(h)]
        if counts[split] > len(pool):
            raise ValueError(f"deeprag synthesize: {counts[split]} {split} questions asked, only {len(pool)} distinct "
                             f"(head, chain) pairs exist over {len(world.people[split])} {split} people; add people")
        by_hops = {h: [q for q in pool if len(q[1]) == h] for h in hops}
        for h in by_hops.values():
            rng.shuffle(h)
        chosen: list[tuple[str, tuple[str, ...]]] = []
        while len(chosen) < counts[split]:  # hop counts as even as the pools allow
            for h in hops:
                if by_hops[h] and len(chosen) < counts[split]:
                    chosen.append(by_hops[h].pop())
        for i, (head, chain) in enumerate(chosen):
            steps = decompose(world, head, chain)
            rows.append({"id": f"{split}-{i}", "split": split, "head": head, "hops": len(chain), "chain": list(chain),
                         "question": question_text(head, chain), "answer": steps[-1]["answer"],
                         "subqueries": [s["subquery"] for s in steps], "step_entities": [s["entity"] for s in steps],
                         "step_answers": [s["answer"] for s in steps]})
    return rows


def check_questions(questions: list[dict[str, object]], group_of: dict[str, str]) -> None:
    """No leakage between splits: distinct question strings, and every person a question's gold decomposition
    touches belongs to the question's own split. Raises naming the first offending question."""
    seen: dict[str, str] = {}
    for q in questions:
        if q["question"] in seen:
            raise ValueError(f"deeprag: question {q['id']} repeats {seen[q['question']]}: {q['question']!r}")
        seen[q["question"]] = q["id"]
        for person in [*q["step_entities"], *(q["step_answers"][:-1])]:
            if group_of.get(person) != q["split"]:
                raise ValueError(f"deeprag: question {q['id']} ({q['split']}) touches {person} of group {group_of.get(person)}")
