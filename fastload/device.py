"""The device path: decode each batch on the GPU, augment it there in one fused kernel, hand it over in stream order.

With ``device="cuda"`` and a plan the fused kernel runs (any fast-path
plan whose resize is bilinear; ``unsupported``),
a batch goes through three stages:

1. reader threads (the pool): read each file, parse its header and draw the
   sample's crop, rotation, flips and colors; a file the GPU decoder would refuse
   (PNG, CMYK, progressive under some backends...) -- or every file, when
   decoding on the CPU (``decode_device="cpu"``, or no GPU decoder passed its probe) -- is decoded here,
   only its crop region, into pinned memory;
2. the device stage (one thread: torchvision's GPU decoder serializes its callers anyway):
   decode the batch's JPEGs in one batched call, copy the CPU-decoded ones
   over, and launch ``fastload.kernels.augment`` into a free output slot,
   all on a side stream; record the slot's event. It runs at most
   ``device_prefetch`` batches ahead of the training loop. A backend that
   decodes in parallel (``lanes`` > 1: nvImageCodec, one decoder instance
   each) runs this stage in the pool instead, up to ``lanes`` batches at
   once, each lane on its own decoder and side stream;
3. handover, in the training loop's thread: its current stream waits on
   the event (the host does not wait) and the labels, already on the
   device, come along.

Where the loader chose the GPU backend itself (``decoder=None``), the split
of JPEGs between the GPU and the reader threads' CPU decoder is balanced
by measured rates (``fastload.balance``): the reader threads also decode
the smallest GPU-decodable images when they have time to spare; a forced
``decoder=`` sends every file its backend accepts to it.

Output slots: ``device_prefetch + 2`` batches (the ones being made, the
one the loop holds, the one it held) in a ``buffers.BufferPool``: a slot is
written again only when (a) no tensor the training loop received still
views it and (b) the side stream has waited on an event recorded on the
loop's stream after that, so every kernel the loop queued on the batch has
run. A loop that keeps batches gets fresh ones instead (``overflow``).
``deliver.DeviceDelivery`` (slots, side stream, handover) is also the CPU
fast path's route to a CUDA device.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import torch
from PIL import Image

from fastload.kernels.augment import AugmentParams, Warp, augment_batch

from .balance import Balance
from .decode import decode
from .deliver import DeviceDelivery, Ready
from .errors import DecodeError
from .gpu_decode import CpuDecoder, decode_batch, pick_fastest
from .thread_pool import Job, LoaderPath, Stages, batches_ahead
from .sample_reader import EpochContext, SampleReader

# Device types the fused kernel path runs on. Tests add "cpu" to run it through Triton's interpreter.
KERNEL_DEVICE_TYPES = ("cuda",)


def unsupported(plan) -> str | None:
    """Why the fused kernel cannot run ``plan``'s geometry, or None when it can."""
    if plan.resample != Image.Resampling.BILINEAR:
        return "its resize is not bilinear (the kernel resamples like torchvision's bilinear, antialias=True)"
    if getattr(plan.geometry, "box_resize", False):
        return ("its resize keeps a scale that is not a ratio of whole sizes (DALI's subpixel scale): the "
                "kernel's crop boxes are whole pixels")
    affine = getattr(plan, "affine", None)
    if affine is not None and affine.pil and not affine.nearest:
        return ("its bilinear rotation/affine step meets a PIL image: Pillow's rule at the rotated border "
                "(clamp inside, fill outside) is not the kernel's (torchvision's tensor rule), up to 175 "
                "levels apart there; put ToImage() before the step to run it on the device")
    return None


@dataclass
class _Sample:
    """One sample between the reader threads and the device stage."""

    position: int
    index: int
    file: str  # its file path, or its name in a source
    data: bytes
    header: Any
    draw: Any  # its Draw (fastload.transforms)
    label: Any
    image: torch.Tensor | None = None  # (C, H, W) uint8 when decoded on the CPU (pinned when CUDA is there)
    origin: tuple[int, int] = (0, 0)  # where ``image``'s top-left pixel lies in the whole image
    encoded: torch.Tensor | None = None  # the file as uint8, for the GPU decoder (shares ``data``)
    refused: bool = False  # decoded on the CPU because the GPU decoder does not take it


class DevicePath(SampleReader, LoaderPath):
    """Turns an epoch's batches of (position, dataset index) into jobs whose outputs are ``[images, labels]``
    on ``device``: the three stages of the module docstring.

    Args:
        decoders: returns the GPU decoder(s) (``gpu_decode.choose_decoder``,
            whose probe decodes on the device): called at the first epoch, on
            first use. With several, the first batch measures which is
            fastest, and the choice is kept for the loader's life. A
            ``CpuDecoder`` decodes every file in the reader threads.
        (the others as ``SampleReader``'s)

    ``balance``: the CPU/GPU split (``fastload.balance.Balance``) when the
    loader chose the backend itself, else None; ``lanes``: how many batches
    the device stage decodes at once (the backend's ``lanes``, 1 without).
    """

    fast = on_device = True

    def __init__(self, loader, samples, plan, target_transform, read, *, decoders: Callable[[], list]):
        super().__init__(loader, samples, plan, target_transform, read)
        self._choose_decoders = decoders
        self.cpu, self.candidates, self.decoder = None, [], None  # chosen by the first stages()
        self.balance: Balance | None = None
        self.parallel = False  # whether the device stage runs in the pool, one batch per free lane
        self._lanes: queue.SimpleQueue | None = None  # (lane, decoder) pairs free to run a batch
        self._choosing = threading.Lock()
        self._kernel_lock = threading.Lock()  # Triton's interpreter (off CUDA) runs one launch at a time
        self.delivery = DeviceDelivery(self.device, loader.batch_size, plan, self.options)
        self.decoded_bytes_peak = 0
        # the kernel samples a rotation or affine map as torchvision does a tensor, whatever the plan's meets
        affine = plan.affine
        self.warp = None if affine is None else Warp(affine.input_size, affine.nearest, affine.fill)

    def _choose(self) -> None:
        if self._choose_decoders is None:
            return
        decoders, self._choose_decoders = self._choose_decoders(), None
        self.cpu = next((d for d in decoders if isinstance(d, CpuDecoder)), None)
        self.candidates = [d for d in decoders if not isinstance(d, CpuDecoder)]
        self.decoder = self.candidates[0] if len(self.candidates) == 1 else None
        if self.candidates and self.options.decoder is None:  # chosen by the loader: balanced with the CPU
            self.balance = Balance(max(1.0, (self.loader.num_workers or 1) / 2))
        self.parallel = self.loader.num_workers > 0 and any(_lane_count(c) > 1 for c in self.candidates)

    @property
    def lanes(self) -> int:
        """How many batches the device stage decodes at once: the chosen backend's ``lanes`` (1 until chosen)."""
        return _lane_count(self.decoder) if self.parallel and self.decoder is not None else 1

    def _lane_decoders(self) -> queue.SimpleQueue:
        """The lanes of the chosen decoder: itself and ``lanes - 1`` clones, each used by one batch at a time."""
        if self._lanes is None:
            lanes: queue.SimpleQueue = queue.SimpleQueue()
            for lane in range(self.lanes):
                lanes.put((lane, self.decoder if lane == 0 else self.decoder.clone()))
            self._lanes = lanes
        return self._lanes

    @property
    def decoder_name(self) -> str:
        """The backend's description for loader.stats: "torchvision (nvjpeg)", "torchvision (rocjpeg)",
        "torchcodec" or "cpu"; "choosing" until the first batch has measured the candidates."""
        if self.cpu is not None:
            return self.cpu.description
        return self.decoder.description if self.decoder is not None else "choosing"

    def stages(self, batches: Iterator[list[tuple[int, int]]], epoch: int, order) -> Stages:
        """Reader threads per sample; the device stage in order on one thread, ``device_prefetch`` batches
        ahead of the loop; the handover in the loop's thread. Encoded batches in flight: those on the GPU,
        and a few being read (one thread's ``batches_ahead``)."""
        self._choose()
        prefetch = self.options.device_prefetch
        return Stages(self._jobs(batches, self.context(epoch, order)),
                      in_flight=prefetch + batches_ahead(self.loader, threads=1),
                      finish_in_order=0 if self.parallel else prefetch, handover=self.delivery.handover)

    # -- reader threads --------------------------------------------------------------------
    def _jobs(self, batches, ctx: EpochContext) -> Iterator[Job]:
        for batch in batches:
            yield Job([_Prepare(self, position, index, ctx) for position, index in batch],
                      functools.partial(self._finish, ctx=ctx),
                      what=[self.samples[index][0] for _, index in batch])

    def _prepare(self, position: int, index: int, repeat: int, ctx: EpochContext, report,
                 on_cpu: bool = False) -> _Sample:
        """Read and draw a sample; decode it here unless the GPU decoder takes it (every candidate, while
        they are still to be measured), in which case its bytes are made ready for the batched call."""
        file, label, data, header, draw = self.read(index, repeat, ctx, report)
        sample = _Sample(position, index, file, data, header, draw, label)
        gpus = [self.decoder] if self.decoder is not None else self.candidates
        if on_cpu or not gpus or not all(gpu.accepts(data) for gpu in gpus):
            sample.refused = bool(gpus) and not on_cpu
            self._decode_on_cpu(sample, ctx)
        elif self.balance is not None and self.decoder is not None and self.balance.to_cpu(
                header.width * header.height):  # the CPU has time for it: the balancer's share
            self._decode_on_cpu(sample, ctx)
        else:  # one buffer for the GPU decoder and, should it fail, the CPU fallback
            sample.data = bytearray(data)
            sample.encoded = torch.frombuffer(sample.data, dtype=torch.uint8)
        return sample

    def _decode_on_cpu(self, sample: _Sample, ctx: EpochContext) -> torch.Tensor:
        """The one CPU fallback: decode the sample's crop region on the CPU into (pinned) memory; returns it
        as (C, H, W). For files the GPU decoder refuses, fails, or every file with a CPU decoder."""
        started = time.perf_counter()
        decoded = decode(sample.index, sample.file, sample.data, sample.header, sample.draw, 1)
        ctx.errors.check_corrupt(decoded.warning, ctx.epoch, sample.index, sample.file)
        image = decoded.image if decoded.image.mode in ("RGB", "L") else decoded.image.convert("RGB")
        pixels = np.asarray(image)
        # pinned from a reader thread, whose current device would otherwise be GPU 0: under torchrun every
        # rank would create a CUDA context there (torch's pin-memory thread sets its device for this too)
        on_cuda = self.delivery.on_cuda
        with torch.cuda.device(self.device) if on_cuda else contextlib.nullcontext():
            host = torch.empty(pixels.shape, dtype=torch.uint8, pin_memory=on_cuda)
        host.numpy()[...] = pixels
        sample.image = host.permute(2, 0, 1) if host.dim() == 3 else host[None]
        sample.origin = decoded.origin
        seconds = time.perf_counter() - started
        self.stats.add("decode", seconds)
        if self.balance is not None:
            self.balance.cpu_done(seconds)
        return sample.image

    # -- the device stage ------------------------------------------------------------------
    def _finish(self, samples: list[_Sample], ctx: EpochContext) -> Ready:
        if not self.parallel:
            return self._finish_on(samples, ctx, 0, None)
        with self._choosing:
            if self.decoder is None:  # the first batch measures the candidates: on lane 0, alone
                return self._finish_on(samples, ctx, 0, None)
            lanes = self._lane_decoders()
        lane, decoder = lanes.get()  # a pool thread waits here for a free lane
        try:
            return self._finish_on(samples, ctx, lane, decoder)
        finally:
            lanes.put((lane, decoder))

    def _finish_on(self, samples: list[_Sample], ctx: EpochContext, lane: int, decoder) -> Ready:
        """The device stage of one batch on ``lane`` (its side stream) with ``decoder`` (None: the chosen one)."""
        started = time.perf_counter()
        delivery = self.delivery
        stream = delivery.lane_stream(lane)
        with delivery.on_stream(stream):
            images = self._decode(samples, ctx, decoder)
            self.decoded_bytes_peak = max(self.decoded_bytes_peak, sum(i.numel() for i in images))
            out, slot = delivery.take(len(samples), stream)
            with contextlib.nullcontext() if delivery.on_cuda else self._kernel_lock:
                augment_batch(images, self._params(samples), self.plan.output_size,
                              out.dtype, values=self.plan.values,
                              quantize=self.plan.color_quantized, out=out, warp=self.warp)
            batch = self.tail(out, [self.label(sample.label) for sample in samples])
            if stream is not None:
                for image in images:  # decoded on the decoder's stream, read on ours
                    image.record_stream(stream)
            ready = delivery.ready(batch, slot, stream)
        self.stats.add("copy", time.perf_counter() - started)
        self.stats.device(self.decoder_name, self.device_bytes, delivery.overflow)
        return ready

    def _decode(self, samples: list[_Sample], ctx: EpochContext, decoder=None) -> list[torch.Tensor]:
        """Every sample's image on the device: GPU-decoded in one batch, the others copied over."""
        pending = [s for s in samples if s.image is None]
        if pending:
            encoded = [s.encoded for s in pending]  # all taken by every candidate (``_prepare``)
            if self.decoder is None:  # measure the candidates on this batch, once for the loader's life
                self.decoder = pick_fastest(self.candidates, encoded)[0]
            decoder = decoder or self.decoder or self.candidates[0]
            regions = self._regions(pending, decoder)
            items = [(s.index, s.file, s.data) for s in pending]
            started = time.perf_counter()
            results = decode_batch(items, decoder, functools.partial(self._fallback, pending, ctx), encoded,
                                   regions)
            on_gpu = 0
            for k, (sample, result) in enumerate(zip(pending, results)):
                if isinstance(result, DecodeError):
                    ctx.errors.skip(result, ctx.epoch)  # raises unless on_error="skip"
                    self._replace(sample, ctx)
                elif sample.image is not result:  # the GPU's (the CPU fallback sets ``sample.image`` itself)
                    sample.image = result
                    on_gpu += 1
                    if regions is not None and regions[k] is not None:
                        sample.origin = regions[k][:2]
            if self.balance is not None:
                self.balance.gpu_done(on_gpu, time.perf_counter() - started)
        if self.balance is not None:
            self.balance.batch_done(len(samples), sum(s.refused for s in samples))
        return [_on_device(s.image, self.device) for s in samples]

    def _regions(self, pending: list[_Sample], decoder) -> list | None:
        """Per pending sample, the window its GPU decode reads alone (``gpu_nvimgcodec.region_pays``), or
        None for the whole image; None when no sample has one or ``decoder`` decodes whole images only."""
        if not getattr(decoder, "decodes_regions", False) or self.warp is not None:
            return None
        from .gpu_nvimgcodec import region_pays
        regions = []
        for s in pending:
            g, width, height = s.draw, s.header.width, s.header.height
            window = g.region(width, height, 1) if g is not None and g.crop is not None else None
            regions.append(window if region_pays(window, width, height) else None)
        return regions if any(r is not None for r in regions) else None

    def _fallback(self, pending: list[_Sample], ctx: EpochContext, i: int) -> torch.Tensor:
        return self._decode_on_cpu(pending[i], ctx)

    def _replace(self, sample: _Sample, ctx: EpochContext) -> None:
        """Under on_error="skip": put the next loadable sample (decoded on the CPU) in ``sample``'s place."""
        replacement = self.load_or_replace(
            functools.partial(self._prepare, sample.position, ctx=ctx, report=_ignore, on_cpu=True),
            sample.position, sample.index, ctx, start=1)
        sample.__dict__.update(replacement.__dict__)

    def _params(self, samples: list[_Sample]) -> AugmentParams:
        """The kernel's per-image crop boxes (relative to each decoded image), flips, colors and inverse
        maps, on the host."""
        boxes, windows, flips, ops, factors = [], [], [], [], []
        out_h, out_w = self.plan.resampled_size
        for s in samples:
            g = s.draw
            height, width = s.image.shape[1:]
            left, top, right, bottom = g.crop if g.crop is not None else (0, 0, width, height)
            x0, y0 = s.origin
            boxes.append((top - y0, left - x0, bottom - top, right - left))
            if g.post_crop is not None:  # Resize then CenterCrop: a window of the whole image's resize
                resize_w, resize_h = g.resize
                windows.append((resize_h, resize_w, g.post_crop[1], g.post_crop[0]))
            else:
                windows.append((out_h, out_w, 0, 0))
            flips.append((int(g.hflip), int(g.vflip)))
            ops.append([op for op, _ in g.color])
            factors.append([factor for _, factor in g.color])
        return AugmentParams.make(boxes, flips, ops if self.plan.color_slots else None,
                                  factors if self.plan.color_slots else None, windows=windows,
                                  matrices=[s.draw.warp for s in samples] if self.warp is not None else None)

    @property
    def device_bytes(self) -> int:
        """Device memory the loader's own tensors take: the output slots and the largest decoded batch."""
        return self.delivery.slots.nbytes + self.decoded_bytes_peak


class _Prepare:
    """A reader-thread task: one sample (or its replacement) read, drawn, and decoded on the CPU or made
    ready for the batched GPU decode."""

    def __init__(self, path: DevicePath, position: int, index: int, ctx: EpochContext):
        self.path, self.position, self.index, self.ctx = path, position, index, ctx

    def __call__(self, report) -> _Sample:
        prepare = functools.partial(self.path._prepare, self.position, ctx=self.ctx, report=report)
        return self.path.load_or_replace(prepare, self.position, self.index, self.ctx)


def _lane_count(decoder) -> int:
    """How many batches ``decoder`` can decode at once: its ``lanes`` where it can ``clone`` itself, else 1."""
    return max(1, int(getattr(decoder, "lanes", 1))) if hasattr(decoder, "clone") else 1


def _ignore(stage: str, what: str) -> None:
    """A report function for work no timeout watches."""


def _on_device(image: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``image`` on ``device``; a CHW view of HWC pixels travels as its HWC storage, in one copy."""
    if image.device == device:
        return image
    if image.is_contiguous():
        return image.to(device, non_blocking=True)
    return image.permute(1, 2, 0).to(device, non_blocking=True).permute(2, 0, 1)
