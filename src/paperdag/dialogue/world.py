"""Long multi-session dialogues between generated people, with dated sessions, for conversational-memory retrieval.

Similarity-dense by construction: every session is about one entity from a few kinds that share attributes and
sentence templates (my friend Anna / my cousin Ben both move house and change jobs), every entity is discussed in
several sessions and its attributes change from one to the next, and topical filler names the entity without
saying anything (a near-duplicate of the questions that is never useful). One session per preference category
(food, music, ...) has every speaker state their own preference: near-duplicates that differ by the speaker.
Three question types:

    fact        the current value of an entity's attribute   ("... now?")      useful: its latest statement
    temporal    the value stated in one dated session         ("... on 3 May")  useful: that session's statement
    preference  a speaker's own stated preference             ("What ... does Ben enjoy?")  useful: that statement

Which utterance answers each question is known by construction (`useful`: utterance ids). A question never contains
its answer. A generator that cannot deliver the requested counts raises.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta

from paperdag.dialogue.registers import REGISTERS, Register, name_pool

QUESTION_TYPES = ("fact", "preference", "temporal")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


@dataclass(frozen=True)
class DialogueSpec:
    register: str  # "chat" (two people) or "meeting" (a team)
    dialogues: int  # independent dialogues (each is one retrieval haystack)
    sessions: int  # dated sessions per dialogue
    utterances: int  # utterances per session
    entities: int  # entities per dialogue; each is the topic of >= 2 sessions
    statements: tuple[int, int]  # [fewest, most] attribute statements per session
    questions: dict[str, int]  # per dialogue and question type (fact, preference, temporal)
    pronoun_rate: float = 0.5  # share of statements that refer to the entity by pronoun only
    start: date = date(2023, 1, 9)  # first session's date
    gap_days: tuple[int, int] = (1, 9)  # days between consecutive sessions, [fewest, most]


def date_words(d: date) -> str:
    """14 March 2023: the form questions use and `paperdag.methods.assomem` parses."""
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def _check(spec: DialogueSpec, reg: Register) -> None:
    if spec.register not in REGISTERS:
        raise ValueError(f"dialogue register {spec.register!r}: use one of {', '.join(REGISTERS)}")
    if set(spec.questions) != set(QUESTION_TYPES):
        raise ValueError(f"dialogue questions: give a count for each of {QUESTION_TYPES}; got {sorted(spec.questions)}")
    if spec.sessions - len(reg.preferences) < 2 * spec.entities:
        raise ValueError(f"dialogue sessions ({spec.sessions}) < 2 x entities ({spec.entities}) + one per preference "
                         f"category ({len(reg.preferences)} in {reg.name!r}): every entity must be discussed in at least "
                         "two sessions")
    lo, hi = spec.statements
    if not 1 <= lo <= hi or spec.utterances < 1 + max(hi, reg.speakers):
        raise ValueError(f"dialogue statements {spec.statements}: need 1 <= fewest <= most, and utterances per session "
                         f"({spec.utterances}) >= 1 + max(most, speakers = {reg.speakers}) (an opener, then the statements)")
    if spec.gap_days[0] < 1 or spec.gap_days[0] > spec.gap_days[1]:
        raise ValueError(f"dialogue gap_days {spec.gap_days}: need 1 <= fewest <= most (one session per date)")


def _entities(reg: Register, n: int, speakers: list[str], rng: random.Random) -> list[tuple[str, str, str]]:
    """n distinct (kind, name, full name), kinds as evenly spread as the draw allows."""
    kinds = sorted(reg.kinds)
    out, used = [], set(speakers)
    for i in range(n):
        kind = kinds[i % len(kinds)] if i < len(kinds) else rng.choice(kinds)
        pool = [x for x in name_pool(reg.kinds[kind].names) if x not in used]
        if not pool:
            raise ValueError(f"dialogue register {reg.name!r}: the {reg.kinds[kind].names} name pool is exhausted "
                             f"after {i} entities; ask for fewer entities per dialogue")
        name = rng.choice(pool)
        used.add(name)
        out.append((kind, name, reg.kinds[kind].pattern.format(n=name)))
    return out


def _dialogue(spec: DialogueSpec, reg: Register, d: int, rng: random.Random, first_uid: int) -> tuple[list[dict], list[dict]]:
    speakers = rng.sample(name_pool("people"), reg.speakers)
    ents = _entities(reg, spec.entities, speakers, rng)
    categories = sorted(reg.preferences)
    # each entity is the topic of >= 2 sessions; each preference category of one, where every speaker states theirs
    topics: list[tuple[str, int | str]] = [("entity", i % len(ents)) for i in range(spec.sessions - len(categories))]
    topics += [("preference", c) for c in categories]
    rng.shuffle(topics)
    dates, day = [], spec.start + timedelta(days=rng.randint(0, 60))
    for _ in range(spec.sessions):
        dates.append(day)
        day += timedelta(days=rng.randint(*spec.gap_days))

    rows: list[dict] = []
    current: dict[tuple[int, str], str] = {}
    history: dict[tuple[int, str], list[tuple[int, int, str]]] = {}  # (entity, attribute) -> [(session, uid, value)]
    pref_uid: dict[tuple[str, str], tuple[int, str]] = {}
    for s, (what, topic) in enumerate(topics):
        slots: list[dict] = []
        if what == "preference":
            c, pref = str(topic), reg.preferences[str(topic)]
            fields, full, k = {"T": pref.topic}, pref.topic, None
            for speaker, v in zip(speakers, rng.sample(pref.values, len(speakers)), strict=True):
                slots.append({"kind": "preference", "attribute": c, "value": v, "speaker": speaker,
                              "line": pref.state.format(v=v)})
            fillers = [("chat", reg.topic_chat)]
            opener = rng.choice(reg.topic_openers).format(**fields)
        else:
            e = int(topic)
            kind, name, full = ents[e]
            k = reg.kinds[kind]
            fields = {"E": full, "n": name, "P": k.pronoun}
            for a in rng.sample(sorted(k.attributes), min(len(k.attributes), rng.randint(*spec.statements))):
                at = k.attributes[a]
                values = [v for v in (at.values or name_pool(at.pool)) if v != current.get((e, a)) and v not in speakers]
                v = rng.choice(values)
                current[(e, a)] = v
                pronoun = rng.random() < spec.pronoun_rate
                slots.append({"kind": "fact", "attribute": a, "value": v, "entity_index": e,
                              "line": (at.state_pronoun if pronoun else at.state).format(v=v, **fields)})
            fillers = [("chat", reg.chat), ("tease", None)]
            opener = rng.choice(reg.openers).format(**fields)
        while len(slots) < spec.utterances - 1:
            r = rng.random()
            if r < 0.45 or (r < 0.75 and k is None):
                slots.append({"kind": "chat", "line": rng.choice(fillers[0][1]).format(**fields)})
            elif r < 0.75 and k is not None:
                a = rng.choice(sorted(k.attributes))
                slots.append({"kind": "tease", "attribute": a, "line": k.attributes[a].tease.format(**fields)})
            else:
                slots.append({"kind": "small_talk", "line": rng.choice(reg.small_talk)})
        rng.shuffle(slots)
        slots.insert(0, {"kind": "opener", "line": opener})
        for t, slot in enumerate(slots):
            uid = first_uid + len(rows)
            speaker = slot.get("speaker") or speakers[(s + t) % len(speakers)]
            line = slot["line"]
            rows.append({"uid": uid, "dialogue": d, "session": s, "date": dates[s].isoformat(), "turn": t,
                         "speaker": speaker, "text": f"{speaker}: {line[:1].upper()}{line[1:]}", "kind": slot["kind"],
                         "entity": "" if slot["kind"] == "small_talk" else full,
                         "attribute": slot.get("attribute", ""), "value": slot.get("value", "")})
            if slot["kind"] == "fact":
                history.setdefault((slot["entity_index"], slot["attribute"]), []).append((s, uid, slot["value"]))
            elif slot["kind"] == "preference":
                pref_uid[(speaker, slot["attribute"])] = (uid, slot["value"])
    return rows, _questions(spec, reg, d, ents, history, pref_uid, dates, rng)


def _questions(spec: DialogueSpec, reg: Register, d: int, ents: list[tuple[str, str, str]],
               history: dict[tuple[int, str], list[tuple[int, int, str]]], pref_uid: dict[tuple[str, str], tuple[int, str]],
               dates: list[date], rng: random.Random) -> list[dict]:
    def fields(e: int) -> dict[str, str]:
        kind, name, full = ents[e]
        return {"E": full, "n": name, "P": reg.kinds[kind].pronoun}

    pools: dict[str, list] = {
        "fact": sorted(history),
        "temporal": sorted((e, a, i) for (e, a), h in history.items() for i in range(len(h) - 1)),
        "preference": sorted(pref_uid),
    }
    out: list[dict] = []
    for qtype in QUESTION_TYPES:
        want, pool = spec.questions[qtype], pools[qtype]
        if want > len(pool):
            raise ValueError(f"dialogue {d} ({reg.name}): {want} {qtype} questions asked, only {len(pool)} distinct ones "
                             "exist; raise sessions or statements per session, or ask fewer")
        for item in rng.sample(pool, want):
            if qtype == "fact":
                e, a = item
                _, uid, value = history[(e, a)][-1]
                attr, asked = reg.kinds[ents[e][0]].attributes[a], "latest"
                text = attr.ask_now.format(**fields(e))
            elif qtype == "temporal":
                e, a, i = item
                s, uid, value = history[(e, a)][i]
                attr, asked = reg.kinds[ents[e][0]].attributes[a], dates[s].isoformat()
                text = attr.ask_then.format(D=date_words(dates[s]), **fields(e))
            else:
                speaker, c = item
                (uid, value), asked = pref_uid[item], ""
                text = reg.preferences[c].ask.format(S=speaker)
            out.append({"dialogue": d, "qtype": qtype, "text": text, "answer": value, "useful": [uid], "asked_date": asked})
    return out


def generate(spec: DialogueSpec, rng: random.Random) -> tuple[list[dict], list[dict]]:
    """(utterances, questions) of `spec.dialogues` dialogues. Utterance rows: uid (0.., unique in the set), dialogue,
    session, date (ISO), turn, speaker, text ("Speaker: line"), kind (opener / fact / preference / chat / tease /
    small_talk), entity, attribute, value. Question rows: qid, dialogue, qtype, text, answer, useful (uids),
    asked_date (ISO date of a temporal question's session, "latest" for fact, "" for preference; for tests, the
    question's text is what a retriever reads)."""
    reg = REGISTERS.get(spec.register)
    if reg is None:
        raise ValueError(f"dialogue register {spec.register!r}: use one of {', '.join(REGISTERS)}")
    _check(spec, reg)
    utterances: list[dict] = []
    questions: list[dict] = []
    for d in range(spec.dialogues):
        rows, qs = _dialogue(spec, reg, d, rng, len(utterances))
        utterances += rows
        questions += qs
    for i, q in enumerate(questions):
        q["qid"] = i
    expected = spec.dialogues * spec.sessions * spec.utterances
    if len(utterances) != expected or len(questions) != spec.dialogues * sum(spec.questions.values()):
        raise AssertionError(f"dialogue generator delivered {len(utterances)} utterances / {len(questions)} questions, "
                             f"expected {expected} / {spec.dialogues * sum(spec.questions.values())}")
    return utterances, questions
