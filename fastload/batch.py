"""The fast path's batches: each sample read, decoded and augmented in a thread, each batch finished once.

A sample's crop and flip are drawn from its own random stream keyed by
(seed, epoch, dataset index), so they do not depend on thread timing,
worker count, batch size or world size. Its pixels land, as uint8, in its row
of a staging buffer; the thread that completes the batch converts the whole
buffer to the plan's dtype and layout in one pass.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import torch
from torch.utils.data import default_collate

from .augment import apply_geometry, finish_batch
from .decode import open_image, decode
from .deliver import StagingRing, to_device
from .errors import DecodeError
from .pipeline import Job
from .read import read_file
from .rng import SampleRandom
from .stats import Stats
from .transforms import Plan


class FastPath:
    """Turns batches of dataset indices into jobs that yield ``[images, labels]``.

    Args:
        samples: the dataset's [(path, label)].
        plan: the compiled transform.
        order: this epoch's index order when known (fastload sources), so
            that a skipped sample is replaced by the next one of the same
            shard; otherwise by the next dataset index.
    """

    def __init__(self, samples: list[tuple[str, int]], plan: Plan, *, batch_size: int, seed: int,
                 target_transform: Callable | None, collate_fn: Callable | None, on_error: str,
                 max_image_pixels: int | None, dct_scaling: bool, device: torch.device | None,
                 pin_memory: bool, slots: int, stats: Stats):
        self.samples = samples
        self.plan = plan
        self.seed = seed
        self.target_transform = target_transform
        self.collate_fn = collate_fn
        self.on_error = on_error
        self.max_image_pixels = max_image_pixels
        self.dct_scaling = dct_scaling
        self.device = device
        self.pin_output = pin_memory and (device is None or device.type == "cpu") and torch.cuda.is_available()
        self.stats = stats
        height, width = plan.output_size
        on_gpu = device is not None and device.type == "cuda"
        self.ring = StagingRing(slots, (batch_size, height, width, 3), pin=on_gpu)
        self.stream = torch.cuda.Stream(device) if on_gpu else None

    def load(self, index: int, epoch: int, row: np.ndarray, report) -> Any:
        """Decode and augment sample ``index`` into ``row``; return its label."""
        path, label = self.samples[index]
        stats = self.stats
        report("read", path)
        t0 = time.perf_counter()
        data = read_file(index, path)
        t1 = time.perf_counter()
        report("decode", path)
        image = open_image(index, path, data, self.max_image_pixels)
        geometry = self.plan.sample(image.width, image.height, SampleRandom(self.seed, epoch, index))
        image, scale = decode(index, path, image, geometry.max_reduction if self.dct_scaling else 1)
        t2 = time.perf_counter()
        report("augment", path)
        try:
            row[...] = apply_geometry(image, geometry, scale, self.plan.resample)
        except Exception as error:
            raise DecodeError(index, path, f"augmentation failed: {error}") from error
        t3 = time.perf_counter()
        stats.add("read", t1 - t0)
        stats.add("decode", t2 - t1)
        stats.add("augment", t3 - t2)
        return self.target_transform(label) if self.target_transform is not None else label

    def _load_or_replace(self, position: int, index: int, epoch: int, order: list[int] | None,
                         row: np.ndarray, report) -> Any:
        """``load``, or under on_error="skip" the first loadable sample after this one."""
        count = len(order) if order is not None else len(self.samples)
        for attempt in range(count):
            if attempt:
                index = (order[(position + attempt) % count] if order is not None
                         else (index + 1) % count)
            try:
                return self.load(index, epoch, row, report)
            except DecodeError as error:
                if self.on_error != "skip":
                    raise
                with self.stats._lock:
                    self.stats.skipped.append((epoch, error.index, error.path, error.reason))
        raise DecodeError(index, self.samples[index][0], "on_error='skip': no loadable sample left "
                                                         "to replace the failed ones")

    def jobs(self, batches: Iterable[list[tuple[int, int]]], epoch: int,
             order: list[int] | None = None) -> Iterator[Job]:
        """One job per batch of (position in epoch order, dataset index)."""
        for batch in batches:
            buffer = self.ring.acquire()
            rows = buffer.numpy()
            tasks = [self._task(position, index, epoch, order, rows[i])
                     for i, (position, index) in enumerate(batch)]
            yield Job(tasks, self._finisher(buffer, len(batch)))

    def _task(self, position, index, epoch, order, row):
        return lambda report: self._load_or_replace(position, index, epoch, order, row, report)

    def _finisher(self, buffer: torch.Tensor, size: int):
        def finish(labels: list) -> Any:
            started = time.perf_counter()
            try:
                images = self._finish_images(buffer[:size])
            finally:
                self.ring.release(buffer)
            if self.collate_fn is not None:
                batch = self.collate_fn(list(zip(images.unbind(0), labels)))
            else:
                label_batch = (torch.tensor(labels, dtype=torch.int64) if self.target_transform is None
                               else default_collate(labels))
                batch = [images, label_batch]
            if self.device is not None and self.device.type != "cpu":
                batch = to_device(batch, self.device, pin=False)
            self.stats.add("finish", time.perf_counter() - started)
            self.stats.count_batch(size)
            return batch
        return finish

    def _finish_images(self, staged: torch.Tensor) -> torch.Tensor:
        if self.stream is None:
            out = None
            if self.pin_output:
                shape = (staged.shape[0], 3, staged.shape[1], staged.shape[2])
                out = torch.empty(shape, dtype=self.plan.dtype if self.plan.scale else torch.uint8,
                                  pin_memory=True)
            return finish_batch(staged, self.plan, out=out)
        with torch.cuda.stream(self.stream):
            on_device = staged.to(self.device, non_blocking=True)
            images = finish_batch(on_device, self.plan)
            done = torch.cuda.Event()
            done.record(self.stream)
        done.synchronize()  # the staging slot is reused only after its copy has completed
        return images
