"""The synthetic world SynthKG is tested on: a generated KG of fictional people, organisations, cities and countries,
rendered into one multi-paragraph page per entity, plus multi-hop questions whose supporting triples are known.

After a page introduces its entity by full name (and declares its alias: "Alaric Venmoor, known as the Archivist,
..."), later sentences name it by a pronoun ("He", "It"), a short name ("Venmoor", "Drennic"), a description ("The
company") or its alias ("The Archivist"): the coreference a single-step extractor gets wrong. The other entity of a
fact is always named in full. Each replicate draws two disjoint worlds: `train` (pages the distilled model learns
from) and `eval` (the retrieval corpus; its questions are split into val and test; coverage is measured on it)."""

from __future__ import annotations

import random
from dataclasses import dataclass

# ---- relations: subject type, object type, predicate text, and the sentences that state them ----------------------


@dataclass(frozen=True)
class Relation:
    key: str  # compact code (the distilled model's output vocabulary)
    predicate: str  # the predicate as text: a triple renders as "source predicate target"
    subject: str  # entity type of the source
    object: str  # entity type of the target
    templates: tuple[str, ...]  # "{s}" the subject mention, "{o}" the object's full name


RELATIONS: tuple[Relation, ...] = (
    Relation("born", "was born in", "person", "city", ("{s} was born in {o}.", "{s} is a native of {o}.")),
    Relation("works", "works for", "person", "org", ("{s} works for {o}.", "{s} is employed by {o}.")),
    Relation("mentor", "was mentored by", "person", "person", ("{s} was mentored by {o}.", "{s} trained under {o}.")),
    Relation("founder", "was founded by", "org", "person", ("{s} was founded by {o}.", "{s} was established by {o}.")),
    Relation("hq", "is headquartered in", "org", "city", ("{s} is headquartered in {o}.", "{s} has its head office in {o}.")),
    Relation("country", "lies in", "city", "country", ("{s} lies in {o}.", "{s} is a city in {o}.")),
)
REL = {r.key: r for r in RELATIONS}
FACTS_OF = {"person": ("born", "works", "mentor"), "org": ("founder", "hq"), "city": ("country",)}  # a page's facts
PAGE_TYPES = ("person", "org", "city")

# ---- names: syllables, so that a byte-level BPE learnt on one world tokenises another's names into known pieces --
_ONSET = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "kr", "st", "th", "tr")
_VOWEL = ("a", "e", "i", "o", "u", "ae", "ei", "ou")
_CODA = ("", "", "n", "r", "l", "s", "th", "nd")
ORG_KINDS = ("Holdings", "Works", "Guild", "Press", "Foundry", "Traders", "Collective", "Labs")
CITY_KINDS = ("Haven", "Ford", "Falls", "Cross", "Mere", "Dale", "Wick", "Bridge")  # a city is "Stem Kind"
EPITHETS = ("Archivist", "Navigator", "Weaver", "Alchemist", "Cartographer", "Lamplighter", "Falconer", "Tinker",
            "Chronicler", "Herbalist", "Glassblower", "Stargazer", "Locksmith", "Beekeeper", "Bellringer", "Scribe",
            "Ferryman", "Mapmaker", "Wanderer", "Engraver", "Potter", "Quartermaster", "Shepherd", "Watchmaker")
FILLERS = {
    "person": ("{s} enjoys long walks by the river.", "{s} collects old coins.", "{s} rarely gives interviews.",
               "{s} speaks three languages.", "{s} once sailed around the coast."),
    "org": ("{s} employs several hundred people.", "{s} publishes a yearly report.", "{s} expanded rapidly last decade.",
            "{s} sponsors a local choir."),
    "city": ("{s} is known for its stone bridges.", "{s} hosts a famous spring market.", "{s} has a busy harbour.",
             "{s} grew quickly after the railway came."),
}
INTROS = {"person": "{full}, known as the {alias}, is a {job}.", "org": "{full}, known as {alias}, is a {job}.",
          "city": "{full} is a {job}."}
JOBS = {"person": ("painter", "physician", "engineer", "merchant", "teacher", "sculptor", "botanist", "lawyer"),
        "org": ("shipping firm", "textile maker", "printing house", "trading company", "toolmaker", "brewery"),
        "city": ("river town", "market town", "port city", "hill town", "mill town")}
DESCRIPTIONS = {"org": "The company", "city": "The city"}  # a page entity named by its kind


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_ONSET) + rng.choice(_VOWEL) + rng.choice(_CODA) for _ in range(syllables)).capitalize()


def _lexicon(rng: random.Random, n: int, syllables: tuple[int, ...], taken: set[str], suffix: str = "") -> tuple[str, ...]:
    out: list[str] = []
    while len(out) < n:
        w = _word(rng, rng.choice(syllables)) + suffix
        if w not in taken and w not in {"He", "She", "It", "The"}:
            taken.add(w)
            out.append(w)
    return tuple(out)


def _lexicons(seed: int = 20261) -> dict[str, tuple[str, ...]]:
    """Invented name parts, fixed for every world (a language's stock of names): worlds combine them into full names
    they never share, and a tokenizer learnt on one world knows the parts of another's names (as with real names)."""
    rng, taken = random.Random(seed), set()
    return {"first": _lexicon(rng, 200, (2,), taken), "surname": _lexicon(rng, 400, (2,), taken),
            "org": _lexicon(rng, 300, (2,), taken), "country": _lexicon(rng, 24, (2,), taken, "ia"),
            "city": _lexicon(rng, 60, (1, 2), taken)}  # city stems: a city is a stem and a CITY_KINDS word


LEXICONS = _lexicons()


class NameBank:
    """Full names of people, orgs and cities never drawn twice from one bank (so the train and eval worlds of a
    replicate share none), composed from the fixed LEXICONS: every word of a new name is a word other names use, as
    with real names (a city was one unseen word before: a model trained on one world could not copy another's)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def _fresh(self, make, tries: int = 5000) -> str:
        for _ in range(tries):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise ValueError("NameBank: could not draw a fresh name; the lexicon is exhausted (draw fewer entities)")

    def person(self) -> str:
        return self._fresh(lambda: f"{self.rng.choice(LEXICONS['first'])} {self.rng.choice(LEXICONS['surname'])}")

    def org(self) -> str:
        return self._fresh(lambda: f"{self.rng.choice(LEXICONS['org'])} {self.rng.choice(ORG_KINDS)}")

    def city(self) -> str:
        return self._fresh(lambda: f"{self.rng.choice(LEXICONS['city'])} {self.rng.choice(CITY_KINDS)}")

    def countries(self, count: int) -> list[str]:
        """`count` distinct countries of the closed set every world shares (as real countries: a world's eval pages
        name countries the train world names too)."""
        if count > len(LEXICONS["country"]):
            raise ValueError(f"NameBank: {count} countries requested, the lexicon holds {len(LEXICONS['country'])}")
        return self.rng.sample(LEXICONS["country"], count)


@dataclass(frozen=True)
class Entity:
    name: str  # full name (the canonical node)
    type: str  # person | org | city | country
    short: str  # surname / first word of an org ("" for cities and countries)
    alias: str  # "Archivist" (person, "the Archivist"), "DH" (org acronym), "" otherwise
    pronoun: str  # "He" / "She" / "It"


@dataclass(frozen=True)
class Fact:
    id: int
    source: str
    relation: str  # a Relation key
    target: str

    def text(self) -> str:
        return triple_text(self.source, REL[self.relation].predicate, self.target)


def triple_text(source: str, predicate: str, target: str) -> str:
    """A triple as the text its semantic score is computed on (gold and extracted alike)."""
    return f"{source} {predicate} {target}"


@dataclass
class World:
    entities: dict[str, Entity]
    facts: list[Fact]

    def fact(self, source: str, relation: str) -> Fact | None:
        return next((f for f in self.facts if f.source == source and f.relation == relation), None)


def make_world(counts: dict[str, int], bank: NameBank, rng: random.Random, mentor_share: float = 0.7, first_id: int = 0) -> World:
    """Entities of each type (counts: person, org, city, country) and their facts: every person born somewhere and
    working for an org, a share mentored by another person; every org founded by a person and headquartered in a city;
    every city in a country."""
    for t in ("person", "org", "city", "country"):
        if counts.get(t, 0) < 2:
            raise ValueError(f"make_world: need at least 2 entities of type {t}, got {counts.get(t, 0)}")
    ents: dict[str, Entity] = {}
    by_type: dict[str, list[str]] = {}
    countries = iter(bank.countries(counts["country"]))
    for t in ("person", "org", "city", "country"):
        for _ in range(counts[t]):
            if t == "person":
                name = bank.person()
                e = Entity(name, t, name.split()[1], rng.choice(EPITHETS), rng.choice(("He", "She")))
            elif t == "org":
                name = bank.org()
                e = Entity(name, t, name.split()[0], "".join(w[0] for w in name.split()), "It")
            else:
                name = bank.city() if t == "city" else next(countries)
                e = Entity(name, t, "", "", "It")
            ents[name] = e
            by_type.setdefault(t, []).append(name)
    facts: list[Fact] = []

    def add(s: str, rel: str, o: str) -> None:
        facts.append(Fact(first_id + len(facts), s, rel, o))

    people = by_type["person"]
    for p in people:
        add(p, "born", rng.choice(by_type["city"]))
        add(p, "works", rng.choice(by_type["org"]))
        if rng.random() < mentor_share:
            add(p, "mentor", rng.choice([q for q in people if q != p]))
    for o in by_type["org"]:
        add(o, "founder", rng.choice(people))
        add(o, "hq", rng.choice(by_type["city"]))
    for c in by_type["city"]:
        add(c, "country", rng.choice(by_type["country"]))
    return World(ents, facts)


# ---- pages ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Page:
    entity: str
    text: str  # paragraphs separated by a blank line
    fact_sentences: dict[int, str]  # fact id -> the sentence that states it (as written, mention and all)
    mentions: tuple[str, ...]  # how the page named its entity in each sentence after the first ("full", "pronoun", ...)


def _mention(e: Entity, form: str) -> str:
    if form == "pronoun":
        return e.pronoun
    if form == "short":
        return e.short
    if form == "alias":
        return f"The {e.alias}" if e.type == "person" else e.alias
    if form == "description":
        return DESCRIPTIONS[e.type]
    return e.name


def mention_forms(e: Entity) -> tuple[str, ...]:
    """The ways a page may name its own entity after introducing it."""
    if e.type == "person":
        return ("full", "pronoun", "short", "alias")
    if e.type == "org":
        return ("full", "pronoun", "short", "alias", "description")
    return ("full", "pronoun", "description")


def render_page(world: World, name: str, rng: random.Random, coref_share: float, fillers: int) -> Page:
    """The page of one entity: its intro, its facts (each in a random template) and `fillers` sentences with no fact,
    shuffled after the intro and cut into two paragraphs. Each sentence after the intro names the entity in full with
    probability 1 - coref_share, else by a pronoun, short name, description or alias (drawn evenly)."""
    e = world.entities[name]
    facts = [f for f in world.facts if f.source == name]
    bodies: list[tuple[int | None, str]] = [(f.id, rng.choice(REL[f.relation].templates).replace("{o}", f.target)) for f in facts]
    bodies += [(None, s) for s in rng.sample(FILLERS[e.type], fillers)]
    rng.shuffle(bodies)
    intro = INTROS[e.type].format(full=e.name, alias=e.alias, job=rng.choice(JOBS[e.type]))
    sentences, forms, stated = [intro], [], {}
    others = [f for f in mention_forms(e) if f != "full"]
    for fid, body in bodies:
        form = "full" if rng.random() >= coref_share else rng.choice(others)
        sentence = body.replace("{s}", _mention(e, form))
        sentences.append(sentence)
        forms.append(form)
        if fid is not None:
            stated[fid] = sentence
    cut = 1 + (len(sentences) - 1) // 2
    text = " ".join(sentences[:cut]) + "\n\n" + " ".join(sentences[cut:])
    return Page(name, text, stated, tuple(forms))


# ---- multi-hop questions ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class QuestionTemplate:
    key: str
    chain: tuple[str, ...]  # relation keys followed from the start entity
    start: str  # type of the start entity
    text: str  # "{e}": the start entity's full name


QUESTION_TEMPLATES: tuple[QuestionTemplate, ...] = (
    QuestionTemplate("founder_born", ("founder", "born"), "org", "In which city was the founder of {e} born?"),
    QuestionTemplate("employer_hq", ("works", "hq"), "person", "Where is the employer of {e} headquartered?"),
    QuestionTemplate("employer_founder", ("works", "founder"), "person", "Who founded the organisation that {e} works for?"),
    QuestionTemplate("mentor_born", ("mentor", "born"), "person", "Where was the mentor of {e} born?"),
    QuestionTemplate("mentor_employer", ("mentor", "works"), "person", "Which organisation employs the mentor of {e}?"),
    QuestionTemplate("hq_country", ("hq", "country"), "org", "In which country is the head office of {e}?"),
    QuestionTemplate("birth_country", ("born", "country"), "person", "In which country was {e} born?"),
    QuestionTemplate("founder_birth_country", ("founder", "born", "country"), "org",
                     "In which country was the founder of {e} born?"),
    QuestionTemplate("employer_hq_country", ("works", "hq", "country"), "person",
                     "In which country is the head office of the employer of {e}?"),
    QuestionTemplate("mentor_employer_founder", ("mentor", "works", "founder"), "person",
                     "Who founded the organisation that employs the mentor of {e}?"),
)
TEMPLATE = {t.key: t for t in QUESTION_TEMPLATES}


@dataclass(frozen=True)
class Question:
    template: str
    start: str
    text: str
    answer: str
    supports: tuple[int, ...]  # fact ids along the chain, in order


def chain_of(world: World, template: QuestionTemplate, start: str) -> Question | None:
    """The question from `start` along the template's chain, or None where a link is missing or the chain comes back
    to an entity it passed (the answer would be in the question, or a hop would be void)."""
    node, supports, seen = start, [], {start}
    for rel in template.chain:
        f = world.fact(node, rel)
        if f is None or f.target in seen:
            return None
        supports.append(f.id)
        node = f.target
        seen.add(node)
    return Question(template.key, start, template.text.format(e=start), node, tuple(supports))


def all_questions(world: World) -> list[Question]:
    """Every answerable (template, start entity) question of the world, in a fixed order."""
    out = []
    for t in QUESTION_TEMPLATES:
        for name, e in world.entities.items():
            if e.type == t.start and (q := chain_of(world, t, name)) is not None:
                out.append(q)
    return out
