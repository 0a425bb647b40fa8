"""rocAL's per-sample rules, in torch: its decoder's size cap, its resize output sizes, its crop windows and
its output tensors' layout and type. Each rule cites the rocAL source it follows (ROCm/rocAL at 0981d5bb).
Images are HWC tensors, as rocAL's operators hold them (NHWC).
"""

from __future__ import annotations

import io
import math

import numpy as np
import torch
from PIL import Image

# rocAL keeps these extensions (any case) and files with none (rocAL/source/readers/file_source_reader.cpp,
# rocAL/source/meta_data/label_reader_folders.cpp: the text after the last '.', lower-cased)
EXTENSIONS = frozenset({"jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif", "tiff", "webp", "wav"})
MAX_ASPECT_RATIO = 6  # rocAL/include/pipeline/commons.h: output buffers of resizes that keep the aspect


def decode(data: bytes, color: str, max_width: int, max_height: int) -> torch.Tensor:
    """``decoders.image``: HWC uint8 (1 channel for GRAY). As rocAL's TurboJPEG decoder with the default
    USER_GIVEN_SIZE_ORIG policy (rocAL/source/decoders/image/turbo_jpeg_decoder.cpp): an image within
    ``max_width`` x ``max_height`` decodes at its size (no EXIF rotation: libjpeg-turbo applies none); a
    larger JPEG decodes at the largest DCT scale M/8 whose size fits (ceil(side * M / 8), aspect kept),
    e.g. 1200x800 in 1000x1000 at 3/4 -> 900x600. rocAL crops an image over 8x the cap; fastload refuses it,
    and a larger image of another format, which rocAL's JPEG decoder does not read at all."""
    from ... import _jpeg
    image = Image.open(io.BytesIO(data))
    width, height = image.size
    if width <= max_width and height <= max_height:
        if color == "GRAY" and image.format == "JPEG":
            image.draft("L", image.size)
        pixels = np.asarray(image.convert("L" if color == "GRAY" else "RGB"))
    else:
        if image.format != "JPEG":
            raise ValueError(f"a {width}x{height} {image.format} image is larger than max_decoded_width x "
                             f"max_decoded_height ({max_width}x{max_height}); rocAL's decoder only scales JPEGs")
        scale = next((m for m in range(7, 0, -1) if -(-width * m // 8) <= max_width
                      and -(-height * m // 8) <= max_height), None)
        if scale is None:
            raise ValueError(f"a {width}x{height} JPEG is over 8x max_decoded_width x max_decoded_height "
                             f"({max_width}x{max_height}): rocAL crops such images, fastload does not")
        out_w, out_h = -(-width * scale // 8), -(-height * scale // 8)
        buffer = np.empty(out_w * out_h * 3, np.uint8)
        got_w, got_h, channels, warnings, warning = _jpeg.decode(data, buffer, scale, 0, 0, out_w, out_h)
        if warnings:
            raise ValueError(f"corrupt JPEG data ({warning})")
        pixels = buffer[:got_w * got_h * channels].reshape(got_h, got_w, channels)
        if color == "GRAY" and channels == 3:  # libjpeg's luma (JPEG's YCbCr weights), rounded
            pixels = np.round(pixels @ np.array([0.299, 0.587, 0.114])).astype(np.uint8)
        elif color != "GRAY" and channels == 1:
            pixels = np.repeat(pixels, 3, axis=2)
        pixels = pixels.reshape(got_h, got_w, -1)
    tensor = torch.from_numpy(np.array(pixels, copy=True))
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(-1)
    return tensor.flip(-1).contiguous() if color == "BGR" else tensor


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
    (rocalResize: max_size, else the requested sides, a missing one MAX_ASPECT_RATIO times the other)."""
    if max_size:
        max_w, max_h = (tuple(max_size) * 2)[:2]
        if max_w and max_h:
            return int(max_w), int(max_h)
    if resize_shorter:
        return resize_shorter * MAX_ASPECT_RATIO, resize_shorter * MAX_ASPECT_RATIO
    if resize_longer:
        return resize_longer, resize_longer
    w, h = int(resize_width), int(resize_height)
    if scaling_mode == 1:
        return w or input_max[0], h or input_max[1]
    if scaling_mode == 2:
        return (w or h) * MAX_ASPECT_RATIO, (h or w) * MAX_ASPECT_RATIO
    return w or h * MAX_ASPECT_RATIO, h or w * MAX_ASPECT_RATIO


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


def fixed_crop(width: int, height: int, crop_w: int, crop_h: int, pos_x: float, pos_y: float):
    """(x, y, w, h) of ``fn.crop`` with a size: rocAL stores crop_pos_x/y into whole-pixel offsets
    (CropNode::init, rocAL/source/augmentations/geometry_augmentations/node_crop.cpp), so the default 0.5
    is 0, the top-left corner; an offset past the image is 0."""
    x, y = int(pos_x), int(pos_y)
    x, y = (0 if x >= width else x), (0 if y >= height else y)
    w = crop_w if 0 < crop_w <= width else width
    h = crop_h if 0 < crop_h <= height else height
    return x, y, min(w, width - x), min(h, height - y)


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
    src/modules/tensor/cpu/kernel/resize.cpp): "linear" is plain bilinear on pixel centres, edge pixels
    repeated, no antialiasing when shrinking (resize_bilinear_*_host_tensor); "nn" takes the source
    pixel floor((x + 0.5) * ratio) (compute_resize_nn_src_loc); "triangular" is the separable triangle
    filter widened by the ratio when shrinking (resize_separable_host_tensor), which is DALI's. uint8 in,
    uint8 out (rounded half to even, as _mm256_cvtps_epi32, and saturated)."""
    import torch.nn.functional as F
    if interpolation == "triangular":
        from ..dali import imageops as dali_imageops
        return dali_imageops.resize(image, resize_x=width, resize_y=height, interp_type="triangular",
                                    antialias=True)
    src_h, src_w = image.shape[0], image.shape[1]
    if interpolation == "nn":
        rows = torch.clamp(((torch.arange(height) + 0.5) * (src_h / height)).floor().long(), max=src_h - 1)
        cols = torch.clamp(((torch.arange(width) + 0.5) * (src_w / width)).floor().long(), max=src_w - 1)
        return image[rows][:, cols].contiguous()
    planes = image.permute(2, 0, 1).unsqueeze(0).float()
    out = F.interpolate(planes, size=(height, width), mode="bilinear", align_corners=False, antialias=False)
    out = out[0].permute(1, 2, 0)
    if image.dtype == torch.uint8:
        return out.round().clamp(0, 255).to(torch.uint8).contiguous()
    return out.to(image.dtype).contiguous()
