"""The step formats: retrieved documents are out of the imitation loss, the decision and the answer in it; the
preference pairs are the path's decision against its opposite."""

from __future__ import annotations

from paperdag.lm.causal import IGNORE
from paperdag.lm.tokenizer import train_byte_bpe
from paperdag.methods.deeprag.policy import SPECIAL_TOKENS, Steps, collate_labelled, decision_pairs, labelled


def _steps() -> Steps:
    tok = train_byte_bpe(["Who is the mentor of Bralimo?", "The mentor of Bralimo is Kestra."] * 3, 300)
    tok.add_tokens(list(SPECIAL_TOKENS), special_tokens=True)
    return Steps(tok)


def test_loss_mask_excludes_retrieved_tokens() -> None:
    """A retrieve step: the query and the whole <doc> ... </doc> span are IGNORE; the decision token, the answer and
    eos carry themselves as labels. A parametric step has no document span."""
    steps = _steps()
    query, context, answer = "Who is the mentor of Bralimo?", "The mentor of Bralimo is Kestra.", "Kestra"
    ids, labels = labelled(steps.segments(query, "R", context, answer))
    q = steps.encode([query])[0]
    start, end = ids.index(steps.doc), ids.index(steps.end_doc)
    assert ids[len(q)] == steps.ret and labels[len(q)] == steps.ret
    assert all(label == IGNORE for label in labels[: len(q)])
    assert all(label == IGNORE for label in labels[start : end + 1])  # every retrieved token, both markers included
    assert ids[start + 1 : end] == steps.encode([context])[0]
    tail = steps.encode([" " + answer])[0] + [steps.eos]
    assert ids[end + 1 :] == tail and labels[end + 1 :] == tail
    assert sum(label != IGNORE for label in labels) == 1 + len(tail)
    ids_p, labels_p = labelled(steps.segments(query, "P", "", answer))
    assert steps.doc not in ids_p and ids_p[len(q)] == steps.par and labels_p[len(q) :] == [steps.par, *tail]
    batch = collate_labelled([(ids, labels), (ids_p, labels_p)], steps.pad)
    assert batch["labels"][1, len(ids_p) :].eq(IGNORE).all() and batch["labels"][0].tolist() == labels


def test_decision_pairs() -> None:
    """chosen = the path's decision token after q_t, rejected = the opposite one; same prompt."""
    steps = _steps()
    chosen, rejected = decision_pairs(steps, ["Who is the mentor of Bralimo?"] * 2, ["P", "R"])
    assert [c[1] for c in chosen] == [[steps.par], [steps.ret]] and [r[1] for r in rejected] == [[steps.ret], [steps.par]]
    assert chosen[0][0] == rejected[0][0] == steps.encode(["Who is the mentor of Bralimo?"])[0]


def test_rehearsal_rows_teach_the_answer_not_the_decision() -> None:
    """One row per memorised fact, `q_t <par> a_t <eos>`: the loss on the answer and eos only; <par> is input, so
    rehearsing the memorised facts (some of them test people's) teaches no retrieval decision."""
    from paperdag.methods.deeprag.training import rehearsal_rows
    from paperdag.methods.deeprag.world import subquery

    steps = _steps()
    facts = {("Bralimo", "mentor"): "Kestra", ("Kestra", "mentor"): "Bralimo"}
    rows = rehearsal_rows(steps, facts, {("Bralimo", "mentor")})
    assert len(rows) == 1
    ids, labels = rows[0]
    q = steps.encode([subquery("mentor", "Bralimo")])[0]
    tail = steps.encode([" Kestra"])[0] + [steps.eos]
    assert ids == [*q, steps.par, *tail]
    assert labels == [IGNORE] * (len(q) + 1) + tail
    assert steps.par not in [label for label in labels if label != IGNORE] and steps.ret not in ids
