"""The synthetic procedure world: deterministic string procedures (replace / delete / double a letter, put two letters
in front / at the end), each known by an invented name and a one-line description that begins with it; queries in two
regimes: paraphrased (the default: the query implies the procedure by a paraphrase of its rule, never its name, so a
retriever must match meaning) and named (the query names the procedure, as in the first version: retrieval by name is
near perfect); and compositional queries answered by 2-3 tool calls in a small JSON format, each step worded in the
same two regimes (paraphrased by default)."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

import polars as pl

from paperdag.lm import invented_names

LETTERS = "abcdefghijklmnopqrstuvwxyz"
RULES = {  # family -> description of what the procedure does with its letters a, b
    "replace": "replace every {a} with {b}",
    "remove": "delete every {a}",
    "double": "write every {a} twice",
    "prefix": "put {a} {b} in front",
    "suffix": "add {a} {b} at the end",
}
QUERY_TEMPLATES = ("{name}: {x}", "please {name} {x}", "apply {name} to {x}", "run {name} on {x}", "what does {name} make of {x}",
                   "use {name} for {x}")  # the named regime; the input last: the tiny backbone copies it from a fixed place
PARAPHRASES = {  # family -> wordings that imply the rule without the description's words or the procedure's name
    "replace": ("turn each {a} into {b}", "swap {a} for {b}", "change {a} to {b}", "make every {a} a {b}"),
    "remove": ("drop each {a}", "strip out {a}", "take away the {a}", "leave out every {a}"),
    "double": ("repeat each {a}", "say {a} two times", "make each {a} double", "copy every {a} once more"),
    "prefix": ("start with {a} {b}", "begin it with {a} {b}", "lead with {a} {b}", "open with {a} {b}"),
    "suffix": ("finish with {a} {b}", "end it with {a} {b}", "close with {a} {b}", "tack on {a} {b}"),
}
PARAPHRASE_FRAMES = ("{rule}: {x}", "please {rule} in {x}", "{rule} , input {x}")  # the input last, as above
CALL_JOINERS = (" , then ", " and then ", " ; ")
SPLITS = ("backbone", "memory", "tool")  # pretraining procedures, procedures added as memory, tools of the calls track


@dataclass(frozen=True)
class Procedure:
    id: int
    name: str
    family: str
    a: str
    b: str
    split: str
    round: int  # memory / tool procedures: the round (1, 2, ...) that adds them; backbone procedures: 0

    @property
    def description(self) -> str:
        return f"{self.name} means {RULES[self.family].format(a=self.a, b=self.b)}"

    def __call__(self, letters: list[str]) -> list[str]:
        a, b = self.a, self.b
        if self.family == "replace":
            return [b if c == a else c for c in letters]
        if self.family == "remove":
            return [c for c in letters if c != a]
        if self.family == "double":
            return [d for c in letters for d in ([c, c] if c == a else [c])]
        if self.family == "prefix":
            return [a, b, *letters]
        if self.family == "suffix":
            return [*letters, a, b]
        raise ValueError(f"unknown procedure family {self.family!r}; choose from {sorted(RULES)}")


def spaced(letters: list[str]) -> str:
    """Letters as text, one token each for the byte-level BPE: "k d x"."""
    return " ".join(letters)


def response(answer: str) -> str:
    """The response text after the memory token / description line: a leading space, so every letter is the same
    token (" k") in the query and in the response."""
    return " " + answer


def make_procedures(counts: dict[str, int], round_size: dict[str, int], rng: random.Random, alphabet: str = LETTERS) -> list[Procedure]:
    """counts[split] distinct procedures per split, families drawn evenly (a family whose letter pairs ran out is
    skipped), invented names all distinct; memory and tool procedures numbered into rounds of round_size[split]."""
    pool = {"replace": [(a, b) for a in alphabet for b in alphabet if a != b], "remove": [(a, "") for a in alphabet],
            "double": [(a, "") for a in alphabet], "prefix": [(a, b) for a in alphabet for b in alphabet],
            "suffix": [(a, b) for a in alphabet for b in alphabet]}
    for options in pool.values():
        rng.shuffle(options)
    total = sum(counts.values())
    if total > sum(map(len, pool.values())):
        raise ValueError(f"tokmem synthesize: {total} procedures asked for, only {sum(map(len, pool.values()))} distinct rules exist")
    names = invented_names(total, rng)
    out: list[Procedure] = []
    for split in SPLITS:
        for i in range(counts.get(split, 0)):
            family = rng.choice(sorted(f for f, options in pool.items() if options))
            a, b = pool[family].pop()
            rnd = i // round_size[split] + 1 if split in round_size else 0
            out.append(Procedure(len(out), names[len(out)], family, a, b, split, rnd))
    return out


def random_input(proc: Procedure, length: tuple[int, int], rng: random.Random, alphabet: str = LETTERS) -> list[str]:
    """Random letters (at least 2); for the letter-keyed families one or two of them are the key letter (never all)."""
    n = rng.randint(*length)
    if n < 2:
        raise ValueError(f"tokmem synthesize.input_length must be at least 2 letters; got {length}")
    letters = [rng.choice(alphabet) for _ in range(n)]
    if proc.family in ("replace", "remove", "double"):
        letters = [c if c != proc.a else rng.choice(alphabet.replace(proc.a, "")) for c in letters]
        for pos in rng.sample(range(n), rng.randint(1, min(2, n - 1))):
            letters[pos] = proc.a
    return letters


def query(name: str, x: str, rng: random.Random) -> str:
    """The named regime: the query carries the procedure's invented name verbatim."""
    return rng.choice(QUERY_TEMPLATES).format(name=name, x=x)


def paraphrased_query(proc: Procedure, x: str, rng: random.Random) -> str:
    """The paraphrased regime: a wording of the procedure's rule (its family's paraphrases, its letters), no name."""
    rule = rng.choice(PARAPHRASES[proc.family]).format(a=proc.a, b=proc.b)
    return rng.choice(PARAPHRASE_FRAMES).format(rule=rule, x=x)


def atomic_examples(procs: list[Procedure], per_split: dict[str, int], length: tuple[int, int], rng: random.Random,
                    alphabet: str = LETTERS) -> list[dict]:
    """per_split["train"] / ["test"] queries per procedure, test inputs never seen in that procedure's training; each
    example in both regimes on the same input: `query` paraphrased, `query_named` naming the procedure."""
    rows = []
    for proc in procs:
        seen: set[str] = set()
        for split, n in per_split.items():
            made = 0
            while made < n:
                letters = random_input(proc, length, rng, alphabet)
                x = spaced(letters)
                if x in seen:
                    continue
                seen.add(x)
                made += 1
                rows.append({"track": "atomic", "split": split, "procedure": proc.id, "query": paraphrased_query(proc, x, rng),
                             "query_named": query(proc.name, x, rng), "answer": spaced(proc(letters)), "tools": [proc.id], "args": [x]})
    return rows


def call_text(arg: str) -> str:
    """The JSON call a tool's memory token is followed by."""
    return " " + json.dumps({"arg": arg})


def named_call_text(name: str, arg: str) -> str:
    """A call written out in text, the tool named inside it (the format of the calls track's RAG and fine-tuning
    baselines, which have no tool tokens): ' {"tool": "Bralimo", "arg": "c d"}'."""
    return " " + json.dumps({"tool": name, "arg": arg})


NAMED_CALL = re.compile(r'\{"tool":\s*"([^"]*)",\s*"arg":\s*"([^"]*)"\}')


def parse_named_calls(text: str) -> list[tuple[str, str]]:
    """The (tool name, argument) of every well-formed named call in a generation, in order."""
    return [(m.group(1), m.group(2)) for m in NAMED_CALL.finditer(text)]


def call_examples(tools: list[Procedure], n: int, split: str, length: tuple[int, int], rng: random.Random,
                  alphabet: str = LETTERS) -> list[dict]:
    """n compositional queries, each 2-3 distinct tools applied to their own arguments, answered by the chain of calls.
    Each step worded in both regimes on the same arguments: `query` paraphrases each tool's rule (no tool is named,
    as in the atomic track), `query_named` names each tool."""
    rows = []
    for _ in range(n):
        chosen = rng.sample(tools, rng.choice((2, 3)))
        args = [spaced([rng.choice(alphabet) for _ in range(rng.randint(*length))]) for _ in chosen]
        lead, joiner = rng.choice(("", "first ")), rng.choice(CALL_JOINERS)
        paraphrased = [paraphrased_query(t, x, rng) for t, x in zip(chosen, args, strict=True)]
        named = [f"{t.name} {x}" for t, x in zip(chosen, args, strict=True)]
        rows.append({"track": "calls", "split": split, "procedure": -1, "query": lead + joiner.join(paraphrased),
                     "query_named": lead + joiner.join(named),
                     "answer": json.dumps([{"tool": t.name, "arg": x} for t, x in zip(chosen, args, strict=True)]),
                     "tools": [t.id for t in chosen], "args": args})
    return rows


def procedures_table(procs: list[Procedure]) -> pl.DataFrame:
    return pl.DataFrame([{"id": p.id, "name": p.name, "family": p.family, "a": p.a, "b": p.b, "split": p.split,
                          "round": p.round, "description": p.description} for p in procs])


def procedures_from(table: pl.DataFrame) -> list[Procedure]:
    return [Procedure(r["id"], r["name"], r["family"], r["a"], r["b"], r["split"], r["round"]) for r in table.iter_rows(named=True)]


# Prompts. The memory token (or, for RAG / the backbone's reading format, the description line) sits between the query
# and the response, so a description and a memory token play the same role for the backbone.

def query_prompt(q: str) -> str:
    return f"{q}\n"


def described_prompt(q: str, description: str) -> str:
    return f"{q}\n{description}\n"


def make_world(counts: dict[str, int], round_size: dict[str, int], queries: dict[str, int], calls: dict[str, int],
               input_length: tuple[int, int], arg_length: tuple[int, int], rng: random.Random,
               alphabet: str = LETTERS) -> tuple[list[Procedure], pl.DataFrame]:
    """Procedures (counts per split, rounds of round_size) and examples: atomic queries per backbone and memory
    procedure (queries per split), compositional tool-call queries (calls: "backbone" for pretraining, "tool_train"
    and "tool_test" for the calls track); each example's `set` is its first tool's split."""
    procs = make_procedures(counts, round_size, rng, alphabet)
    by_split = {s: [q for q in procs if q.split == s] for s in SPLITS}
    rows = atomic_examples(by_split["backbone"] + by_split["memory"], queries, input_length, rng, alphabet)
    rows += call_examples(by_split["backbone"], calls["backbone"], "train", arg_length, rng, alphabet)
    if by_split["tool"]:
        rows += call_examples(by_split["tool"], calls["tool_train"], "train", arg_length, rng, alphabet)
        rows += call_examples(by_split["tool"], calls["tool_test"], "test", arg_length, rng, alphabet)
    split_of = {q.id: q.split for q in procs}
    examples = pl.DataFrame(rows).with_columns(
        pl.col("tools").map_elements(lambda t: split_of[t[0]], return_dtype=pl.String).alias("set"))
    return procs, examples
