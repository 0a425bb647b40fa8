"""GPU batch decoding: the backends that decode a batch of JPEGs on the device, and the choice between them.

This is the device path's half of decoding; ``fastload.decode`` is the CPU
half (header parsing, region decode, Pillow). The two change for different
reasons -- this one with GPU libraries and what they accept, that one with
libjpeg-turbo and torchvision's pixels -- and the CPU half must import
without touching CUDA, so they are separate modules.

A backend decodes what it can; every image it refuses or fails on -- not a
JPEG, CMYK, lossless, corrupt, one the GPU library cannot take, or a whole
batch the library rejected -- is decoded alone by the caller's CPU fallback,
or reported with its file and reason, so one bad image never loses its
neighbours. Results are (3, H, W) uint8 RGB tensors (gray and CMYK
converted), as torchvision's RGB read mode gives.

Backends:

* ``TorchvisionGpuDecoder`` ("torchvision"; "nvjpeg" is accepted as its old
  name): torchvision's batched GPU decode, nvJPEG on CUDA builds and rocJPEG
  on ROCm builds, behind the same operator;
* ``TorchCodecDecoder`` ("torchcodec"): TorchCodec's, an optional extra;
* ``gpu_nvimgcodec.NvImageCodecDecoder`` ("nvimgcodec", "nvimgcodec-hw",
  "nvimgcodec-hybrid"): nvImageCodec's, which reaches the GPU's hardware
  JPEG engines, an optional extra (its own module);
* ``CpuDecoder`` ("cpu"): no GPU decode; every file is decoded on the CPU.

Whether a GPU backend works here is decided by capability, not by build
flags: at first use, a probe decode of a small JPEG on the device (cached per
device). A failing probe makes the backend unavailable, and its reason is
what an explicit request for GPU decoding reports. The frame-header reading
and the probe's machinery, which every backend uses, are ``gpu_support``'s.
"""

from __future__ import annotations

import functools
import io
import time
from typing import Callable, Sequence

from PIL import Image

from .decode import DEFAULT_MAX_PIXELS
from .errors import DecodeError
from .gpu_nvimgcodec import NvImageCodecDecoder
from .gpu_support import (_SOF_BASELINE, JpegFrame, Unavailable, _probe_result, check_probe_output,
                          gpu_jpeg_frame, jpeg_frame, probe_jpeg)

DECODE_DEVICES = ("auto", "cpu", "cuda")
# the values ``decoder=`` takes (and None)
DECODER_NAMES = ("torchvision", "nvjpeg", "torchcodec", "nvimgcodec", "nvimgcodec-hw", "nvimgcodec-hybrid", "cpu")
_ALIASES = {"nvjpeg": "torchvision"}  # the torchvision backend's name before it also ran on rocJPEG

# What rocJPEG's hardware (VCN) path decodes: baseline JPEGs of at least 64x64 in these subsamplings.
ROCJPEG_MIN_SIZE = 64
ROCJPEG_SUBSAMPLINGS = ("4:4:4", "4:2:2", "4:2:0", "4:0:0")


class CpuDecoder:
    """The choice to decode every file on the CPU (``fastload.decode``), in the device path's reader threads.

    Not a batch backend: the device path sees it and decodes each file where
    it is read, as ``decode_device="cpu"`` (or no working GPU backend) asks.
    """

    name = "cpu"
    description = "cpu"

    def __init__(self, max_pixels: int | None = DEFAULT_MAX_PIXELS):
        self.max_pixels = max_pixels  # the loader's pixel cap, which the reader threads apply to every header


# ---------------------------------------------------------------- probing

def _probe_torchvision(device) -> None:
    """Decode ``probe_jpeg()`` on ``device`` with torchvision's GPU decoder; raise, saying why, if it cannot."""
    import torch
    import torchvision
    from torchvision.io import ImageReadMode
    if not torch.cuda.is_available():
        raise Unavailable("no GPU (torch.cuda.is_available() is False)")
    if not hasattr(torch.ops.image, "decode_jpegs_cuda"):
        raise Unavailable(f"torchvision {torchvision.__version__} has no GPU JPEG decoder (decode_jpegs_cuda)")
    data = probe_jpeg()
    [image] = torch.ops.image.decode_jpegs_cuda([torch.frombuffer(bytearray(data), dtype=torch.uint8)],
                                                ImageReadMode.RGB.value, device)
    check_probe_output(image, data)


def _probe_torchcodec(device) -> None:
    """Decode ``probe_jpeg()`` on ``device`` with TorchCodec; raise, saying why, if it cannot."""
    import torch
    if not TorchCodecDecoder.installed():
        raise Unavailable("torchcodec is not installed (pip install 'torch-fastload[torchcodec]', the release made "
                          "for this torch)")
    if not torch.cuda.is_available():
        raise Unavailable("no GPU (torch.cuda.is_available() is False)")
    from torchcodec.decoders import decode_jpeg
    data = probe_jpeg()
    [image] = decode_jpeg([torch.frombuffer(bytearray(data), dtype=torch.uint8)], mode="RGB", device=device)
    check_probe_output(image, data)


# ---------------------------------------------------------------- GPU backends

class TorchvisionGpuDecoder:
    """torchvision's batched GPU JPEG decode on one device: nvJPEG on CUDA builds, rocJPEG on ROCm builds.

    torchvision's GPU decoder serializes its callers behind one lock, so
    the loader gives it one decoding thread per device, not the pool. It is
    called through the operator itself, which does not emit
    torchvision.io's deprecation warning (the user's own calls still do).

    Args:
        device: the device to decode on.
        library: "nvjpeg" or "rocjpeg", the library underneath (default: from
            ``torch.version.hip``); rocJPEG is given only the files its
            hardware path takes (``accepts``).
        probe: a function of the device that decodes a small JPEG there and
            raises if it cannot (default: a real decode); called once per
            device, at the first ``unavailable()``.
    """

    name = "torchvision"
    default_probe = staticmethod(_probe_torchvision)

    def __init__(self, device, *, library: str | None = None, probe: Callable | None = None):
        import torch
        self.device = torch.device(device)
        self.library = library or ("rocjpeg" if torch.version.hip else "nvjpeg")
        self.probe = probe or self.default_probe

    @property
    def description(self) -> str:
        """What ``loader.stats.decoder`` reports: "torchvision (nvjpeg)" or "torchvision (rocjpeg)"."""
        return f"{self.name} ({self.library})"

    def unavailable(self) -> str | None:
        """Why this backend cannot decode on its device (the probe's failure), or None when it can."""
        return _probe_result(self.probe, self.device)

    def accepts(self, data: bytes) -> bool:
        """Whether to try this file on the GPU: a JPEG, not CMYK, not lossless (nvJPEG refuses those);
        for rocJPEG also baseline, at least 64x64, and 4:4:4, 4:2:2, 4:2:0 or grayscale."""
        frame = gpu_jpeg_frame(data)
        return frame is not None and (self.library != "rocjpeg" or rocjpeg_accepts(data, frame))

    def decode_many(self, encoded: list) -> list:
        """Decode a list of uint8 CPU tensors; raises if the library rejects the batch."""
        from torchvision.io import ImageReadMode
        import torch
        return torch.ops.image.decode_jpegs_cuda(encoded, ImageReadMode.RGB.value, self.device)


def rocjpeg_accepts(data: bytes, frame: JpegFrame | None = None) -> bool:
    """Whether rocJPEG's hardware path takes this JPEG: baseline 8-bit, at least 64x64, and 4:4:4, 4:2:2,
    4:2:0 or grayscale. Anything else goes to the CPU fallback instead of failing a batch on the GPU.
    ``frame``: its ``jpeg_frame``, if read already."""
    frame = frame or jpeg_frame(data)
    return (frame is not None and frame.marker == _SOF_BASELINE and frame.precision == 8
            and frame.width >= ROCJPEG_MIN_SIZE and frame.height >= ROCJPEG_MIN_SIZE
            and frame.subsampling in ROCJPEG_SUBSAMPLINGS)


class TorchCodecDecoder(TorchvisionGpuDecoder):
    """TorchCodec's batched JPEG decode (``torchcodec.decoders.decode_jpeg``), the successor of torchvision's.

    An optional extra (``pip install 'torch-fastload[torchcodec]'``): used when it is
    installed and decodes here, and, with ``decoder="auto"``, when it is
    measured faster than torchvision's on the loader's own first batch
    (``pick_fastest``). It takes what torchvision's GPU decoder takes.
    """

    name = "torchcodec"
    default_probe = staticmethod(_probe_torchcodec)

    @property
    def description(self) -> str:
        return self.name

    @staticmethod
    def installed() -> bool:
        try:
            from torchcodec.decoders import decode_jpeg  # noqa: F401
        except Exception:  # not installed, or its native library does not load here
            return False
        return True

    def accepts(self, data: bytes) -> bool:
        """As torchvision's, and not EXIF-rotated: TorchCodec applies the EXIF orientation, which torchvision's
        loaders (and so fastload's other paths) do not, and a 90-degree turn would also swap the size."""
        return super().accepts(data) and _exif_orientation(data) in (None, 1)

    def decode_many(self, encoded: list) -> list:
        from torchcodec.decoders import decode_jpeg
        return decode_jpeg(list(encoded), mode="RGB", device=self.device)


def _exif_orientation(data: bytes) -> int | None:
    """The EXIF orientation tag of a JPEG, or None when it has none."""
    if b"Exif" not in data[:65536]:
        return None
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.getexif().get(0x0112)
    except Exception:
        return None


# in order of preference; with decoder="auto", every one that passes its probe is measured on the first batch
GPU_BACKENDS = (TorchvisionGpuDecoder, TorchCodecDecoder, NvImageCodecDecoder)
# backends only a decoder= name asks for (the hardware-only and hybrid nvImageCodec configurations)
NAMED_BACKENDS = {name: functools.partial(NvImageCodecDecoder, name=name)
                  for name in ("nvimgcodec-hw", "nvimgcodec-hybrid")}


# ---------------------------------------------------------------- the choice

def choose_decoder(decode_device: str = "auto", device=None, max_pixels: int | None = DEFAULT_MAX_PIXELS,
                   decoder: str | None = None, *, backends: Sequence[Callable] | None = None) -> list:
    """The batch decoder(s) for ``decode_device`` and an optional ``decoder`` name (both already validated).

    ``decode_device``: "cpu"; "cuda" (an error that says why where no GPU
    backend decodes); or "auto": the GPU for a CUDA ``device`` where a
    backend decodes there, else the CPU. ``decoder`` forces a backend by
    name: "torchvision" (or "nvjpeg"), "torchcodec" or "cpu", or is the
    caller's own backend object (or list of them), used as given. ``backends``:
    the GPU backend classes (or factories of a device) to consider, in order
    of preference (default ``GPU_BACKENDS``). Returns a list: one decoder,
    or with "auto" and several working GPU backends, all of them, for
    ``pick_fastest`` to choose between on real data.
    """
    import torch
    if decoder is not None and not isinstance(decoder, str):  # the caller's own backend object(s)
        return list(decoder) if isinstance(decoder, (list, tuple)) else [decoder]
    on_gpu = device is not None and torch.device(device).type == "cuda"
    gpu_wanted = decode_device == "cuda" or (decode_device != "cpu" and on_gpu)
    if decoder == "cpu" or (decoder is None and not gpu_wanted):
        return [CpuDecoder(max_pixels)]  # no probe: nothing is to decode on a GPU
    gpu_device = device if on_gpu else "cuda"
    candidates = [make(gpu_device) for make in (GPU_BACKENDS if backends is None else backends)]
    if decoder is not None:
        name = _ALIASES.get(decoder, decoder)
        backend = next((b for b in candidates if b.name == name), None)
        if backend is None and backends is None and name in NAMED_BACKENDS:
            backend = NAMED_BACKENDS[name](gpu_device)
        reason = "no such backend" if backend is None else backend.unavailable()
        if reason is not None:
            raise RuntimeError(f"decoder={decoder!r} is not available here: {reason}")
        return [backend]
    reasons = [(backend, backend.unavailable()) for backend in candidates]
    present = [backend for backend, reason in reasons if reason is None]
    if present:
        return present
    if decode_device == "cuda":
        why = "; ".join(f"{backend.description}: {reason}" for backend, reason in reasons) or "no GPU backend"
        raise RuntimeError(f"decode_device='cuda': this torch/torchvision build cannot decode JPEGs on a GPU "
                           f"here ({why}); use 'auto' or 'cpu'")
    return [CpuDecoder(max_pixels)]


def pick_fastest(decoders: list, encoded: list, clock=None):
    """The decoder of ``decoders`` that decodes ``encoded`` (one real batch) fastest, and its output.

    Each decodes the batch twice (the first call warms it up: handles,
    buffers) and the second is timed to completion. A decoder that fails on
    the batch is not chosen; (None, None) when all fail. A single decoder
    is returned without a trial.
    """
    import torch
    if len(decoders) == 1:
        return decoders[0], None
    clock = clock or time.perf_counter
    best = None
    for decoder in decoders:
        try:
            decoder.decode_many(encoded)
            started = clock()
            output = decoder.decode_many(encoded)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            seconds = clock() - started
        except Exception:
            continue
        if best is None or seconds < best[0]:
            best = (seconds, decoder, output)
    if best is None:  # the batch failed on every backend: choose on another batch
        return None, None
    return best[1], best[2]


def decode_batch(items: list[tuple[int, str, bytes]], decoder, fallback: Callable[[int], object],
                 encoded: list | None = None, regions: list | None = None) -> list:
    """Decode (index, path, data) items: a (3, H, W) uint8 tensor or a DecodeError per item, in order.

    ``decoder`` takes the files it accepts as one batch; if it rejects the
    batch, each of them alone; whatever it still refuses (or returns None
    for, as nvImageCodec does per image), ``fallback`` decodes: a function
    of an item's position in ``items`` that returns its image or raises
    DecodeError. ``encoded``: every item's data as a uint8 tensor, when the
    caller has already checked that ``decoder`` accepts them all.
    ``regions``: with ``encoded``, per item None or the window (left, top,
    right, bottom) to decode alone, for a decoder with ``decodes_regions``.
    """
    import torch
    results: list = [None] * len(items)
    if encoded is not None:
        tried = list(range(len(items)))
    else:
        tried = [i for i, (_, _, data) in enumerate(items) if decoder.accepts(data)]
        encoded = [torch.frombuffer(bytearray(items[i][2]), dtype=torch.uint8) for i in tried]
        regions = None

    def decode(data: list, windows: list | None) -> list:
        return decoder.decode_many(data) if windows is None else decoder.decode_many(data, windows)
    if tried:
        try:
            for i, image in zip(tried, decode(encoded, regions)):
                results[i] = image
        except Exception:  # one bad image fails the library's batch: retry each alone
            for k, (i, data) in enumerate(zip(tried, encoded)):
                try:
                    results[i] = decode([data], None if regions is None else [regions[k]])[0]
                except Exception:
                    pass
    for i in range(len(items)):
        if results[i] is None:
            try:
                results[i] = fallback(i)
            except DecodeError as error:
                results[i] = error
    return results
