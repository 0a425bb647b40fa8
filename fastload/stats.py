"""``loader.stats``: throughput, time per stage, and what was skipped."""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

STAGES = ("read", "decode", "augment", "copy", "wait")


@dataclass(repr=False)
class Stats:
    """Counters for the loader's current (or last) epoch.

    ``images_per_s`` is the epoch's throughput: images over the time since
    it started while it runs, and once it has ended (ran out, or its
    iterator was closed or collected after a ``break``) over its whole
    duration, ``elapsed``, so that the rate read after an epoch stays that
    epoch's rather than decaying while the training loop does other work.

    Stage times are seconds summed over all threads (``read``, ``decode``,
    ``augment`` per sample; ``copy`` per batch: assembling it -- collate,
    normalizing a staged batch, the copy to the device); ``wait`` is the time
    the training loop spent waiting for a batch. ``skipped`` holds (epoch,
    index, path, reason) for every sample replaced under ``on_error="skip"``,
    ``corrupt`` (epoch, index, path, libjpeg's warning) for every corrupt
    JPEG that was decoded anyway and delivered (``on_corrupt="deliver"``).
    Both accumulate over epochs.

    On the device path (``device="cuda"``): ``decoder`` names the backend
    that decodes ("torchvision (nvjpeg)", "torchvision (rocjpeg)",
    "torchcodec", "cpu"); ``device_bytes`` is the
    device memory the loader's own tensors take (its output slots and the
    largest batch of decoded images; nvJPEG's internal buffers are not
    counted); ``overflow`` counts batches made outside the slots because the
    training loop still held every slot (memory grows only then).
    ``copy`` is then the device stage's host time per batch (the GPU work
    itself is asynchronous).

    ``retried``: remote reads of this epoch that failed (a network error or a
    timeout) and were tried again by fastload (``TarShards`` and ``TFRecords``
    over HTTP, S3, GCS...); the source counts them, over its life, in its own
    ``retried`` (shared by the loaders over that source).

    ``unfused``: for a front end's pipeline (``fastload.compat.dali``), the
    operators that run one by one in torch instead of fused, and why ("" when
    it is fused or not a front end's).
    """

    images: int = 0
    batches: int = 0
    seconds: dict = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    skipped: list = field(default_factory=list)
    corrupt: list = field(default_factory=list)
    decoder: str = ""
    device_bytes: int = 0
    overflow: int = 0
    unfused: str = ""
    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None  # perf_counter() when the epoch ended; None while it runs
    retries: Callable[[], int] = field(default=lambda: 0, repr=False)  # the source's retries so far
    _retries_at_reset: int = field(default=0, repr=False)
    _epoch: int = 0  # how many times reset() was called
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, stage: str, seconds: float) -> None:
        with self._lock:
            self.seconds[stage] += seconds

    def add_sample(self, read: float, decode: float, augment: float) -> None:
        """One sample's read, decode and augment seconds, under one lock (a loader thread's per-sample
        bookkeeping is GIL time)."""
        with self._lock:
            seconds = self.seconds
            seconds["read"] += read
            seconds["decode"] += decode
            seconds["augment"] += augment

    def waited(self, seconds: float) -> None:
        """The training loop waited this long for a batch."""
        self.add("wait", seconds)

    def device(self, decoder: str, device_bytes: int, overflow: int) -> None:
        """What the device delivery reports after each batch."""
        with self._lock:
            self.decoder, self.device_bytes, self.overflow = decoder, device_bytes, overflow

    def count_batch(self, images: int) -> None:
        with self._lock:
            self.images += images
            self.batches += 1

    def record(self, kind: str, entry: tuple) -> None:
        """Append to ``skipped`` or ``corrupt`` (entries start with their epoch)."""
        with self._lock:
            getattr(self, kind).append(entry)

    @property
    def retried(self) -> int:
        return self.retries() - self._retries_at_reset

    @property
    def elapsed(self) -> float:
        """Seconds since the epoch started; once it ended, its duration."""
        return (time.perf_counter() if self.ended is None else self.ended) - self.started

    @property
    def images_per_s(self) -> float:
        elapsed = self.elapsed
        return self.images / elapsed if elapsed > 0 else 0.0

    def reset(self) -> Callable[[], None]:
        """Start counting a new epoch. Returns what ends that epoch (``end``): it does nothing once a later
        epoch has started, so that an earlier iterator collected late cannot stop the current one's clock."""
        with self._lock:
            self.images = self.batches = 0
            self.seconds = dict.fromkeys(STAGES, 0.0)
            self.started, self.ended = time.perf_counter(), None
            self._retries_at_reset = self.retries()
            self._epoch += 1
            return functools.partial(self.end, self._epoch)

    def end(self, epoch: int | None = None) -> None:
        """The epoch ended: ``images_per_s`` stops there. The first call counts; ``epoch`` (from ``reset``):
        only if that epoch is still the current one."""
        with self._lock:
            if self.ended is None and (epoch is None or epoch == self._epoch):
                self.ended = time.perf_counter()

    def __str__(self) -> str:
        stages = ", ".join(f"{name} {value:.2f}s" for name, value in self.seconds.items())
        device = (f"; decoder {self.decoder}, {self.device_bytes / 2**20:.0f} MiB on the device"
                  if self.decoder else "")
        return (f"{self.images} images in {self.batches} batches, {self.images_per_s:.0f} img/s; "
                f"{stages}; {len(self.skipped)} skipped, {len(self.corrupt)} corrupt delivered"
                f"{f', {self.retried} remote reads retried' if self.retried else ''}{device}")

    def __repr__(self) -> str:
        # Counts only (the skipped and corrupt lists can be long); never raises, for a debugger or a log.
        try:
            stages = {name: round(value, 3) for name, value in self.seconds.items()}
            device = (f", decoder={self.decoder!r}, device_bytes={self.device_bytes}, overflow={self.overflow}"
                      if self.decoder else "")
            return (f"Stats(images={self.images}, batches={self.batches}, images_per_s={self.images_per_s:.1f}, "
                    f"elapsed={self.elapsed:.3f}, ended={self.ended is not None}, seconds={stages}, "
                    f"skipped={len(self.skipped)}, corrupt={len(self.corrupt)}, retried={self.retried}{device}"
                    f"{f', unfused={self.unfused!r}' if self.unfused else ''})")
        except Exception:  # a half-made Stats, or a source whose retry count fails
            return f"{type(self).__name__}(...)"
