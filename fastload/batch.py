"""The CPU fast path: each sample read, decoded and augmented in a loader thread, each batch finished once.

A sample's crop and flip are drawn from its own random stream keyed by
(seed, epoch, dataset index), so they do not depend on thread timing,
worker count, batch size or world size. Its pixels stay uint8 through crop,
resize and flip, then land normalized in their row of the batch's output (on
the CPU) or as uint8 in a staging row that is finished once per batch --
on the CPU, or with a CUDA ``device`` on the GPU, through the device path's
delivery (``deliver.DeviceDelivery``: output slots, side stream, handover).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Iterator

import numpy as np
import torch

from . import native_sample
from .buffers import BufferPool, LazyTake
from .cpu_augment import finish_batch, normalizes_per_sample, transform_image, write_normalized
from .decode import decode, read_header
from .deliver import DeviceDelivery
from .errors import DecodeError
from .thread_pool import SKIP, Job, LoaderPath, Stages, batches_ahead
from .sample_reader import EpochContext, SampleReader
from .sources import Source
from .torch_draws import TorchDraws
from .transforms import Plan, RandomResizedCropGeometry
from .workers import worker_generator


class CpuPath(SampleReader, LoaderPath):
    """The CPU fast path: turns an epoch's batches of (position, dataset index) into jobs that yield
    ``[images, labels]``, each sample decoded and augmented on the CPU. (Named for where it augments:
    ``loader.fast_path`` is true on the device path too.)

    On the CPU each thread writes its sample, normalized and in the output
    dtype, straight into its row of the batch's output, while the sample's
    pixels are still in the core's cache; other outputs are staged as uint8
    and finished per batch. With a CUDA ``device`` the staged batch is
    finished on the GPU into the device path's output slots. Buffers and
    streams are made once, for the loader's life.
    """

    fast, on_device = True, False

    def __init__(self, loader, samples, plan: Plan, target_transform, read, torch_draws: TorchDraws | None = None):
        super().__init__(loader, samples, plan, target_transform, read, torch_draws)
        options = self.options
        self.in_flight = batches_ahead(loader)
        height, width = plan.output_size
        self.delivery = None
        if self.device is not None and self.device.type == "cuda":  # every batch in flight may be finished
            self.delivery = DeviceDelivery(self.device, loader.batch_size, plan, options, slots=self.in_flight + 2)
        # direct: threads write normalized samples into the output batch; else they stage uint8
        self.direct = self.delivery is None and normalizes_per_sample(plan)
        # pin_memory: a fresh pinned output per batch, as torch's pin_memory gives; torch's caching host
        # allocator then tracks the copies that read it, which a pool could not
        self.pin_output = loader.pin_memory and torch.cuda.is_available() and self.delivery is None
        self.outputs = BufferPool(self.in_flight + 2, (loader.batch_size, 3, height, width), plan.output_dtype)
        staging = (loader.batch_size, height, width, 3)
        self.staging = None if self.direct else BufferPool(self.in_flight, staging, torch.uint8,
                                                           pin=self.device if self.delivery is not None else None)
        # "auto": at a reduced DCT scale where the geometry is random -- but not under torch's draws, whose
        # point is torch's pixels
        self.dct = options.dct_scaling is True or (options.dct_scaling == "auto" and torch_draws is None
                                                   and isinstance(plan.geometry, RandomResizedCropGeometry))
        # JPEGs go through one native call without the GIL where the plan allows (fastload.native_sample);
        # a RandomResizedCrop's files, read included (load_settings: None where not)
        self.native = native_sample.available(plan)
        self.native_kind = native_sample.FLOAT32_PLANES if self.direct else native_sample.UINT8_ROWS
        self.load_settings = None if torch_draws is not None else native_sample.load_settings(
            plan, self.native_kind, options.max_image_pixels, self.dct)  # (it draws from fastload's streams)

    def stages(self, batches: Iterator[list[tuple[int, int]]], epoch: int, order) -> Stages:
        """The epoch's jobs; with torch's draws each batch pinned to its worker's thread, as torch gives
        batch k to worker ``k % num_workers`` (a resumed epoch's round robin goes on from there)."""
        pinned = self.torch_draws is not None and self.loader.num_workers > 0
        first = self.loader.schedule.position["batches"]
        return Stages(self._jobs(batches, self.context(epoch, order), first if pinned else None),
                      in_flight=self.in_flight, handover=self.delivery.handover if self.delivery is not None else None,
                      pinned=pinned)

    def _jobs(self, batches, ctx: EpochContext, first: int | None) -> Iterator[Job]:
        """One job per batch: a task per sample, which runs anywhere -- or, with ``first`` (torch's draws),
        batch k's tasks in order on thread ``k % num_workers``, whose worker generator they draw from."""
        slots = self.plan.color_slots
        workers = self.loader.num_workers
        if self.torch_draws is not None:
            yield from self._replays(batches, ctx, first)
        for k, batch in enumerate(batches, first or 0):
            rows = LazyTake(self.staging.take if self.staging is not None else self._output, len(batch))
            color = ((torch.empty(len(batch), slots, dtype=torch.int32),
                      torch.empty(len(batch), slots, dtype=torch.float32)) if slots else None)
            tasks = [_LoadInto(self, position, index, ctx, rows, row, color)
                     for row, (position, index) in enumerate(batch)]
            yield Job(tasks, _Finish(self, rows, color), what=[self.samples[index][0] for _, index in batch],
                      discard=rows.drop, worker=k % workers if first is not None else None)

    def _replays(self, batches, ctx: EpochContext, first: int | None) -> Iterator[Job]:
        """A resumed epoch under torch's draws: the delivered batches' draws made again, each on its worker's
        generator (without workers, the process's), so that the rest are drawn as an uninterrupted run draws
        them; jobs that deliver nothing (``SKIP``). Torch's draws need each image's size: the files' headers
        are read again (a RandomResizedCrop's; flips alone need none)."""
        skipped = getattr(batches, "skipped", None)
        workers = self.loader.num_workers
        for k, batch in enumerate(skipped() if skipped is not None else []):
            yield Job([_Replay(self, batch, ctx)], _skip, what=[f"the draws of delivered batch {k}"],
                      worker=k % workers if first is not None else None)

    def replay(self, batch: list[tuple[int, int]], ctx: EpochContext) -> None:
        """Make a delivered batch's torch draws again, in order, in the calling thread (its worker's)."""
        for position, index in batch:
            self.load_or_replace(functools.partial(self._draw_again, ctx=ctx), position, index, ctx)

    def _draw_again(self, index: int, repeat: int, ctx: EpochContext) -> None:
        width = height = 1
        if self.torch_draws.sized:
            file = self.samples[index][0]
            header = read_header(index, file, self.read_bytes(index), self.options.max_image_pixels)
            width, height = header.width, header.height
        self.torch_draws.draw(width, height, worker_generator())

    def _output(self, rows: int) -> tuple[torch.Tensor, int | None]:
        """A CPU output batch: pooled, or fresh and pinned (``pin_memory``)."""
        if self.pin_output:
            return torch.empty((rows,) + self.outputs.shape[1:], dtype=self.outputs.dtype, pin_memory=True), None
        return self.outputs.take(rows)

    def load(self, index: int, repeat: int, ctx: EpochContext, rows: LazyTake, row: int, report,
             color_row=None) -> Any:
        """Decode and augment sample ``index`` (drawn with ``repeat``) into row ``row`` of the batch's
        buffer (its output, or its uint8 staging); return its label.

        ``color_row`` receives the sample's color operations and factors,
        which the batch's finish applies.
        """
        data = None
        if self.load_settings is not None and getattr(self.read_bytes, "__func__", None) is Source.read:
            file = self.samples[index][0]  # a file (ImageFolder, FileList): read in the native call too
            report("decode", file)
            buffer = rows.array()
            done = native_sample.load(file, (ctx.seed, ctx.epoch, index, repeat), self.load_settings, buffer,
                                      row * buffer.strides[0])
            if type(done) is tuple:
                read, decoding, total = done
                self.stats.add_sample(read, decoding, total - read - decoding)
                return self.label(self.samples[index][1])
            data = done  # its bytes, for the route below (None: not read; the read below says why)
        file, label, data, header, draw = self.read(index, repeat, ctx, report, data)
        t1 = time.perf_counter()
        if color_row is not None:
            color_row[0].copy_(torch.tensor([op for op, _ in draw.color], dtype=torch.int32))
            color_row[1].copy_(torch.tensor([factor for _, factor in draw.color], dtype=torch.float32))
        reduction = draw.max_reduction if self.dct else 1
        if self.native:
            report("augment", file)
            buffer = rows.array()
            decoding = native_sample.sample(data, header, draw, self.plan, reduction, buffer,
                                            row * buffer.strides[0], self.native_kind)
            if decoding is not None:
                elapsed = time.perf_counter() - t1
                self.stats.add("decode", decoding)
                self.stats.add("augment", elapsed - decoding)
                return self.label(label)
        out = rows.get()[row]
        decoded = decode(index, file, data, header, draw, reduction)
        ctx.errors.check_corrupt(decoded.warning, ctx.epoch, index, file)
        t2 = time.perf_counter()
        report("augment", file)
        try:
            image = transform_image(decoded, draw, self.plan.resample, flip=not self.direct,
                                    affine=self.plan.affine)
            if self.direct:
                write_normalized(image, draw.hflip, self.plan, out)
            else:
                out.numpy()[...] = np.asarray(image)
        except Exception as error:
            raise DecodeError(index, file, f"augmentation failed: {error}") from error
        self.stats.add("decode", t2 - t1)
        self.stats.add("augment", time.perf_counter() - t2)
        return self.label(label)

    def finish(self, rows: LazyTake, labels: list, color) -> Any:
        """Per batch: the staged uint8 batch converted (on the CPU, or on the GPU into an output slot)."""
        started = time.perf_counter()
        buffer, size = rows.get(), len(labels)
        if self.delivery is not None:
            with self.delivery.on_stream():
                images, slot = self.delivery.finish_staged(buffer[:size], self.plan, color, self.staging, rows.slot)
                rows.drop()
                ready = self.delivery.ready(self.tail(images, labels), slot)
            self.stats.add("copy", time.perf_counter() - started)
            self.stats.device("cpu", self.delivery.slots.nbytes, self.delivery.overflow)
            return ready
        if self.direct:
            images = buffer
        else:
            images = finish_batch(buffer[:size], self.plan, out=self._output(size)[0], color=color)
        rows.drop()
        if self.options.memory_format != torch.contiguous_format:
            images = images.contiguous(memory_format=self.options.memory_format)
        batch = self.tail(images, labels)
        self.stats.add("copy", time.perf_counter() - started)
        return batch


class _LoadInto:
    """A task: one sample (or its replacement) decoded and augmented into its row of the batch."""

    def __init__(self, path: CpuPath, position: int, index: int, ctx: EpochContext, rows: LazyTake, row: int,
                 color):
        self.path, self.position, self.index, self.ctx, self.rows, self.row = path, position, index, ctx, rows, row
        self.color_row = None if color is None else (color[0][row], color[1][row])

    def __call__(self, report) -> Any:
        return self.path.load_or_replace(functools.partial(self._load, report), self.position, self.index,
                                         self.ctx)

    def _load(self, report, index: int, repeat: int) -> Any:
        return self.path.load(index, repeat, self.ctx, self.rows, self.row, report, self.color_row)


class _Replay:
    """A task: a delivered batch's torch draws made again (``CpuPath.replay``)."""

    def __init__(self, path: CpuPath, batch: list[tuple[int, int]], ctx: EpochContext):
        self.path, self.batch, self.ctx = path, batch, ctx

    def __call__(self, report) -> None:
        report("draw", f"{len(self.batch)} samples")
        self.path.replay(self.batch, self.ctx)


def _skip(results: list) -> Any:
    return SKIP


class _Finish:
    """A job's finish: ``CpuPath.finish`` of its rows, labels and colors."""

    def __init__(self, path: CpuPath, rows: LazyTake, color):
        self.path, self.rows, self.color = path, rows, color

    def __call__(self, labels: list) -> Any:
        return self.path.finish(self.rows, labels, self.color)
