"""The device path: decode each batch on the GPU, augment it there in one fused kernel, hand it over in stream order.

With ``device="cuda"`` and a plan the fused kernel runs (any fast-path
plan whose resize is bilinear; ``unsupported``),
a batch goes through three stages:

1. reader threads (the pool): read each file, parse its header and draw the
   sample's crop, flips and colors; a file the GPU decoder would refuse
   (PNG, CMYK, progressive under some backends...) -- or every file, when
   decoding on the CPU (``decode_device="cpu"``, ROCm) -- is decoded here,
   only its crop region, into pinned memory;
2. the device stage (one thread: nvJPEG serializes its callers anyway):
   decode the batch's JPEGs in one batched call, copy the CPU-decoded ones
   over, and launch ``fastload.kernels.augment`` into a free output slot,
   all on a side stream; record the slot's event. It runs at most
   ``device_prefetch`` batches ahead of the training loop;
3. handover, in the training loop's thread: its current stream waits on
   the event (the host does not wait) and the labels, already on the
   device, come along.

Output slots: ``device_prefetch + 2`` preallocated batches (the ones being
made, the one the loop holds, the one it held). A slot is written again
only when (a) no tensor the training loop received still views it -- the
storage's use count says so, as ``OutputPool``'s reference count does on
the CPU -- and (b) the side stream has waited on an event recorded on the
loop's stream after that, so every kernel the loop queued on the batch has
run. A loop that keeps batches gets fresh ones instead (``overflow``).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import numpy as np
import torch
from PIL import Image

from fastload.kernels.augment import AugmentParams, augment_batch

from .batch import SampleReader
from .deliver import collate, to_device
from .decode import CpuDecoder, decode, decode_batch, pick_fastest
from .errors import DecodeError
from .pipeline import Job

# Device types the fused kernel path runs on. Tests add "cpu" to run it through Triton's interpreter.
KERNEL_DEVICE_TYPES = ("cuda",)


def unsupported(plan) -> str | None:
    """Why the fused kernel cannot run ``plan``'s geometry, or None when it can."""
    if plan.resample != Image.Resampling.BILINEAR:
        return "its resize is not bilinear (the kernel resamples like torchvision's bilinear, antialias=True)"
    return None


@dataclass
class _Sample:
    """One sample between the reader threads and the device stage."""

    position: int
    index: int
    path: str
    data: bytes
    header: Any
    geometry: Any
    label: Any
    image: torch.Tensor | None = None  # (C, H, W) uint8 when decoded on the CPU (pinned when CUDA is there)
    origin: tuple[int, int] = (0, 0)  # where ``image``'s top-left pixel lies in the whole image
    encoded: torch.Tensor | None = None  # the file as uint8, for the GPU decoder (shares ``data``)


class OutputSlots:
    """``count`` preallocated (N, 3, H, W) output batches on ``device``, reused only once the loop is done."""

    def __init__(self, count: int, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device,
                 memory_format: torch.memory_format):
        self.shape, self.dtype, self.device, self.memory_format = shape, dtype, device, memory_format
        self._slots = [torch.empty(shape, dtype=dtype, device=device, memory_format=memory_format)
                       for _ in range(count)]
        self._readers: list = [None] * count  # the stream each slot was last handed over on
        self.overflow = 0

    @property
    def nbytes(self) -> int:
        return sum(slot.numel() * slot.element_size() for slot in self._slots)

    def take(self, rows: int, stream) -> tuple[torch.Tensor, int | None]:
        """A batch of ``rows`` to write on ``stream`` (None off CUDA), and its slot (None: a fresh tensor)."""
        for i, slot in enumerate(self._slots):
            # users of the storage: the slot itself, the temporary storage object, and any view handed out
            if torch._C._storage_Use_Count(slot.untyped_storage()._cdata) > 2:
                continue
            reader = self._readers[i]
            if reader is not None and stream is not None:
                done = torch.cuda.Event()
                done.record(reader)  # after all the work the loop queued on this batch
                stream.wait_event(done)
            return slot[:rows], i
        self.overflow += 1
        return torch.empty((rows,) + self.shape[1:], dtype=self.dtype, device=self.device,
                           memory_format=self.memory_format), None

    def handed_over(self, slot: int | None, stream) -> None:
        if slot is not None:
            self._readers[slot] = stream


@dataclass
class _Ready:
    """A finished batch and what its handover needs."""

    batch: Any
    done: Any  # a torch.cuda.Event, or None off CUDA
    slot: int | None


class DevicePath(SampleReader):
    """Turns batches of dataset indices into jobs whose outputs are ``[images, labels]`` on ``device``.

    Args:
        decoders: the GPU decoder(s) from ``decode.choose_decoder``; with
            several, the first batch measures which is fastest. A
            ``CpuDecoder`` decodes every file in the reader threads.
        slots: the output slots (kept by the loader across epochs).
        (the others as ``SampleReader``'s)
    """

    def __init__(self, samples, plan, *, device: torch.device, decoders: list, slots: OutputSlots, **reader):
        super().__init__(samples, plan, **reader)
        self.device = device
        self.on_cuda = device.type == "cuda"
        self._chosen = decoders
        self.cpu = next((d for d in decoders if isinstance(d, CpuDecoder)), None)
        self.candidates = [d for d in decoders if not isinstance(d, CpuDecoder)]
        self.decoder = self.candidates[0] if len(self.candidates) == 1 else None
        self.slots = slots
        self.stream = torch.cuda.Stream(device) if self.on_cuda else None
        self.decoded_bytes_peak = 0

    @property
    def decoder_name(self) -> str:
        if self.cpu is not None:
            return "cpu"
        return self.decoder.name if self.decoder is not None else "choosing"

    # -- reader threads --------------------------------------------------------------------
    def jobs(self, batches: Iterable[list[tuple[int, int]]], epoch: int,
             order: list[int] | None = None) -> Iterator[Job]:
        """One job per batch of (position in epoch order, dataset index)."""
        for batch in batches:
            tasks = [self._task(position, index, epoch, order) for position, index in batch]
            yield Job(tasks, lambda samples: self._finish(samples, epoch, order))

    def _task(self, position: int, index: int, epoch: int, order):
        return lambda report: self.load_or_replace(
            lambda i: self._prepare(position, i, epoch, report), position, index, epoch, order)

    def _prepare(self, position: int, index: int, epoch: int, report, on_cpu: bool = False) -> _Sample:
        """Read and draw a sample; decode it here unless the GPU decoder takes it (every candidate, while
        they are still to be measured), in which case its bytes are made ready for the batched call."""
        path, label, data, header, geometry = self.read(index, epoch, report)
        sample = _Sample(position, index, path, data, header, geometry, label)
        gpus = [self.decoder] if self.decoder is not None else self.candidates
        if on_cpu or not gpus or not all(gpu.accepts(data) for gpu in gpus):
            self._decode_on_cpu(sample, epoch)
        else:  # one buffer for the GPU decoder and, should it fail, the CPU fallback
            sample.data = bytearray(data)
            sample.encoded = torch.frombuffer(sample.data, dtype=torch.uint8)
        return sample

    def _decode_on_cpu(self, sample: _Sample, epoch: int) -> torch.Tensor:
        """Decode the sample's crop region on the CPU into (pinned) memory; returns it as (C, H, W)."""
        started = time.perf_counter()
        decoded = decode(sample.index, sample.path, sample.data, sample.header, sample.geometry, 1)
        self.check_corrupt(decoded, epoch, sample.index, sample.path)
        image = decoded.image if decoded.image.mode in ("RGB", "L") else decoded.image.convert("RGB")
        pixels = np.asarray(image)
        # pinned from a reader thread, whose current device would otherwise be GPU 0: under torchrun every
        # rank would create a CUDA context there (torch's pin-memory thread sets its device for this too)
        with torch.cuda.device(self.device) if self.on_cuda else contextlib.nullcontext():
            host = torch.empty(pixels.shape, dtype=torch.uint8, pin_memory=self.on_cuda)
        host.numpy()[...] = pixels
        sample.image = host.permute(2, 0, 1) if host.dim() == 3 else host[None]
        sample.origin = decoded.origin
        self.stats.add("decode", time.perf_counter() - started)
        return sample.image

    # -- the device stage ------------------------------------------------------------------
    def _finish(self, samples: list[_Sample], epoch: int, order) -> _Ready:
        started = time.perf_counter()
        stream = self.stream
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            images = self._decode(samples, epoch, order)
            self.decoded_bytes_peak = max(self.decoded_bytes_peak, sum(i.numel() for i in images))
            out, slot = self.slots.take(len(samples), stream)
            augment_batch(images, self._params(samples), self.plan.output_size,
                          self.slots.dtype, self.plan.scale, self.plan.shift,
                          quantize=self.plan.color_quantized, out=out)
            labels = [self.label(sample.label) for sample in samples]
            if self.collate_fn is not None:
                batch = collate(self.collate_fn, list(zip(out.unbind(0), labels)), f"a batch of {len(samples)} images")
            else:
                batch = [out, to_device(self.labels(labels), self.device, pin=False)]
            done = None
            if stream is not None:
                for image in images:  # decoded on the decoder's stream, read on ours
                    image.record_stream(stream)
                done = torch.cuda.Event()
                done.record(stream)
        self.stats.add("copy", time.perf_counter() - started)
        self.stats.count_batch(len(samples))
        self.stats.decoder, self.stats.device_bytes = self.decoder_name, self.device_bytes
        self.stats.overflow = self.slots.overflow
        return _Ready(batch, done, slot)

    def _decode(self, samples: list[_Sample], epoch: int, order) -> list[torch.Tensor]:
        """Every sample's image on the device: GPU-decoded in one batch, the others copied over."""
        pending = [s for s in samples if s.image is None]
        if pending:
            encoded = [s.encoded for s in pending]  # all taken by every candidate (``_prepare``)
            if self.decoder is None:  # measure the candidates on this batch, once
                self.decoder = pick_fastest(self.candidates, encoded)[0]
                if self.decoder is not None:  # kept for the loader's later epochs
                    self._chosen[:] = [self.decoder]
            decoder = self.decoder or self.candidates[0]
            items = [(s.index, s.path, s.data) for s in pending]
            results = decode_batch(items, decoder, lambda i: self._decode_on_cpu(pending[i], epoch), encoded)
            for sample, result in zip(pending, results):
                if isinstance(result, DecodeError):
                    self.skip(result, epoch)  # raises unless on_error="skip"
                    self._replace(sample, epoch, order)
                else:
                    sample.image = result
        return [_on_device(s.image, self.device) for s in samples]

    def _replace(self, sample: _Sample, epoch: int, order) -> None:
        """Under on_error="skip": put the next loadable sample (decoded on the CPU) in ``sample``'s place."""
        replacement = self.load_or_replace(
            lambda i: self._prepare(sample.position, i, epoch, lambda *_: None, on_cpu=True),
            sample.position, sample.index, epoch, order, start=1)
        sample.__dict__.update(replacement.__dict__)

    def _params(self, samples: list[_Sample]) -> AugmentParams:
        """The kernel's per-image crop boxes (relative to each decoded image), flips and colors, on the host."""
        boxes, windows, flips, ops, factors = [], [], [], [], []
        out_h, out_w = self.plan.output_size
        for s in samples:
            g = s.geometry
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
                                  factors if self.plan.color_slots else None, windows=windows)

    # -- handover (the training loop's thread) -----------------------------------------------
    def handover(self, ready: _Ready) -> Any:
        if ready.done is not None:
            consumer = torch.cuda.current_stream(self.device)
            consumer.wait_event(ready.done)
            for tensor in _tensors(ready.batch):
                if tensor.is_cuda:  # made on our stream, used on the loop's: free only after its use there
                    tensor.record_stream(consumer)
            self.slots.handed_over(ready.slot, consumer)
        return ready.batch

    @property
    def device_bytes(self) -> int:
        """Device memory the loader's own tensors take: the output slots and the largest decoded batch."""
        return self.slots.nbytes + self.decoded_bytes_peak


def _on_device(image: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``image`` on ``device``; a CHW view of HWC pixels travels as its HWC storage, in one copy."""
    if image.device == device:
        return image
    if image.is_contiguous():
        return image.to(device, non_blocking=True)
    return image.permute(1, 2, 0).to(device, non_blocking=True).permute(2, 0, 1)


def _tensors(batch: Any) -> Iterator[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, dict):
        for value in batch.values():
            yield from _tensors(value)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            yield from _tensors(value)
