"""``loader.stats``: throughput, time per stage, and what was skipped."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

STAGES = ("read", "decode", "augment", "copy", "wait")


@dataclass
class Stats:
    """Counters for the loader's current (or last) epoch.

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
    retries: Callable[[], int] = field(default=lambda: 0, repr=False)  # the source's retries so far
    _retries_at_reset: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, stage: str, seconds: float) -> None:
        with self._lock:
            self.seconds[stage] += seconds

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

    def record(self, kind: str, entry: tuple) -> int:
        """Append to ``skipped`` or ``corrupt``; returns how many that list holds for entry's epoch."""
        with self._lock:
            entries = getattr(self, kind)
            entries.append(entry)
            return sum(1 for other in entries if other[0] == entry[0])

    @property
    def retried(self) -> int:
        return self.retries() - self._retries_at_reset

    @property
    def images_per_s(self) -> float:
        elapsed = time.perf_counter() - self.started
        return self.images / elapsed if elapsed > 0 else 0.0

    def reset(self) -> None:
        with self._lock:
            self.images = self.batches = 0
            self.seconds = dict.fromkeys(STAGES, 0.0)
            self.started = time.perf_counter()
            self._retries_at_reset = self.retries()

    def __str__(self) -> str:
        stages = ", ".join(f"{name} {value:.2f}s" for name, value in self.seconds.items())
        device = (f"; decoder {self.decoder}, {self.device_bytes / 2**20:.0f} MiB on the device"
                  if self.decoder else "")
        return (f"{self.images} images in {self.batches} batches, {self.images_per_s:.0f} img/s; "
                f"{stages}; {len(self.skipped)} skipped, {len(self.corrupt)} corrupt delivered"
                f"{f', {self.retried} remote reads retried' if self.retried else ''}{device}")
