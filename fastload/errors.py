"""Errors the loader raises in the training loop."""

from __future__ import annotations

import math
import threading


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


class ErrorPolicy:
    """What a path does with a bad sample in one epoch: ``on_error``, the ``max_skips`` budget,
    ``on_corrupt``; the records go to ``stats`` (``skipped``, ``corrupt``).

    A bad sample is recorded once per epoch, however many samples it was tried in place of, and the
    budget counts bad samples; the order's replacements pass over a sample already known bad without
    reading it again (``known_bad``), so a folder of thousands of bad files fails or finishes in one
    pass over them, not one pass per sample.

    Args:
        max_skips: a count per epoch, or a fraction of ``epoch_samples``, rounded up (a positive fraction
            allows at least one).
    """

    def __init__(self, on_error: str, max_skips: int | float | None, on_corrupt: str, stats,
                 epoch_samples: int = 0):
        self.on_error, self.on_corrupt, self.stats = on_error, on_corrupt, stats
        self.fraction = max_skips if isinstance(max_skips, float) else None
        self.max_skips = math.ceil(max_skips * epoch_samples) if isinstance(max_skips, float) else max_skips
        self._bad: set[int] = set()
        self._lock = threading.Lock()

    def known_bad(self, index: int) -> bool:
        """Whether sample ``index`` already failed in this epoch."""
        return index in self._bad

    def skip(self, error: DecodeError, epoch: int) -> None:
        """Raise ``error``, or under on_error="skip" record it (once a sample; within the max_skips budget)."""
        if self.on_error != "skip":
            raise error
        with self._lock:
            if error.index in self._bad:
                return
            self._bad.add(error.index)
            skipped = len(self._bad)
        self.stats.record("skipped", (epoch, error.index, error.path, error.reason))
        if self.max_skips is not None and skipped > self.max_skips:
            budget = (f"max_skips={self.fraction:g} ({self.max_skips} of the epoch's samples)"
                      if self.fraction is not None else f"max_skips={self.max_skips}")
            raise LoaderError(f"on_error='skip': {skipped} samples skipped in epoch {epoch}, more "
                              f"than {budget}; the last: {error}") from error

    def check_corrupt(self, warning: str | None, epoch: int, index: int, path: str) -> None:
        """Apply on_corrupt to a JPEG that libjpeg decoded while ``warning`` about corrupt data."""
        if warning is None:
            return
        if self.on_corrupt == "error":
            raise DecodeError(index, path, f"corrupt JPEG data (libjpeg: {warning}); on_corrupt='error'")
        self.stats.record("corrupt", (epoch, index, path, warning))


class StuckThreadWarning(RuntimeWarning):
    """A loader thread did not stop within the shutdown bound (the loader's ``timeout``, else
    ``fastload.thread_pool.CLOSE_TIMEOUT``): it is still inside a call (a ``__getitem__`` blocked on a lock or
    a read), and is left running as a daemon thread until that call returns. The message names the thread
    and the sample it is on."""
