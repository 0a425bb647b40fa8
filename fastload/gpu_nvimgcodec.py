"""nvImageCodec's batched JPEG decode: the GPU's hardware JPEG engines (NVJPG), CUDA nvJPEG, or both.

An optional extra (``pip install 'torch-fastload[nvimgcodec-cu12]'`` or
``[nvimgcodec-cu13]``, for the CUDA major version of your torch; it needs
libnvjpeg too, which the extra installs). nvImageCodec is how DALI reaches
the hardware engines of A100, H100 and H200, which torchvision's decoder
does not use. Three configurations, each a decoder name:

* "nvimgcodec": what DALI's image decoder does: the hardware engines take
  ``hw_load`` (0.65, DALI's ``hw_decoder_load`` default) of each batch's
  images they can decode, CUDA nvJPEG (GPU_ONLY) the rest, and the hybrid
  backend (Huffman on nvImageCodec's CPU threads, the rest on the GPU)
  whatever those refuse;
* "nvimgcodec-hw": the hardware engines only (baseline JPEGs in 4:4:4,
  4:2:2, 4:2:0, 4:4:0 or gray; every other file is refused up front and
  decoded on the CPU);
* "nvimgcodec-hybrid": the hybrid CPU+GPU backend only.

Pixels are torchvision's layout: (3, H, W) uint8 RGB, gray expanded, the
EXIF orientation not applied (as torchvision's loaders and fastload's other
paths do not), with fancy (libjpeg's smooth) chroma upsampling, so the
pixels are within a few levels of the CPU decoder's. nvImageCodec returns
None for each image it could not decode; that image alone goes to the
caller's CPU fallback, with its file named if that fails too.

Region decode: ``decode_many(encoded, regions)`` decodes only a window of
an image (a ``CodeStream.get_sub_code_stream(region=Region(...))``): nvJPEG
still reads the whole entropy-coded stream, but skips the IDCT, color
conversion and the writes outside the window. The rule (``region_pays``):
a window of at most half the image's pixels, on an image of at least
256x256 -- below that the per-image region setup costs more than the
skipped pixels; RandomResizedCrop's windows cover 8-100% of the image (54%
on average), so about half of an ImageNet epoch's images are region-decoded.

Each instance owns one ``nvimgcodec.Decoder`` (its own nvJPEG states and
buffers), decodes on the caller's current CUDA stream and hands the images
over as torch tensors through DLPack on that stream, so nothing waits on
the host. Several instances can decode at once (``lanes``): the device
path gives each of its lanes one.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable

from .gpu_support import (JpegFrame, Unavailable, _probe_result, check_probe_output, gpu_jpeg_frame, jpeg_frame,
                           probe_jpeg)

MODES = {"nvimgcodec": "mixed", "nvimgcodec-hw": "hw", "nvimgcodec-hybrid": "hybrid"}
HW_LOAD = 0.65  # DALI's hw_decoder_load default: the hardware engines' share, the CUDA decoder's the rest
REGION_MAX_FRACTION = 0.5  # region-decode a window of at most this share of the image's pixels ...
REGION_MIN_PIXELS = 256 * 256  # ... on an image at least this large
_HW_MARKERS = (0xC0, 0xC1)  # baseline and extended Huffman 8-bit: what nvJPEG's hardware backend decodes
_HW_SUBSAMPLINGS = ("4:4:4", "4:2:2", "4:2:0", "4:4:0", "4:0:0")
INSTALL = ("nvImageCodec is not installed (pip install 'torch-fastload[nvimgcodec-cu13]', or -cu12 for a torch "
           "built for CUDA 12)")


def module():
    """``nvidia.nvimgcodec``, imported on first use (tests put a stand-in in ``sys.modules``)."""
    if "nvidia.nvimgcodec" in sys.modules:
        return sys.modules["nvidia.nvimgcodec"]
    from nvidia import nvimgcodec
    return nvimgcodec


def installed() -> bool:
    try:
        module()
    except Exception:  # not installed, or its native library does not load here
        return False
    return True


def region_pays(region: tuple[int, int, int, int] | None, width: int, height: int) -> bool:
    """Whether to decode only ``region`` (left, top, right, bottom) of a ``width`` x ``height`` JPEG: a
    window of at most ``REGION_MAX_FRACTION`` of an image of at least ``REGION_MIN_PIXELS``."""
    if region is None or width * height < REGION_MIN_PIXELS:
        return False
    left, top, right, bottom = region
    if left < 0 or top < 0 or right > width or bottom > height or right <= left or bottom <= top:
        return False
    return (right - left) * (bottom - top) <= REGION_MAX_FRACTION * width * height


def hw_accepts(data: bytes, frame: JpegFrame | None = None) -> bool:
    """Whether nvJPEG's hardware backend decodes this JPEG: baseline (or extended Huffman) 8-bit, in
    4:4:4, 4:2:2, 4:2:0, 4:4:0 or gray. ``frame``: its frame header where the caller has read it."""
    frame = frame or jpeg_frame(data)
    return (frame is not None and frame.marker in _HW_MARKERS and frame.precision == 8
            and frame.subsampling in _HW_SUBSAMPLINGS)


def _backends(nvimgcodec, mode: str, hw_load: float) -> list:
    kind = nvimgcodec.BackendKind
    if mode == "hw":
        return [nvimgcodec.Backend(kind.HW_GPU_ONLY)]
    if mode == "hybrid":
        return [nvimgcodec.Backend(kind.HYBRID_CPU_GPU)]
    return [nvimgcodec.Backend(kind.HW_GPU_ONLY, load_hint=hw_load), nvimgcodec.Backend(kind.GPU_ONLY),
            nvimgcodec.Backend(kind.HYBRID_CPU_GPU)]


class NvImageCodecDecoder:
    """nvImageCodec's batched decode on one device, in one of ``MODES`` (see the module docstring).

    Args:
        device: the CUDA device to decode on.
        name: "nvimgcodec", "nvimgcodec-hw" or "nvimgcodec-hybrid".
        hw_load: the hardware engines' share of a batch in the mixed mode.
        cpu_threads: nvImageCodec's own CPU threads (the hybrid backend's
            Huffman decoding; 0: one per core, its default).
        probe: a function of the device that decodes a small JPEG there and
            raises if it cannot (default: a real decode with this
            configuration); called once per (device, name).
        lanes: how many batches the device path may decode at once, each
            on its own instance (``clone``) and stream.
    """

    decodes_regions = True

    def __init__(self, device, name: str = "nvimgcodec", *, hw_load: float = HW_LOAD, cpu_threads: int = 0,
                 probe: Callable | None = None, lanes: int = 2):
        import torch
        if name not in MODES:
            raise ValueError(f"name={name!r}: one of {', '.join(MODES)}")
        self.device = torch.device(device)
        self.name, self.mode = name, MODES[name]
        self.hw_load, self.cpu_threads, self.lanes = hw_load, cpu_threads, lanes
        self.probe = probe or default_probe(name, hw_load, cpu_threads)
        self._decoder = None  # made at the first decode, on the decoding thread

    @property
    def description(self) -> str:
        return {"mixed": "nvimgcodec (hardware + cuda)", "hw": "nvimgcodec (hardware)",
                "hybrid": "nvimgcodec (hybrid cpu+gpu)"}[self.mode]

    def clone(self) -> "NvImageCodecDecoder":
        """Another instance of the same configuration (its own nvImageCodec decoder), for another lane."""
        return NvImageCodecDecoder(self.device, self.name, hw_load=self.hw_load, cpu_threads=self.cpu_threads,
                                   probe=self.probe, lanes=self.lanes)

    def unavailable(self) -> str | None:
        """Why this backend cannot decode on its device (the probe's failure), or None when it can."""
        return _probe_result(self.probe, self.device)

    def accepts(self, data: bytes) -> bool:
        """A JPEG, not CMYK, not lossless; for the hardware-only mode also what the engines take
        (``hw_accepts``). EXIF-rotated files are taken: the orientation is not applied."""
        frame = gpu_jpeg_frame(data)
        return frame is not None and (self.mode != "hw" or hw_accepts(data, frame))

    def _instance(self):
        if self._decoder is None:
            nvimgcodec = module()
            self._decoder = nvimgcodec.Decoder(
                device_id=self.device.index if self.device.index is not None else -1,  # -1: the current device
                max_num_cpu_threads=self.cpu_threads, backends=_backends(nvimgcodec, self.mode, self.hw_load),
                options=":fancy_upsampling=1")
            self._params = nvimgcodec.DecodeParams(apply_exif_orientation=False,
                                                   color_spec=nvimgcodec.ColorSpec.RGB)
        return self._decoder

    def decode_many(self, encoded: list, regions: list | None = None) -> list:
        """Decode a list of uint8 CPU tensors (or bytes): a (3, H, W) uint8 tensor on the device per image,
        or None where nvImageCodec could not decode it. ``regions``: per image, None or the window
        (left, top, right, bottom) to decode alone."""
        import torch
        nvimgcodec = module()
        decoder = self._instance()
        sources = []
        for i, data in enumerate(encoded):
            stream = nvimgcodec.CodeStream(data.numpy() if isinstance(data, torch.Tensor) else data)
            region = regions[i] if regions is not None else None
            if region is not None:
                left, top, right, bottom = region
                stream = stream.get_sub_code_stream(region=nvimgcodec.Region(top, left, bottom, right))
            sources.append(stream)
        on_gpu = self.device.type == "cuda"
        cuda_stream = torch.cuda.current_stream(self.device).cuda_stream if on_gpu else 0
        images = decoder.decode(sources, params=self._params, cuda_stream=cuda_stream)
        return [None if image is None else _as_chw(image) for image in images]


def _as_chw(image):
    """An nvImageCodec image (H, W, 3, on the device) as a (3, H, W) torch view, without a copy: DLPack,
    exported on the current stream (the one it was decoded on)."""
    import torch
    tensor = torch.from_dlpack(image)
    if tensor.dim() == 2:
        tensor = tensor[:, :, None]
    if tensor.shape[2] == 1:
        tensor = tensor.expand(-1, -1, 3)
    return tensor.permute(2, 0, 1)


@functools.lru_cache(maxsize=None)
def default_probe(name: str, hw_load: float, cpu_threads: int) -> Callable:
    """The real probe of one configuration: one function per configuration, so its result is cached once
    per (configuration, device) however many instances are made."""
    return functools.partial(_probe, name=name, hw_load=hw_load, cpu_threads=cpu_threads)


def _probe(device, *, name: str, hw_load: float, cpu_threads: int) -> None:
    """Decode ``probe_jpeg()`` on ``device`` with this configuration; raise, saying why, if it cannot."""
    import torch
    if not installed():
        raise Unavailable(INSTALL)
    if not torch.cuda.is_available():
        raise Unavailable("no GPU (torch.cuda.is_available() is False)")
    if torch.version.hip:
        raise Unavailable("nvImageCodec runs on NVIDIA GPUs only (this torch is a ROCm build)")
    decoder = NvImageCodecDecoder(device, name, hw_load=hw_load, cpu_threads=cpu_threads, probe=lambda d: None)
    data = probe_jpeg()
    with torch.cuda.device(decoder.device):
        [image] = decoder.decode_many([torch.frombuffer(bytearray(data), dtype=torch.uint8)])
        if image is None:
            raise Unavailable(f"{decoder.description} did not decode a baseline 4:2:0 JPEG here (no hardware "
                              f"JPEG engine on {torch.cuda.get_device_name(decoder.device)}?)")
        torch.cuda.synchronize(decoder.device)
    check_probe_output(image, data)
