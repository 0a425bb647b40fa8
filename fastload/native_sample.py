"""One sample of the CPU fast path in one native call: decode, crop, resize, flip and write, without the GIL.

Why: loader threads scale with cores only while they run outside the GIL.
The Pillow route (decode into a PIL image, resize, ``tobytes``, normalize)
holds it for about half a millisecond per image between its native steps,
which caps one process near 2,000 images/s however many cores it has.
``fastload._jpeg.sample`` does a JPEG's whole chain in C with the GIL
released -- region decode at the DCT scale, Pillow's resampling arithmetic
(``fastload/_resample.h``: the same pixels as Image.resize), the window of
a CenterCrop, flips, and the write into the sample's row of the batch
(uint8, or float32: each level's value as torchvision computes it, looked up in
``fastload.kernels.normalize``'s table) -- so Python is left with the file read,
the header and the sample's random draws.

For a RandomResizedCrop plan reading plain files, ``load`` goes one step
further: ``fastload._jpeg.load_sample`` also reads the file, parses the
header, applies its limits and draws the crop and flips from the sample's
stream, so a sample costs its loader thread one call of Python.

It takes what the region decoder takes (baseline and progressive JPEGs in
YCbCr, RGB or gray) under a plan without rotation or affine steps or
nearest-neighbour resizing, and crops that lie inside the image; for
anything else (and a JPEG libjpeg warns about, which Pillow then judges)
``sample`` returns None and the sample goes the Pillow route, whose pixels
these are.
"""

from __future__ import annotations

from PIL import Image

from fastload.kernels.normalize import table_bytes

from .decode import MAX_SCANS, Header, thread_scratch
from .transforms import Draw, Plan

try:
    from . import _jpeg
except ImportError:  # built without libjpeg headers: every sample goes the Pillow route
    _jpeg = None

UINT8_ROWS, FLOAT32_PLANES = 0, 1  # what the output row holds (fastload._jpeg.sample's `kind`)
_FILTERS = {Image.Resampling.BILINEAR, Image.Resampling.BICUBIC, Image.Resampling.LANCZOS,
            Image.Resampling.BOX, Image.Resampling.HAMMING}


def available(plan: Plan) -> bool:
    """Whether this plan's samples can take the native route (the extension is built and the plan has no
    step it lacks)."""
    return (_jpeg is not None and hasattr(_jpeg, "sample") and plan.affine is None
            and plan.resample in _FILTERS)


def steps(header: Header, draw: Draw, reduction: int) -> tuple | None:
    """The native call's region, box, size and window for this sample, or None where the steps are not
    expressible (a crop or window that pads): Pillow's route, ``cpu_augment.transform_image``, in numbers."""
    width, height = header.width, header.height
    left, top, right, bottom = draw.region(width, height, reduction)
    in_w, in_h = right - left, bottom - top
    if reduction != 1 or draw.box_resize:
        sl, st, sr, sb = draw.source_box
        box = (sl / reduction - left, st / reduction - top, sr / reduction - left, sb / reduction - top)
        size = draw.resampled_size[::-1]  # (width, height), as the native call takes sizes
        return (left, top, in_w, in_h), box, size, (0, 0) + size
    if draw.crop is not None and draw.crop != (left, top, right, bottom):
        return None  # a crop reaching past the image: padded, the Pillow route
    size = draw.resize or (in_w, in_h)
    window = draw.post_crop or (0, 0) + size
    wl, wt, wr, wb = window
    if wl < 0 or wt < 0 or wr > size[0] or wb > size[1]:
        return None
    return (left, top, in_w, in_h), (0.0, 0.0, float(in_w), float(in_h)), size, (wl, wt, wr - wl, wb - wt)


def sample(data: bytes, header: Header, draw: Draw, plan: Plan, reduction: int, out, offset: int,
           kind: int) -> float | None:
    """Decode and augment one JPEG into ``out`` (a writable buffer: the batch) at byte ``offset``.

    Returns the seconds spent decoding, or None where the Pillow route must
    take the sample (see the module docstring; a JPEG libjpeg warns about
    is among them: Pillow then judges the file and words the warning).
    """
    if header.image is not None:  # Pillow parsed the header: not a JPEG the region decoder takes
        return None
    found = steps(header, draw, reduction)
    if found is None:
        return None
    region, box, size, window = found
    table = table_bytes(plan.values) if kind == FLOAT32_PLANES else b""
    scratch = thread_scratch(1 << 20)
    while True:
        try:
            result = _jpeg.sample(data, scratch, out, 8 // reduction, region, box, size, window, plan.resample,
                                  draw.hflip, draw.vflip, kind, table, offset)
        except (ValueError, NotImplementedError, MemoryError):
            return None  # Pillow's verdict and wording for what libjpeg rejects
        if isinstance(result, int):  # the scratch is too small for this image: grow it and try again
            scratch = thread_scratch(result)
            continue
        warnings, _, seconds = result
        return None if warnings else seconds


def load_settings(plan: Plan, kind: int, max_pixels: int | None, dct: bool) -> tuple | None:
    """What ``load`` passes for every sample of this plan, or None where ``load`` cannot take its samples
    (not a RandomResizedCrop with flips only, or an extension without ``load_sample``)."""
    if not (available(plan) and hasattr(_jpeg, "load_sample") and plan.native_draw):
        return None
    out_h, out_w = plan.geometry.size
    table = table_bytes(plan.values) if kind == FLOAT32_PLANES else b""
    return (-1 if max_pixels is None else max_pixels, MAX_SCANS, *plan.geometry.draw_arguments, plan.hflip_p,
            plan.vflip_p, (out_w, out_h), dct, plan.resample, kind, table)


def load(path: str, stream: tuple[int, int, int, int], settings: tuple, out, offset: int):
    """Read, decode and augment the file at ``path`` into ``out`` at byte ``offset``, its crop and flips drawn
    from ``stream`` (seed, epoch, index, repeat), in one native call without the GIL.

    Returns (read, decode, total) seconds when done; else the file's bytes
    (a file this route does not take: the Pillow route takes it from them,
    and words any refusal), or None where the file could not be read here
    (the caller's read words the error).
    """
    scratch = thread_scratch(1 << 20)
    while True:
        result = _jpeg.load_sample(path, scratch, out, offset, stream, settings)
        if type(result) is not int:
            return result
        scratch = thread_scratch(result)  # the scratch is too small for this image: grow it and try again
