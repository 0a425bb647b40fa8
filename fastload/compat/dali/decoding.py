"""DALI's CPU image decoder (``fn.decoders.image(device="cpu")``), one encoded image at a time.

Pillow over libjpeg-turbo decodes as DALI's nvImageCodec CPU path does (same library, same IDCT
and upsampling), with the EXIF orientation applied; what differs is DALI's policy, kept here: which
formats it accepts, the progressive-JPEG scan limit fastload enforces (``fastload.decode.MAX_SCANS``),
and the GRAY / BGR / YCbCr outputs (the colour-space arithmetic is ``colour.py``'s).
"""

from __future__ import annotations

import io

import numpy as np
import torch
from PIL import Image, ImageOps

from ...decode import _REGION_COLOR_SPACES, MAX_SCANS, _jpeg, count_scans
from .colour import _rgb_to_gray, _rgb_to_ycbcr


# What DALI's decoder takes (its documented list), by Pillow's format names (PNM is "PPM")
_DALI_FORMATS = {"JPEG", "MPO", "JPEG2000", "TIFF", "PNG", "BMP", "PPM", "WEBP"}


_ORIENTATION = 0x0112  # the EXIF Orientation tag


def decode(data: bytes, output_type: str = "RGB") -> torch.Tensor:
    """fn.decoders.image(device="cpu"): the image as HWC uint8.

    DALI's CPU decoder is libjpeg-turbo (through nvImageCodec) with fancy upsampling and the
    accurate integer IDCT; Pillow wraps the same library with the same defaults, and both apply
    the EXIF orientation (DALI's ``adjust_orientation=True``). "GRAY" of a JPEG asks libjpeg for
    the luma plane (Pillow's draft mode), as DALI does; other formats are converted from RGB with
    0.299/0.587/0.114. "YCbCr" is the RGB result in ITU-R BT.601 studio range (DALI's documented
    definition). WebP goes through torchvision where Pillow lacks it. Formats DALI does not
    decode (GIF, ...) and undecodable bytes raise ValueError saying why.
    """
    kind = {"RGB": "RGB", "BGR": "BGR", "GRAY": "GRAY", "YCBCR": "YCbCr"}.get(str(output_type).upper())
    if kind is None:
        raise ValueError(f"decode: output_type {output_type!r} is not one of RGB, BGR, GRAY, YCbCr")
    data = bytes(data)
    try:
        image = Image.open(io.BytesIO(data))
        if image.format not in _DALI_FORMATS:
            raise ValueError(f"cannot decode image: {image.format} is not a format DALI decodes "
                             "(JPEG, JPEG 2000, TIFF, PNG, BMP, PNM, WebP)")
        if image.format in ("JPEG", "MPO") and image.info.get("progressive") and count_scans(data) > MAX_SCANS:
            raise ValueError(f"cannot decode image: a progressive JPEG with more than {MAX_SCANS} scans "
                             f"(each costs a pass over the whole image): refused")
        if kind == "GRAY" and image.format in ("JPEG", "MPO"):
            image.draft("L", image.size)
        if image.getexif().get(_ORIENTATION, 1) != 1:  # (exif_transpose copies the decoded image even when not)
            image = ImageOps.exif_transpose(image)
        if image.mode not in ("L", "RGB") or (image.mode == "L" and kind != "GRAY"):
            image = image.convert("RGB")
        array = torch.from_numpy(np.array(image))
    except Image.UnidentifiedImageError:
        if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
            raise ValueError("cannot decode image: unknown image format") from None
        array = _decode_webp(data)
    except Image.DecompressionBombError as error:
        raise ValueError(f"cannot decode image: too large ({error})") from None
    except (OSError, SyntaxError, EOFError) as error:
        raise ValueError(f"cannot decode image: {error}") from None
    if kind == "GRAY":
        return (array if array.dim() == 2 else _rgb_to_gray(array)).unsqueeze(-1).contiguous()
    if array.dim() == 2:
        array = array.unsqueeze(-1).expand(-1, -1, 3)
    if kind == "BGR":
        return array.flip(-1).contiguous()
    if kind == "YCbCr":
        return _rgb_to_ycbcr(array)
    return array.contiguous()


def _decode_webp(data: bytes) -> torch.Tensor:
    import torchvision.io
    try:
        decoded = torchvision.io.decode_image(torch.frombuffer(bytearray(data), dtype=torch.uint8),
                                              mode=torchvision.io.ImageReadMode.RGB, apply_exif_orientation=True)
    except RuntimeError as error:
        raise ValueError(f"cannot decode image: {error}") from None
    return decoded.permute(1, 2, 0).contiguous()


def decode_window(data: bytes, output_type: str, window) -> torch.Tensor:
    """fn.decoders.image_slice's pixels: the part of the decoded image that ``window(shape)`` names (it
    returns the HWC start and size, or raises ValueError for one out of bounds).

    A JPEG that libjpeg decodes directly (no orientation to apply, not progressive) has only that region
    decoded: the rows below it are not decoded, nor the columns beside it colour-converted, as DALI's ROI
    decoding skips them. The region decoder widens its columns by one each side for fancy upsampling, so
    its pixels are a full decode's. Any other image is decoded whole and cut, and so is a JPEG whose
    window libjpeg warns about (corrupt data: Pillow judges it, as ``decode`` does). Damage below the
    window is not read, so a JPEG cut short or broken there gives the window's pixels where a whole decode
    refuses it: DALI's ROI decoding does the same (measured on such files).
    """
    kind = {"RGB": "RGB", "BGR": "BGR", "GRAY": "GRAY", "YCBCR": "YCbCr"}.get(str(output_type).upper())
    data = bytes(data)
    size = _region_size(data) if kind in ("RGB", "BGR", "GRAY") else None
    if size is not None:
        start, extent = window((*size, 1 if kind == "GRAY" else 3))
        if start[2] == 0 and extent[2] in (1, 3) and extent[0] > 0 and extent[1] > 0:
            pixels = _decode_region(data, start[0], start[1], extent[0], extent[1], kind)
            if pixels is not None:
                return pixels
    image = decode(data, output_type)
    start, extent = window(tuple(image.shape))
    cut = image.numpy()[start[0]:start[0] + extent[0], start[1]:start[1] + extent[1], start[2]:start[2] + extent[2]]
    return torch.from_numpy(np.ascontiguousarray(cut))  # numpy's copy: torch's strided uint8 one is slow


def _region_size(data: bytes) -> tuple[int, int] | None:
    """(height, width) of a JPEG the region decoder takes as it is, else None."""
    if _jpeg is None or data[:2] != b"\xff\xd8":
        return None
    try:
        width, height, _, color_space, progressive = _jpeg.header(data)
    except ValueError:
        return None
    if progressive or color_space not in _REGION_COLOR_SPACES or width * height > (Image.MAX_IMAGE_PIXELS or 0):
        return None  # decode() applies the scan limit and the size limit, and words their errors
    if _has_app1(data) and Image.open(io.BytesIO(data)).getexif().get(_ORIENTATION, 1) != 1:
        return None
    return height, width


def _has_app1(data: bytes) -> bool:
    """Whether the JPEG has an APP1 segment before its first scan: where Pillow reads an orientation from
    (EXIF, or XMP's tiff:Orientation). True when the markers cannot be walked."""
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return True
        marker = data[at + 1]
        if marker == 0xFF:  # a fill byte
            at += 1
        elif marker == 0xDA:  # start of scan
            return False
        elif marker == 0xE1:
            return True
        elif 0xD0 <= marker <= 0xD8 or marker == 0x01:  # markers without a length
            at += 2
        else:
            at += 2 + int.from_bytes(data[at + 2:at + 4], "big")
    return True


def _decode_region(data: bytes, top: int, left: int, height: int, width: int, kind: str) -> torch.Tensor | None:
    """The region's pixels from the region decoder (HWC uint8 in ``kind``), or None for Pillow to judge."""
    gray = kind == "GRAY"
    out = np.empty((height, width, 1 if gray else 3), np.uint8)
    try:
        result = _jpeg.decode(data, out, 8, left, top, width, height, gray)
    except (ValueError, NotImplementedError, MemoryError):
        return None
    if not isinstance(result, tuple) or result[3] or result[0] != width or result[1] != height:
        return None  # corrupt data (libjpeg warned), or a region the image does not hold
    if result[2] == 1 and not gray:  # a grayscale JPEG (its values packed first): RGB repeats the one channel
        return torch.from_numpy(np.repeat(out.reshape(-1)[:height * width].reshape(height, width, 1), 3, axis=2))
    pixels = torch.from_numpy(out)
    return pixels.flip(-1).contiguous() if kind == "BGR" else pixels
