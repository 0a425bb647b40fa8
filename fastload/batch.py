"""The fast path's batches: each sample read, decoded and augmented in a thread, each batch finished once.

A sample's crop and flip are drawn from its own random stream keyed by
(seed, epoch, dataset index), so they do not depend on thread timing,
worker count, batch size or world size. Its pixels stay uint8 through crop,
resize and flip, then land normalized in their row of the batch's output (on
the CPU) or as uint8 in a staging row that is normalized on the GPU.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import torch
from torch.utils.data import default_collate

from .augment import finish_batch, normalizes_per_sample, transform_image, write_normalized
from .decode import decode, read_header
from .deliver import OutputPool, StagingRing, collate, to_device
from .errors import DecodeError, LoaderError
from .pipeline import Job
from .read import read_file
from .rng import SampleRandom
from .stats import Stats
from .transforms import Plan


class SampleReader:
    """What every fast path does per sample: read the file, parse its header, draw its augmentation, and
    under ``on_error="skip"`` replace a sample that fails by the next loadable one.

    Args:
        samples: the dataset's [(path, label)].
        plan: the compiled transform.
    """

    def __init__(self, samples: list[tuple[str, int]], plan: Plan, *, seed: int,
                 target_transform: Callable | None, collate_fn: Callable | None, on_error: str,
                 max_skips: int | None = None, on_corrupt: str = "deliver",
                 max_image_pixels: int | None, stats: Stats):
        self.samples = samples
        self.plan = plan
        self.seed = seed
        self.target_transform = target_transform
        self.collate_fn = collate_fn
        self.on_error = on_error
        self.max_skips = max_skips
        self.on_corrupt = on_corrupt
        self.max_image_pixels = max_image_pixels
        self.stats = stats

    def read(self, index: int, epoch: int, report) -> tuple[str, Any, bytes, Any, Any]:
        """(path, label, file bytes, header, geometry) of sample ``index`` in ``epoch``."""
        path, label = self.samples[index]
        report("read", path)
        started = time.perf_counter()
        data = read_file(index, path)
        read = time.perf_counter()
        report("decode", path)
        header = read_header(index, path, data, self.max_image_pixels)
        geometry = self.plan.sample(header.width, header.height, SampleRandom(self.seed, epoch, index))
        self.stats.add("read", read - started)
        self.stats.add("decode", time.perf_counter() - read)  # the header
        return path, label, data, header, geometry

    def check_corrupt(self, decoded, epoch: int, index: int, path: str) -> None:
        """Apply on_corrupt to a JPEG that libjpeg decoded while warning about corrupt data."""
        if decoded.warning is None:
            return
        if self.on_corrupt == "error":
            raise DecodeError(index, path, f"corrupt JPEG data (libjpeg: {decoded.warning}); on_corrupt='error'")
        self.stats.record("corrupt", (epoch, index, path, decoded.warning))

    def label(self, label: Any) -> Any:
        return self.target_transform(label) if self.target_transform is not None else label

    def labels(self, labels: list) -> Any:
        """A batch's labels, as torch's default_collate makes them."""
        if self.target_transform is None:
            return torch.tensor(labels, dtype=torch.int64)
        return default_collate(labels)

    def load_or_replace(self, load: Callable[[int], Any], position: int, index: int, epoch: int,
                        order: list[int] | None, start: int = 0) -> Any:
        """``load(index)``, or under on_error="skip" ``load`` of the first loadable sample after this one
        (``start=1``: of the first after it, this one having failed already)."""
        count = len(order) if order is not None else len(self.samples)
        for attempt in range(start, count):
            if attempt:
                index = (order[(position + attempt) % count] if order is not None
                         else (index + 1) % count)
            try:
                return load(index)
            except DecodeError as error:
                self.skip(error, epoch)
        raise DecodeError(index, self.samples[index][0], "on_error='skip': no loadable sample left "
                                                         "to replace the failed ones")

    def skip(self, error: DecodeError, epoch: int) -> None:
        """Raise ``error``, or under on_error="skip" record it (within the max_skips budget)."""
        if self.on_error != "skip":
            raise error
        skipped = self.stats.record("skipped", (epoch, error.index, error.path, error.reason))
        if self.max_skips is not None and skipped > self.max_skips:
            raise LoaderError(f"on_error='skip': {skipped} samples skipped in epoch {epoch}, more "
                              f"than max_skips={self.max_skips}; the last: {error}") from error


class FastPath(SampleReader):
    """Turns batches of dataset indices into jobs that yield ``[images, labels]``.

    On the CPU each thread writes its sample, normalized and in the output
    dtype, straight into its row of the batch's output tensor, while the
    sample's pixels are still in the core's cache. With a CUDA ``device``
    samples are staged as uint8 and the batch is normalized on the GPU.

    Args:
        outputs: the pool that CPU output batches come from (kept by the
            loader across epochs, so their pages stay mapped).
        (the others as ``SampleReader``'s)
    """

    def __init__(self, samples: list[tuple[str, int]], plan: Plan, *, batch_size: int, dct_scaling: bool,
                 device: torch.device | None, pin_memory: bool, slots: int, outputs: OutputPool,
                 memory_format: torch.memory_format = torch.contiguous_format, **reader):
        super().__init__(samples, plan, **reader)
        self.memory_format = memory_format
        self.dct_scaling = dct_scaling
        self.device = device
        height, width = plan.output_size
        on_gpu = device is not None and device.type == "cuda"
        self.pin_output = pin_memory and not on_gpu and torch.cuda.is_available()
        # direct: threads write normalized samples into the output batch; else
        # they stage uint8 and the batch is finished at once, on CPU or GPU.
        self.direct = not on_gpu and normalizes_per_sample(plan)
        self.outputs = outputs
        self.ring = None if self.direct else StagingRing(slots, (batch_size, height, width, 3), pin=on_gpu)
        self.stream = torch.cuda.Stream(device) if on_gpu else None

    def load(self, index: int, epoch: int, out: torch.Tensor, report,
             color_row: tuple[torch.Tensor, torch.Tensor] | None = None) -> Any:
        """Decode and augment sample ``index`` into ``out`` (its output or staging row); return its label.

        ``color_row`` receives the sample's color operations and factors,
        which the batch's finish applies.
        """
        path, label, data, header, geometry = self.read(index, epoch, report)
        stats = self.stats
        t1 = time.perf_counter()
        if color_row is not None:
            color_row[0].copy_(torch.tensor([op for op, _ in geometry.color], dtype=torch.int32))
            color_row[1].copy_(torch.tensor([factor for _, factor in geometry.color], dtype=torch.float32))
        decoded = decode(index, path, data, header, geometry, geometry.max_reduction if self.dct_scaling else 1)
        self.check_corrupt(decoded, epoch, index, path)
        t2 = time.perf_counter()
        report("augment", path)
        try:
            image = transform_image(decoded, geometry, self.plan.resample, flip=not self.direct)
            if self.direct:
                write_normalized(image, geometry.hflip, self.plan, out)
            else:
                out.numpy()[...] = np.asarray(image)
        except Exception as error:
            raise DecodeError(index, path, f"augmentation failed: {error}") from error
        t3 = time.perf_counter()
        stats.add("decode", t2 - t1)
        stats.add("augment", t3 - t2)
        return self.label(label)

    def jobs(self, batches: Iterable[list[tuple[int, int]]], epoch: int,
             order: list[int] | None = None) -> Iterator[Job]:
        """One job per batch of (position in epoch order, dataset index)."""
        slots = self.plan.color_slots
        for batch in batches:
            buffer = _LazyBuffer(self._acquire, len(batch), self.ring.release if self.ring is not None else None)
            color = ((torch.empty(len(batch), slots, dtype=torch.int32),
                      torch.empty(len(batch), slots, dtype=torch.float32)) if slots else None)
            tasks = [self._task(position, index, epoch, order, buffer, i, color)
                     for i, (position, index) in enumerate(batch)]
            yield Job(tasks, self._finisher(buffer, len(batch), color), discard=buffer.discard)

    def _acquire(self, rows: int) -> torch.Tensor:
        return self.ring.acquire() if self.ring is not None else self._output(rows)

    def _output(self, rows: int) -> torch.Tensor:
        """A CPU output batch: pinned when CUDA is available and pin_memory is set, else pooled."""
        if self.pin_output:  # torch's caching host allocator reuses pinned blocks itself
            return torch.empty((rows,) + self.outputs.shape[1:], dtype=self.outputs.dtype, pin_memory=True)
        return self.outputs.take(rows)

    def _task(self, position, index, epoch, order, buffer: "_LazyBuffer", row: int, color):
        color_row = None if color is None else (color[0][row], color[1][row])
        return lambda report: self.load_or_replace(
            lambda i: self.load(i, epoch, buffer.get()[row], report, color_row), position, index, epoch, order)

    def _finisher(self, lazy: "_LazyBuffer", size: int, color=None):
        def finish(labels: list) -> Any:
            started = time.perf_counter()
            buffer = lazy.get()
            if self.ring is None:
                images = buffer
            else:
                try:
                    if self.stream is not None:
                        images = self._finish_on_device(buffer[:size], color)
                    else:
                        images = finish_batch(buffer[:size], self.plan, out=self._output(size), color=color)
                finally:
                    self.ring.release(buffer)
            if self.memory_format != torch.contiguous_format:
                images = images.contiguous(memory_format=self.memory_format)
            if self.collate_fn is not None:
                batch = collate(self.collate_fn, list(zip(images.unbind(0), labels)), f"a batch of {size} images")
            else:
                batch = [images, self.labels(labels)]
            if self.device is not None and self.device.type != "cpu":
                batch = to_device(batch, self.device, pin=False)
            self.stats.add("copy", time.perf_counter() - started)
            self.stats.count_batch(size)
            return batch
        return finish

    def _finish_on_device(self, staged: torch.Tensor, color=None) -> torch.Tensor:
        """Copy a staged uint8 batch to the GPU and normalize it there, on a side stream."""
        with torch.cuda.stream(self.stream):
            on_device = staged.to(self.device, non_blocking=True)
            if color is not None:
                color = tuple(part.to(self.device) for part in color)
            images = finish_batch(on_device, self.plan, color=color)
            done = torch.cuda.Event()
            done.record(self.stream)
        done.synchronize()  # the staging slot is reused only after its copy has completed
        return images


class _LazyBuffer:
    """A batch's output or staging buffer, taken when its first sample starts, not when the job is queued.

    Jobs are queued ``prefetch_factor * num_workers`` ahead, but the threads
    take samples in order, so only the batches being built and those already
    done hold memory: with a fast consumer that is two or three, not six.
    """

    def __init__(self, acquire: Callable[[int], torch.Tensor], rows: int,
                 release: Callable[[torch.Tensor], None] | None = None):
        self._acquire, self._rows, self._release = acquire, rows, release
        self._buffer: torch.Tensor | None = None
        self._lock = threading.Lock()

    def get(self) -> torch.Tensor:
        with self._lock:
            if self._buffer is None:
                self._buffer = self._acquire(self._rows)
            return self._buffer

    def discard(self) -> None:
        """The batch failed: give a staging buffer back to its ring."""
        with self._lock:
            if self._buffer is not None and self._release is not None:
                self._release(self._buffer)
            self._buffer = None


def output_pool(plan: Plan, batch_size: int, slots: int) -> OutputPool:
    """A pool of CPU output batches for ``plan``: one per batch in flight, plus two the training loop holds."""
    height, width = plan.output_size
    return OutputPool((batch_size, 3, height, width), plan.output_dtype, capacity=slots + 2)
