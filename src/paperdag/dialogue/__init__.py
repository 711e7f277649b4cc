"""Synthetic long conversations for memory methods: multi-session dialogues between generated people (chat) and team
meetings (MeetingQA-like), dated sessions, similarity-dense topics, and fact / preference / temporal questions whose
useful utterances are known by construction.

generate(DialogueSpec(register="chat", ...), random.Random(seed)) -> (utterance rows, question rows).
"""

from __future__ import annotations

from paperdag._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "world": ["MONTHS", "QUESTION_TYPES", "DialogueSpec", "date_words", "generate"],
    "registers": ["REGISTERS", "Register", "name_pool"],
})
