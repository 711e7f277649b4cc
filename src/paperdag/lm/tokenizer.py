"""A WordPiece tokenizer trained with `tokenizers` on in-memory texts, wrapped as a transformers
PreTrainedTokenizerFast (so save_pretrained / AutoTokenizer.from_pretrained round-trip)."""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
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
    """A BERT-style WordPiece tokenizer ([CLS] text [SEP], "##" continuation pieces) trained on `texts`.

    Normalisation is NFKC (+ lowercase) and keeps accents and every script: a word in Greek, Georgian or Latin with
    diacritics stays itself. vocab_size is an upper bound: a small corpus yields fewer pieces.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens; got {vocab_size}")
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    steps = [normalizers.NFKC(), normalizers.Lowercase()] if lowercase else [normalizers.NFKC()]
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS), show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer)
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
