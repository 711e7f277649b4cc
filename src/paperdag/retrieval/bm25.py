"""Lexical retrieval: BM25 (Lucene variant) over a list of documents, on bm25s.

bm25s saves the sparse score matrix as .npy files (allow_pickle=False) and its vocabulary as JSON, so an index
on disk holds no pickle.
"""

from __future__ import annotations

import json
from pathlib import Path

import bm25s
import numpy as np

CONFIG_NAME = "bm25_config.json"


class BM25Index:
    """BM25 over `corpus`; document i has id i.

    >>> index = BM25Index.build(["a red shirt", "a blue hat"])
    >>> scores, ids = index.search(["red"], k=2)     # (1, 2) each; ids -1 where no query term occurs
    """

    def __init__(self, retriever: bm25s.BM25, k1: float, b: float, stopwords: str | list[str] | None) -> None:
        self.retriever = retriever
        self.k1 = k1
        self.b = b
        self.stopwords = stopwords

    @property
    def ntotal(self) -> int:
        return int(self.retriever.scores["num_docs"])

    def __repr__(self) -> str:
        return f"BM25Index(ntotal={self.ntotal}, k1={self.k1}, b={self.b}, stopwords={self.stopwords!r})"

    def _tokenize(self, texts: list[str]) -> list[list[str]]:
        if isinstance(texts, str):
            raise TypeError("pass a list of strings, not one string (wrap it: [text])")
        return bm25s.tokenize(list(texts), stopwords=self.stopwords or [], return_ids=False, show_progress=False)

    @classmethod
    def build(cls, corpus: list[str], k1: float = 1.5, b: float = 0.75,
              stopwords: str | list[str] | None = "en") -> BM25Index:
        """Index `corpus`: lower-cased word tokens of 2+ characters, minus `stopwords` ("en", a list, or None)."""
        if len(corpus) == 0:
            raise ValueError("cannot build a BM25 index over an empty corpus")
        index = cls(bm25s.BM25(k1=k1, b=b), k1, b, stopwords)
        index.retriever.index(index._tokenize(corpus), show_progress=False)
        return index

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k best documents per query: (scores float32 (m, k), ids int64 (m, k)), best first.

        A document sharing no term with the query is not a hit: its slot is id -1, score 0 (so are slots past
        the corpus size when k > ntotal).
        """
        if k < 1:
            raise ValueError(f"k must be >= 1; got {k}")
        tokens = self._tokenize(queries)
        m = len(tokens)
        scores = np.zeros((m, k), dtype=np.float32)
        ids = np.full((m, k), -1, dtype=np.int64)
        if m == 0:
            return scores, ids
        kk = min(k, self.ntotal)
        found, s = self.retriever.retrieve(tokens, k=kk, show_progress=False)
        hit = s > 0
        scores[:, :kk] = np.where(hit, s, 0.0)
        ids[:, :kk] = np.where(hit, found, -1)
        return scores, ids

    def save(self, path: Path) -> None:
        """Write the directory `path`: bm25s's .npy matrices and JSON vocabulary, plus bm25_config.json."""
        path = Path(path)
        self.retriever.save(str(path), allow_pickle=False, show_progress=False)
        config = {"k1": self.k1, "b": self.b, "stopwords": self.stopwords}
        (path / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> BM25Index:
        """Read a directory written by save()."""
        path = Path(path)
        if not (path / CONFIG_NAME).exists():
            raise FileNotFoundError(f"{path / CONFIG_NAME} is missing: {path} is not a directory written by BM25Index.save")
        config = json.loads((path / CONFIG_NAME).read_text())
        retriever = bm25s.BM25.load(str(path), allow_pickle=False, show_progress=False)
        return cls(retriever, config["k1"], config["b"], config["stopwords"])
