"""What every path that reads a dataset's samples itself does per sample, shared by the CPU fast path
(``batch.py``), the device path (``device.py``) and DALI's graph path (``compat/engine/execution.py``): read
the file, parse its header, draw its augmentation, replace a sample that fails under
``on_error="skip"``, and finish a batch's tail. Its own module so that those paths import it and not
each other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils.data import default_collate

from .decode import read_header
from .deliver import collate, to_device
from .errors import DecodeError, ErrorPolicy
from .torch_draws import TorchDraws
from .transforms import Plan
from .workers import worker_generator


@dataclass(frozen=True)
class EpochContext:
    """What one epoch's tasks share, carried by them (an iterator still finishing an old epoch keeps its
    own): the epoch, its augmentation seed, its order (which sample replaces a failed one) and its error
    policy (with this epoch's skip budget)."""

    epoch: int
    seed: int
    order: Any
    errors: ErrorPolicy


class SampleReader:
    """What every fast path does per sample: read the file, parse its header, draw its augmentation, and
    under ``on_error="skip"`` replace a sample that fails (the order says by which); and per batch: its
    tail (collate or [images, labels], to the device, stats).

    Args:
        loader: whose options, stats, schedule (seeds) and collate_fn apply.
        samples: the dataset's [(file path or name, label)].
        plan: the compiled transform.
        read: sample index -> its encoded bytes (a file's, or a source's own).
        torch_draws: draw as torch's DataLoader does (``draws="torch"`` over torch's datasets): each sample
            from the calling thread's worker generator, in the order the thread reads them; the path runs
            a batch's samples in order on its worker's thread. None: each sample's own stream (fastload.rng).
    """

    def __init__(self, loader, samples: list[tuple[str, int]], plan: Plan, target_transform: Callable | None,
                 read: Callable[[int], bytes], torch_draws: TorchDraws | None = None):
        self.loader, self.samples, self.plan, self.target_transform = loader, samples, plan, target_transform
        self.torch_draws = torch_draws
        self.read_bytes = read
        self.stats = loader.stats
        self.device = loader.options.device
        self.collate_fn = None if loader.collate_fn is default_collate else loader.collate_fn

    @property
    def options(self):
        return self.loader.options

    def context(self, epoch: int, order) -> EpochContext:
        """An epoch's shared state: its augmentation seed, its order and its error policy (with its budget)."""
        options, loader = self.options, self.loader
        errors = ErrorPolicy(options.on_error, options.max_skips, options.on_corrupt, self.stats,
                             epoch_samples=len(order) * loader.batch_size)
        return EpochContext(epoch, loader.schedule.augment_seed, order, errors)

    def read(self, index: int, repeat: int, ctx: EpochContext, report,
             data: bytes | None = None) -> tuple[str, Any, bytes, Any, Any]:
        """(file, label, file bytes, header, draw) of sample ``index`` in the context's epoch, its
        augmentation drawn with ``repeat`` (``load_or_replace`` says which); ``data``: its bytes, if read."""
        file, label = self.samples[index]
        report("read", file)
        started = time.perf_counter()
        if data is None:
            data = self.read_bytes(index)
        read = time.perf_counter()
        report("decode", file)
        header = read_header(index, file, data, self.options.max_image_pixels)
        if self.torch_draws is not None:
            draw = self.torch_draws.draw(header.width, header.height, worker_generator())
        else:
            draw = self.plan.draw(header.width, header.height, ctx.seed, ctx.epoch, index, repeat)
        self.stats.add("read", read - started)
        self.stats.add("decode", time.perf_counter() - read)  # the header
        return file, label, data, header, draw

    def label(self, label: Any) -> Any:
        return self.target_transform(label) if self.target_transform is not None else label

    def load_or_replace(self, load: Callable[[int, int], Any], position: int, index: int, ctx: EpochContext,
                        start: int = 0) -> Any:
        """``load(index, repeat)``, or under on_error="skip" ``load`` of the order's replacements for it
        (``start=1``: this one having failed already), each sample of the epoch tried at most once.
        ``repeat`` keys the sample's augmentation (fastload.rng): how often it came before in the epoch
        (``Order.repeat``); a replacement draws as its own first copy does, so that a file that failed
        with that draw and was reported is not delivered in another's place with a luckier one (a crop
        away from a truncated JPEG's damage decodes)."""
        for attempt in range(start, ctx.order.attempts()):
            candidate = index if attempt == 0 else ctx.order.replacement(position, index, attempt)
            if ctx.errors.known_bad(candidate):
                continue  # (failed already in this epoch: recorded once, not read again)
            repeat = ctx.order.repeat(position, index) if attempt == 0 else 0
            try:
                return load(candidate, repeat)
            except DecodeError as error:
                ctx.errors.skip(error, ctx.epoch)
        raise DecodeError(index, self.samples[index][0], "on_error='skip': no loadable sample left "
                                                         "to replace the failed ones")

    def tail(self, images: torch.Tensor, labels: list) -> Any:
        """A finished batch as the training loop gets it: ``collate_fn`` of (image, label) pairs, or
        [images, labels] as torch's default_collate makes them; on the loader's device; counted."""
        if self.collate_fn is not None:
            batch = collate(self.collate_fn, list(zip(images.unbind(0), labels)), f"a batch of {len(labels)} images")
        elif self.target_transform is None:
            batch = [images, torch.tensor(labels, dtype=torch.int64)]
        else:
            batch = [images, default_collate(labels)]
        if self.device is not None and self.device.type != "cpu":
            batch = to_device(batch, self.device, pin=False)
        self.stats.count_batch(len(labels))
        return batch
