"""The packaged MiniLM encoder loads offline and embeds text so that similar meanings are close."""

from __future__ import annotations

import numpy as np
import pytest

from paperdag.retrieval import encode, load_encoder


@pytest.fixture(scope="module")
def encoder():
    """The packaged all-MiniLM-L6-v2, loaded once for the module (about 10 s on CPU)."""
    return load_encoder()


def test_packaged_model_embeds_384_dims_unit_norm(encoder):
    """encode returns float32 (n, 384) rows of unit L2 norm when normalize=True; normalize=False keeps directions."""
    texts = ["a red shirt", "a crimson t-shirt", "quarterly tax filing deadline"]
    v = encode(encoder, texts, progress=False)
    assert v.dtype == np.float32 and v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    raw = encode(encoder, texts, normalize=False, progress=False)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), v, atol=1e-5)


def test_similar_meanings_are_closer(encoder):
    """"a red shirt" is closer (cosine) to "a crimson t-shirt" than to an unrelated sentence."""
    a, b, c = encode(encoder, ["a red shirt", "a crimson t-shirt", "quarterly tax filing deadline"], progress=False)
    assert a @ b > a @ c


def test_batching_does_not_change_embeddings(encoder):
    """Embeddings do not depend on the batch size."""
    texts = [f"item number {i} in blue" for i in range(9)]
    np.testing.assert_allclose(encode(encoder, texts, batch_size=2, progress=False),
                               encode(encoder, texts, batch_size=64, progress=False), atol=1e-5)


def test_empty_input_and_single_string(encoder):
    """No texts give a (0, 384) array; one bare string is refused rather than embedded character by character."""
    assert encode(encoder, [], progress=False).shape == (0, 384)
    with pytest.raises(TypeError, match="list of strings"):
        encode(encoder, "a red shirt")


def test_unknown_model_fails_fast_offline(tmp_path):
    """A model that is neither packaged, a local directory, nor cached fails at once, naming what to use."""
    with pytest.raises(RuntimeError, match="cannot load sentence encoder"):
        load_encoder("no-such-org/no-such-model-xyz")
    with pytest.raises(ValueError, match="unknown packaged model"):
        load_encoder("packaged:bert-base")
