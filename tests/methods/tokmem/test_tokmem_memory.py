"""TokMem's memory bank on a tiny random Llama: only the memory rows change during memory training (the backbone is
bit-identical), the rows are tied input / output rows, the new rows are renormalised as the paper says, routing is read
from the emitted token, and the loss covers the memory token and the response only."""

from __future__ import annotations

import torch

from paperdag.lm import IGNORE, TrainConfig, collate, generate, tiny_causal_lm, tiny_llama_config
from paperdag.methods.tokmem import MemoryBank, fit_bank, routed, split_at_memory


def tiny_model(seed: int = 0):
    torch.manual_seed(seed)
    return tiny_causal_lm(tiny_llama_config(40, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=32)).eval()


def test_memory_training_changes_only_the_new_rows() -> None:
    """Two rounds of training: every backbone tensor is bit-identical afterwards, round-1 rows are frozen during
    round 2, and the round-2 rows moved."""
    model = tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    bank = MemoryBank(model)
    fallback = model.get_input_embeddings().weight[30:].detach()
    config = TrainConfig(steps=5, lr=0.05, weight_decay=0.0)
    bank.add(2, 1.0, seed=1)
    fit_bank(bank, [([5, 6, 7], [40, 8, 2]), ([9, 6], [41, 3, 2])], config, 2, 0, True, fallback, "r1", progress=False)
    round1 = bank.rows().detach().clone()
    start2 = bank.add(1, bank.inactive_norm(fallback), seed=2)
    assert list(start2) == [42]
    init2 = bank.new.detach().clone()
    fit_bank(bank, [([5, 7], [42, 9, 2])], config, 2, 0, True, fallback, "r2", progress=False)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(bank.rows()[:2], round1)
    assert not torch.allclose(bank.new.detach(), init2)


def test_new_rows_are_renormalised_to_the_mean_norm_of_the_inactive_rows() -> None:
    """m_i <- m_i * mean_inactive ||m|| / ||m_i||: inactive rows of norms 3 and 5 (mean 4) put every new row at
    norm 4, direction kept; in the first round the fallback rows (the backbone's) give the reference."""
    bank = MemoryBank(tiny_model())
    bank.new = torch.nn.Parameter(torch.tensor([[3.0] + [0.0] * 15, [0.0, 5.0] + [0.0] * 14]))
    assert bank.inactive_norm(torch.tensor([[2.0] + [0.0] * 15])) == 2.0  # no inactive rows yet: the fallback's
    bank.add(2, 1.0, seed=0)
    with torch.no_grad():
        bank.new.copy_(torch.tensor([[1.0, 1.0] + [0.0] * 14, [0.0, 0.0, 0.5] + [0.0] * 13]))
    norm = bank.inactive_norm(torch.zeros(1, 16))
    assert norm == 4.0
    bank.renormalise(norm)
    expected = torch.tensor([[4 / 2**0.5, 4 / 2**0.5] + [0.0] * 14, [0.0, 0.0, 4.0] + [0.0] * 13])
    torch.testing.assert_close(bank.new.detach(), expected)


def test_loss_covers_memory_token_and_response_with_tied_rows() -> None:
    """The bank's loss equals a hand-built cross-entropy: states of the input embeddings (memory token embedded with
    its row), logits h . [E; M], targets the memory token and the response (the instruction ignored)."""
    model = tiny_model()
    bank = MemoryBank(model)
    bank.add(1, 1.0, seed=3)
    batch = collate([([4, 5, 6], [40, 7, 2])], 0)
    assert batch["labels"].tolist() == [[IGNORE] * 3 + [40, 7, 2]]
    table = torch.cat([model.get_input_embeddings().weight, bank.rows()])
    states = model.model(inputs_embeds=table[batch["input_ids"]]).last_hidden_state[0]  # (T, C)
    logits = states[2:5] @ table.T  # positions predicting m, 7, eos
    expected = torch.nn.functional.cross_entropy(logits, torch.tensor([40, 7, 2]))
    torch.testing.assert_close(bank.loss(batch), expected)


def test_routing_is_the_memory_token_the_model_emits() -> None:
    """A memory row set to a large multiple of the prompt's last hidden state wins the argmax, so generation emits it
    first, and routed() reads that token's memory index; a plain first token routes nowhere (-1)."""
    model = tiny_model()
    bank = MemoryBank(model)
    bank.add(3, 1.0, seed=0)
    prompt = [4, 9, 11]
    with torch.no_grad():
        h = model.model(input_ids=torch.tensor([prompt])).last_hidden_state[0, -1]
        bank.new[1] = 50 * h / h.norm()
    out = generate(bank.materialise(), [[prompt]], 0, 2, max_new_tokens=3).tokens[0]
    assert out[0] == 41 and routed(out, 40) == 1
    assert routed([7, 41], 40) == -1 and routed([], 40) == -1
    assert split_at_memory([3, 41, 7, 8, 40, 9], 40) == [(-1, [3]), (1, [7, 8]), (0, [9])]
    assert split_at_memory([41, 7], 40) == [(1, [7])]


def test_prompt_tuning_rows_are_inputs_only() -> None:
    """With emit=False the loss's logits span the backbone vocabulary only, so a soft-prompt row is never a target."""
    model = tiny_model()
    bank = MemoryBank(model, emit=False)
    bank.add(2, 1.0, seed=0)
    batch = collate([([40, 41, 5], [7, 2])], 0)
    states = model.model(inputs_embeds=torch.cat([model.get_input_embeddings().weight, bank.rows()])[batch["input_ids"]]).last_hidden_state[0]
    logits = states[2:4] @ model.get_input_embeddings().weight.T
    torch.testing.assert_close(bank.loss(batch), torch.nn.functional.cross_entropy(logits, torch.tensor([7, 2])))


def untied_model(seed: int = 0):
    from transformers import LlamaForCausalLM

    config = tiny_llama_config(40, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=32)
    config.tie_word_embeddings = False
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # an lm_head unlike the input embedding, as a real untied checkpoint has
        model.lm_head.weight.normal_(0.0, 1.0)
    return model


def test_an_untied_backbone_keeps_its_own_output_rows() -> None:
    """On an untied checkpoint (lm_head != input embedding) the materialised model gives a prompt without memory
    tokens the backbone's own logits over its vocabulary, bit for bit, and the bank's loss scores with [W; M]."""
    model = untied_model()
    assert model.lm_head.weight.data_ptr() != model.get_input_embeddings().weight.data_ptr()
    bank = MemoryBank(model)
    bank.add(2, 1.0, seed=4)
    prompt = torch.tensor([[4, 9, 11, 3]])
    with torch.no_grad():
        before = model(input_ids=prompt).logits[0]  # (T, V)
        after = bank.materialise()(input_ids=prompt).logits[0]  # (T, V + N)
    assert after.shape[-1] == 42
    assert torch.equal(after[:, :40], before)
    batch = collate([([4, 5, 6], [40, 7, 2])], 0)
    inputs = torch.cat([model.get_input_embeddings().weight, bank.rows()])
    states = model.model(inputs_embeds=inputs[batch["input_ids"]]).last_hidden_state[0]
    logits = states[2:5] @ torch.cat([model.lm_head.weight, bank.rows()]).T
    torch.testing.assert_close(bank.loss(batch), torch.nn.functional.cross_entropy(logits, torch.tensor([40, 7, 2])))


def test_masked_backbone_rows_are_never_predicted() -> None:
    """masked ids (the backbone's own procedure tokens) are out of the softmax: the loss equals the cross-entropy
    with their logits at -inf, and the generation rule never picks one even when it has the largest logit."""
    model = tiny_model()
    bank = MemoryBank(model, masked=[30, 31])
    bank.add(1, 1.0, seed=3)
    batch = collate([([4, 5, 6], [40, 7, 2])], 0)
    table = torch.cat([model.get_input_embeddings().weight, bank.rows()])
    logits = model.model(inputs_embeds=table[batch["input_ids"]]).last_hidden_state[0][2:5] @ table.T
    logits[:, [30, 31]] = float("-inf")
    torch.testing.assert_close(bank.loss(batch), torch.nn.functional.cross_entropy(logits, torch.tensor([40, 7, 2])))
    step = torch.zeros(2, 41)
    step[:, 31] = 9.0
    step[:, 12] = 1.0
    assert bank.rule([step]).argmax(-1).tolist() == [12, 12]
