"""The offline multilingual world: English template documents, "cipher languages" (each in its own script, with
synonyms, homonyms, inflections, compounds and its own word order: CipherLanguage), untranslatable proper nouns,
keyword queries and a limited parallel text.

Every document is an English fact, "<name> is a <adjective> <profession> who <verb> <color> <object> in <city>
every <time>", rendered in one cipher language. Each occurrence of a content word draws a synonym stem and an
inflection, so a word-level dictionary learned from a few hundred parallel sentences misses unseen forms and
compounds (translate-then-BM25 is real but imperfect), while a sub-word encoder can generalise; a proper noun is only
transliterated into the language's script, and the names of the searched documents never occur in the parallel
text, so the English (pivot) vocabulary cannot express them: only an exact match on source tokens (LexEcho) can.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# alphabets of the cipher languages: each language writes its words and transliterated names in its own script
SCRIPTS: dict[str, str] = {
    "greek": "αβγδεζηθικλμνξοπρστυφχψω",
    "cyrillic": "абвгдежзийклмнопрстуфхцчшщыэюя",
    "armenian": "աբգդեզէըթժիլխծկհձղճմյնշոչպջռսվտրցւփքօֆ",
    "georgian": "აბგდევზთიკლმნოპჟრსტუფქღყშჩცძწჭხჯჰ",
    "hebrew": "אבגדהוזחטיכלמנסעפצקרשת",
    "latin_ext": "àáâäãåāçčèéêëēìíîïñòóôöõøùúûüýÿžš",
}

SLOTS: dict[str, tuple[str, ...]] = {
    "adjective": ("quiet", "famous", "young", "old", "clever", "busy", "honest", "lazy", "brave", "gentle", "strict",
                  "cheerful", "patient", "rich", "poor", "careful", "friendly", "proud", "shy", "wise"),
    "profession": ("doctor", "teacher", "farmer", "baker", "painter", "sailor", "lawyer", "nurse", "pilot", "chef",
                   "writer", "singer", "builder", "tailor", "miner", "fisher", "soldier", "judge", "dancer", "poet",
                   "merchant", "priest", "hunter", "weaver", "potter"),
    "verb": ("sells", "builds", "paints", "repairs", "collects", "buys", "carves", "cleans", "designs", "delivers",
             "steals", "polishes", "rents", "hides", "inspects", "counts", "trades", "guards"),
    "color": ("red", "blue", "green", "yellow", "black", "white", "brown", "purple", "orange", "grey", "silver", "golden"),
    "object": ("boats", "shoes", "houses", "bicycles", "clocks", "lamps", "chairs", "tables", "hats", "carpets", "bells",
               "kites", "drums", "violins", "wagons", "mirrors", "baskets", "candles", "bottles", "helmets", "ships",
               "rings", "swords", "blankets", "barrels", "ladders", "statues", "windows", "doors", "bridges"),
    "city": ("paris", "london", "rome", "berlin", "madrid", "vienna", "prague", "lisbon", "dublin", "oslo", "athens",
             "cairo", "tokyo", "lima", "delhi", "boston", "chicago", "sydney", "toronto", "moscow"),
    "time": ("monday", "tuesday", "friday", "sunday", "winter", "summer", "spring", "autumn", "morning", "evening"),
}
CONTENT_SLOTS = tuple(SLOTS)
FUNCTION_WORDS = ("is", "a", "who", "in", "every")
# query-side synonyms: a query may say "physician" where the document says "doctor"
SYNONYMS: dict[str, str] = {
    "doctor": "physician", "teacher": "instructor", "chef": "cook", "sailor": "seaman", "writer": "author",
    "builder": "constructor", "merchant": "trader", "famous": "renowned", "clever": "smart", "old": "elderly",
    "busy": "occupied", "brave": "courageous", "rich": "wealthy", "sells": "vends", "buys": "purchases",
    "repairs": "fixes", "cleans": "washes", "designs": "plans", "boats": "vessels", "houses": "homes",
    "bicycles": "bikes", "shoes": "boots", "lamps": "lanterns", "ships": "vessels", "carpets": "rugs",
    "grey": "gray", "autumn": "fall", "evening": "night", "golden": "gold", "hats": "caps",
}
_CONSONANTS, _VOWELS = "bdfgklmnprstvz", "aeiou"


@dataclass(frozen=True)
class Fact:
    """One English fact: a proper noun and a value for every content slot."""

    name: str
    slots: dict[str, str]

    def words(self) -> list[tuple[str, str]]:
        """(slot, English word) in sentence order; function words have slot ''."""
        s = self.slots
        return [("name", self.name), ("", "is"), ("", "a"), ("adjective", s["adjective"]), ("profession", s["profession"]),
                ("", "who"), ("verb", s["verb"]), ("color", s["color"]), ("object", s["object"]), ("", "in"),
                ("city", s["city"]), ("", "every"), ("time", s["time"])]


@dataclass(frozen=True)
class CipherLanguage:
    """A language that differs from English in more than spelling, written in its own script:

    - many-to-many words: each English word has 1..forms_per_word foreign synonyms (one drawn per occurrence), and
      some foreign stems are homonyms shared by two English words of the same slot;
    - morphology: every content word carries one of the language's inflection suffixes, drawn per occurrence;
    - compounding: with `compounds`, adjective + profession and color + object are written as one word;
    - word order: the sentence's phrases in the language's own order (a permutation of English's);
    proper nouns are only transliterated letter by letter (never inflected).
    """

    name: str
    lexicon: dict[str, tuple[str, ...]]  # English word -> its foreign stems (synonyms)
    letters: dict[str, str]  # Latin letter -> letter of the script (transliteration)
    suffixes: tuple[str, ...] = ("",)  # inflection suffixes of content words
    compounds: bool = False  # adjective+profession, color+object written as one word
    order: tuple[int, ...] = (0, 1, 2, 3, 4)  # the language's order of English's five phrases (PHRASES)

    def transliterate(self, name: str) -> str:
        return "".join(self.letters.get(c, c) for c in name.lower())

    def word(self, slot: str, english_word: str, rng: random.Random) -> str:
        """One surface form: the name transliterated, a function word as is, a content word as a drawn synonym stem
        with a drawn suffix."""
        if slot == "name":
            return self.transliterate(english_word)
        stem = rng.choice(self.lexicon[english_word])
        return stem if not slot else stem + rng.choice(self.suffixes)

    def render(self, words: list[tuple[str, str]], rng: random.Random) -> str:
        """A sentence (Fact.words()) or keyword list of (slot, English word) pairs in this language; keyword lists
        (no function words) keep their order and are never compounded."""
        if not any(slot == "" for slot, _ in words):
            return " ".join(self.word(slot, w, rng) for slot, w in words)
        phrases: list[list[str]] = [[] for _ in PHRASES]
        slot_phrase = {slot: i for i, phrase in enumerate(PHRASES) for slot in phrase}
        current = 0
        for slot, w in words:
            current = slot_phrase.get(slot, current)
            phrases[current].append(self.word(slot, w, rng))
            if self.compounds and slot in ("profession", "object") and len(phrases[current]) >= 2:
                second = phrases[current].pop()
                phrases[current][-1] = phrases[current][-1] + second
        return " ".join(w for i in self.order for w in phrases[i])


# English's phrases, in English order: a language writes them in its own order (CipherLanguage.order)
PHRASES: tuple[tuple[str, ...], ...] = (("name",), ("adjective", "profession"), ("verb", "color", "object"), ("city",), ("time",))


def english(words: list[tuple[str, str]]) -> str:
    return " ".join(w.capitalize() if slot == "name" else w for slot, w in words)


def english_vocabulary() -> list[str]:
    """Every translatable English word: content words, their query synonyms and the function words."""
    words = [w for values in SLOTS.values() for w in values] + list(SYNONYMS.values()) + list(FUNCTION_WORDS)
    return list(dict.fromkeys(words))


def _slot_of(word: str) -> str:
    """The slot an English word (or query synonym) fills; '' for function words."""
    inverse = {v: k for k, v in SYNONYMS.items()}
    base = inverse.get(word, word)
    return next((slot for slot, values in SLOTS.items() if base in values), "")


def make_language(name: str, seed: int, *, forms_per_word: int = 1, homonym_rate: float = 0.0, n_suffixes: int = 0,
                  compounds: bool = False, shuffle_order: bool = False) -> CipherLanguage:
    """A language in the script `name` (a key of SCRIPTS): per English word 1..forms_per_word distinct random stems
    of 3-7 letters; with probability homonym_rate a word's first stem is another word's of the same slot; n_suffixes
    inflections of 1-2 letters (0: none); with shuffle_order, its own phrase order."""
    if name not in SCRIPTS:
        raise ValueError(f"unknown cipher language {name!r}: choose from {sorted(SCRIPTS)}")
    alphabet = SCRIPTS[name]
    rng = random.Random(f"{seed}:{name}")
    used: set[str] = set()

    def stem() -> str:
        while True:
            foreign = "".join(rng.choice(alphabet) for _ in range(rng.randint(3, 7)))
            if foreign not in used:
                used.add(foreign)
                return foreign

    lexicon: dict[str, tuple[str, ...]] = {}
    by_slot: dict[str, list[str]] = {}
    for word in english_vocabulary():
        slot = _slot_of(word)
        forms = [stem() for _ in range(rng.randint(1, forms_per_word) if slot else 1)]
        peers = by_slot.setdefault(slot, [])
        if slot and peers and rng.random() < homonym_rate:
            forms[0] = lexicon[rng.choice(peers)][0]  # a homonym: one stem, two meanings
        peers.append(word)
        lexicon[word] = tuple(forms)
    suffixes = tuple(sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 2))) for _ in range(n_suffixes)})) or ("",)
    latin = "abcdefghijklmnopqrstuvwxyz"
    letters = {c: alphabet[i % len(alphabet)] for i, c in enumerate(rng.sample(latin, len(latin)))}
    order = tuple(rng.sample(range(len(PHRASES)), len(PHRASES))) if shuffle_order else tuple(range(len(PHRASES)))
    return CipherLanguage(name=name, lexicon=lexicon, letters=letters, suffixes=suffixes, compounds=compounds, order=order)


def proper_nouns(n: int, rng: random.Random, exclude: set[str] = frozenset()) -> list[str]:
    """n distinct invented names of 2-4 consonant-vowel syllables (plus a final consonant)."""
    names: list[str] = []
    seen = set(exclude)
    while len(names) < n:
        name = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(rng.randint(2, 4))) + rng.choice(_CONSONANTS)
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def random_fact(name: str, rng: random.Random) -> Fact:
    return Fact(name=name, slots={slot: rng.choice(values) for slot, values in SLOTS.items()})


@dataclass
class World:
    """Documents, queries and parallel text of one synthetic multilingual world."""

    languages: list[CipherLanguage]
    docs: list[dict] = field(default_factory=list)  # doc_id, lang, text, english, name, slots, twin_group, split
    queries: list[dict] = field(default_factory=list)  # query_id, kind, split, lang, text, english, relevant, doc_id
    parallel: list[dict] = field(default_factory=list)  # lang, source, english


def build_world(
    languages: list[str],
    n_docs: int,
    twin_fraction: float,
    twin_size: int,
    n_parallel: int,
    n_train_queries: int,
    n_test_crosslingual: int,
    n_test_propernoun: int,
    query_terms: int,
    synonym_rate: float,
    train_fraction: float,
    seed: int,
    *,
    forms_per_word: int = 1,
    homonym_rate: float = 0.0,
    n_suffixes: int = 0,
    compound_languages: int = 0,
    shuffle_order: bool = False,
) -> World:
    """The corpus (each document in one language), keyword queries with their relevant documents, parallel text.

    Twin groups: `twin_size` documents with identical content slots and different names, so a query naming the
    entity is answered only by the name. Cross-lingual queries (query language != document language) name no
    entity; proper-noun queries are in the document's language and hinge on the name. Train queries target only
    the first `train_fraction` of the documents, test queries only the rest. The languages' morphology
    (make_language): forms_per_word, homonym_rate, n_suffixes, shuffle_order; the first compound_languages compound.
    """
    if len(languages) < 2:
        raise ValueError("params.yaml milco.synthesize.languages: cross-lingual queries need at least two languages")
    rng = random.Random(seed)
    langs = [make_language(name, seed, forms_per_word=forms_per_word, homonym_rate=homonym_rate, n_suffixes=n_suffixes,
                           compounds=i < compound_languages, shuffle_order=shuffle_order) for i, name in enumerate(languages)]
    world = World(languages=langs)
    doc_names = proper_nouns(n_docs, rng)
    parallel_names = proper_nouns(max(1, n_parallel // 2), rng, exclude=set(doc_names))

    # ---- documents: singletons and twin groups, each document in one language
    facts: list[tuple[Fact, int]] = []  # (fact, twin group or -1)
    i, group = 0, 0
    n_twins = int(round(n_docs * twin_fraction / twin_size)) * twin_size
    while i < n_twins:
        base = random_fact("", rng)
        for _ in range(twin_size):
            facts.append((Fact(doc_names[i], base.slots), group))
            i += 1
        group += 1
    facts += [(random_fact(doc_names[j], rng), -1) for j in range(i, n_docs)]
    rng.shuffle(facts)
    n_train_docs = int(n_docs * train_fraction)
    for doc_id, (fact, twin) in enumerate(facts):
        lang = rng.choice(langs)
        words = fact.words()
        world.docs.append({
            "doc_id": doc_id, "lang": lang.name, "text": lang.render(words, rng), "english": english(words),
            "name": fact.name, "slots": fact.slots, "twin_group": twin, "split": "train" if doc_id < n_train_docs else "test",
        })

    # ---- queries
    postings: dict[tuple[str, str], set[int]] = {}
    for d in world.docs:
        for key in [*d["slots"].items(), ("name", d["name"])]:
            postings.setdefault(key, set()).add(d["doc_id"])

    def relevant(terms: dict[str, str], name: str | None) -> list[int]:
        keys = [*terms.items()] + ([("name", name)] if name is not None else [])
        return sorted(set.intersection(*(postings[k] for k in keys)))

    def make_query(doc: dict, kind: str, split: str, qlang: CipherLanguage, n_terms: int) -> dict:
        slots = rng.sample(CONTENT_SLOTS, n_terms)
        terms = {s: doc["slots"][s] for s in slots}
        words = [(s, SYNONYMS[w] if w in SYNONYMS and rng.random() < synonym_rate else w) for s, w in terms.items()]
        name = doc["name"] if kind == "propernoun" else None
        if name is not None:
            words = [("name", name)] + words
        return {"query_id": len(world.queries), "kind": kind, "split": split, "lang": qlang.name,
                "text": qlang.render(words, rng), "english": english(words), "doc_id": doc["doc_id"],
                "relevant": relevant(terms, name)}

    by_split = {s: [d for d in world.docs if d["split"] == s] for s in ("train", "test")}
    for split, n_cross, n_noun in (("train", n_train_queries - n_train_queries // 3, n_train_queries // 3),
                                   ("test", n_test_crosslingual, n_test_propernoun)):
        pool = by_split[split]
        singles = [d for d in pool if d["twin_group"] < 0]
        twins = [d for d in pool if d["twin_group"] >= 0]
        if not singles or (n_noun and not twins):
            raise ValueError(f"milco.synthesize: the {split} documents hold no singletons or no twins; raise n_docs or twin_fraction")
        for _ in range(n_cross):
            doc = rng.choice(singles)
            qlang = rng.choice([lang for lang in langs if lang.name != doc["lang"]])
            world.queries.append(make_query(doc, "crosslingual", split, qlang, query_terms))
        for _ in range(n_noun):
            doc = rng.choice(twins)
            qlang = next(lang for lang in langs if lang.name == doc["lang"])
            world.queries.append(make_query(doc, "propernoun", split, qlang, max(1, query_terms - 2)))

    # ---- parallel text for alignment: fresh facts with names never used by a document, some words as synonyms
    for k in range(n_parallel):
        fact = random_fact(parallel_names[k % len(parallel_names)], rng)
        words = [(s, SYNONYMS[w] if w in SYNONYMS and rng.random() < synonym_rate else w) for s, w in fact.words()]
        for lang in langs:
            world.parallel.append({"lang": lang.name, "source": lang.render(words, rng), "english": english(words)})
    return world


def real_parallel_names(locales: list[str]) -> list[dict]:
    """Parallel entity names shipped offline: `babel` territory (country / region) names and `pycountry` country
    names (gettext) in each of `locales`, next to the English name: rows {lang, source, english}, deduplicated,
    names equal to the English one dropped; [] where neither package is installed."""
    rows: dict[tuple[str, str], dict] = {}
    try:
        from babel import Locale, UnknownLocaleError

        en = Locale("en").territories
        for ident in locales:
            try:
                names = Locale.parse(ident).territories
            except (UnknownLocaleError, ValueError):
                continue
            for code, name in names.items():
                if code in en and name != en[code] and not code.isdigit():
                    rows[(name, en[code])] = {"lang": f"babel:{ident}", "source": name, "english": en[code]}
    except ImportError:
        pass
    try:
        import gettext

        import pycountry

        for ident in locales:
            try:
                tr = gettext.translation("iso3166-1", pycountry.LOCALES_DIR, languages=[ident])
            except OSError:
                continue
            for c in pycountry.countries:
                name = tr.gettext(c.name)
                if name != c.name:
                    rows.setdefault((name, c.name), {"lang": f"pycountry:{ident}", "source": name, "english": c.name})
    except ImportError:
        pass
    return list(rows.values())
