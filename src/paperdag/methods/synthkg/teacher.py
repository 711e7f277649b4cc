"""SynthKG's multi-step synthesis (the teacher), rule-based: chunk a page into sentence-aligned chunks; decontextualise
each chunk given the previous (already rewritten) chunk, so that each subject mention takes its full form, keeping a
rewrite only if ROUGE-1 F1(rewrite, original) >= 0.70; extract entities (typed, by shape), then quadruples
(source, predicate, target, proposition) by relation patterns. The single-step baseline is `extract` on the raw chunks.

The teacher sees only the previous chunk: an alias declared two chunks back stays unresolved (as an LLM given one
chunk of context would miss it), so the teacher itself is imperfect."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from paperdag.methods.synthkg.world import CITY_KINDS, DESCRIPTIONS, ORG_KINDS, REL, RELATIONS

ROUGE_MIN = 0.70  # SynthKG: a rewrite is kept only if its ROUGE-1 F1 against the original chunk reaches this

_CAP = r"[A-Z][a-z]+"
_ORG = re.compile(rf"\b{_CAP} (?:{'|'.join(ORG_KINDS)})\b")
_CITY = re.compile(rf"\b{_CAP} (?:{'|'.join(CITY_KINDS)})\b")
_COUNTRY = re.compile(rf"\b{_CAP}ia\b")
_PERSON = re.compile(rf"\b{_CAP} {_CAP}\b")
_NOT_A_NAME = {"The", "It", "He", "She", "In", "Where", "Who", "Which", "What", "A", "An"}
_ALIAS = re.compile(rf"^(?P<full>.+?), known as (?:the )?(?P<alias>[A-Z][A-Za-z]+), ")
_SENTENCE = re.compile(r"(?<=\.)\s+")
PRONOUNS = {"He": "person", "She": "person", "It": "thing"}
_DESCRIBED = {v: k for k, v in DESCRIPTIONS.items()}  # "The company" -> org


def sentences(text: str) -> list[str]:
    """The sentences of a text (every sentence ends with a full stop; names hold none)."""
    return [s for s in _SENTENCE.split(text.replace("\n\n", " ").strip()) if s]


def chunk(text: str, chunk_words: int) -> list[str]:
    """Sentence-aligned chunks: sentences are added to a chunk until it holds at least `chunk_words` words."""
    out, current = [], []
    for s in sentences(text):
        current.append(s)
        if sum(len(x.split()) for x in current) >= chunk_words:
            out.append(" ".join(current))
            current = []
    if current:
        out.append(" ".join(current))
    return out


# ---- step 2 of the teacher: entities by shape ------------------------------------------------------------------------

def entities(text: str) -> list[tuple[str, str]]:
    """Typed entity spans (name, type) in order of first appearance: org "Word Kind", city "Stem Kind", country
    "...ia", person "First Last" (two capitalised words that are neither of those nor start with a function word)."""
    found: dict[str, str] = {}
    spans: list[tuple[int, str, str]] = []
    taken: list[tuple[int, int]] = []
    for pattern, kind in ((_ORG, "org"), (_CITY, "city"), (_COUNTRY, "country"), (_PERSON, "person")):
        for m in pattern.finditer(text):
            a, b = m.span()
            if any(a < y and x < b for x, y in taken):
                continue
            name = m.group(0)
            if kind == "person" and (name.split()[0] in _NOT_A_NAME or _CITY.search(name) or _COUNTRY.search(name)):
                continue
            taken.append((a, b))
            spans.append((a, name, kind))
    for _, name, kind in sorted(spans):
        found.setdefault(name, kind)
    return list(found.items())


def _leading_entity(sentence: str) -> tuple[str, str] | None:
    """The entity a sentence starts with, if it starts with a full name."""
    for name, kind in entities(sentence):
        if sentence.startswith(name):
            return name, kind
    return None


# ---- step 1: decontextualisation -------------------------------------------------------------------------------------

@dataclass
class _Memory:
    """What the context tells about entities: the last subject of each kind, short names and declared aliases."""

    focus: dict[str, str]  # "person" / "org" / "city" / "thing" (the last non-person) -> full name
    shorts: dict[str, str]  # "Venmoor" -> "Alaric Venmoor"
    aliases: dict[str, str]  # "Archivist" -> "Alaric Venmoor"

    def read(self, sentence: str) -> None:
        for name, kind in entities(sentence):
            if kind == "person":
                self.shorts.setdefault(name.split()[1], name)
            elif kind == "org":
                self.shorts.setdefault(name.split()[0], name)
        if m := _ALIAS.match(sentence):
            self.aliases[m.group("alias")] = m.group("full")
        if lead := _leading_entity(sentence):
            name, kind = lead
            self.focus[kind] = name
            if kind != "person":
                self.focus["thing"] = name


def _resolve(sentence: str, memory: _Memory) -> str:
    """The sentence with its leading mention (pronoun, description, alias, short name) replaced by the full name the
    memory gives it; unchanged when the mention is a full name or cannot be resolved."""
    if _leading_entity(sentence):
        return sentence
    head, _, rest = sentence.partition(" ")
    full = None
    if head in PRONOUNS:
        full = memory.focus.get(PRONOUNS[head])
    elif head == "The":
        second, _, rest2 = rest.partition(" ")
        described = _DESCRIBED.get(f"The {second}")
        full = memory.focus.get(described) if described else memory.aliases.get(second)
        if full:
            return f"{full} {rest2}"
        return sentence
    elif head in memory.shorts:
        full = memory.shorts[head]
    elif head in memory.aliases:
        full = memory.aliases[head]
    return f"{full} {rest}" if full else sentence


@functools.cache
def _rouge1():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1"], use_stemmer=False)


def rouge1_f1(candidate: str, reference: str) -> float:
    """ROUGE-1 F1 (rouge-score, no stemming) of a rewrite against the original chunk."""
    return _rouge1().score(reference, candidate)["rouge1"].fmeasure


@dataclass(frozen=True)
class Rewrite:
    original: str
    rewrite: str  # the proposed decontextualised chunk
    rouge1: float  # ROUGE-1 F1 of rewrite against original
    kept: bool  # rouge1 >= the threshold

    @property
    def text(self) -> str:
        """The chunk the extractor reads: the rewrite when kept, else the original."""
        return self.rewrite if self.kept else self.original


def decontextualise(chunk_text: str, previous: str, rouge_min: float = ROUGE_MIN) -> Rewrite:
    """Rewrite `chunk_text` given the previous chunk (its decontextualised text): every leading mention resolved
    against what the previous chunk and the sentences before it in this chunk say; kept only if ROUGE-1 F1 >= rouge_min."""
    memory = _Memory({}, {}, {})
    for s in sentences(previous):
        memory.read(s)
    out = []
    for s in sentences(chunk_text):
        memory.read(s)  # a declaration or full name in the sentence itself counts
        r = _resolve(s, memory)
        memory.read(r)
        out.append(r)
    rewrite = " ".join(out)
    score = rouge1_f1(rewrite, chunk_text)
    return Rewrite(chunk_text, rewrite, score, score >= rouge_min)


def decontextualise_page(chunks: list[str], rouge_min: float = ROUGE_MIN) -> list[Rewrite]:
    """Each chunk decontextualised given the previous chunk's decontextualised text (the first: no context)."""
    out: list[Rewrite] = []
    for c in chunks:
        out.append(decontextualise(c, out[-1].text if out else "", rouge_min))
    return out


# ---- step 3: quadruples ------------------------------------------------------------------------------------------------

def _pattern(template: str) -> re.Pattern[str]:
    body = re.escape(template).replace(re.escape("{s}"), r"(?P<s>.+?)").replace(re.escape("{o}"), r"(?P<o>.+?)")
    return re.compile(rf"^{body}$")


PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((r.key, _pattern(t)) for r in RELATIONS for t in r.templates)


@dataclass(frozen=True)
class Quadruple:
    source: str
    relation: str  # relation key; REL[relation].predicate is the predicate text
    target: str
    proposition: str  # the sentence stating it

    @property
    def predicate(self) -> str:
        return REL[self.relation].predicate


def extract(chunk_text: str) -> tuple[list[tuple[str, str]], list[Quadruple]]:
    """Entities (typed spans), then quadruples: each sentence matched against the relation patterns; the source and
    target are the slots' text as written (a pronoun stays a pronoun: nothing here resolves coreference); a target
    must be an entity of the relation's object type."""
    ents = entities(chunk_text)
    kinds = dict(ents)
    quads = []
    for s in sentences(chunk_text):
        for key, pattern in PATTERNS:
            if (m := pattern.match(s)) and kinds.get(m.group("o")) == REL[key].object:
                quads.append(Quadruple(m.group("s"), key, m.group("o"), s))
                break
    return ents, quads
