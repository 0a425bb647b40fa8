"""Hand finished batches to the training loop: staging ring, pinned memory, device copy.

Samples are staged as uint8 (N, H, W, 3) in a ring of preallocated buffers,
one per batch in flight, pinned when CUDA is available so the copy to the GPU
is asynchronous. Only uint8 crosses PCIe (4x fewer bytes than float32); the
float conversion and normalization then run on the device.

Finished CPU batches go into an ``OutputPool``: a fresh 38 MB float tensor per
batch costs ~9,000 page faults (a quarter of the CPU path's time on 2 cores),
so output buffers are reused -- but only once the training loop has dropped
every tensor that views them. Holding on to a batch (appending it to a list,
say) is as safe as with torch's DataLoader: that buffer is simply not reused.
"""

from __future__ import annotations

import queue
import sys
import threading
from typing import Any

import numpy as np
import torch

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


class StagingRing:
    """``slots`` preallocated uint8 batch buffers of ``shape``, reused in turn."""

    def __init__(self, slots: int, shape: tuple[int, ...], pin: bool):
        pin = pin and _pin_available()
        self._free: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(slots):
            self._free.put(torch.empty(shape, dtype=torch.uint8, pin_memory=pin))

    def acquire(self) -> torch.Tensor:
        # Never blocks in practice: the pipeline holds at most `slots` jobs.
        return self._free.get()

    def release(self, buffer: torch.Tensor) -> None:
        self._free.put(buffer)


class OutputPool:
    """Up to ``capacity`` reusable host output buffers for batches of ``shape`` and ``dtype``.

    Each buffer is a numpy array wrapped by ``torch.from_numpy``: the tensor's
    storage holds a reference to the array until the last tensor viewing it
    is freed, so the array's reference count says exactly when the training
    loop is done with it. When every pooled buffer is still in use, ``take``
    returns a fresh tensor.
    """

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype, capacity: int):
        self.shape, self.dtype, self.capacity = tuple(shape), dtype, capacity
        self._nbytes = int(np.prod(shape)) * torch.empty((), dtype=dtype).element_size()
        self._arrays: list[np.ndarray] = []
        self._lock = threading.Lock()

    def take(self, rows: int) -> torch.Tensor:
        """An output tensor for a batch of ``rows`` samples, unreferenced by anyone else."""
        with self._lock:
            array = next((self._arrays[i] for i in range(len(self._arrays))
                          # references: the pool's list and getrefcount's argument only
                          if sys.getrefcount(self._arrays[i]) == 2), None)
            if array is None and len(self._arrays) < self.capacity:
                array = np.empty(self._nbytes, np.uint8)
                self._arrays.append(array)
        if array is None:
            return torch.empty((rows,) + self.shape[1:], dtype=self.dtype)
        return torch.from_numpy(array).view(self.dtype).view(self.shape)[:rows]


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
