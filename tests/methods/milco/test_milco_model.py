"""The MILCO model: pivot vector, LexEcho weights and the two-view score on tiny examples; sparse rows; save/load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from paperdag.lm import tiny_bert_config, tiny_encoder, tiny_masked_lm, train_wordpiece
from paperdag.methods.milco import Milco, SparseRep, echo_match, group_scores, score, to_sparse_matrix


def test_score_sums_pivot_dot_and_echo_matches_by_hand() -> None:
    """s = <t_q, t_d> + sum_ij w_i^q w_j^d [id_i == id_j]: q ids (7, 9), d ids (9, 9, 5) -> pivot 1*2 + echo 0.5*(1 + 2) = 3.5."""
    q = SparseRep(pivot=torch.tensor([[1.0, 0.0, 3.0]]), ids=torch.tensor([[7, 9]]), echo=torch.tensor([[2.0, 0.5]]))
    d = SparseRep(pivot=torch.tensor([[2.0, 5.0, 0.0]]), ids=torch.tensor([[9, 9, 5]]), echo=torch.tensor([[1.0, 2.0, 4.0]]))
    assert score(q, d).item() == pytest.approx(3.5)
    assert echo_match(q.ids, q.echo, d.ids, d.echo).item() == pytest.approx(1.5)
    no_echo = SparseRep(q.pivot, q.ids, None)
    assert score(no_echo, d).item() == pytest.approx(2.0)


def test_sparse_rows_reproduce_the_score_and_group_scores_match_all_pairs() -> None:
    """Row_q . row_d of to_sparse_matrix (repeated ids summed) equals score(q, d); group_scores picks each query's own group."""
    g = torch.Generator().manual_seed(0)
    q = SparseRep(torch.relu(torch.randn(2, 6, generator=g)), torch.randint(5, 9, (2, 4), generator=g), torch.rand(2, 4, generator=g))
    d = SparseRep(torch.relu(torch.randn(6, 6, generator=g)), torch.randint(5, 9, (6, 5), generator=g), torch.rand(6, 5, generator=g))
    full = score(q, d)  # (2, 6)
    rows_q, rows_d = to_sparse_matrix(q, 6, 10), to_sparse_matrix(d, 6, 10)
    assert np.allclose((rows_q @ rows_d.T).toarray(), full.numpy(), atol=1e-5)
    grouped = group_scores(q, d, group=3)
    assert torch.allclose(grouped, torch.stack([full[0, :3], full[1, 3:]]), atol=1e-5)


@pytest.fixture(scope="module")
def tiny() -> tuple[Milco, object]:
    texts = ["the red boat sails", "ο κόκκινος βάρκα", "the blue boat", "κόκκινος ήλιος"] * 4
    src_tok = train_wordpiece(texts, 120)
    en_tok = train_wordpiece(texts[::2], 60)
    torch.manual_seed(0)
    teacher = tiny_masked_lm(tiny_bert_config(len(en_tok), 16, 1, 2, 32))
    encoder = tiny_encoder(tiny_bert_config(len(src_tok), 24, 1, 2, 32))
    return Milco.from_teacher(encoder, src_tok, teacher, connector=True, echo=True).eval(), src_tok


def test_pivot_is_log1p_relu_max_and_echo_skips_special_tokens(tiny: tuple[Milco, object]) -> None:
    """t = log(1 + relu(max_T L * mask)); w is 0 on [CLS], [SEP] and padding, and scaled by `scale`."""
    model, tok = tiny
    batch = tok(["the red boat", "κόκκινος"], padding=True, return_tensors="pt")
    with torch.no_grad():
        rep = model(batch["input_ids"], batch["attention_mask"])
        logits, _ = model.lexical_logits(batch["input_ids"], batch["attention_mask"])
    assert torch.allclose(rep.pivot, torch.log1p(torch.relu(logits.max(dim=1).values)))
    special = torch.isin(batch["input_ids"], torch.tensor(tok.all_special_ids))
    assert (rep.echo[special] == 0).all() and (rep.echo >= 0).all()
    with torch.no_grad():
        model.scale.fill_(2.0)
        doubled = model(batch["input_ids"], batch["attention_mask"]).echo
        model.scale.fill_(1.0)
    assert torch.allclose(doubled, 2 * rep.echo)


def test_milco_round_trips_through_save_pretrained(tiny: tuple[Milco, object], tmp_path: Path) -> None:
    """from_pretrained(save_pretrained(model)) gives identical pivot and echo weights; with_echo(False) drops LexEcho."""
    model, tok = tiny
    model.save_pretrained(tmp_path)
    again = Milco.from_pretrained(tmp_path).eval()
    batch = tok(["the red boat", "κόκκινος βάρκα"], padding=True, return_tensors="pt")
    with torch.no_grad():
        a, b = model(**batch), again(**batch)
    assert torch.allclose(a.pivot, b.pivot, atol=1e-6) and torch.allclose(a.echo, b.echo, atol=1e-6)
    assert model.with_echo(False)(**batch).echo is None


def test_no_connector_zero_pads_a_narrower_encoder_and_refuses_a_wider_one(tiny: tuple[Milco, object], tmp_path: Path) -> None:
    """Without the connector the head reads H directly, zero-padded to the teacher's width (24 -> 40 here, nothing
    learned); an encoder wider than the teacher is an error naming both sizes. The saved config names no path."""
    model, tok = tiny
    wide = tiny_masked_lm(tiny_bert_config(40, 40, 1, 2, 32))
    padded = Milco.from_teacher(model.encoder, tok, wide, connector=False, echo=True)
    h = torch.randn(2, 3, 24)
    z = padded.connector(h)
    assert z.shape == (2, 3, 40) and torch.equal(z[..., :24], h) and not z[..., 24:].any()
    assert not list(padded.connector.parameters())
    padded.save_pretrained(tmp_path / "m")
    assert "_name_or_path" not in (tmp_path / "m" / "milco_config.json").read_text()
    assert isinstance(Milco.from_pretrained(tmp_path / "m").connector, type(padded.connector))
    narrow = tiny_masked_lm(tiny_bert_config(40, 16, 1, 2, 32))
    with pytest.raises(ValueError, match=r"hidden 16.*hidden size 24"):
        Milco.from_teacher(model.encoder, tok, narrow, connector=False, echo=True)
