"""CPU decoding: the header first, then only the pixels the sample's geometry reads.

The header is parsed before any pixel memory is allocated, so a file that
claims a gigapixel is refused in milliseconds instead of ending in an
out-of-memory kill.

JPEGs go to ``fastload._jpeg``, a small libjpeg-turbo binding built with the
package, which decodes only the region a random-resized crop reads (rows above
it skip the inverse DCT, rows below are never touched) at the smallest DCT
scale (1/2, 1/4, 1/8) that still covers the output. On ImageNet-sized photos
that is about 1.6x faster than Pillow decoding the whole image, with the same
pixels. Everything else -- other formats, CMYK JPEGs, files libjpeg warns
about, or a build without the extension -- goes through Pillow (pillow-simd
when installed), whose verdict on a broken file is then exactly torchvision's
``pil_loader``'s.

This module is the CPU half of decoding, used by every path (and by the
device path for the files its GPU decoder refuses). Batched GPU decoding and
the choice of backend live in ``fastload.gpu_decode``, so that CPU decoding
imports and changes without CUDA libraries in view.
"""

from __future__ import annotations

import io
import threading
import warnings
from dataclasses import dataclass

import numpy as np
from PIL import Image

from .errors import DecodeError
from .transforms import Draw

try:
    from . import _jpeg
except ImportError:  # built without libjpeg headers: Pillow decodes everything
    _jpeg = None

DEFAULT_MAX_PIXELS = Image.MAX_IMAGE_PIXELS or 89_478_485
_REGION_COLOR_SPACES = (1, 2, 3)  # libjpeg's JCS_GRAYSCALE, JCS_RGB, JCS_YCbCr
# Progressive JPEGs of more scans are refused (check_scans). libjpeg has no limit of its own; TurboJPEG's
# TJPARAM_SCANLIMIT and djpeg's -maxscans leave it to the caller. Encoders write 6-12 (libjpeg's default
# script 10, mozjpeg's optimized ones a few more).
MAX_SCANS = 100
_SCRATCH_LIMIT = 64 << 20  # bytes of decoded region kept per thread between images
_scratch = threading.local()


@dataclass
class Header:
    """An image's size, read before any pixel is decoded.

    ``image`` is the Pillow handle when Pillow parsed the header (any file the
    region decoder does not take); None for a JPEG the region decoder takes.
    """

    width: int
    height: int
    image: Image.Image | None = None


@dataclass
class Decoded:
    """Pixels of the image decoded at 1/``scale``, RGB or L.

    ``origin`` is where ``image``'s top-left pixel lies in the whole image at
    that scale: (0, 0) unless only a region was decoded. ``warning`` is
    libjpeg's complaint about a corrupt JPEG that Pillow then decoded anyway
    (the loader records it, or refuses the image with ``on_corrupt="error"``).
    """

    image: Image.Image
    scale: int = 1
    origin: tuple[int, int] = (0, 0)
    warning: str | None = None  # libjpeg's first warning: corrupt data that was decoded anyway


def open_image(index: int, path: str, data: bytes, max_pixels: int | None = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Parse the header with Pillow; raise DecodeError if it is not an image or too large."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as error:
        raise DecodeError(index, path, str(error)) from None
    except Image.UnidentifiedImageError:
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _open_webp(index, path, data, max_pixels)
        raise DecodeError(index, path, "not a readable image: unknown format (Pillow cannot identify it)") from None
    except Exception as error:  # Pillow raises many types for malformed headers
        raise DecodeError(index, path, f"not a readable image: {error}") from error
    _check_size(index, path, image.width, image.height, max_pixels)
    if image.format == "JPEG" and image.info.get("progressive"):
        check_scans(index, path, data)
    return image


def check_scans(index: int, path: str, data: bytes, limit: int | None = None) -> None:
    """Refuse a progressive JPEG of more than ``limit`` (default ``MAX_SCANS``) scans, before any decoder
    spends a pass over the whole image on each (a 300 KB file of 1,500 scans took 34 s)."""
    limit = MAX_SCANS if limit is None else limit
    if count_scans(data, limit) > limit:
        raise DecodeError(index, path, f"progressive JPEG with more than {limit} scans (encoders write about "
                                       f"10; each costs a pass over the whole image): refused")


def count_scans(data: bytes, limit: int = MAX_SCANS) -> int:
    """A JPEG's scans (SOS markers, along its marker segments and entropy-coded data), counted up to
    ``limit`` + 1: in C without the GIL, or in Python for a build without the extension."""
    return _jpeg.count_scans(data, limit) if _jpeg is not None else _count_scans(data, limit)


def _count_scans(data: bytes, limit: int) -> int:
    scans, at, length = 0, 2, len(data)
    while at + 4 <= length and scans <= limit and data[at] == 0xFF:
        marker = data[at + 1]
        if marker == 0xFF:
            at += 1
            continue
        if marker == 0xD9:
            break
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            at += 2
            continue
        at += 2 + int.from_bytes(data[at + 2:at + 4], "big")
        if marker != 0xDA:
            continue
        scans += 1
        while at + 1 < length:
            at = data.find(b"\xff", at, length - 1)
            if at < 0:
                at = length
                break
            after = data[at + 1]
            if after == 0x00 or 0xD0 <= after <= 0xD7:
                at += 2
            elif after == 0xFF:
                at += 1
            else:
                break
    return scans


def _webp_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a WebP's first chunk header (VP8X, VP8L or VP8), or None."""
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and len(data) >= 30:
        return int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF
    return None


def _open_webp(index: int, path: str, data: bytes, max_pixels: int | None) -> Image.Image:
    """A WebP that this Pillow build cannot read (pillow-simd built without libwebp): torchvision decodes it.

    The size in its header is checked against the pixel cap first, as for any image.
    """
    import torch
    import torchvision.io
    size = _webp_size(data)
    if size is None:
        raise DecodeError(index, path, "not a readable image: WebP without a size in its first chunk")
    _check_size(index, path, *size, max_pixels)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torchvision 0.29 deprecates its decoders
            pixels = torchvision.io.decode_webp(torch.frombuffer(bytearray(data), dtype=torch.uint8),
                                                mode=torchvision.io.ImageReadMode.RGB)
    except RuntimeError as error:
        raise DecodeError(index, path, f"decoding failed: WebP: {error}") from error
    return Image.fromarray(pixels.permute(1, 2, 0).numpy(), "RGB")


def _check_size(index: int, path: str, width: int, height: int, max_pixels: int | None) -> None:
    if width < 1 or height < 1:
        raise DecodeError(index, path, f"invalid size {width}x{height} in header")
    if max_pixels is not None and width * height > max_pixels:
        raise DecodeError(index, path, f"{width}x{height} = {width * height} pixels exceeds "
                                       f"max_image_pixels={max_pixels}")


def read_header(index: int, path: str, data: bytes, max_pixels: int | None = DEFAULT_MAX_PIXELS) -> Header:
    """The image's size, from libjpeg for JPEGs the region decoder takes, else from Pillow."""
    if _jpeg is not None and data[:2] == b"\xff\xd8":
        try:
            width, height, _, color_space, progressive = _jpeg.header(data)
        except ValueError:
            pass  # let Pillow judge (and word the error for) a header libjpeg rejects
        else:
            if progressive:
                check_scans(index, path, data)
            if color_space in _REGION_COLOR_SPACES:
                _check_size(index, path, width, height, max_pixels)
                return Header(width, height)
    image = open_image(index, path, data, max_pixels)
    return Header(image.width, image.height, image)


def decode(index: int, path: str, data: bytes, header: Header, geometry: Draw | None = None,
           reduction: int = 1) -> Decoded:
    """Decode what ``geometry`` reads (everything when None) at 1/``reduction`` scale or the nearest the format allows.

    ``reduction`` must be 1, 2, 4 or 8. 1-channel images stay L (expanded to
    RGB after resizing, which is exact and cheaper); other modes become RGB
    as torchvision's pil_loader makes them.
    """
    warning = None
    if header.image is None:
        decoded = _decode_region(data, header, geometry, reduction)
        if isinstance(decoded, Decoded):
            return decoded
        warning = decoded
        header.image = open_image(index, path, data, None)
    try:
        decoded = _decode_with_pillow(index, path, header.image, reduction)
    except DecodeError as error:
        if not warning:
            raise
        raise DecodeError(index, path, f"{error.reason} (libjpeg: {warning})") from error.__cause__
    decoded.warning = warning
    return decoded


def thread_scratch(size: int) -> np.ndarray:
    """A uint8 buffer of at least ``size`` bytes for this thread's decoding (the region decoder's pixels,
    the native sample's working rows): kept between images up to _SCRATCH_LIMIT, so a thread allocates
    only when an image needs more than any before it."""
    scratch = getattr(_scratch, "buffer", None)
    if scratch is None or scratch.size < size:
        scratch = np.empty(size, np.uint8)
        if size <= _SCRATCH_LIMIT:
            _scratch.buffer = scratch
    return scratch


def _decode_region(data: bytes, header: Header, geometry: Draw | None, scale: int) -> Decoded | str | None:
    """The region decoder's result, or libjpeg's warning / None when Pillow must decide."""
    if geometry is None:
        left, top, right, bottom = 0, 0, -(-header.width // scale), -(-header.height // scale)
    else:
        left, top, right, bottom = geometry.region(header.width, header.height, scale)
    width, height = right - left, bottom - top
    scratch = thread_scratch(width * height * 3)
    try:
        result = _jpeg.decode(data, scratch, 8 // scale, left, top, width, height)
    except (ValueError, NotImplementedError, MemoryError):
        return None
    width, height, channels, warning_count, warning = result
    if warning_count:  # corrupt or truncated data: Pillow's verdict, as with torchvision's loader
        return warning or "corrupt JPEG data"
    pixels = scratch[: width * height * channels]
    mode = "RGB" if channels == 3 else "L"
    image = Image.frombuffer(mode, (width, height), pixels, "raw", mode, 0, 1)
    return Decoded(image, scale, (left, top))


def _decode_with_pillow(index: int, path: str, image: Image.Image, reduction: int) -> Decoded:
    """Decode the whole image with Pillow, using draft mode for DCT scaling."""
    scale = 1
    if reduction > 1 and image.format == "JPEG":
        width = image.width
        drafted = image.draft(image.mode, (width // reduction, image.height // reduction))
        if drafted is not None:  # (mode, (0, 0, width / scale, height / scale))
            scale = round(width / drafted[1][2])
    try:
        image.load()
    except Exception as error:
        raise DecodeError(index, path, f"decoding failed: {error}") from error
    if image.mode not in ("RGB", "L"):
        image = image.convert("RGB")
    return Decoded(image, scale)
