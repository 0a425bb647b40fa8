"""Hand finished batches to the training loop: collate, pinned memory, the copy to the device.

Buffers the batches are made in are ``fastload.buffers``'; the GPU's
delivery route (slots, side stream, handover) is ``device.DeviceDelivery``.
"""

from __future__ import annotations

from typing import Any

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
