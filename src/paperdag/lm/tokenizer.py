"""A WordPiece tokenizer learned from in-memory texts on `tokenizers` (normaliser, pre-tokenizer, WordPiece model,
[CLS]/[SEP] template), wrapped as a transformers PreTrainedTokenizerFast (save_pretrained / AutoTokenizer round trip)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4 in this order


def train_wordpiece(
    texts: Iterable[str],
    vocab_size: int,
    *,
    min_frequency: int = 1,
    lowercase: bool = True,
    model_max_length: int = 512,
) -> PreTrainedTokenizerFast:
    """A BERT-style WordPiece tokenizer ([CLS] text [SEP], "##" continuation pieces) learned from `texts`.

    Normalisation is NFKC (+ lowercase) and keeps accents and every script: a word in Greek, Georgian or Latin with
    diacritics stays itself. The vocabulary is chosen deterministically (see wordpiece_vocabulary): `tokenizers`'
    own WordPieceTrainer breaks frequency ties in hash order, so two runs on the same texts gave different
    vocabularies (measured), which a reproducible pipeline cannot have. vocab_size is an upper bound.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens; got {vocab_size}")
    steps = [normalizers.NFKC(), normalizers.Lowercase()] if lowercase else [normalizers.NFKC()]
    normalizer = normalizers.Sequence(steps)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words: Counter[str] = Counter()
    for text in texts:
        words.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    vocab = wordpiece_vocabulary({w: c for w, c in words.items() if c >= min_frequency}, vocab_size)
    tok = Tokenizer(models.WordPiece(vocab={t: i for i, t in enumerate(vocab)}, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.WordPiece(prefix="##")
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=model_max_length,
    )


def wordpiece_vocabulary(word_counts: dict[str, int], vocab_size: int, max_piece: int = 12) -> list[str]:
    """Special tokens, then every character (word-initial and "##" continuation, so no word is [UNK]), then
    multi-character pieces by the characters they save, count x (length - 1), ties by the piece itself.

    Candidates are whole words, word-initial prefixes and "##" pieces inside words (up to max_piece characters).
    Deterministic: the same counts give the same list.
    """
    chars: set[str] = set()
    gain: Counter[str] = Counter()
    for word, count in word_counts.items():
        chars.update(word[:1])
        chars.update("##" + c for c in word[1:])
        n = len(word)
        for end in range(2, min(n, max_piece) + 1):
            gain[word[:end]] += count * (end - 1)
        for start in range(1, n - 1):
            for end in range(start + 2, min(n, start + max_piece) + 1):
                gain["##" + word[start:end]] += count * (end - start - 1)
    vocab = list(SPECIAL_TOKENS) + sorted(chars - set(SPECIAL_TOKENS))
    room = max(0, vocab_size - len(vocab))
    vocab += [piece for piece, _ in sorted(gain.items(), key=lambda kv: (-kv[1], kv[0]))[:room]]
    return vocab


# Byte-level BPE for the causal LMs. `tokenizers`' BpeTrainer breaks frequency ties in hash order (like its
# WordPieceTrainer), so its merges can differ between processes: the merges are learned here, ties broken by the pair.
BPE_SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")  # ids 0, 1, 2: tiny_llama_config's pad / bos / eos defaults


def train_byte_bpe(
    texts: Iterable[str],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    add_bos: bool = False,
    model_max_length: int = 512,
) -> PreTrainedTokenizerFast:
    """A GPT-2-style byte-level BPE tokenizer (every byte in the alphabet: no [UNK]; a leading space belongs to the
    word's token) learned from `texts`, wrapped as PreTrainedTokenizerFast. Deterministic: see bpe_merges.

    With add_bos, every encoding starts with <bos>; <eos> is never added (append it to training targets).
    vocab_size is an upper bound: merges stop when no pair occurs min_frequency times.
    """
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    if vocab_size <= len(BPE_SPECIAL_TOKENS) + len(alphabet):
        raise ValueError(f"vocab_size must exceed the {len(alphabet)} bytes + {len(BPE_SPECIAL_TOKENS)} special tokens; got {vocab_size}")
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False)
    words: Counter[str] = Counter()
    for text in texts:
        words.update(w for w, _ in pre.pre_tokenize_str(text))
    merges = bpe_merges(words, vocab_size - len(BPE_SPECIAL_TOKENS) - len(alphabet), min_frequency)
    vocab = [*BPE_SPECIAL_TOKENS, *alphabet, *(a + b for a, b in merges)]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(vocab)}, merges=merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    pad, bos, eos = BPE_SPECIAL_TOKENS
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A $B:1", special_tokens=[(bos, 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=pad, bos_token=bos, eos_token=eos,
                                   model_max_length=model_max_length)


def bpe_merges(word_counts: Counter[str], n_merges: int, min_frequency: int = 2) -> list[tuple[str, str]]:
    """Up to n_merges BPE merges over words (as symbol sequences): each time the most frequent adjacent pair, ties by
    the pair itself, so the same counts always give the same merges."""
    words = {tuple(w): c for w, c in word_counts.items()}
    merges: list[tuple[str, str]] = []
    while len(merges) < n_merges:
        pairs: Counter[tuple[str, str]] = Counter()
        for symbols, count in words.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best, count = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if count < min_frequency:
            break
        merges.append(best)
        joined = best[0] + best[1]
        merged: dict[tuple[str, ...], int] = {}
        for symbols, c in words.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    out.append(joined)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        words = merged
    return merges
