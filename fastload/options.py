"""fastload's own DataLoader arguments, validated once, in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

import torch

from .decode import DEFAULT_MAX_PIXELS
from .gpu_decode import DECODE_DEVICES, DECODER_NAMES

DRAWS = ("torch", "fastload")  # the ``draws`` option's values


@dataclass(frozen=True)
class Options:
    """The arguments ``fastload.DataLoader`` adds to torch's.

    Args:
        device: deliver batches on this device (e.g. "cuda"). On a CUDA
            device the fast path decodes JPEGs there (torchvision's GPU decoder) and augments
            each batch in one fused kernel (``loader.device_path``; see
            ``fastload.device``); other transforms travel as uint8 and are
            converted there. A plain "cuda" under torchrun means this
            process's GPU: cuda:LOCAL_RANK.
        seed: seed of the sample order of fastload sources and of every
            sample's augmentation. Default: the fastload source's ``seed``;
            without one, the order's is 0 (DistributedSampler's) and the
            augmentation's is ``torch.initial_seed()`` (the ``generator``'s,
            if one is given) when the loader is first iterated, so
            ``torch.manual_seed`` changes it and a fixed seed reproduces it.
            Augmentation is a pure function of (seed, epoch, sample index)
            where it draws from fastload's streams (see ``draws``: over
            torch's datasets it draws as torch does by default);
            ``state_dict`` records its seed.
        on_error: "raise" (default) raises ``fastload.DecodeError`` naming the
            file; "skip" replaces a bad sample with the next one and records
            it in ``loader.stats.skipped``.
        rank, world_size: override the rank and world size from
            torch.distributed / torchrun. On a map-style dataset without a
            sampler they make the loader use a DistributedSampler.
        max_skips: with on_error="skip", a budget per epoch: a count, or a
            fraction of the epoch's samples; one skip more raises
            ``fastload.LoaderError``. None (default): no limit.
        on_corrupt: a JPEG that libjpeg decodes while warning about corrupt
            data ("Corrupt JPEG data: ...", which torchvision prints to stderr
            and otherwise ignores): "deliver" (default) delivers it, as
            torchvision does, and records it in ``loader.stats.corrupt``;
            "error" treats it as a bad sample (raised, or skipped with
            on_error="skip").
        max_image_pixels: refuse images whose header claims more pixels.
        dct_scaling: decode JPEGs at 1/2, 1/4 or 1/8 scale when that still
            covers the output (faster; pixels differ slightly from a full
            decode). "auto" (default): only where the geometry is random
            (RandomResizedCrop), so deterministic geometry (Resize,
            CenterCrop) gives torchvision's pixels; True: wherever it
            applies; False: never.
        decode_device: with ``device="cuda"``, where JPEGs are decoded:
            "auto" (default: on the GPU where a probe decode there succeeds
            -- torchvision's decoder: nvJPEG on CUDA, rocJPEG on ROCm --
            else on the CPU), "cuda" (an error where it cannot) or "cpu"
            (decode on the CPU, augment on the GPU).
        decoder: force a decoding backend: "torchvision" (torchvision's GPU
            decoder; "nvjpeg" is the same), "torchcodec"
            (``pip install 'torch-fastload[torchcodec]'``) or "cpu"; or a backend
            object of your own (``accepts(data)``, ``decode_many(encoded)``,
            ``description``, as in ``fastload.gpu_decode``), or a list of
            them, of which the first batch measures the fastest.
            By default, with both GPU backends installed, the first batch
            measures which is faster.
        device_prefetch: with ``device="cuda"``, how many batches are
            decoded and augmented on the GPU ahead of the training loop
            (default 2). This is the knob for GPU memory: the loader keeps
            ``device_prefetch + 2`` output batches there, plus one batch of
            decoded images while it works.
        memory_format: of the image batches: ``torch.contiguous_format``
            (default) or ``torch.channels_last``, which the device path
            writes directly (the CPU paths convert each batch).
        draws: where the fast path's augmentation draws come from over
            torch's datasets (torchvision's ImageFolder / DatasetFolder, or
            a Subset of one): "torch" (default) draws them as torch's
            DataLoader does -- batch k from worker ``k % num_workers``'s
            generator (the global one without workers), sample by sample in
            torchvision's call order -- so the same seed and ``num_workers``
            give torch's pixels; "fastload" draws each sample's from its own
            stream of (seed, epoch, sample index), independent of threads,
            batch size and world size. fastload's own sources always draw
            from their streams.

    """

    device: torch.device | None = None
    seed: int | None = None
    on_error: str = "raise"
    rank: int | None = None
    world_size: int | None = None
    max_image_pixels: int | None = DEFAULT_MAX_PIXELS
    dct_scaling: bool | str = "auto"
    max_skips: int | float | None = None
    on_corrupt: str = "deliver"
    decode_device: str = "auto"
    decoder: str | None = None
    device_prefetch: int = 2
    memory_format: torch.memory_format = torch.contiguous_format
    draws: str = "torch"

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", local_device(self.device))
        _one_of("on_error", self.on_error, ("raise", "skip"))
        _one_of("on_corrupt", self.on_corrupt, ("deliver", "error"))
        _one_of("dct_scaling", self.dct_scaling, (True, False, "auto"))
        _one_of("decode_device", self.decode_device, DECODE_DEVICES)
        if not _backends(self.decoder):
            _one_of("decoder", self.decoder, (None, *DECODER_NAMES))
        _one_of("memory_format", self.memory_format, (torch.contiguous_format, torch.channels_last))
        _one_of("draws", self.draws, DRAWS)
        skips = self.max_skips
        if skips is not None and not (isinstance(skips, int) and skips >= 0
                                      or isinstance(skips, float) and 0 <= skips < 1):
            raise ValueError(f"max_skips must be a count >= 0 or a fraction in [0, 1), got {skips!r}")
        if not isinstance(self.device_prefetch, int) or self.device_prefetch < 1:
            raise ValueError(f"device_prefetch must be an int >= 1, got {self.device_prefetch!r}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(field.name for field in fields(cls))


def _backends(decoder) -> bool:
    """Whether ``decoder`` is a backend object (or a list of them): anything with ``accepts`` and
    ``decode_many``, as ``fastload.gpu_decode``'s backends have."""
    candidates = decoder if isinstance(decoder, (list, tuple)) else [decoder]
    return bool(candidates) and all(callable(getattr(c, "decode_many", None)) and callable(getattr(c, "accepts", None))
                                    for c in candidates)


def _one_of(name: str, value, allowed: tuple) -> None:
    if not any(value is choice or (type(value) is type(choice) and value == choice) for choice in allowed):
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")


def local_device(device) -> torch.device | None:
    """``device`` as a torch.device; a bare "cuda" under torchrun becomes cuda:LOCAL_RANK."""
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cuda" and device.index is None and "LOCAL_RANK" in os.environ:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    _check_available(device)
    return device


def _check_available(device: torch.device) -> None:
    """A ValueError now, naming the device and what this torch has, where ``device`` cannot be used (torch
    itself fails only at the first copy there, from inside the loader's threads)."""
    if device.type in ("cpu", "meta"):
        return
    backend = getattr(torch, device.type, None)
    available = getattr(backend, "is_available", None)
    if available is None or available():
        count = getattr(backend, "device_count", lambda: None)()
        if device.index is None or count is None or device.index < count:
            return
        raise ValueError(f"device={str(device)!r}: this machine has {count} {device.type} device(s), "
                         f"{device.type}:0 to {device.type}:{count - 1}" if count else
                         f"device={str(device)!r}: this machine has no {device.type} device")
    build = (f"a CUDA {torch.version.cuda} build" if torch.version.cuda else
             f"a ROCm {torch.version.hip} build" if getattr(torch.version, "hip", None) else "a CPU-only build")
    raise ValueError(f"device={str(device)!r}: no {device.type} device is available here (torch "
                     f"{torch.__version__} is {build}; available: cpu). Leave device=None to load on the CPU, "
                     f"or install a torch built for your GPU (https://pytorch.org/get-started/locally/)")
