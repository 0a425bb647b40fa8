"""What every GPU decoding backend shares (``gpu_decode``'s and ``gpu_nvimgcodec``'s): reading a JPEG's frame
header to tell what a GPU library may take, and the capability probe -- a small JPEG decoded on the device
once, its result cached per (probe, device). Its own module so that the backends and the list of them
(``gpu_decode.GPU_BACKENDS``) import it, not each other.
"""

from __future__ import annotations

import functools
import io
import threading
from dataclasses import dataclass
from typing import Callable

from PIL import Image

try:
    from . import _jpeg
except ImportError:  # built without libjpeg headers
    _jpeg = None

_SOF_BASELINE = 0xC0
_SOF_LOSSLESS = (0xC3, 0xC7, 0xCB, 0xCF)  # nvJPEG and rocJPEG refuse lossless JPEGs


@dataclass(frozen=True)
class JpegFrame:
    """A JPEG's frame header (SOFn): its coding process, size and per-component sampling factors."""

    marker: int  # 0xC0 baseline, 0xC1 extended, 0xC2 progressive, 0xC3 lossless, ...
    precision: int
    width: int
    height: int
    sampling: tuple[tuple[int, int], ...]  # (horizontal, vertical) per component, in frame order

    @property
    def subsampling(self) -> str | None:
        """"4:4:4", "4:2:2", "4:2:0", "4:4:0", "4:1:1", "4:0:0" (grayscale), or None for other layouts."""
        if len(self.sampling) == 1:
            return "4:0:0"
        if len(self.sampling) != 3 or self.sampling[1] != (1, 1) or self.sampling[2] != (1, 1):
            return None
        return {(1, 1): "4:4:4", (2, 1): "4:2:2", (2, 2): "4:2:0", (1, 2): "4:4:0",
                (4, 1): "4:1:1"}.get(self.sampling[0])


def gpu_jpeg_frame(data: bytes) -> JpegFrame | None:
    """The frame of a JPEG that every GPU library may take -- one or three components (not CMYK), not
    lossless -- or None. The frame header's marker, not a search of the first 64 KB for SOF3 (80 us of GIL
    per image, and an EXIF thumbnail or ICC profile could hold the bytes)."""
    if data[:3] != b"\xff\xd8\xff":
        return None
    if _jpeg is not None:
        try:
            components = _jpeg.header(data)[2]
        except Exception:
            return None
        if components not in (1, 3):
            return None
    frame = jpeg_frame(data)
    return None if frame is None or frame.marker in _SOF_LOSSLESS else frame


def jpeg_frame(data: bytes) -> JpegFrame | None:
    """The frame header of a JPEG, read by walking its marker segments; None if there is none before the scan."""
    if data[:2] != b"\xff\xd8":
        return None
    i, end = 2, len(data)
    while i + 4 <= end:
        if data[i] != 0xFF:  # stray bytes between segments: skipped to the next marker, as libjpeg does
            i = data.find(b"\xff", i)
            if i < 0:
                return None
            continue
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            i += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image, or a scan, before any frame header
            return None
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # SOFn (not DHT, JPG, DAC)
            segment = data[i + 4:i + 2 + length]
            count = segment[5] if len(segment) >= 6 else 0
            if count == 0 or len(segment) < 6 + 3 * count:
                return None
            sampling = tuple((segment[7 + 3 * k] >> 4, segment[7 + 3 * k] & 0x0F) for k in range(count))
            return JpegFrame(marker, segment[0], int.from_bytes(segment[3:5], "big"),
                             int.from_bytes(segment[1:3], "big"), sampling)
        if length < 2:
            return None
        i += 2 + length
    return None


# ---------------------------------------------------------------- probing

@functools.lru_cache(maxsize=1)
def probe_jpeg() -> bytes:
    """A small JPEG (128x128 baseline 4:2:0, a color gradient) to probe GPU decoders with.

    Large enough for rocJPEG's hardware path (64x64 and up), small enough to cost nothing.
    """
    import numpy as np
    ramp = np.arange(128, dtype=np.uint8) * 2
    pixels = np.stack([np.broadcast_to(ramp[None, :], (128, 128)), np.broadcast_to(ramp[:, None], (128, 128)),
                       np.full((128, 128), 90, np.uint8)], axis=-1)
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels), "RGB").save(out, "JPEG", quality=90, subsampling=2)
    return out.getvalue()


class Unavailable(RuntimeError):
    """A probe's finding that its backend cannot run here at all (no GPU, not installed): said as is."""


def check_probe_output(image, data: bytes) -> None:
    """Raise unless ``image`` (the backend's decode of ``data``) is what torchvision's CPU decoder gives, within
    the few levels GPU IDCTs and upsampling differ by."""
    import torch
    import torchvision.io
    expected = torch.ops.image.decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8),
                                           torchvision.io.ImageReadMode.RGB.value, False)
    got = image.cpu()
    if tuple(got.shape) != tuple(expected.shape) or got.dtype != torch.uint8:
        raise RuntimeError(f"the probe decode gave a {got.dtype} tensor of shape {tuple(got.shape)}, "
                           f"not {tuple(expected.shape)} uint8")
    off = (got.float() - expected.float()).abs().mean().item()
    if off > 4:
        raise RuntimeError(f"the probe decode gave wrong pixels ({off:.1f} levels off on average)")


_probed: dict = {}  # (probe, device) -> None when it decodes, else why not
_probe_lock = threading.Lock()


def _probe_result(probe: Callable, device) -> str | None:
    key = (probe, str(device))
    with _probe_lock:
        if key not in _probed:
            try:
                probe(device)
                _probed[key] = None
            except Unavailable as error:
                _probed[key] = str(error)
            except Exception as error:  # whatever the library raises: the backend cannot decode here
                _probed[key] = f"a probe decode on {device} failed: {type(error).__name__}: {error}"
        return _probed[key]
