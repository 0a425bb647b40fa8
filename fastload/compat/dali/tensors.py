"""DALI's ``nvidia.dali.tensors``: the classes a pipeline's outputs are.

``pipe.run()`` gives one ``TensorListCPU`` or ``TensorListGPU`` per output
(both ``TensorList``: per-sample torch tensors, or one dense batch kept
uncopied), so a script's ``isinstance(out, TensorListGPU)`` reads as in DALI.
A sample (``out[i]``) and a dense batch (``out.as_tensor()``) are a
``TensorCPU`` or ``TensorGPU``: a torch tensor (a view, no copy) whose
``shape`` can also be called as DALI's method, with DALI's ``as_cpu()``; its
``dtype``, ``layout`` and ``ndim`` stay torch's. ``at(i)`` and
``as_array()`` give numpy arrays, as in DALI. ``copy_to_external(ptr)``
copies a tensor, or a list's samples back to back, to memory at a raw
address (a ``ctypes.c_void_p``, as DALI takes it; an int address too), as
DALI's plugins and its SSD example's ``feed_ndarray`` do.
"""

from __future__ import annotations

import contextlib
import ctypes

import numpy as np
import torch

from .types import DALI_TYPES

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]


class Shape(tuple):
    """A tensor's shape: a tuple as torch's ``shape`` reads (``t.shape[0]``), and called, as DALI's
    ``shape()`` method, the list of its dimensions."""

    def __call__(self) -> list[int]:
        return list(self)

    def numel(self) -> int:
        return int(np.prod(self, dtype=np.int64))


class _Tensor(torch.Tensor):
    """One DALI tensor: a torch tensor (operations on it give plain torch tensors)."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __new__(cls, data, layout=None):  # DALI's TensorCPU(array, layout): the array's data
        return torch.as_tensor(np.asarray(data) if not isinstance(data, torch.Tensor) else data).as_subclass(cls)

    @property
    def shape(self) -> Shape:
        return Shape(super().shape)

    def as_cpu(self) -> "TensorCPU":
        return self.as_subclass(torch.Tensor).cpu().as_subclass(TensorCPU)

    def copy_to_external(self, ptr, cuda_stream=None, non_blocking: bool = False,
                         use_copy_kernel: bool = False) -> None:
        """Copy this tensor's bytes to the memory at ``ptr`` (host memory for a TensorCPU, GPU memory for a
        TensorGPU, on ``cuda_stream`` or torch's current stream), as DALI's."""
        _copy_out([self.as_subclass(torch.Tensor)], ptr, cuda_stream, non_blocking)


class TensorCPU(_Tensor):
    """A sample (or a dense batch) in host memory (DALI's ``TensorCPU``)."""


class TensorGPU(_Tensor):
    """A sample (or a dense batch) in GPU memory (DALI's ``TensorGPU``)."""

    def __new__(cls, data, layout=None):
        return torch.as_tensor(np.asarray(data) if not isinstance(data, torch.Tensor) else data,
                               device="cuda").as_subclass(cls)


def tensor(value: torch.Tensor, device: str = "cpu") -> _Tensor:
    """``value`` as DALI's class for a list on ``device`` ("cpu" or "gpu"): a view, no copy."""
    return value.as_subclass(TensorCPU if device == "cpu" else TensorGPU)


class TensorList:
    """One output of a batch, as DALI's ``TensorListCPU``/``TensorListGPU`` reads: per-sample tensors.

    ``TensorList(...)`` makes a ``TensorListCPU`` or a ``TensorListGPU`` (by
    ``device``). ``at(i)`` gives sample i as a numpy array (CPU lists, as in
    DALI); ``list[i]`` the sample as a ``TensorCPU``/``TensorGPU``;
    ``as_tensor()`` the dense batch as one (a torch tensor, uncopied);
    ``as_cpu()`` a CPU copy. ``layout()`` is the per-sample layout ("HWC",
    "CHW" or ""); ``tensors`` the samples as plain torch tensors.
    """

    def __new__(cls, tensors=None, layout: str = "", device: str = "cpu", dense=None):
        if cls is TensorList:
            cls = TensorListCPU if device == "cpu" else TensorListGPU
        return super().__new__(cls)

    def __init__(self, tensors: list[torch.Tensor] | None, layout: str = "", device: str = "cpu",
                 dense: torch.Tensor | None = None):
        self._tensors, self._layout, self.device, self._dense = tensors, layout or "", device, dense

    @classmethod
    def from_batch(cls, batch: torch.Tensor, layout: str = "", device: str = "cpu") -> "TensorList":
        """A dense batch (first dimension: samples) kept as it is: ``as_tensor()`` returns it, uncopied."""
        return TensorList(None, layout, device, dense=batch)

    @property
    def tensors(self) -> list[torch.Tensor]:
        if self._tensors is None:
            self._tensors = list(self._dense.unbind(0))
        return self._tensors

    def __len__(self) -> int:
        return len(self._dense) if self._dense is not None else len(self._tensors)

    def __iter__(self):
        return (tensor(t, self.device) for t in self.tensors)

    def __getitem__(self, i: int) -> _Tensor:
        return tensor(self.tensors[i], self.device)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} samples, layout={self._layout!r}, dtype={self.dtype})"

    def at(self, i: int) -> np.ndarray:
        if self.device != "cpu":
            raise RuntimeError("TensorListGPU has no at(); call as_cpu() first (as in DALI)")
        return self.tensors[i].numpy()

    def layout(self) -> str:
        return self._layout

    def set_layout(self, layout: str) -> None:
        self._layout = layout or ""

    @property
    def dtype(self):
        return DALI_TYPES.get(self.tensors[0].dtype) if self.tensors else None

    def shape(self) -> list[tuple[int, ...]]:
        return [tuple(t.shape) for t in self.tensors]

    def ndim(self) -> int:
        return self.tensors[0].dim() if self.tensors else 0

    def is_dense_tensor(self) -> bool:
        return self._dense is not None or len({tuple(t.shape) for t in self.tensors}) <= 1

    def as_tensor(self) -> _Tensor:
        if self._dense is not None:
            return tensor(self._dense, self.device)
        if not self.is_dense_tensor():
            raise RuntimeError(f"the samples have different shapes ({self.shape()[:4]}...): as_tensor() needs "
                               f"a dense batch (as in DALI)")
        return tensor(torch.stack(self.tensors), self.device)

    def as_reshaped_tensor(self, shape) -> _Tensor:
        return tensor(self.as_tensor().as_subclass(torch.Tensor).reshape(tuple(shape)), self.device)

    def as_array(self) -> np.ndarray:
        return self.as_cpu().as_tensor().numpy()

    def as_cpu(self) -> "TensorListCPU":
        if self.device == "cpu":
            return self
        if self._dense is not None:
            return TensorList.from_batch(self._dense.cpu(), self._layout, "cpu")
        return TensorList([t.cpu() for t in self.tensors], self._layout, "cpu")

    def data_ptr(self) -> int:
        return self.as_tensor().data_ptr()

    def copy_to_external(self, ptr, cuda_stream=None, non_blocking: bool = False,
                         use_copy_kernel: bool = False) -> None:
        """Copy the samples' bytes, one after another, to the memory at ``ptr`` (host memory for a
        TensorListCPU, GPU memory for a TensorListGPU, on ``cuda_stream`` or torch's current stream), as
        DALI's: samples of different shapes too."""
        _copy_out([self._dense] if self._dense is not None else self.tensors, ptr, cuda_stream, non_blocking)


class TensorListCPU(TensorList):
    """A batch output in host memory (DALI's ``TensorListCPU``); ``TensorListCPU(array_or_list, layout)``
    makes one from a dense array (first dimension: samples) or a list of per-sample arrays, as in DALI."""

    def __init__(self, tensors=None, layout: str = "", device: str = "cpu", dense=None):
        if tensors is not None and not isinstance(tensors, list) or isinstance(tensors, list) and tensors \
                and not isinstance(tensors[0], torch.Tensor):
            tensors, dense = _from_data(tensors, "cpu")
        super().__init__(tensors, layout, device, dense)


class TensorListGPU(TensorList):
    """A batch output in GPU memory (DALI's ``TensorListGPU``): ``as_cpu()`` copies it to the host."""

    def __init__(self, tensors=None, layout: str = "", device: str = "gpu", dense=None):
        if tensors is not None and not isinstance(tensors, list) or isinstance(tensors, list) and tensors \
                and not isinstance(tensors[0], torch.Tensor):
            tensors, dense = _from_data(tensors, "cuda")
        super().__init__(tensors, layout, "gpu" if device == "cpu" else device, dense)


def _address(ptr) -> int:
    """A destination address: a ``ctypes.c_void_p`` (DALI's type) or an int (DALI crashes on one; so would
    a None or a string, which fastload refuses)."""
    address = ptr.value if isinstance(ptr, ctypes.c_void_p) else ptr
    if isinstance(address, bool) or not isinstance(address, int) or address <= 0:
        raise TypeError(f"copy_to_external: the destination must be a non-null ctypes.c_void_p (or an int "
                        f"address), not {ptr!r}")
    return address


def _copy_out(tensors: list[torch.Tensor], ptr, cuda_stream, non_blocking: bool) -> None:
    """Copy ``tensors``' bytes back to back to the address ``ptr``, on the tensors' device."""
    address = _address(ptr)
    chunks = [value.contiguous().reshape(-1).view(torch.uint8) for value in tensors]
    if not chunks or chunks[0].device.type == "cpu":
        for chunk in chunks:
            ctypes.memmove(address, chunk.data_ptr(), chunk.numel())
            address += chunk.numel()
        return
    device = chunks[0].device
    stream = cuda_stream if isinstance(cuda_stream, torch.cuda.Stream) else (
        torch.cuda.ExternalStream(_address(cuda_stream), device=device) if cuda_stream else None)
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        for chunk in chunks:
            _device_bytes(address, chunk.numel(), device).copy_(chunk, non_blocking=non_blocking)
            address += chunk.numel()
        if not non_blocking:
            torch.cuda.current_stream(device).synchronize()


def _device_bytes(address: int, size: int, device: torch.device) -> torch.Tensor:
    """The ``size`` bytes of GPU memory at ``address`` as a uint8 tensor (a view, no copy)."""
    class Memory:
        __cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (address, False), "version": 2}
    return torch.as_tensor(Memory(), device=device)


def _from_data(data, device: str):
    """DALI's constructor data (a dense array, or per-sample arrays) as (samples, dense batch)."""
    if isinstance(data, (list, tuple)):
        return [torch.as_tensor(np.asarray(x)).to(device) for x in data], None
    return None, torch.as_tensor(np.asarray(data) if not isinstance(data, torch.Tensor) else data).to(device)

from .unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "nvidia.dali.tensors")  # any other name: NotImplementedError naming it
