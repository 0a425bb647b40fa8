"""One sample of the CPU fast path in one native call: decode, crop, resize, flip and write, without the GIL.

Why: loader threads scale with cores only while they run outside the GIL.
The Pillow route (decode into a PIL image, resize, ``tobytes``, normalize)
holds it for about half a millisecond per image between its native steps,
which caps one process near 2,000 images/s however many cores it has.
``fastload._jpeg.sample`` does a JPEG's whole chain in C with the GIL
released -- region decode at the DCT scale, Pillow's resampling arithmetic
(``fastload/_resample.h``: the same pixels as Image.resize), the window of
a CenterCrop, flips, and the write into the sample's row of the batch
(uint8, or float32 normalized) -- so Python is left with the file read,
the header and the sample's random draws.

It takes what the region decoder takes (baseline and progressive JPEGs in
YCbCr, RGB or gray) under a plan without rotation or affine steps or
nearest-neighbour resizing, and crops that lie inside the image; for
anything else (and a JPEG libjpeg warns about, which Pillow then judges)
``sample`` returns None and the sample goes the Pillow route, whose pixels
these are.
"""

from __future__ import annotations

from PIL import Image

from .decode import Header, thread_scratch
from .transforms import Geometry, Plan

try:
    from . import _jpeg
except ImportError:  # built without libjpeg headers: every sample goes the Pillow route
    _jpeg = None

UINT8_ROWS, FLOAT32_PLANES = 0, 1  # what the output row holds (fastload._jpeg.sample's `kind`)
_FILTERS = {Image.Resampling.BILINEAR, Image.Resampling.BICUBIC, Image.Resampling.LANCZOS,
            Image.Resampling.BOX, Image.Resampling.HAMMING}
_NO_SCALE = (1.0, 1.0, 1.0), (0.0, 0.0, 0.0)


def available(plan: Plan) -> bool:
    """Whether this plan's samples can take the native route (the extension is built and the plan has no
    step it lacks)."""
    return (_jpeg is not None and hasattr(_jpeg, "sample") and plan.affine is None
            and plan.resample in _FILTERS)


def steps(header: Header, geometry: Geometry, reduction: int) -> tuple | None:
    """The native call's region, box, size and window for this sample, or None where the steps are not
    expressible (a crop or window that pads): Pillow's route, ``cpu_augment.transform_image``, in numbers."""
    width, height = header.width, header.height
    left, top, right, bottom = geometry.region(width, height, reduction)
    in_w, in_h = right - left, bottom - top
    if reduction != 1 or geometry.box_resize:
        sl, st, sr, sb = geometry.source_box
        box = (sl / reduction - left, st / reduction - top, sr / reduction - left, sb / reduction - top)
        size = geometry.output_size
        return (left, top, in_w, in_h), box, size, (0, 0) + size
    if geometry.crop is not None and geometry.crop != (left, top, right, bottom):
        return None  # a crop reaching past the image: padded, the Pillow route
    size = geometry.resize or (in_w, in_h)
    window = geometry.post_crop or (0, 0) + size
    wl, wt, wr, wb = window
    if wl < 0 or wt < 0 or wr > size[0] or wb > size[1]:
        return None
    return (left, top, in_w, in_h), (0.0, 0.0, float(in_w), float(in_h)), size, (wl, wt, wr - wl, wb - wt)


def sample(data: bytes, header: Header, geometry: Geometry, plan: Plan, reduction: int, out, offset: int,
           kind: int) -> float | None:
    """Decode and augment one JPEG into ``out`` (a writable buffer: the batch) at byte ``offset``.

    Returns the seconds spent decoding, or None where the Pillow route must
    take the sample (see the module docstring; a JPEG libjpeg warns about
    is among them: Pillow then judges the file and words the warning).
    """
    if header.image is not None:  # Pillow parsed the header: not a JPEG the region decoder takes
        return None
    found = steps(header, geometry, reduction)
    if found is None:
        return None
    region, box, size, window = found
    scale, shift = (plan.scale, plan.shift) if kind == FLOAT32_PLANES else _NO_SCALE
    scratch = thread_scratch(1 << 20)
    while True:
        try:
            result = _jpeg.sample(data, scratch, out, 8 // reduction, region, box, size, window, plan.resample,
                                  geometry.hflip, geometry.vflip, kind, scale, shift, offset)
        except (ValueError, NotImplementedError, MemoryError):
            return None  # Pillow's verdict and wording for what libjpeg rejects
        if isinstance(result, int):  # the scratch is too small for this image: grow it and try again
            scratch = thread_scratch(result)
            continue
        warnings, _, seconds = result
        return None if warnings else seconds
