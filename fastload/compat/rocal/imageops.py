"""rocAL's per-sample rules, in torch: its decoder's size cap, its resize output sizes, its crop windows and
its output tensors' layout and type. Each rule cites the rocAL source it follows (ROCm/rocAL at 0981d5bb).
Images are HWC tensors, as rocAL's operators hold them (NHWC).
"""

from __future__ import annotations

import functools
import io
import math
import warnings

import numpy as np
import torch
from PIL import Image

from ..float32 import expf, fmaf

# rocAL keeps these extensions (any case) and files with none (rocAL/source/readers/file_source_reader.cpp,
# rocAL/source/meta_data/label_reader_folders.cpp: the text after the last '.', lower-cased)
EXTENSIONS = frozenset({"jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif", "tiff", "webp", "wav"})
MAX_ASPECT_RATIO = 6  # rocAL/include/pipeline/commons.h: output buffers of resizes that keep the aspect


def decode(data: bytes, color: str, max_width: int, max_height: int, keep_original: bool = True) -> torch.Tensor:
    """``decoders.image``: HWC uint8 (1 channel for GRAY), as rocAL's TurboJPEG decoder gives it
    (rocAL/source/decoders/image/turbo_jpeg_decoder.cpp, TJDecoder::decode). ``keep_original`` is the
    USER_GIVEN_SIZE_ORIG policy, the decoders' default: an image within ``max_width`` x ``max_height``
    decodes at its size (no EXIF rotation: libjpeg-turbo applies none), a larger JPEG at the largest DCT
    scale M/8 whose size fits (ceil(side * M / 8), aspect kept), e.g. 1200x800 in 1000x1000 at 3/4 ->
    900x600. Without it (USER_GIVEN_SIZE, which ``fn.external_source`` and the inference server's JSON
    pipelines use) tjDecompress2 is given the cap itself and takes the largest of TurboJPEG's scales
    2/1 ... 1/8 that fits, enlarging small JPEGs: 500x375 in 1000x1000 decodes at 2/1, 1000x750.
    rocAL crops an image over 8x the cap; fastload refuses it. rocAL's decoder reads JPEGs only (another
    format fails its header read and the batch's last good image takes its place,
    rocAL/source/loaders/image/image_read_and_decode.cpp; a CMYK JPEG fails its decode, which leaves the
    buffer as it was); fastload decodes those with Pillow at their size and warns, and refuses one larger
    than the cap."""
    from ...decode import MAX_SCANS, _jpeg, count_scans  # _jpeg: None where the C extension is not built
    image = Image.open(io.BytesIO(data))
    width, height = image.size
    within = width <= max_width and height <= max_height
    jpeg = image.format in ("JPEG", "MPO")  # MPO: a camera's JPEG with a second picture appended
    if jpeg and image.info.get("progressive") and count_scans(data) > MAX_SCANS:
        raise ValueError(f"a progressive JPEG with more than {MAX_SCANS} scans (each costs a pass over the "
                         f"whole image; encoders write about 10): refused")
    turbo_reads = jpeg and image.mode != "CMYK"
    if not turbo_reads:
        what = "a CMYK JPEG" if jpeg else f"a {image.format} image"
        warnings.warn(f"{what} in a rocAL pipeline: fastload decodes it with Pillow at its size; rocAL's TurboJPEG "
                      f"decoder cannot (another format: it puts another image of the batch in its place; CMYK: it "
                      f"leaves the image's buffer as it was)", stacklevel=2)
        keep_original = True  # no DCT scaling: at its size, or refused below
    scale = 8 if keep_original and within else _tj_scale(width, height, max_width, max_height)
    if scale == 8:
        pixels = _turbo_rgb(_jpeg, data, image) if color != "GRAY" else None
        if pixels is None:
            if color == "GRAY" and jpeg:
                image.draft("L", image.size)  # libjpeg's own grayscale output, as TurboJPEG's TJPF_GRAY
            pixels = np.array(image.convert("L" if color == "GRAY" else "RGB"))  # a writable copy
    else:
        if not turbo_reads:
            raise ValueError(f"a {width}x{height} {image.format} {image.mode} image is larger than max_decoded_width "
                             f"x max_decoded_height ({max_width}x{max_height}); rocAL's decoder only scales the "
                             f"JPEGs it reads (YCbCr, RGB, gray)")
        if scale is None:
            raise ValueError(f"a {width}x{height} JPEG is over 8x max_decoded_width x max_decoded_height "
                             f"({max_width}x{max_height}): rocAL crops such images, fastload does not")
        require_dct_scaling("decoding a JPEG at rocAL's DCT scale")
        pixels, warning = _turbo(_jpeg, data, scale, -(-width * scale // 8), -(-height * scale // 8),
                                 gray=color == "GRAY")
        if warning is not None:
            raise ValueError(f"corrupt JPEG data ({warning})")
        if color != "GRAY" and pixels.shape[2] == 1:
            pixels = np.repeat(pixels, 3, axis=2)
    tensor = torch.from_numpy(pixels)
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(-1)
    return tensor.flip(-1).contiguous() if color == "BGR" else tensor


def require_dct_scaling(what: str) -> None:
    """Refuse ``what`` (at once, where a pipeline is built) where fastload's C extension is missing: DCT
    scaling, which TurboJPEG's size rule needs for most JPEGs under USER_GIVEN_SIZE, is only there."""
    from ...decode import _jpeg
    if _jpeg is None:
        raise RuntimeError(f"{what} needs fastload's C extension (fastload._jpeg, libjpeg-turbo), which is not "
                           f"built here: rocAL's decoder scales JPEGs in the DCT, Pillow cannot (install "
                           f"libjpeg-turbo's headers and reinstall fastload)")


def _tj_scale(width: int, height: int, max_width: int, max_height: int) -> int | None:
    """The M of the first of TurboJPEG's scaling factors, M/8 from 16/8 down to 1/8 (tjGetScalingFactors),
    whose TJSCALED size, ceil(side * M / 8), fits ``max_width`` x ``max_height``; None if none does."""
    return next((m for m in range(16, 0, -1) if -(-width * m // 8) <= max_width
                 and -(-height * m // 8) <= max_height), None)


def _turbo(jpeg, data: bytes, scale: int, width: int, height: int, gray: bool = False
           ) -> tuple[np.ndarray, str | None]:
    """A JPEG decoded whole at DCT scale ``scale``/8 (``width`` x ``height``) by fastload's libjpeg-turbo
    binding into a fresh array: (height, width, channels), and libjpeg's first warning or None. ``gray``:
    libjpeg's grayscale output (a YCbCr JPEG's Y), as TurboJPEG's TJPF_GRAY."""
    buffer = np.empty(width * height * 3, np.uint8)
    got_w, got_h, channels, warnings_seen, warning = jpeg.decode(data, buffer, scale, 0, 0, width, height, gray)
    return buffer[:got_w * got_h * channels].reshape(got_h, got_w, channels), warning if warnings_seen else None


def _turbo_rgb(jpeg, data: bytes, image) -> np.ndarray | None:
    """A three-component JPEG decoded whole by fastload's libjpeg-turbo binding, straight into the array
    returned (Pillow's decode and its copies cost a serving request about 0.8 ms of 3 at 500x375): the
    same pixels (both are libjpeg-turbo with the accurate integer IDCT, as rocAL's TurboJPEG call asks).
    None where Pillow decodes it instead: another format or colour space, or data libjpeg warns about
    (Pillow's decode of those is what rocAL's decoder has always been compared with here)."""
    if jpeg is None or image.format not in ("JPEG", "MPO") or image.mode != "RGB":
        return None
    width, height = image.size
    try:
        pixels, warning = _turbo(jpeg, data, 8, width, height)
    except (ValueError, NotImplementedError):
        return None
    return pixels if warning is None and pixels.shape == (height, width, 3) else None


def resize_size(width: int, height: int, *, resize_width=0, resize_height=0, resize_shorter=0, resize_longer=0,
                scaling_mode=0, max_size=()) -> tuple[int, int]:
    """The (width, height) rocAL's resize gives an image of ``width`` x ``height`` (ResizeNode::
    adjust_out_roi_size, rocAL/source/augmentations/geometry_augmentations/node_resize.cpp; the mode
    rules of rocalResize, rocAL/source/api/rocal_api_augmentation.cpp). ``max_size`` is (width, height)
    as rocAL's C++ reads it."""
    if resize_shorter:  # forces NOT_SMALLER to a square (rocalResize)
        scaling_mode, resize_width, resize_height = 2, resize_shorter, resize_shorter
    elif resize_longer:
        scaling_mode, resize_width, resize_height = 3, resize_longer, resize_longer
    max_w, max_h = (tuple(max_size) * 2)[:2] if max_size else (0, 0)
    dst_w, dst_h = int(resize_width), int(resize_height)
    if scaling_mode == 1:  # STRETCH: a missing side keeps the source's
        dst_w, dst_h = dst_w or width, dst_h or height
        return (min(dst_w, max_w) if max_w else dst_w), (min(dst_h, max_h) if max_h else dst_h)
    if scaling_mode == 0:  # DEFAULT: both given: stretch; one given: the other keeps the aspect
        if dst_w and not dst_h:
            dst_h = _lround(float(np.float32(height) * np.float32(dst_w) / np.float32(width)))
        elif dst_h and not dst_w:
            dst_w = _lround(float(np.float32(width) * np.float32(dst_h) / np.float32(height)))
        return (min(dst_w, max_w) if max_w else dst_w), (min(dst_h, max_h) if max_h else dst_h)
    f32 = np.float32  # the node computes its scales in float
    scale_w, scale_h = f32(dst_w) / f32(width), f32(dst_h) / f32(height)
    if not dst_w or not dst_h:
        scale = scale_w or scale_h
    else:
        scale = max(scale_w, scale_h) if scaling_mode == 2 else min(scale_w, scale_h)
    if max_w:
        scale = min(scale, f32(max_w) / f32(width))
    if max_h:
        scale = min(scale, f32(max_h) / f32(height))
    out_w = dst_w if dst_w and scale_w == scale else _lround(float(f32(width) * scale))
    out_h = dst_h if dst_h and scale_h == scale else _lround(float(f32(height) * scale))
    return out_w, out_h


def resize_buffer(input_max: tuple[int, int], *, resize_width=0, resize_height=0, resize_shorter=0, resize_longer=0,
                  scaling_mode=0, max_size=()) -> tuple[int, int]:
    """The (width, height) of a resize's output buffer, in which every sample's image lies at the top left
    (rocalResize: max_size where both its sides are given, else the requested sides, a missing one
    MAX_ASPECT_RATIO times the other, and then a side max_size gives)."""
    max_w, max_h = (tuple(max_size) * 2)[:2] if max_size else (0, 0)
    if max_w and max_h:
        return int(max_w), int(max_h)
    if resize_shorter:
        w = h = resize_shorter * MAX_ASPECT_RATIO
    elif resize_longer:
        w = h = resize_longer
    else:
        w, h = int(resize_width), int(resize_height)
        if scaling_mode == 1:
            w, h = w or input_max[0], h or input_max[1]
        elif scaling_mode == 2:
            w, h = (w or h) * MAX_ASPECT_RATIO, (h or w) * MAX_ASPECT_RATIO
        else:
            w, h = w or h * MAX_ASPECT_RATIO, h or w * MAX_ASPECT_RATIO
    return int(max_w or w), int(max_h or h)


def _lround(value: float) -> int:
    """C's lround: halves away from zero."""
    return int(math.floor(abs(value) + 0.5)) * (1 if value >= 0 else -1)


def anchored_crop(width: int, height: int, crop_w: int, crop_h: int, pos_x: float, pos_y: float):
    """(x, y, w, h) of a fixed-anchor crop (crop_mirror_normalize, center_crop): a side larger than the
    image shrinks to the image's, the anchor is nearbyintf(pos * (side - crop)), halves to even
    (rocAL/source/parameters/parameter_rocal_crop.cpp, fill_crop_dims)."""
    w = crop_w if 0 < crop_w <= width else width
    h = crop_h if 0 < crop_h <= height else height
    x, y = round(pos_x * (width - w)), round(pos_y * (height - h))  # Python rounds halves to even, as nearbyintf
    return x, y, min(w, width - x), min(h, height - y)


def fixed_window(width: int, height: int, crop_w: int, crop_h: int, pos_x: float, pos_y: float):
    """(x, y, w, h) of ``fn.crop``'s window with a size, before the image's edge cuts it: rocAL stores
    crop_pos_x/y into whole-pixel offsets (CropNode::init, rocAL/source/augmentations/geometry_augmentations/
    node_crop.cpp), so the default 0.5 is 0, the top-left corner; an offset past the image is 0; a size of
    0 or larger than the image is the image's."""
    x, y = int(pos_x), int(pos_y)
    x, y = (0 if x >= width else x), (0 if y >= height else y)
    return x, y, (crop_w if 0 < crop_w <= width else width), (crop_h if 0 < crop_h <= height else height)


def fixed_crop(width: int, height: int, crop_w: int, crop_h: int, pos_x: float, pos_y: float):
    """``fixed_window`` cut at the image's edge."""
    x, y, w, h = fixed_window(width, height, crop_w, crop_h, pos_x, pos_y)
    return x, y, min(w, width - x), min(h, height - y)


def crop_resize_window(width: int, height: int, area: float, ratio: float, x_drift: float, y_drift: float):
    """RocalRandomCropParam::fill_crop_dims with fixed values (rocAL/source/parameters/
    parameter_random_crop.cpp): w = trunc(sqrt(A * r)), h = trunc(sqrt(A / r)) for A = area * W * H, kept
    when strictly inside the image, at trunc(drift * (side - crop)); else the central crop of the image
    with its aspect ratio clamped to [0.75, 1.333]."""
    size = _window_size(width, height, area, ratio)
    if size is None:
        return central_window(width, height)
    w, h = size
    return int(x_drift * (width - w)), int(y_drift * (height - h)), w, h


def random_crop_window(width: int, height: int, uniform) -> tuple[int, int, int, int]:
    """RocalRandomCropParam::fill_crop_dims with its own parameters (fn.random_crop's, rocAL/source/
    parameters/parameter_random_crop.cpp): up to 5 draws (num_attempts is not read) of an area factor in
    [0.08, 0.99] and an aspect ratio in [0.75, 1.333] until the window is strictly inside the image, placed
    by drifts in [0.01, 0.99]; else central_window. ``uniform(low, high)`` draws one value."""
    for _ in range(5):
        size = _window_size(width, height, uniform(0.08, 0.99), uniform(0.75, 1.333))
        if size is not None:
            w, h = size
            return int(uniform(0.01, 0.99) * (width - w)), int(uniform(0.01, 0.99) * (height - h)), w, h
    return central_window(width, height)


def _window_size(width: int, height: int, area: float, ratio: float) -> tuple[int, int] | None:
    """RocalRandomCropParam's window (w, h) for an area factor and aspect ratio, or None where it is not
    strictly inside the image."""
    target = area * height * width
    w, h = int(math.sqrt(target * ratio)), int(math.sqrt(target * (1 / ratio)))
    return (w, h) if h < height and w < width else None


def central_window(width: int, height: int) -> tuple[int, int, int, int]:
    """RocalRandomCropParam's fallback: the central crop with the image's aspect ratio clamped to
    [0.75, 1.333], as (left, top, width, height), in rocAL's float32 (1.333 * 3000 is 3998 there)."""
    low, high = np.float32(0.75), np.float32(1.333)
    in_ratio = np.float32(width) / np.float32(height)
    if in_ratio < low:
        w, h = width, int(np.float32(width) / low)
    elif in_ratio > high:
        w, h = int(np.float32(height) * high), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def crop_resize(image: torch.Tensor, area: float, ratio: float, x_drift: float, y_drift: float, width: int,
                height: int) -> torch.Tensor:
    """rocAL's CropResizeNode (fn.resize_crop, the JSON CropResizeFixed): crop_resize_window's window,
    resized to ``width`` x ``height`` with RPP's bilinear."""
    left, top, w, h = crop_resize_window(image.shape[1], image.shape[0], area, ratio, x_drift, y_drift)
    return resample(image[top:top + h, left:left + w], width, height, "linear")


def resize_crop_mirror(image: torch.Tensor, crop_w: int, crop_h: int, width: int, height: int,
                       mirror: bool) -> torch.Tensor:
    """rocAL's ResizeCropMirrorNode (fn.resize_crop_mirror, the JSON ResizeCropMirrorFixed): the top-left
    crop_w x crop_h window (fixed_crop: 0 or more than the image is the whole side), resized to ``width``
    x ``height`` with RPP's bilinear, mirrored."""
    left, top, w, h = fixed_crop(image.shape[1], image.shape[0], crop_w, crop_h, 0, 0)
    out = resample(image[top:top + h, left:left + w], width, height, "linear")
    return out.flip(1) if mirror else out


def per_channel(values, channels: int) -> list[float]:
    """rocAL's mean/std lists for ``channels`` channels: one value for all, else the first ``channels``."""
    values = [float(v) for v in values]
    return values * channels if len(values) == 1 else values[:channels]


def normalize(image: torch.Tensor, mean, std, mirror, dtype: torch.dtype) -> torch.Tensor:
    """crop_mirror_normalize's arithmetic on an HWC image: mirrored where ``mirror``, then (x - mean) / std
    on 0-255 pixels, in ``dtype`` (uint8 rounded and saturated)."""
    channels = image.shape[2]
    mean, std = torch.tensor(per_channel(mean, channels)), torch.tensor(per_channel(std, channels))
    if bool((std == 0).any()):
        raise ValueError("crop_mirror_normalize: a std of 0")
    if mirror:
        image = image.flip(1)
    return as_output((image.float() - mean) / std, dtype)


def as_output(image: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """An operator's result in its output_dtype: floats as they are, uint8 rounded and saturated."""
    if image.dtype == dtype:
        return image
    if dtype == torch.uint8:
        return image.float().round().clamp(0, 255).to(torch.uint8)
    return image.to(dtype)


def pad_batch(samples: list[torch.Tensor], buffer_hw: tuple[int, int], layout: str) -> torch.Tensor:
    """A batch as rocAL hands it: one buffer of the operator's maximum size with each sample's image at its
    top left, zeros elsewhere (rocAL/source/pipeline/tensor.cpp: a dense buffer, per-sample ROIs); NHWC or
    NCHW."""
    height = max([buffer_hw[0]] + [s.shape[0] for s in samples])
    width = max([buffer_hw[1]] + [s.shape[1] for s in samples])
    channels = samples[0].shape[2]
    out = torch.zeros((len(samples), height, width, channels), dtype=samples[0].dtype)
    for row, sample in enumerate(samples):
        out[row, :sample.shape[0], :sample.shape[1]] = sample
    return out.permute(0, 3, 1, 2).contiguous() if layout == "NCHW" else out


def resample(image: torch.Tensor, width: int, height: int, interpolation: str) -> torch.Tensor:
    """The image resampled to ``width`` x ``height`` as RPP's host kernels do (ROCm/rpp at f1d37473,
    src/modules/tensor/cpu/kernel/resize.cpp): "nn" takes the source pixel floor((x + 0.5) * ratio)
    (compute_resize_nn_src_loc); "linear" is ``_rpp_bilinear``; "cubic", "lanczos", "gaussian" and
    "triangular" are RPP's separable filters (``_rpp_separable``)."""
    if image.shape[0] < 1 or image.shape[1] < 1:
        raise ValueError(f"an empty {image.shape[1]}x{image.shape[0]} window to resize")
    if interpolation in _SEPARABLE:
        return _rpp_separable(image, width, height, interpolation)
    src_h, src_w = image.shape[0], image.shape[1]
    if interpolation == "nn":
        rows = _nn_sources(src_h, height)
        cols = _nn_sources(src_w, width)
        return image[rows][:, cols].contiguous()
    return _rpp_bilinear(image, width, height)


def _nn_sources(size: int, out: int) -> torch.Tensor:
    ratio = np.float32(size) / np.float32(out)
    where = torch.arange(out, dtype=torch.float32) * float(ratio) + float(ratio * np.float32(0.5))
    return where.floor().long().clamp(0, size - 1)


def _bilinear_taps(size: int, out: int):
    """Per output index: the two source taps and the first's weight. c = (d + 0.5) * ratio - 0.5 in float32,
    the first tap ceil(c - 1), weighted (tap - (c - 1)); both taps capped at size - 2, so the last source
    row or column is never read (resize_bilinear_u8_u8_host_tensor: maxHeightLimit = height - 2)."""
    ratio = np.float32(size) / np.float32(out)
    offset = (ratio - np.float32(1)) * np.float32(0.5) - np.float32(1)
    where = torch.arange(out, dtype=torch.float32) * float(ratio) + float(offset)
    first = torch.ceil(where)
    weight = first - where
    limit = max(size - 2, 0)
    first = first.long()
    return first.clamp(0, limit), (first + 1).clamp(0, limit), weight


def _rpp_bilinear(image: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """RPP's plain bilinear resize: centre-aligned, no antialiasing when shrinking, taps capped at
    side - 2; uint8 results rounded half to even and saturated, except the last ``width % 8`` columns of
    each row, which RPP's scalar tail truncates (compute_bilinear_interpolation_3c_pkd: a cast to Rpp8u)."""
    top, bottom, wy = _bilinear_taps(image.shape[0], height)
    left, right, wx = _bilinear_taps(image.shape[1], width)
    # RPP's arithmetic, wy * (wx * TL + (1 - wx) * TR) + (1 - wy) * (wx * BL + (1 - wx) * BR), in float32 and
    # in this order (so bit for bit the per-pixel formula), but as a horizontal pass over the source rows the
    # taps use, then a vertical one, with index_select and in-place products: about 3x faster than
    # gathering the four taps per output pixel, which dominated a JSON pipeline's time.
    height_in, width_in = image.shape[0], image.shape[1]
    channels = image.shape[2] if image.dim() == 3 else 1
    rows = torch.unique(torch.cat([top, bottom]))
    where = torch.full((height_in,), -1, dtype=torch.long)
    where[rows] = torch.arange(len(rows))
    used = image.reshape(height_in, width_in * channels).index_select(0, rows).view(len(rows), width_in, channels)
    across = used.index_select(1, left).float().mul_(wx.view(1, -1, 1))
    across.add_(used.index_select(1, right).float().mul_((1 - wx).view(1, -1, 1)))
    across = across.view(len(rows), width * channels)
    out = across.index_select(0, where[top]).mul_(wy.view(-1, 1))
    out.add_(across.index_select(0, where[bottom]).mul_((1 - wy).view(-1, 1)))
    out = out.view(height, width, channels) if image.dim() == 3 else out.view(height, width)
    if image.dtype != torch.uint8:
        return out.to(image.dtype)
    tail = width & ~7
    truncated = out[:, tail:].trunc()
    out.round_()
    out[:, tail:] = truncated
    return out.clamp_(0, 255).to(torch.uint8)


# RPP's separable filters (ROCm/rpp f1d37473, api/rppdefs.h GenericFilter; src/modules/tensor/cpu/kernel/
# resize.cpp): (radius, widened when shrinking) -- a shrinking axis scales the filter by 1 / ratio and its
# radius by ratio; cubic never widens.
_SEPARABLE = {"cubic": (2.0, False), "lanczos": (3.0, True), "gaussian": (1.0, True), "triangular": (1.0, True)}
# How the uint8 outputs round: every column half to even (saturate_pixel's nearbyintf, since ROCm/rpp
# d1b136a7), or, as RPP's golden resize files were made before that (7fca0252), the scalar tail -- the last
# width % 16 columns -- truncated ("truncate_tail", for the tests against those files).
SEPARABLE_ROUNDING = "nearest"


def _filter_value(kind: str, x: np.ndarray) -> np.ndarray:
    """RPP's coefficient functions (resize.cpp: compute_bicubic/lanczos3/gaussian/triangular_coefficient)
    in float32 as its build computes them: clang fuses a multiply feeding an add within an expression
    (cubic's polynomials, Horner by Horner), ``x *= M_PI`` multiplies in double, and sinf/expf are
    glibc's, correctly rounded (here: double, then rounded)."""
    f32 = np.float32
    x = np.asarray(x, f32)
    if kind == "cubic":
        a = np.abs(x)
        square = (a * a).astype(f32)
        # x*x*(-0.5f*x + 2.5f) - 4.0f*x + 2.0f: fma(x*x, fma(-0.5, x, 2.5), -(4x)) + 2
        far = (fmaf(square, fmaf(a, -0.5, 2.5), -(f32(4) * a)) + f32(2)).astype(f32)
        near = fmaf(square, fmaf(a, 1.5, -2.5), 1)  # x*x*(1.5f*x - 2.5f) + 1
        return np.where(a >= 2, f32(0), np.where(a > 1, far, near)).astype(f32)
    if kind == "lanczos":
        def sinc(v):
            v = (v.astype(np.float64) * np.pi).astype(f32)
            with np.errstate(invalid="ignore", divide="ignore"):
                small = fmaf(-(v * v).astype(f32), f32(1.0) / f32(6), f32(1))  # 1.0f - x*x*ONE_OVER_6
                return np.where(np.abs(v) < f32(1e-5), small, (np.sin(v.astype(np.float64)).astype(f32) / v))
        third = (x * f32(0.333333)).astype(f32)
        return np.where(np.abs(x) >= 3, f32(0), (sinc(x) * sinc(third)).astype(f32)).astype(f32)
    if kind == "gaussian":
        return expf((x * x).astype(f32) * f32(-4.0))
    return np.maximum(f32(1) - np.abs(x), f32(0)).astype(f32)


@functools.lru_cache(maxsize=1024)
def _separable_axis(size: int, out: int, kind: str) -> tuple[np.ndarray, np.ndarray, float]:
    """One axis of RPP's separable resize (resize_separable_host_tensor): per output index its first source
    tap, ceil(d * ratio + offset) (unclamped), and the filter's normalized float32 coefficients (one per
    tap); and the filter's radius. Kept per (size, out, kind): images of one size share it (read-only)."""
    f32 = np.float32
    ratio = f32(size) / f32(out)
    base, widens = _SEPARABLE[kind]
    radius, scale = f32(base), f32(1)
    if widens and size > out:
        radius, scale = f32(base) * ratio, f32(1) / ratio
    taps = int(np.ceil(f32(2) * radius))
    offset = (ratio - f32(1)) * f32(0.5) - radius
    where = fmaf(np.arange(out, dtype=f32), ratio, offset)  # compute_resize_src_loc
    first = np.ceil(where)
    weight = (first - where).astype(f32) - radius
    coefficients = np.stack([_filter_value(kind, ((weight + f32(k)) * scale).astype(f32)) for k in range(taps)], 1)
    total = np.zeros(out, f32)
    for k in range(taps):  # compute_row_coefficients: summed in order, then scaled by the reciprocal
        total = (total + coefficients[:, k]).astype(f32)
    inverse = np.where(total != 0, f32(1) / np.where(total != 0, total, f32(1)), f32(1)).astype(f32)
    first, coefficients = first.astype(np.int64), (coefficients * inverse[:, None]).astype(f32)
    first.flags.writeable = coefficients.flags.writeable = False
    return first, coefficients, float(radius)


@functools.lru_cache(maxsize=1024)
def _gray_reads_past(size: int, out: int, kind: str) -> bool:
    """Whether RPP's one-channel horizontal pass (compute_separable_horizontal_resample's last branch)
    weighs a value past the end of the row. Its SIMD loop makes 16 outputs at a time, 4 by 4, loading 4
    consecutive taps from a start clamped once (not at all in a group whose first tap is negative), until
    a group's fourth first tap reaches the row's last index less int(radius): that block and the rest go
    to the scalar tail, which clamps each tap. A filter wider than that margin reads past the row, and
    where that tap's coefficient is not 0 the output depends on it."""
    first, coefficients, radius = _separable_axis(size, out, kind)
    limit, taps = size - 1, coefficients.shape[1]
    for column in range(0, (out & ~15) - 15, 16):
        groups = range(column, column + 16, 4)
        if any(first[x] >= 0 and first[x + 3] >= limit - int(radius) for x in groups):
            return False  # this block is redone by the scalar tail, and so is the rest of the row
        for x in groups:
            for k in range(0, taps, 4):
                for output in range(x, x + 4):
                    start = first[output] + k
                    start = start if first[x] < 0 else min(max(start, 0), limit)
                    for j in range(min(4, taps - k)):  # kernelAdd: the loaded taps the sums use
                        if start + j > limit and coefficients[output, k + j] != 0:
                            return True
    return False


def _rpp_separable(image: torch.Tensor, width: int, height: int, kind: str) -> torch.Tensor:
    """RPP's separable resize (cubic, Lanczos-3, Gaussian, triangular): a vertical pass into float32, then
    a horizontal one, each summing its taps in order with fused multiply-adds, taps clamped to the image
    (compute_separable_vertical/horizontal_resample: ``fmaf``, here on float64 tensors holding float32
    values); uint8 outputs rounded half to even and saturated (``SEPARABLE_ROUNDING``). A one-channel
    image whose filter would read past its rows (``_gray_reads_past``) is a ValueError."""
    one_channel = image.dim() == 2 or image.shape[2] == 1
    source = image.reshape(image.shape[0], image.shape[1], -1).double()
    rows, row_coefficients, _ = _separable_axis(source.shape[0], height, kind)
    cols, col_coefficients, _ = _separable_axis(source.shape[1], width, kind)
    if one_channel and _gray_reads_past(source.shape[1], width, kind):
        raise ValueError(f"{kind} resampling of a one-channel {source.shape[1]}-pixel row to {width}: RPP's "
                         f"one-channel resize then reads past the end of the row (its SIMD loads four taps "
                         f"from a start clamped once) with a weight not 0, so its output depends on memory "
                         f"past the image; RGB images, and CUBIC, LINEAR or NEAREST_NEIGHBOR resampling, "
                         f"do not")
    temp = torch.zeros((height, source.shape[1], source.shape[2]), dtype=torch.float64)
    for k in range(row_coefficients.shape[1]):
        taps = torch.from_numpy(np.clip(rows + k, 0, source.shape[0] - 1))
        weights = torch.tensor(row_coefficients[:, k], dtype=torch.float64)[:, None, None]
        temp = source.index_select(0, taps).mul_(weights).add_(temp).float().double()  # one rounding each
    out = torch.zeros((height, width, source.shape[2]), dtype=torch.float64)
    for k in range(col_coefficients.shape[1]):
        taps = torch.from_numpy(np.clip(cols + k, 0, source.shape[1] - 1))
        weights = torch.tensor(col_coefficients[:, k], dtype=torch.float64)[None, :, None]
        out = temp.index_select(1, taps).mul_(weights).add_(out).float().double()
    out = out.float()
    if image.dtype == torch.uint8:
        tail = width & ~15 if SEPARABLE_ROUNDING == "truncate_tail" else width
        out[:, :tail] = out[:, :tail].round()
        out = out.trunc_().clamp_(0, 255).to(torch.uint8)
    out = out.reshape((height, width) if image.dim() == 2 else (height, width, image.shape[2]))
    return out.contiguous() if image.dtype == torch.uint8 else out.to(image.dtype)


def pixelate_size(side: int, percent: float) -> int:
    """The side of RPP's intermediate image: side * (100 - percent) / 100 in float32, truncated (ROCm/rpp
    f1d37473, src/modules/rppt_tensor_effects_augmentations.cpp, rppt_pixelate_host)."""
    return int(np.float32(side) * (np.float32(100) - np.float32(percent)) / np.float32(100))


def pixelate(image: torch.Tensor, percent: float) -> torch.Tensor:
    """RPP's pixelate (rppt_pixelate_host): the image resized down to ``pixelate_size`` of each side with
    RPP's bilinear resize, then back up to its own size with RPP's nearest-neighbour resize -- no fixed
    block size; at 50 % each output 2x2 block is the mean of the source's."""
    height, width = image.shape[0], image.shape[1]
    small_w, small_h = pixelate_size(width, percent), pixelate_size(height, percent)
    if small_w < 1 or small_h < 1:
        raise ValueError(f"pixelate_percent {percent} leaves no pixel of a {width}x{height} image")
    return resample(resample(image, small_w, small_h, "linear"), width, height, "nn")


def rotate(image: torch.Tensor, angle: float, interpolation: str = "linear") -> torch.Tensor:
    """The image rotated by ``angle`` degrees about its centre, at its own size, as RPP's host warp does
    (ROCm/rpp: rppt_rotate_host builds {cos, -sin, 0, sin, cos, 0} for ``warp_affine``)."""
    radians = np.float32(angle) * np.float32(np.pi / 180)
    cos, sin = np.float32(np.cos(radians)), np.float32(np.sin(radians))
    return warp_affine(image, (cos, -sin, 0.0, sin, cos, 0.0), interpolation)


def warp_affine(image: torch.Tensor, affine, interpolation: str = "linear") -> torch.Tensor:
    """The image warped by the 2x3 ``affine`` (row-major: m0..m5), at its own size, as RPP's host warp does
    (ROCm/rpp: src/modules/tensor/cpu/kernel/warp_affine.cpp, compute_warp_affine_src_loc: src = M (dst - c)
    + c with c = (width >> 1, height >> 1) of the image, in float32; rpp_cpu_interpolation.hpp: a source
    point whose floor (bilinear) or rounding (nearest) falls outside the image is 0, else bilinear between
    trunc(src) and the next pixel, both capped at side - 2, rounded half to even). RPP steps the source
    point along a row by adding m0 and m3; that accumulates float32 error, and this computes each point
    directly, so the two can differ by a level where a point lands on a pixel boundary."""
    height, width = image.shape[0], image.shape[1]
    m = [float(np.float32(v)) for v in affine]
    ys, xs = torch.meshgrid(torch.arange(height, dtype=torch.float32), torch.arange(width, dtype=torch.float32),
                            indexing="ij")
    dx, dy = xs - (width >> 1), ys - (height >> 1)
    src_x = dx * m[0] + dy * m[1] + m[2] + (width >> 1)
    src_y = dx * m[3] + dy * m[4] + m[5] + (height >> 1)
    pixels = image.float()
    if interpolation == "nn":
        sx, sy = torch.round(src_x), torch.round(src_y)
        valid = (sx >= 0) & (sy >= 0) & (sx <= width - 1) & (sy <= height - 1)
        out = pixels[sy.clamp(0, height - 1).long(), sx.clamp(0, width - 1).long()]
    else:
        valid = ((src_x.floor() >= 0) & (src_y.floor() >= 0) & (src_x.floor() <= width - 1)
                 & (src_y.floor() <= height - 1))
        left = torch.clamp(src_x.trunc(), max=width - 2).clamp(min=0).long()
        top = torch.clamp(src_y.trunc(), max=height - 2).clamp(min=0).long()
        right = torch.clamp(left + 1, max=width - 2)
        bottom = torch.clamp(top + 1, max=height - 2)
        wx, wy = (src_x - left).unsqueeze(-1), (src_y - top).unsqueeze(-1)
        out = ((1 - wy) * ((1 - wx) * pixels[top, left] + wx * pixels[top, right])
               + wy * ((1 - wx) * pixels[bottom, left] + wx * pixels[bottom, right]))
    out = torch.where(valid.unsqueeze(-1), out, torch.zeros(()))
    if image.dtype == torch.uint8:
        return out.round().clamp(0, 255).to(torch.uint8)
    return out.to(image.dtype)


def _to_hsv(image: torch.Tensor):
    """RGB pixels as RPP's HSV kernels read them: x / 255 in float32, value = max, saturation = delta / max,
    hue in sextants as ``shade + add``: the ramp within the sextant pair and the pair's start (both 0 where
    the pixel is grey or black), kept apart because RPP adds the hue shift to ``add`` first.
    Returns (rgb in [0, 1], v, sat, shade, add)."""
    f32 = np.float32
    x = image.float() * float(f32(1) / f32(255))
    r, g, b = x.unbind(-1)
    cmax, cmin = torch.maximum(torch.maximum(r, g), b), torch.minimum(torch.minimum(r, g), b)
    delta = cmax - cmin
    valid = (delta != 0) & (cmax != 0)
    safe = torch.where(valid, delta, torch.ones(()))
    sat = torch.where(valid, delta / torch.where(valid, cmax, torch.ones(())), torch.zeros(()))
    numerator = torch.where(cmax == r, g - b, torch.where(cmax == g, b - r, r - g))
    add = torch.where(cmax == r, 0.0, torch.where(cmax == g, 2.0, 4.0))
    shade = torch.where(valid, numerator / safe, torch.zeros(()))
    return x, cmax, sat, shade, torch.where(valid, add, torch.zeros(()))


def _from_hsv(rgb: torch.Tensor, v: torch.Tensor, sat: torch.Tensor, hue: torch.Tensor) -> torch.Tensor:
    """HSV back to RGB in [0, 1] by sextant (hue in [0, 6)); a pixel no sextant matches stays as read."""
    sextant = hue.trunc()
    fraction = hue - sextant
    vsat = v * sat
    vsatf = vsat * fraction
    p, q, t = v - vsat, v - vsatf, v - vsat + vsatf
    cases = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out_r, out_g, out_b = rgb.unbind(-1)
    for k, (cr, cg, cb) in enumerate(cases):
        here = sextant == k
        out_r, out_g, out_b = torch.where(here, cr, out_r), torch.where(here, cg, out_g), torch.where(here, cb, out_b)
    return torch.stack([out_r, out_g, out_b], -1)


def _wrap_sextants(hue: torch.Tensor) -> torch.Tensor:
    hue = torch.where(hue >= 6, hue - 6, hue)
    return torch.where(hue < 0, hue + 6, hue)


def _rgb_only(image: torch.Tensor, name: str) -> None:
    if image.shape[-1] != 3:
        raise ValueError(f"{name} takes RGB (or BGR) images, not {image.shape[-1]} channel(s)")


def color_twist(image: torch.Tensor, brightness: float, contrast: float, hue: float, saturation: float):
    """RPP's fused colour twist on RGB uint8 pixels (ROCm/rpp: src/modules/tensor/cpu/kernel/color_twist.cpp,
    compute_color_twist_host and its u8 set-up): to HSV on x / 255 with the hue in sextants, the hue moved
    by (int(hue) % 360) / 60 and wrapped once, the saturation scaled and clamped to [0, 1], back to RGB,
    then ``rgb * brightness * 255 + contrast`` -- brightness multiplies, contrast is an offset in pixel
    units -- rounded half to even and saturated. In float32, as RPP."""
    _rgb_only(image, "color_twist")
    f32 = np.float32
    rgb, v, sat, shade, add = _to_hsv(image)
    hue_shift = float(f32(math.fmod(int(hue), 360)) * f32(0.01666667))
    shade = _wrap_sextants(shade + (hue_shift + add))
    sat = (sat * float(f32(saturation))).clamp(0, 1)
    scale = float(f32(brightness) * f32(255))
    out = _from_hsv(rgb, v, sat, shade) * scale + float(f32(contrast))
    return out.round().clamp(0, 255).to(torch.uint8) if image.dtype == torch.uint8 else out.to(image.dtype)


def hue_saturation(image: torch.Tensor, hue: float = 0.0, saturation: float = 1.0) -> torch.Tensor:
    """RPP's hue and saturation operators on RGB pixels (ROCm/rpp:
    src/modules/legacy_dep/cpu/kernel/hue_saturation.cpp, the vector path of hueRGB / saturationRGB
    _processBuffer_host, which rocAL's HueNode and SaturationNode reach through MIVisionX's vxExtRppHue /
    vxExtRppSaturation): the HSV hexcone on x / 255; the hue turned by ``hue`` degrees (any real angle,
    wrapped into [0, 360)), the saturation multiplied by ``saturation`` and clamped to [0, 1]; back to RGB
    * 255, rounded half to even and saturated. RPP's scalar loop for the last few pixels of a row snaps the
    chroma ramp to 0 or 1 (``int(fmod(hue / 60, 2))``); that defect is not reproduced."""
    _rgb_only(image, "hue / saturation")
    rgb, v, sat, shade, add = _to_hsv(image)
    turn = math.fmod(float(hue), 360.0)
    shift = float(np.float32(turn if turn >= 0 else turn + 360.0) / np.float32(60))
    shade = _wrap_sextants(shade + (shift + add))
    sat = (sat * float(np.float32(saturation))).clamp(0, 1)
    out = _from_hsv(rgb, v, sat, shade) * 255.0
    return out.round().clamp(0, 255).to(torch.uint8) if image.dtype == torch.uint8 else out.to(image.dtype)


def gamma_lut(gamma: float) -> torch.Tensor:
    """RPP's gamma table for uint8 (ROCm/rpp: src/modules/tensor/cpu/kernel/gamma_correction.cpp):
    ``(Rpp8u) RPPPIXELCHECK(pow(i * ONE_OVER_255, gamma) * 255.0)`` -- i / 255 in float32 by the float
    constant 0.00392156862745f, the power and the product in double, clamped, then truncated."""
    levels = np.arange(256, dtype=np.float32) * np.float32(0.00392156862745)
    values = np.power(levels.astype(np.float64), float(np.float32(gamma))) * 255.0
    return torch.from_numpy(np.clip(values, 0, 255).astype(np.uint8))


def exposure(image: torch.Tensor, exposure: float) -> torch.Tensor:
    """RPP's exposure (src/modules/tensor/cpu/kernel/exposure.cpp): x * (float) pow(2, exposure)."""
    return image.float() * float(np.float32(2.0 ** float(np.float32(exposure))))


def color_temperature(image: torch.Tensor, adjustment: int) -> torch.Tensor:
    """RPP's colour temperature (src/modules/tensor/cpu/kernel/color_temperature.cpp): red + adjustment,
    blue - adjustment, green as it is; the adjustment an integer in pixel units."""
    _rgb_only(image, "color_temp")
    shift = torch.tensor([float(adjustment), 0.0, -float(adjustment)])
    return image.float() + shift


def _fast_exp(x: np.ndarray) -> np.ndarray:
    """RPP's fast_exp_avx (src/include/common/cpu/rpp_cpu_simd_math.hpp), in float32 as written: 2^x by a
    rational approximation of the fraction, the integer part added to the exponent bits."""
    f32 = np.float32
    x = (x * f32(1.442695022)).astype(f32)
    whole = np.trunc(x)
    x = x - whole
    xx = x * x
    a = x + f32(0.007972914726) * (xx * x)
    b = f32(2.885390043) + f32(0.1385283768) * xx
    ratio = ((b + a) / (b - a)).astype(f32)
    return (ratio.view(np.int32) + (whole.astype(np.int32) << 23)).view(f32)


def vignette(image: torch.Tensor, intensity: float) -> torch.Tensor:
    """RPP's host vignette (ROCm/rpp f1d37473, src/modules/tensor/cpu/kernel/vignette.cpp, u8 NHWC): each
    pixel times exp(m * (i^2 + j^2)), (i, j) its offset from (height >> 1, width >> 1), m = -(0.25 *
    intensity) / r^2 for r = max(height >> 1, width >> 1); the first ``width & ~15`` columns through
    fast_exp_avx, the rest through expf(m i^2) * expf(m j^2), as RPP's vector loop and scalar tail. Float, on
    the image's levels; RPP then rounds half to even and saturates. rocAL's Vignette node hands its
    ``vignette`` (sdev) to rppt_vignette as this intensity (MIVisionX amd_rpp/source/tensor/Vignette.cpp).
    A 1x1 image has radius 0, where RPP divides by zero; it is left as it is."""
    f32 = np.float32
    height, width = image.shape[0], image.shape[1]
    half_h, half_w = height >> 1, width >> 1
    if max(half_h, half_w) == 0:
        return image.float()
    radius = f32(max(half_h, half_w))
    m = f32(-(f32(0.25) * f32(intensity))) / (radius * radius)
    i = (np.arange(height) - half_h).astype(f32)[:, None]
    j = (np.arange(width) - half_w).astype(f32)[None, :]
    gain = _fast_exp(((j * j + i * i).astype(f32) * m).astype(f32))
    vector = width & ~15
    if vector < width:
        gain[:, vector:] = expf((i * i * m).astype(f32)) * expf((j[:, vector:] * j[:, vector:] * m).astype(f32))
    gain = torch.from_numpy(gain)
    return image.float() * (gain[..., None] if image.dim() == 3 else gain)


def lens_remap_tables(height: int, width: int, camera: list, distortion: list) -> tuple[np.ndarray, np.ndarray]:
    """RPP's lens-correction remap tables (ROCm/rpp f1d37473, src/modules/tensor/cpu/kernel/lens_correction.cpp,
    its vector loop): for each output pixel, the source (row, column) of the undistorted camera model --
    the 3x3 ``camera`` matrix inverted as RPP does, radial coefficients (k1, k2, k3, k4, k5, k6) and
    tangential (p1, p2) from the 8 ``distortion`` values (k1, k2, p1, p2, k3, k4, k5, k6) -- in float32 with
    its fused multiply-adds. RPP's scalar loop for the last ``width % 8`` columns starts again from the row's
    first camera coordinates (it is never advanced past the vector loop), so its last columns sample the
    positions of the first ones; fastload computes every column as the vector loop does."""
    f32 = np.float32
    m = [f32(v) for v in camera]
    det = m[0] * (m[4] * m[8] - m[7] * m[5]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6])
    if det == 0:
        raise ValueError("the camera matrix has no inverse")
    inv_det = f32(1) / f32(det)
    cofactors = (m[4] * m[8] - m[7] * m[5], m[2] * m[7] - m[1] * m[8], m[1] * m[5] - m[2] * m[4],
                 m[5] * m[6] - m[3] * m[8], m[0] * m[8] - m[2] * m[6], m[3] * m[2] - m[0] * m[5],
                 m[3] * m[7] - m[6] * m[4], m[6] * m[1] - m[0] * m[7], m[0] * m[4] - m[3] * m[1])
    inv = [f32(v * inv_det) for v in cofactors]
    k = [f32(distortion[i]) for i in (0, 1, 4, 5, 6, 7)]
    p = [f32(distortion[2]), f32(distortion[3])]
    rows = np.arange(height, dtype=f32)[:, None]
    lanes = np.arange(8, dtype=f32)
    blocks = -(-width // 8)

    def camera_coordinate(row_factor, offset, step):
        """The vector loop's running coordinate: the row's start plus lane * step, then + 8 * step a block."""
        start = (rows * row_factor + offset).astype(f32)
        value = (start + (lanes * step).astype(f32)[None, :]).astype(f32)
        increment, out = f32(step * f32(8)), np.empty((height, blocks * 8), f32)
        for block in range(blocks):
            out[:, block * 8:(block + 1) * 8] = value
            value = (value + increment).astype(f32)
        return out[:, :width]
    xc, yc, zc = (camera_coordinate(inv[1 + 3 * a], inv[2 + 3 * a], inv[3 * a]) for a in range(3))
    z = (f32(1) / zc).astype(f32)
    x, y = (xc * z).astype(f32), (yc * z).astype(f32)
    x2, y2 = (x * x).astype(f32), (y * y).astype(f32)
    r2 = (x2 + y2).astype(f32)
    xy2 = (f32(2) * (x * y).astype(f32)).astype(f32)
    kr = (fmaf(fmaf(fmaf(k[2], r2, k[1]), r2, k[0]), r2, f32(1))
          / fmaf(fmaf(fmaf(k[5], r2, k[4]), r2, k[3]), r2, f32(1))).astype(f32)
    columns = fmaf(m[0], fmaf(p[1], fmaf(f32(2), x2, r2), fmaf(x, kr, (p[0] * xy2).astype(f32))), m[2])
    source_rows = fmaf(m[4], fmaf(p[0], fmaf(f32(2), y2, r2), fmaf(y, kr, (p[1] * xy2).astype(f32))), m[5])
    return source_rows, columns


def remap_bilinear(image: torch.Tensor, rows: np.ndarray, columns: np.ndarray) -> torch.Tensor:
    """RPP's bilinear remap (src/modules/tensor/cpu/kernel/remap.cpp, its vector loop, with
    rpp_cpu_interpolation.hpp's generic bilinear): each output pixel samples (row, column) of the image --
    0 where the point is left of or above the image, or its floor past the last row or column; else the
    four taps around it, each clamped to [0, side - 2] (RPP's bound is the last index - 1), weighted by the
    point's fractions, summed with fused multiply-adds. Float, on the image's levels."""
    f32 = np.float32
    height, width = image.shape[0], image.shape[1]
    y0, x0 = np.floor(rows), np.floor(columns)
    wy, wx = (rows - y0).astype(f32), (columns - x0).astype(f32)
    wy1, wx1 = (f32(1) - wy).astype(f32), (f32(1) - wx).astype(f32)
    weights = [(wy1 * wx1).astype(f32), (wy1 * wx).astype(f32), (wy * wx1).astype(f32), (wy * wx).astype(f32)]
    top, left = (np.clip(v, 0, max(side - 2, 0)).astype(np.int64) for v, side in ((y0, height), (x0, width)))
    bottom, right = (np.clip(v + 1, 0, max(side - 2, 0)).astype(np.int64) for v, side in ((y0, height), (x0, width)))
    outside = (columns < 0) | (rows < 0) | (x0 > width - 1) | (y0 > height - 1)
    source = image.numpy().astype(f32).reshape(height, width, -1)
    taps = [source[top, left], source[top, right], source[bottom, left], source[bottom, right]]
    value = (taps[0] * weights[0][..., None]).astype(f32)
    for tap, weight in zip(taps[1:], weights[1:]):
        value = fmaf(tap, weight[..., None], value)
    value[outside] = 0
    out = torch.from_numpy(value)
    return out if image.dim() == 3 else out[..., 0]


def lens_correction(image: torch.Tensor, camera: list, distortion: list) -> torch.Tensor:
    """RPP's lens correction (rppt_lens_correction_host): the remap tables of ``camera`` (3x3, row-major) and
    ``distortion`` (8 values), then the bilinear remap. Float, on the image's levels."""
    rows, columns = lens_remap_tables(image.shape[0], image.shape[1], camera, distortion)
    return remap_bilinear(image, rows, columns)


def blend(first: torch.Tensor, second: torch.Tensor, ratio: float) -> torch.Tensor:
    """RPP's blend (src/modules/tensor/cpu/kernel/blend.cpp): (first - second) * ratio + second over the
    first image's region; the second is read at the same pixels, zeros where it is smaller (the padding of
    its buffer)."""
    height, width = first.shape[:2]
    other = torch.zeros_like(first, dtype=torch.float32)
    h, w = min(height, second.shape[0]), min(width, second.shape[1])
    other[:h, :w] = second[:h, :w].float()
    return (first.float() - other) * float(np.float32(ratio)) + other


# ------------------------------------------------------------------------------------ noise and weather
# RPP's formulas (ROCm/rpp f1d37473), with fastload's random draws: RPP's own are unseeded (snow's rand(),
# rain's random_device) or laid out per SIMD lane and image stride (salt and pepper, jitter), and RPP's
# test suite keeps no golden output for any of them, so only their distributions can be matched.

def snp_noise(image: torch.Tensor, p_noise: float, p_salt: float, salt: float, pepper: float,
              generator: torch.Generator) -> torch.Tensor:
    """Salt and pepper (kernel/noise_salt_and_pepper.cpp): one draw r per pixel, all its channels alike;
    r > p_noise keeps the pixel, r <= p_noise * p_salt makes it salt, else pepper; the values are on 0-1,
    truncated to uint8 (``(Rpp8u)(value * 255.0f)``)."""
    draws = torch.rand(image.shape[:2], generator=generator)
    salt_u8 = int(np.float32(salt) * np.float32(255.0))
    pepper_u8 = int(np.float32(pepper) * np.float32(255.0))
    out = image.clone()
    noisy = draws <= np.float32(p_noise)
    salted = draws <= np.float32(p_salt) * np.float32(p_noise)
    out[noisy & salted] = salt_u8
    out[noisy & ~salted] = pepper_u8
    return out


def jitter(image: torch.Tensor, kernel_size: int, generator: torch.Generator) -> torch.Tensor:
    """Jitter (kernel/jitter.cpp): each pixel copies the one at (row + floor(u1 * k) - bound, column +
    floor(u2 * k) - bound), bound = (k - 1) // 2, rows clamped to [0, height - bound] and columns to
    [0, width - 1]. For k = 2 RPP's row limit is the height itself, one row past the image (the next
    image's or the buffer's pixels); fastload stops at the last row there."""
    height, width = image.shape[:2]
    bound = (kernel_size - 1) // 2
    if bound >= height:
        raise ValueError(f"jitter: a kernel of {kernel_size} is taller than twice the {height}-row image; RPP's "
                         f"row limit (height - bound) is then negative")
    rows = torch.arange(height)[:, None] + (torch.rand(height, width, generator=generator) * kernel_size).floor().long()
    cols = torch.arange(width)[None, :] + (torch.rand(height, width, generator=generator) * kernel_size).floor().long()
    rows = (rows - bound).clamp(0, min(height - bound, height - 1))
    cols = (cols - bound).clamp(0, width - 1)
    return image[rows, cols]


SNOW_STAMP = torch.tensor([[0, 50, 75, 50, 0], [40, 80, 120, 80, 40], [75, 120, 255, 120, 75],
                           [40, 80, 120, 80, 40], [0, 50, 75, 50, 0]], dtype=torch.float32)


def snow(image: torch.Tensor, amount: float, generator: torch.Generator) -> torch.Tensor:
    """Snow as rocAL's fn.snow runs it (rppi_snow_u8 ..._batchPD_host, batch_pd/cpu/host_image_augmentations.hpp:
    snow_host_batch): int(amount / 100 * width * height * channels) flakes at uniform (row, column); each
    whose 5x5 stamp fits (row + 5 < height, column + 5 < width) adds the stamp to every channel,
    saturating at 255."""
    height, width, channels = image.shape
    flakes = int(np.float32(amount) / np.float32(100) * width * height * channels)
    rows = torch.randint(0, height, (flakes,), generator=generator)
    cols = torch.randint(0, width, (flakes,), generator=generator)
    fits = (rows + 5 < height) & (cols + 5 < width)
    counts = torch.zeros(height, width)
    counts.index_put_((rows[fits], cols[fits]), torch.ones(int(fits.sum())), accumulate=True)
    added = torch.nn.functional.conv_transpose2d(counts[None, None], SNOW_STAMP[None, None])[0, 0, :height, :width]
    return (image.float() + added[:, :, None]).clamp(max=255).to(torch.uint8)


def rain(image: torch.Tensor, percent: float, drop_width: int, drop_length: int, alpha: float, slant_angle: float,
         generator: torch.Generator) -> torch.Tensor:
    """Rain (kernel/rain.cpp): int(percent * 0.004 * height * width) drops, each starting at (x, y) both
    drawn from [0, width - slant - 1] (RPP draws y from x's range), slant = sin(slant_angle) * length
    (radians), running down ``drop_length`` rows and ``drop_width`` pixels across (the flat index, so a wide
    drop continues on the next row), the drop layer 200 there and 0 elsewhere; every pixel then becomes
    round((layer - x) * alpha + x): drops pulled toward 200, the rest darkened by 1 - alpha. RPP sizes the
    drop count and ranges by the batch buffer's width and height, fastload by each image's."""
    height, width = image.shape[:2]
    drops = int(np.float32(percent) * np.float32(0.004) * height * width)
    slant = math.sin(slant_angle) * drop_length
    layer = torch.zeros(height * width)
    if drop_length > 0 and drop_width > 0 and drops:
        high = max(int(width - slant - 1), 0)
        x_start = torch.randint(0, high + 1, (drops,), generator=generator)
        y_start = torch.randint(0, high + 1, (drops,), generator=generator)
        steps = torch.arange(drop_length)
        x = (x_start[:, None].float() + steps.float() * np.float32(slant / drop_length)).trunc().long()  # float32
        y = y_start[:, None] + steps
        inside = (x >= 0) & (x < width) & (y < height)
        starts = (y * width + x)[inside]
        flat = (starts[:, None] + torch.arange(drop_width)).reshape(-1)
        layer[flat[flat < height * width]] = 200.0
    layer = layer.reshape(height, width, 1)
    mixed = (layer - image.float()) * np.float32(alpha) + image.float()
    return mixed.round().clamp(0, 255).to(torch.uint8)


# -- fish_eye: RPP's legacy batchPD fisheye (ROCm/rpp f1d37473, src/modules/legacy_dep/cpu/kernel/fisheye.cpp,
# fisheye_host_batch, packed 3 channels), which MIVisionX's FishEye node calls (rppi_fisheye_u8_pkd3_batchPD_host),
# with the SSE atan2_ps and sincos_ps it vectorizes with (src/include/common/cpu/rpp_cpu_simd_math.hpp).

_F = np.float32
_SIGN = np.uint32(0x80000000)


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint32)


def _cvtps(x: np.ndarray) -> np.ndarray:
    """_mm_cvtps_epi32: round half to even; NaN or out of range gives INT_MIN."""
    out = np.full(x.shape, np.iinfo(np.int32).min, np.int32)
    ok = np.isfinite(x) & (np.abs(x) < 2.0 ** 31)
    out[ok] = np.rint(x[ok]).astype(np.int32)
    return out


def _cvttps(x: np.ndarray) -> np.ndarray:
    """_mm_cvttps_epi32: truncate; NaN or out of range gives INT_MIN."""
    out = np.full(x.shape, np.iinfo(np.int32).min, np.int32)
    ok = np.isfinite(x) & (np.abs(x) < 2.0 ** 31)
    out[ok] = np.trunc(x[ok]).astype(np.int32)
    return out


def _sincos_ps(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RPP's SSE sincos_ps (the Cephes single-precision one), op for op in float32."""
    with np.errstate(invalid="ignore", over="ignore"):
        sign_sin = _bits(x) & _SIGN
        x = (_bits(x) ^ sign_sin).view(_F)
        y = x * _F(1.27323954473516)
        emm2 = (_cvttps(y) + np.int32(1)) & np.int32(~1)
        y = emm2.astype(_F)
        swap_sign_sin = ((emm2 & np.int32(4)).astype(np.uint32) << np.uint32(29))
        poly_mask = (emm2 & np.int32(2)) == 0
        x = (x + y * _F(-0.78515625)) + (y * _F(-2.4187564849853515625e-4) + y * _F(-3.77489497744594108e-8))
        sign_cos = ((~(emm2 - np.int32(2)) & np.int32(4)).astype(np.uint32) << np.uint32(29))
        sign_sin = sign_sin ^ swap_sign_sin
        z = x * x
        y = _F(2.443315711809948e-05) * z + _F(-1.388731625493765e-03)
        y = y * z + _F(4.166664568298827e-02)
        y = y * (z * z) - z * _F(0.5) + _F(1.0)
        y2 = _F(-1.9515295891e-4) * z + _F(8.3321608736e-3)
        y2 = (y2 * z + _F(-1.6666654611e-1)) * (z * x) + x
        ysin2 = np.where(poly_mask, y2, _F(0))
        ysin1 = np.where(poly_mask, _F(0), y)
        y2, y = y2 - ysin2, y - ysin1
        sin = (_bits((ysin1 + ysin2).astype(_F)) ^ sign_sin).view(_F)
        cos = (_bits((y + y2).astype(_F)) ^ sign_cos).view(_F)
    return sin, cos


def _atan_ps(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sign = _bits(x) & _SIGN
        x = (_bits(x) & ~_SIGN).view(_F)
        above = x > _F(2.414213562373095)
        middle = ~above & (x > _F(0.4142135623730950))
        y = np.where(above, _F(1.5707963267948966192), np.where(middle, _F(0.7853981633974483096), _F(0)))
        x = np.where(above, -(_F(1) / x), np.where(middle, (x - _F(1)) / (x + _F(1)), x)).astype(_F)
        zz = x * x
        acc = ((_F(8.05374449538e-2) * zz - _F(1.38776856032e-1)) * zz + _F(1.99777106478e-1)) * zz
        acc = ((acc - _F(3.33329491539e-1)) * zz) * x + x
        return (_bits((y + acc).astype(_F)) ^ sign).view(_F)


def _atan2_ps(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """RPP's SSE atan2_ps. Its masks OR the special results into the arctangent's bits: x = 0 with y != 0
    gives +-pi/2; y = 0 gives 0 (x > 0) or pi (x < 0), and NaN for x = y = 0 (0 / 0 reaches the OR)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        pi = _F(3.141592653589793238)
        offset = np.where(x < 0, np.where(y < 0, -pi, pi), _F(0)).astype(_F)
        atan = (_atan_ps((y / x).astype(_F)) + offset).astype(_F)
        pio2 = (y != 0) & (x == 0)
        result = np.where(pio2, np.where(y < 0, -_F(1.5707963267948966192), _F(1.5707963267948966192)), atan)
        return np.where((y == 0) & (x <= 0) & ~pio2, np.where(np.isnan(atan), np.nan, pi), result).astype(_F)


def fish_eye(image: torch.Tensor) -> torch.Tensor:
    """RPP's fisheye of an HWC uint8 image with 3 channels that fills its buffer: each pixel inside the
    inscribed ellipse takes the source pixel at radius (r + 1 - sqrt(1 - r^2)) / 2 along its angle, the rest
    are 0. As RPP's source reads without FMA contraction: columns in groups of 4 whose pixels are all inside
    take the SSE path (its atan2_ps and sincos_ps, the half sides rounded down to whole pixels, NaN positions
    wrapping as _mm_cvtps_epi32 makes them), the others and the last width % 4 columns the scalar one (here
    libm in double rounded to float, where RPP calls glibc's atan2f, sinf and cosf, which are not always
    correctly rounded). RPP's release builds (-Ofast -mfma) fuse some of these steps, which moves a few
    pixels on the centre row and column by a step (and can keep the centre pixel, which this reads from the
    top-left one through the NaN)."""
    src = image.contiguous().numpy()
    height, width = src.shape[:2]
    flat = src.reshape(-1)
    rows = np.arange(height, dtype=np.float64)
    new_i = (((rows * 2.0).astype(_F) / _F(height)) - _F(1)).astype(_F)[:, None]  # Rpp32f newI per row
    new_i2 = (new_i * new_i).astype(_F)
    cols = np.arange(width)
    elements = 3 * height * width

    # the scalar path, fisheye_base_host (srcSize.width is the buffer's: refused otherwise)
    new_j = (((cols * 2.0).astype(_F) / _F(width)) - _F(1)).astype(_F)[None, :]
    distance = np.sqrt((new_i2 + (new_j * new_j).astype(_F)).astype(_F)).astype(_F)
    inside = (distance >= 0) & (distance <= 1)
    with np.errstate(invalid="ignore"):
        shrunk = np.sqrt(1.0 - (distance * distance).astype(_F).astype(np.float64)).astype(_F)
        shrunk = ((distance.astype(np.float64) + (1.0 - shrunk.astype(np.float64))) / 2.0).astype(_F)
        theta = np.arctan2(new_i.astype(np.float64), new_j.astype(np.float64)).astype(_F)
        row_src = (shrunk * np.sin(theta.astype(np.float64)).astype(_F)).astype(_F)
        col_src = (shrunk * np.cos(theta.astype(np.float64)).astype(_F)).astype(_F)
        i_src = np.trunc((row_src.astype(np.float64) + 1.0) * height / 2.0)
        j_src = np.trunc((col_src.astype(np.float64) + 1.0) * width / 2.0)
    scalar_ok = inside & (shrunk <= 1)
    scalar_pos = np.where(scalar_ok, 3 * (np.nan_to_num(i_src) * width + np.nan_to_num(j_src)), -1).astype(np.int64)
    scalar_ok &= (scalar_pos >= 0) & (scalar_pos < elements)

    # the SSE path, four columns at a time
    p0 = (cols.astype(_F) * _F(2.0 / float(_F(width))) - _F(1)).astype(_F)[None, :] * np.ones((height, 1), _F)
    p1 = np.sqrt((new_i2 + p0 * p0).astype(_F)).astype(_F)
    in_range = (p1 >= 0) & (p1 <= 1)
    with np.errstate(invalid="ignore"):
        p2 = ((p1 + (_F(1) - np.sqrt((_F(1) - p1 * p1).astype(_F)))) * _F(0.5)).astype(_F)
        sin, cos = _sincos_ps(_atan2_ps(np.broadcast_to(new_i, p0.shape).astype(_F), p0))
        rs = ((p2 * sin + _F(1)) * _F(height // 2)).astype(_F)
        cs = ((p2 * cos + _F(1)) * _F(width // 2)).astype(_F)
        vector_pos = (_cvtps((np.floor(rs) * _F(3 * width)).astype(_F))
                      + _cvtps((np.floor(cs) * _F(3)).astype(_F)))  # int32, wrapping as the SSE add does
    vector_ok = (vector_pos >= 0) & (vector_pos < elements)

    aligned = width // 4 * 4
    groups_inside = in_range[:, :aligned].reshape(height, -1, 4).all(axis=2)
    groups_near = (p2[:, :aligned] <= 1).reshape(height, -1, 4).all(axis=2) & groups_inside
    vector = np.zeros((height, width), bool)
    vector[:, :aligned] = np.repeat(groups_near, 4, axis=1)
    # the rest: a group all inside but some p2 > 1 (per pixel: scalar where p2 <= 1), a group not all inside
    # (per pixel: scalar where inside), the tail columns (scalar)
    scalar = np.zeros((height, width), bool)
    group_all = np.repeat(groups_inside, 4, axis=1)
    scalar[:, :aligned] = ~vector[:, :aligned] & np.where(group_all, p2[:, :aligned] <= 1, in_range[:, :aligned])
    scalar[:, aligned:] = True
    take = np.where(vector & vector_ok, vector_pos.astype(np.int64), np.where(scalar & scalar_ok, scalar_pos, -1))
    out = np.zeros_like(src)
    found = take >= 0
    for channel in range(3):
        out[..., channel][found] = flat[take[found] + channel]
    return torch.from_numpy(out)
