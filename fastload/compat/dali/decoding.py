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

from ...decode import MAX_SCANS, count_scans
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
