"""The MILCO model: pivot vector, LexEcho weights and the two-view score on tiny examples; sparse rows; save/load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from paperdag.lm import tiny_bert_config, tiny_encoder, tiny_masked_lm, train_wordpiece
from paperdag.methods.milco import Milco, SparseRep, echo_match, group_scores, masked_max, score, soft_max_pool, to_sparse_matrix


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


def test_pivot_is_log1p_relu_max_over_words_and_special_tokens_carry_nothing(tiny: tuple[Milco, object]) -> None:
    """t = log(1 + relu(max over the text's own tokens of L)); L and w are 0 on [CLS], [SEP] and padding, w is
    scaled by `scale`, and max_logits (stage 1's m) is the max over the words only."""
    model, tok = tiny
    batch = tok(["the red boat", "κόκκινος"], padding=True, return_tensors="pt")
    special = torch.isin(batch["input_ids"], torch.tensor(tok.all_special_ids))
    with torch.no_grad():
        rep = model(batch["input_ids"], batch["attention_mask"])
        logits, _, words = model.lexical_logits(batch["input_ids"], batch["attention_mask"])
        m = model.max_logits(batch["input_ids"], batch["attention_mask"])
    assert torch.equal(words.bool(), batch["attention_mask"].bool() & ~special)
    assert (logits[special] == 0).all() and (rep.echo[special] == 0).all() and (rep.echo >= 0).all()
    by_hand = torch.stack([logits[b, words[b].bool()].max(dim=0).values for b in range(2)])
    assert torch.allclose(m, by_hand) and torch.allclose(rep.pivot, torch.log1p(torch.relu(by_hand)))
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


def test_soft_max_pool_runs_from_the_max_to_the_mean_and_ignores_padding() -> None:
    """tau -> 0 gives the max over the real tokens, a large tau their mean; padded positions never count; a row with
    no real token pools to 0 (masked_max too)."""
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 5, 4, generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    logits[0, 3:] = 100.0  # padding that would win any max
    real = logits[:2].clone()
    assert torch.allclose(soft_max_pool(logits, mask, 1e-3)[:2], torch.stack([real[0, :3].max(0).values, real[1].max(0).values]), atol=1e-2)
    assert torch.allclose(soft_max_pool(logits, mask, 1e3)[:2], torch.stack([real[0, :3].mean(0), real[1].mean(0)]), atol=5e-3)
    assert torch.equal(soft_max_pool(logits, mask, 0.0), masked_max(logits, mask))
    assert (soft_max_pool(logits, mask, 3.0)[2] == 0).all() and (masked_max(logits, mask)[2] == 0).all()
    assert (soft_max_pool(logits, mask, 3.0)[:2] <= masked_max(logits, mask)[:2] + 1e-6).all()  # never above the max


def test_soft_max_pool_sends_gradient_to_every_word_where_max_sends_it_to_one() -> None:
    """The point of stage 1's annealed pooling: d pooled / d L is softmax(L / tau) over the words (all > 0), where the
    max's gradient is one-hot on the argmax; padding gets none, and nothing is NaN for an empty row."""
    logits = torch.tensor([[[1.0], [2.0], [0.5], [9.0]], [[0.0], [0.0], [0.0], [0.0]]], requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0]])
    soft_max_pool(logits, mask, 1.0).sum().backward()
    grad = logits.grad[..., 0]
    assert torch.allclose(grad[0, :3], torch.softmax(torch.tensor([1.0, 2.0, 0.5]), 0)) and grad[0, 3] == 0
    assert torch.isfinite(logits.grad).all() and (grad[1] == 0).all()
    logits.grad = None
    masked_max(logits, mask).sum().backward()
    assert torch.equal(logits.grad[0, :, 0], torch.tensor([0.0, 1.0, 0.0, 0.0]))


def test_learning_check_names_every_model_below_the_minimum_and_passes_at_it() -> None:
    """check_learned raises naming each checked model under the minimum (not the unchecked ablation) and the
    params.yaml key, and passes a model exactly at it."""
    from paperdag.methods.milco.training import check_learned

    scores = {"milco": 0.04, "no_echo": 0.01, "no_align": 0.0}
    with pytest.raises(ValueError, match=r"milco 0\.040, no_echo 0\.010 < milco\.train\.min_train_ndcg10 = 0\.05") as err:
        check_learned(scores, ["milco", "no_echo"], 0.05, "milco train 0", "milco.train.min_train_ndcg10")
    assert "no_align" not in str(err.value)
    check_learned(scores, ["milco"], 0.04, "milco train 0", "milco.train.min_train_ndcg10")


def test_soft_pooling_steps_beyond_stage_1_are_refused_on_their_key() -> None:
    """milco.train.align_soft_steps > align_steps would end stage 1 on the soft pool while the model is used with
    the max: the params are refused, naming the key; at align_steps they load."""
    import yaml

    from paperdag.engine import Item, SpecError
    from paperdag.engine.params import build, collect
    from paperdag.methods.milco.config import TrainParams

    params = yaml.safe_load((Path(__file__).parents[3] / "params.yaml").read_text())
    train = params["milco"]["train"]
    train["align_soft_steps"] = train["align_steps"] + 1
    with pytest.raises(SpecError, match=r"milco\.train\.align_soft_steps.*> align_steps"):
        build(TrainParams, collect(params, ("milco.model", "milco.train")), seed=1, stage="milco:train", item=Item({"replicate": 0}))
    train["align_soft_steps"] = train["align_steps"]
    assert build(TrainParams, collect(params, ("milco.model", "milco.train")), seed=1, stage="milco:train",
                 item=Item({"replicate": 0})).align_soft_steps == train["align_steps"]
