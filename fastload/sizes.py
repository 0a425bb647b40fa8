"""torchvision's size arithmetic, as pure functions of image sizes and draws: a size argument as (height,
width), a center crop's offset, a resize's output size, RandomResizedCrop's window (drawn from a sample's
stream), the largest DCT reduction that still covers an output, and Pillow's rotation map and expanded size.
``fastload.transforms``' geometries are made of them.
"""

from __future__ import annotations

import math

from ._torchvision import _compute_affine_output_size, _get_inverse_affine_matrix
from .rng import SampleRandom


def center_offset(size: int, crop: int) -> int:
    """Where torchvision's CenterCrop starts a crop of ``crop`` pixels along an axis of ``size`` pixels.

    A crop larger than the image pads it first, ``(crop - size) // 2`` before
    (so the image starts that far in, whatever ``round`` would say of half
    the difference); a smaller one starts at ``round((size - crop) / 2)``.
    """
    if crop > size:
        return -((crop - size) // 2)
    return int(round((size - crop) / 2.0))


def pair(size) -> tuple[int, int]:
    """(height, width) from torchvision's int-or-sequence size."""
    if isinstance(size, int):
        return size, size
    size = tuple(size)
    return (size[0], size[0]) if len(size) == 1 else (size[0], size[1])


def largest_reduction(ratio: float) -> int:
    for factor in (8, 4, 2):
        if ratio >= factor:
            return factor
    return 1


def rrc_params(width: int, height: int, scale, ratio, rng: SampleRandom) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop.get_params, drawing from the sample's stream: (top, left, h, w)."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect_ratio = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h + 1), rng.randint(0, width - w + 1), h, w
    return fallback_crop(width, height, ratio)


def fallback_crop(width: int, height: int, ratio) -> tuple[int, int, int, int]:
    """RandomResizedCrop's window after ten draws that did not fit: the centre crop of the image clamped to
    ``ratio``, (top, left, h, w), as torchvision's get_params ends."""
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def resized_size(width: int, height: int, size, max_size) -> tuple[int, int]:
    """torchvision's _compute_resized_output_size, as (width, height)."""
    if size is None:  # v2's Resize(None, max_size): the long side becomes max_size
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = int(max_size * short / long), max_size
        return (new_short, new_long) if width <= height else (new_long, new_short)
    if isinstance(size, int) or len(size) == 1:
        requested = size if isinstance(size, int) else size[0]
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = requested, int(requested * long / short)
        if max_size is not None and new_long > max_size:
            new_short, new_long = int(max_size * new_short / new_long), max_size
        return (new_short, new_long) if width <= height else (new_long, new_short)
    return size[1], size[0]


def rotation_matrix(angle: float, width: int, height: int, center, output: tuple[int, int]) -> tuple[float, ...]:
    """The inverse map of Pillow's ``Image.rotate`` (which torchvision's rotate calls on a PIL image), to an
    output of (width, height) ``output``, computed as Pillow computes it so the pixels are Pillow's exactly."""
    angle = -math.radians(angle % 360.0)
    cos, sin = round(math.cos(angle), 15), round(math.sin(angle), 15)
    a, b, d, e = cos, sin, round(-math.sin(angle), 15), cos
    cx, cy = center if center is not None else (width / 2, height / 2)
    c = a * -cx + b * -cy + 0.0 + cx
    f = d * -cx + e * -cy + 0.0 + cy
    dx, dy = -(output[0] - width) / 2.0, -(output[1] - height) / 2.0  # expand: keep the centre
    return a, b, a * dx + b * dy + c, d, e, d * dx + e * dy + f


def expanded_size(angle: float, width: int, height: int, pil: bool) -> tuple[int, int]:
    """(height, width) of ``rotate(expand=True)`` by ``angle``: Pillow's rule on a PIL image, torchvision's
    (which truncates to 1e-4 before rounding up) on a tensor -- except at multiples of 90 degrees, where both
    transpose instead (the rules would add a pixel to an odd-sized side)."""
    if angle % 360 in (0.0, 180.0):
        return height, width
    if angle % 360 in (90.0, 270.0):
        return width, height
    if pil:
        a, b, c, d, e, f = rotation_matrix(angle, width, height, None, (width, height))
        corners = ((0, 0), (width, 0), (width, height), (0, height))
        xs, ys = [a * x + b * y + c for x, y in corners], [d * x + e * y + f for x, y in corners]
        return math.ceil(max(ys)) - math.floor(min(ys)), math.ceil(max(xs)) - math.floor(min(xs))
    centred = _get_inverse_affine_matrix([0.0, 0.0], -(angle % 360), [0.0, 0.0], 1.0, [0.0, 0.0])
    out_w, out_h = _compute_affine_output_size(centred, width, height)
    return out_h, out_w
