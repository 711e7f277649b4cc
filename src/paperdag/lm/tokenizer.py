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


# Byte-level BPE for the causal LMs. NOTE: paperdag/lm/__init__.py (another engineer's concurrent, uncommitted
# edit) imports these two names; this minimal version restores the import. `tokenizers`' BpeTrainer breaks
# frequency ties in hash order like its WordPieceTrainer, so its vocabulary can differ between processes.
BPE_SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")  # ids 0, 1, 2: tiny_llama_config's pad / bos / eos defaults


def train_byte_bpe(texts: Iterable[str], vocab_size: int, *, model_max_length: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2 style, no [UNK]) trained with `tokenizers`, wrapped as PreTrainedTokenizerFast."""
    from tokenizers import trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(BPE_SPECIAL_TOKENS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    pad, bos, eos = BPE_SPECIAL_TOKENS
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=pad, bos_token=bos, eos_token=eos,
                                   model_max_length=model_max_length)
