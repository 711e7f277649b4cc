"""The engine's error types: each names the file, key, stage or artifact at fault."""

from __future__ import annotations


class PaperdagError(Exception):
    """Base of every error the CLI reports as one line (exit code 2) instead of a traceback."""


class SpecError(PaperdagError):
    """A pipeline declaration or params.yaml is invalid; the message names the file and key."""

    def __init__(self, file: str, key: str, problem: str) -> None:
        self.file, self.key, self.problem = file, key, problem
        super().__init__(f"{file}: {key}: {problem}")


class StageError(PaperdagError):
    """A stage could not run or returned something other than what its declaration promises."""


class LockBusy(PaperdagError):
    """Another paperdag process holds the repository's run lock."""
