"""Hand finished batches to the training loop: collate, pinned memory, the copy to the device, and the
GPU's delivery route (``DeviceDelivery``: output slots, side stream, handover), which the CPU fast path
on a CUDA device and the device path share.

Buffers the batches are made in are ``fastload.buffers``'.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from .buffers import BufferPool
from .cpu_augment import finish_batch
from .workers import no_worker_info


def collate(collate_fn, items: list, what: str) -> Any:
    """``collate_fn(items)``, naming ``what`` (the batch's samples) in an error, and without the loader
    thread's worker info: torch's default_collate would put a worker process's batch in shared memory for
    its pipe, and here it goes nowhere."""
    try:
        with no_worker_info():
            return collate_fn(items)
    except Exception as error:
        error.add_note(f"fastload: raised in collate_fn for {what}")
        raise


def _pin_available() -> bool:
    return torch.cuda.is_available()


def to_device(data: Any, device: torch.device | None, pin: bool) -> Any:
    """Pin and/or move a collated batch (tensors inside lists, tuples, dicts) like torch would."""
    if pin and _pin_available() and (device is None or device.type == "cpu"):
        from torch.utils.data._utils.pin_memory import pin_memory
        data = pin_memory(data)
    if device is None or device.type == "cpu":
        return data
    if isinstance(data, torch.Tensor):
        return data.to(device, non_blocking=True)
    if isinstance(data, dict):
        return type(data)({key: to_device(value, device, False) for key, value in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(to_device(value, device, False) for value in data))
    if isinstance(data, (list, tuple)):
        return type(data)(to_device(value, device, False) for value in data)
    return data


class DeviceDelivery:
    """The one GPU delivery route, shared by the device path and the CPU fast path on a CUDA device: output
    slots on the device (a ``BufferPool``), a side stream the batch is made on, and the handover that makes
    the training loop's stream wait for it. Made once, for the loader's life (the stream at first use, so
    that making a loader touches no GPU)."""

    def __init__(self, device: torch.device, batch_size: int, plan, options, slots: int | None = None):
        self.device = device
        self.on_cuda = device.type == "cuda"
        self._stream = None
        self._lane_streams: dict = {}  # lane -> its side stream, for lanes after the first
        height, width = plan.output_size
        self.slots = BufferPool(slots or options.device_prefetch + 2, (batch_size, 3, height, width),
                                plan.output_dtype, device, memory_format=options.memory_format)

    @property
    def stream(self):
        """The side stream (None off CUDA)."""
        if self._stream is None and self.on_cuda:
            self._stream = torch.cuda.Stream(self.device)
        return self._stream

    def lane_stream(self, lane: int):
        """The side stream of a parallel lane: lane 0's is ``stream``, the others' are made at first use."""
        if lane == 0 or not self.on_cuda:
            return self.stream
        if lane not in self._lane_streams:
            self._lane_streams[lane] = torch.cuda.Stream(self.device)
        return self._lane_streams[lane]

    def on_stream(self, stream=None):
        """Queue the work that follows on the side stream (or ``stream``, a lane's)."""
        stream = stream if stream is not None else self.stream
        return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()

    def take(self, rows: int, stream=None) -> tuple[torch.Tensor, int | None]:
        """An output batch to write on the side stream (after the loop's last use of that slot)."""
        return self.slots.take(rows, stream if stream is not None else self.stream)

    def finish_staged(self, staged: torch.Tensor, plan, color, staging: BufferPool, staging_slot: int | None):
        """A staged uint8 batch (pinned host memory) copied over and converted into an output slot."""
        on_device = staged.to(self.device, non_blocking=True)
        staging.release_after(staging_slot, self.stream)  # the host rewrites it only after this copy
        if color is not None:
            color = tuple(part.to(self.device, non_blocking=True) for part in color)
        out, slot = self.take(len(staged))
        return finish_batch(on_device, plan, out=out, color=color), slot

    def ready(self, batch: Any, slot: int | None, stream=None) -> "Ready":
        """``batch`` as made so far on the side stream (or ``stream``), for ``handover``."""
        done = None
        stream = stream if stream is not None else self.stream
        if stream is not None:
            done = torch.cuda.Event()
            done.record(stream)
        return Ready(batch, done, slot)

    def handover(self, ready: "Ready") -> Any:
        """In the training loop's thread: its stream waits for the batch (the host does not)."""
        if ready.done is not None:
            consumer = torch.cuda.current_stream(self.device)
            consumer.wait_event(ready.done)
            for tensor in _tensors(ready.batch):
                if tensor.is_cuda:  # made on our stream, used on the loop's: free only after its use there
                    tensor.record_stream(consumer)
            self.slots.release_after(ready.slot, consumer)
        return ready.batch

    @property
    def overflow(self) -> int:
        return self.slots.overflow


@dataclass
class Ready:
    """A finished batch and what its handover needs."""

    batch: Any
    done: Any  # a torch.cuda.Event, or None off CUDA
    slot: int | None



def _tensors(batch: Any) -> Iterator[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, dict):
        for value in batch.values():
            yield from _tensors(value)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            yield from _tensors(value)
