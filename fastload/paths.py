"""Which path a loader takes: chosen once, by ``choose_path``, and an object that owns its stages.

* ``generic.IterablePath`` -- a generic IterableDataset (torch's rule for workers);
* ``generic.MapPath`` -- any other dataset, or one whose transform does not fuse;
* ``batch.CpuPath`` -- a fastload source, or torchvision's ImageFolder/DatasetFolder
  with its default loader (or a ``Subset`` of one), whose transform compiles
  to a ``Plan``: decoded and augmented on the CPU;
* ``device.DevicePath`` -- the fast path with a CUDA ``device`` and a plan
  the fused kernel runs: decoded and augmented on the GPU.

A path meets ``thread_pool.LoaderPath``: ``fast`` and ``on_device``
(``loader.fast_path`` / ``loader.device_path``), ``plan``, and
``stages(batches, epoch, order)``: the epoch's declared stages. Adding a
path is adding such a class and one line here.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

from torch.utils.data import IterableDataset, Subset

from fastload.kernels import augment as augment_kernel

from . import device as device_stage
from ._torchvision import DatasetFolder, default_loader, get_image_backend, pil_loader
from .batch import CpuPath
from .generic import IterablePath, MapPath
from .gpu_decode import choose_decoder
from .thread_pool import LoaderPath
from .read import read_file
from .sources import Source
from .torch_draws import TorchDraws, torch_draws
from .transforms import Plan, UnsupportedTransform, compile_plan


def choose_path(loader) -> LoaderPath:
    """The path for ``loader``'s dataset and options (an error when GPU decoding was asked for and cannot
    happen, or its backend is missing)."""
    dataset, options = loader.dataset, loader.options
    own_path = getattr(dataset, "fastload_path", None)  # a front end's source may bring its own path
    path = own_path(loader) if own_path is not None else None
    if path is not None:
        return path
    if isinstance(dataset, IterableDataset) and not isinstance(dataset, Source):
        return IterablePath(loader)
    fast = fast_path_inputs(dataset, loader.batch_size, draws=options.draws)
    draws = None if fast is None else torch_draws_of(dataset, fast[1], options.draws)
    reason = device_refusal(fast, options.device)
    if reason is None and draws is not None:  # the device path draws from fastload's streams only
        reason = "it draws from fastload's streams, not torch's (draws='fastload' lets it run)"
    gpu_decode_asked = options.decode_device == "cuda" or options.decoder not in (None, "cpu")
    if reason and gpu_decode_asked:
        raise ValueError(f"decode_device={options.decode_device!r}, decoder={options.decoder!r}: GPU decoding "
                         f"runs on the device path, and {reason}")
    if fast is None:
        return MapPath(loader)
    if reason is None:  # the decoders are chosen (GPU backends probed) at the first epoch, on first use
        decoders = functools.partial(choose_decoder, options.decode_device, options.device,
                                     options.max_image_pixels, options.decoder)
        return device_stage.DevicePath(loader, *fast, decoders=decoders)
    return CpuPath(loader, *fast, torch_draws=draws)


def device_refusal(fast, device) -> str | None:
    """Why the device path cannot run, or None when it can."""
    if fast is None:
        return "the dataset or its transform does not take the fast path"
    if device is None or device.type not in device_stage.KERNEL_DEVICE_TYPES:
        return "device is not a CUDA device"
    if augment_kernel.triton is None:
        return "triton is not installed"
    reason = device_stage.unsupported(fast[1])
    return reason and f"the fused kernel cannot run {reason}"


def fast_path_inputs(dataset, batch_size: int | None, warn: bool = True, draws: str | None = None):
    """(samples, plan, target_transform, read) when the fast path applies, else None (warning once);
    ``read(index)`` gives sample ``index``'s encoded bytes.

    A ``Subset`` (``random_split``'s output) of a dataset that takes it
    takes it too, over that subset's samples in its index order. A dataset
    (or Subset) subclass that overrides how it fetches runs as given. With
    ``draws`` (the loader's option; None: not checked), a torch dataset
    whose random transforms cannot be drawn as torch draws them under
    ``draws="torch"`` runs as given, whose draws are torch's.
    """
    dataset, indices = _unwrap_subsets(dataset)
    say = _warn if warn else _quiet
    if isinstance(dataset, Subset):  # one that overrides how it fetches
        if isinstance(_unwrap_subsets(dataset.dataset)[0], (Source, DatasetFolder)):
            say(f"{type(dataset).__name__} overrides {', '.join(_overridden(dataset, Subset))}")
        return None
    if isinstance(dataset, Source):
        if indices is not None:
            return None
    elif isinstance(dataset, DatasetFolder):
        if dataset.loader not in (default_loader, pil_loader):
            say(f"{type(dataset).__name__} reads its files with its own loader, {dataset.loader!r}")
            return None
        if get_image_backend() != "PIL":
            return None
    else:
        return None
    if batch_size is None:
        return None
    known = Source if isinstance(dataset, Source) else DatasetFolder
    if _overridden(dataset, known):
        say(f"{type(dataset).__name__} overrides {', '.join(_overridden(dataset, known))}")
        return None
    try:  # a front end may give its source a Plan it compiled itself (fastload.compat.dali)
        plan = dataset.transform if isinstance(dataset.transform, Plan) else compile_plan(dataset.transform)
        if draws is not None:
            torch_draws_of(dataset, plan, draws)
    except UnsupportedTransform as reason:
        say(f"the fast path cannot run {reason}", f"{type(dataset).__name__}'s transform")
        return None
    samples = dataset.samples if indices is None else [dataset.samples[i] for i in indices]
    if isinstance(dataset, Source):
        read = dataset.read if indices is None else _SubsetRead(dataset.read, indices)
    else:
        read = _FileRead(samples)
    return samples, plan, dataset.target_transform, read


def torch_draws_of(dataset, plan: Plan, draws: str) -> TorchDraws | None:
    """How the fast path draws over ``dataset``: torch's way (a ``TorchDraws``) for torch's datasets under
    ``draws="torch"``, else None (fastload's per-sample streams: its own sources, or ``draws="fastload"``).
    Raises UnsupportedTransform where torch's draws cannot be made on the fast path."""
    dataset, _ = _unwrap_subsets(dataset)
    if draws != "torch" or isinstance(dataset, Source) or isinstance(dataset.transform, Plan):
        return None
    return torch_draws(dataset.transform, plan)


class _FileRead:
    """``read(index)``: the file of ``samples[index]``."""

    def __init__(self, samples):
        self.samples = samples

    def __call__(self, index: int) -> bytes:
        return read_file(index, self.samples[index][0])


class _SubsetRead:
    """``read(index)`` of a subset: the source's read of the index it selects."""

    def __init__(self, read, indices: list[int]):
        self.read, self.indices = read, indices

    def __call__(self, index: int) -> bytes:
        return self.read(self.indices[index])


def _unwrap_subsets(dataset) -> tuple[Any, list[int] | None]:
    """(the dataset under any ``Subset`` layers, the indices into it they select; None without one)."""
    indices = None
    while isinstance(dataset, Subset) and not _overridden(dataset, Subset):
        selected = [int(i) for i in dataset.indices]
        indices = selected if indices is None else [selected[i] for i in indices]
        dataset = dataset.dataset
    return dataset, indices


def _overridden(dataset, known: type) -> list[str]:
    """The sample-producing methods of ``known`` that ``type(dataset)`` replaces (the fast path would
    bypass them)."""
    names = ("__getitem__", "__getitems__", "load")
    return [name for name in names
            if hasattr(known, name) and getattr(type(dataset), name, None) is not getattr(known, name)]


def _warn(why: str, what: str = "it") -> None:
    """Say, once, why the fast path is not taken (from the user's DataLoader(...) line)."""
    warnings.warn(f"fastload: {why}; running {what} as given (correct, slower) instead of the fast path",
                  stacklevel=5)


def _quiet(why: str, what: str = "it") -> None:
    """Not again: the reason was given when the path was chosen."""
