"""Errors the loader raises in the training loop."""

from __future__ import annotations


class LoaderError(RuntimeError):
    """Base class of fastload's own errors."""


class DecodeError(LoaderError):
    """A sample could not be read or decoded.

    Carries what a user needs to find and fix the file: its position in the
    dataset (``index``), its ``path`` and a human-readable ``reason``.
    """

    def __init__(self, index: int, path: str, reason: str):
        super().__init__(f"sample {index} ({path}): {reason}")
        self.index = index
        self.path = path
        self.reason = reason

    def __reduce__(self):
        return type(self), (self.index, self.path, self.reason)
