"""CPU decoding with Pillow (pillow-simd when installed): header first, then DCT-scaled decode.

The header is parsed before any pixel memory is allocated, so a file that
claims a gigapixel is refused in milliseconds instead of ending in an
out-of-memory kill. Decoding uses libjpeg-turbo's DCT scaling (Pillow's draft
mode) when the caller says a 1/2, 1/4 or 1/8 scale still covers the output:
large photos then decode several times faster.
"""

from __future__ import annotations

import io
import warnings

from PIL import Image

from .errors import DecodeError

DEFAULT_MAX_PIXELS = Image.MAX_IMAGE_PIXELS or 89_478_485


def open_image(index: int, path: str, data: bytes, max_pixels: int | None = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Parse the header of an encoded image; raise DecodeError if it is not an image or too large."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as error:
        raise DecodeError(index, path, str(error)) from None
    except Exception as error:  # Pillow raises many types for malformed headers
        raise DecodeError(index, path, f"not a readable image: {error}") from error
    width, height = image.size
    if width < 1 or height < 1:
        raise DecodeError(index, path, f"invalid size {width}x{height} in header")
    if max_pixels is not None and width * height > max_pixels:
        raise DecodeError(index, path, f"{width}x{height} = {width * height} pixels exceeds "
                                       f"max_image_pixels={max_pixels}")
    return image


def decode(index: int, path: str, image: Image.Image, reduction: int = 1) -> tuple[Image.Image, int]:
    """Decode pixels at 1/``reduction`` scale where the format allows; returns (image, scale used).

    The image is RGB or L (L is expanded to RGB after resizing, which is
    exact and three times cheaper); other modes are converted to RGB as
    torchvision's pil_loader does.
    """
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
    return image, scale
