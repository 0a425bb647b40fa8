"""rocAL's geometry operators: resizes, crops, flips, transposes, rotations and warps, with the
output buffer rule each has in rocAL.
"""

from __future__ import annotations

import math

import torch

from ..engine.graph import DataNode
from . import imageops
from .meta import meta
from .ops_common import PREFIX, Rocal, RocalParam, _flag, _image_op, _kind, _mirror, _param, _source, refuse
from .spec import MOVE, RESIZED, SIZE, TRANSPOSED, UNMOVED, operator
from .types import RocalResizeInterpolationType, RocalResizeScalingMode, RocalTensorLayout, RocalTensorOutputType

# ---------------------------------------------------------------------------------------------- geometry

_INTERPOLATIONS = {RocalResizeInterpolationType.NEAREST_NEIGHBOR_INTERPOLATION: "nn",
                   RocalResizeInterpolationType.LINEAR_INTERPOLATION: "linear",
                   RocalResizeInterpolationType.CUBIC_INTERPOLATION: "cubic",
                   RocalResizeInterpolationType.LANCZOS_INTERPOLATION: "lanczos",
                   RocalResizeInterpolationType.GAUSSIAN_INTERPOLATION: "gaussian",
                   RocalResizeInterpolationType.TRIANGULAR_INTERPOLATION: "triangular"}


def _interpolation(value) -> str:
    """rocAL's interpolation_type as imageops.resample names it (RPP's RpptInterpolationType: the same
    numbers, which MIVisionX's Resize node casts)."""
    return _INTERPOLATIONS[RocalResizeInterpolationType(value)]


def _resize_args(operator, max_size, resize_longer, resize_shorter, resize_width, resize_height, scaling_mode):
    """rocalResize's argument rules (rocAL/source/api/rocal_api_augmentation.cpp): some size; width/height
    or shorter/longer, not both; shorter and longer not together."""
    if not (resize_width or resize_height or resize_shorter or resize_longer):
        raise ValueError(f"{operator}: give resize_width/resize_height, resize_shorter or resize_longer")
    if (resize_width or resize_height) and (resize_shorter or resize_longer):
        raise ValueError(f"{operator}: resize_width/resize_height cannot be combined with "
                         f"resize_shorter/resize_longer")
    if resize_shorter and resize_longer:
        raise ValueError(f"{operator}: resize_shorter and resize_longer cannot be combined (use "
                         f"SCALING_MODE_MIN_MAX with resize_mirror_normalize)")
    max_size = tuple(int(v) for v in (max_size if isinstance(max_size, (list, tuple)) else [max_size]))
    if len(max_size) > 2:
        raise ValueError(f"{operator}: max_size has one or two values")
    # (width, height), one value for both; a 0 leaves that side unbounded, and (0, 0) is none at all
    max_size = () if not any(max_size) else (max_size * 2)[:2]
    if int(scaling_mode) == 4:
        raise NotImplementedError(f"{PREFIX}: {operator}: SCALING_MODE_MIN_MAX is not supported")
    return {"resize_width": int(resize_width), "resize_height": int(resize_height),
            "resize_shorter": int(resize_shorter), "resize_longer": int(resize_longer),
            "scaling_mode": int(scaling_mode), "max_size": max_size}


def _resized(image: torch.Tensor, sizes: dict, interpolation: str, buffer: tuple[int, int]) -> torch.Tensor:
    """The image resized by rocAL's size rules, each side cut to the output buffer's ((height, width)), as
    ResizeNode::update_node and ResizeMirrorNormalizeNode's cut it: an image more than MAX_ASPECT_RATIO
    times longer than wide is squeezed into the buffer."""
    width, height = imageops.resize_size(image.shape[1], image.shape[0], **sizes)
    return imageops.resample(image, min(width, buffer[1]), min(height, buffer[0]), interpolation)


@operator(output=RESIZED, boxes=MOVE)
def resize(*inputs, max_size=(), resize_longer=0, resize_shorter=0, resize_width=0, resize_height=0,
           scaling_mode=0, interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION, antialias=True,
           device=None, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8,
           resize_x=None, resize_y=None):
    """``fn.resize`` with rocAL's size rules (imageops.resize_size). rocAL ignores ``antialias``; the
    ``resize_x``/``resize_y`` of rocAL's older API (and its documentation page) are read as
    resize_width/resize_height."""
    resize_width = resize_x if resize_x is not None else resize_width
    resize_height = resize_y if resize_y is not None else resize_height
    sizes = _resize_args("fn.resize", max_size, resize_longer, resize_shorter, resize_width, resize_height,
                         scaling_mode)
    layout, dtype = _kind(output_layout, output_dtype)
    width, height = imageops.resize_buffer(_source(inputs).buffer[::-1], **sizes)
    out = Rocal((height, width), layout, dtype)

    def run(ctx, op, image, sizes, interpolation):
        return imageops.as_output(_resized(image, sizes, interpolation, out.buffer), out.torch_dtype)
    return _image_op("resize", run, inputs[0], {"sizes": sizes, "interpolation": _interpolation(interpolation_type)},
                     out)


def _whole_window(operator: str, image: torch.Tensor, crop_w: int, crop_h: int, pos_x: float, pos_y: float):
    """fn.crop's window (imageops.fixed_crop), refused when it passes the image's edge: rocAL's crop nodes
    hand RPP the uncut window (RocalCropParam::fill_crop_dims cuts only x2/y2), which reads the batch
    buffer beyond the image, something fastload does not reproduce."""
    height, width = image.shape[:2]
    x, y, w, h = imageops.fixed_window(width, height, crop_w, crop_h, pos_x, pos_y)
    if x + w > width or y + h > height:
        raise ValueError(f"{operator}: the {w}x{h} window at ({x}, {y}) passes the {width}x{height} image's "
                         f"edge; rocAL reads the batch buffer beyond the image there, which fastload does not "
                         f"reproduce")
    return x, y, w, h


def _whole_pixels(operator: str, **values) -> None:
    """Offsets and sizes rocAL stores as unsigned pixels: a negative or non-finite one is refused (its
    conversion is undefined in C++)."""
    for name, value in values.items():
        if not math.isfinite(float(value)) or float(value) < 0:
            raise ValueError(f"{PREFIX}: {operator}: {name}={value} (rocAL stores it as an unsigned pixel count)")


@operator(output=SIZE)
def roi_resize(*inputs, resize_width=0, resize_height=0, roi_w=None, roi_h=None, roi_pos_x=None, roi_pos_y=None,
               device=None, interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION,
               output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.roi_resize``: fn.crop's window (roi_w x roi_h at whole-pixel offsets roi_pos_x/y, a size past
    the image being the image's: imageops.fixed_crop) resampled to resize_width x resize_height as fn.resize
    does. rocalROIResize makes a CropResizeNode whose fixed-crop init is CropNode's, then RPP's resize of
    that window (rocAL/source/api/rocal_api_augmentation.cpp; geometry_augmentations/node_crop_resize.cpp).
    A window that passes the image's edge is an error for that image: rocAL hands RPP the uncut window,
    which reads the batch buffer beyond the image."""
    if not resize_width or not resize_height:
        raise ValueError("fn.roi_resize: resize_width and resize_height must not be 0 (rocAL refuses it)")
    if any(value is None for value in (roi_w, roi_h, roi_pos_x, roi_pos_y)):
        raise TypeError("fn.roi_resize: give roi_w, roi_h, roi_pos_x and roi_pos_y (rocAL's binding takes numbers)")
    _whole_pixels("fn.roi_resize", roi_pos_x=roi_pos_x, roi_pos_y=roi_pos_y, roi_w=roi_w, roi_h=roi_h)
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal((int(resize_height), int(resize_width)), layout, dtype)

    def run(ctx, op, image, roi, interpolation):
        x, y, w, h = _whole_window("fn.roi_resize", image, *roi)
        return imageops.as_output(imageops.resample(image[y:y + h, x:x + w], int(resize_width), int(resize_height),
                                                    interpolation), out.torch_dtype)
    return _image_op("roi_resize", run, inputs[0],
                     {"roi": (int(roi_w), int(roi_h), float(roi_pos_x), float(roi_pos_y)),
                      "interpolation": _interpolation(interpolation_type)}, out)


def _crop_size(crop, crop_h, crop_w) -> tuple[int, int]:
    """(height, width) from rocAL's crop argument: two values are (h, w), three (d, h, w); otherwise
    crop_h/crop_w (rocAL_pybind/amd/rocal/fn.py)."""
    crop = list(crop) if isinstance(crop, (list, tuple)) else [crop]
    if len(crop) == 2:
        return int(crop[0]), int(crop[1])
    if len(crop) == 3:
        return int(crop[1]), int(crop[2])
    return int(crop_h), int(crop_w)


@operator(output=SIZE, boxes=MOVE)
def crop_mirror_normalize(*inputs, crop=(0, 0), crop_pos_x=0.5, crop_pos_y=0.5, crop_w=0, crop_h=0, mean=(0.0,),
                          std=(1.0,), mirror=1, device=None, output_layout=RocalTensorLayout.NHWC,
                          output_dtype=RocalTensorOutputType.UINT8):
    """``fn.crop_mirror_normalize``: a fixed-anchor crop (imageops.anchored_crop), a horizontal flip where
    ``mirror`` (1 by default, unlike DALI: always flipped), ``(x - mean) / std`` with mean and std in pixel
    units, NHWC uint8 unless asked (rocAL_pybind/amd/rocal/fn.py)."""
    height, width = _crop_size(crop, crop_h, crop_w)
    if not height or not width:
        raise ValueError("fn.crop_mirror_normalize: give crop=(height, width) (rocAL refuses a zero size)")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal((height, width), layout, dtype)

    def run(ctx, op, image, mirror, pos, mean, std):
        x, y, w, h = imageops.anchored_crop(image.shape[1], image.shape[0], width, height, *pos)
        return imageops.normalize(image[y:y + h, x:x + w], mean, std, int(mirror), out.torch_dtype)
    return _image_op("crop_mirror_normalize", run, inputs[0],
                     {"mirror": _mirror(mirror),
                      "pos": (float(crop_pos_x), float(crop_pos_y)), "mean": tuple(float(v) for v in mean),
                      "std": tuple(float(v) for v in std)}, out)


@operator(output=RESIZED)
def resize_mirror_normalize(*inputs, max_size=(), resize_longer=0, resize_shorter=0, resize_width=0,
                            resize_height=0, scaling_mode=0,
                            interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION, mean=(0.0,),
                            std=(1.0,), mirror=1, device=None, output_layout=RocalTensorLayout.NHWC,
                            output_dtype=RocalTensorOutputType.UINT8):
    """``fn.resize_mirror_normalize``: fn.resize's sizes, then a flip where ``mirror`` (1 by default) and
    ``(x - mean) / std`` (rocalResizeMirrorNormalize). Always bilinear, whatever ``interpolation_type``
    says: MIVisionX's ResizeMirrorNormalize node passes RPP BILINEAR (ResizeMirrorNormalize.cpp), the only
    one RPP's resize_mirror_normalize implements."""
    sizes = _resize_args("fn.resize_mirror_normalize", max_size, resize_longer, resize_shorter, resize_width,
                         resize_height, scaling_mode)
    _interpolation(interpolation_type)  # one of rocAL's, which the node then does not read
    layout, dtype = _kind(output_layout, output_dtype)
    width, height = imageops.resize_buffer(_source(inputs).buffer[::-1], **sizes)
    out = Rocal((height, width), layout, dtype)

    def run(ctx, op, image, sizes, interpolation, mirror, mean, std):
        return imageops.normalize(_resized(image, sizes, interpolation, out.buffer), mean, std, int(mirror),
                                  out.torch_dtype)
    return _image_op("resize_mirror_normalize", run, inputs[0],
                     {"sizes": sizes, "interpolation": "linear",
                      "mirror": _mirror(mirror),
                      "mean": tuple(float(v) for v in mean), "std": tuple(float(v) for v in std)}, out)


@operator(output=SIZE, boxes=MOVE)
def crop(*inputs, crop=(0, 0), crop_pos_x=0.5, crop_pos_y=0.5, crop_pos_z=0.5, crop_w=0, crop_h=0, crop_d=1,
         device=None, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.crop``: with a size, at whole-pixel offsets crop_pos_x/y (so the default 0.5 is the top-left
    corner: imageops.fixed_crop); without one, a random crop of 0.55-0.95 of each side at a random place
    (rocalCrop's defaults, rocAL/include/parameters/parameter_crop.h)."""
    height, width = _crop_size(crop, crop_h, crop_w)
    _whole_pixels("fn.crop", crop_pos_x=crop_pos_x, crop_pos_y=crop_pos_y)
    layout, dtype = _kind(output_layout, output_dtype)
    source = _source(inputs).buffer
    out = Rocal((height, width) if height and width else source, layout, dtype)

    def run(ctx, op, image, pos, size):
        if height and width:
            x, y, w, h = _whole_window("fn.crop", image, width, height, *pos)
        else:
            rng = ctx.rng(op)
            w, h = int(rng.uniform(0.55, 0.95) * image.shape[1]), int(rng.uniform(0.55, 0.95) * image.shape[0])
            x = int(rng.uniform(0.01, 0.99) * (image.shape[1] - w))
            y = int(rng.uniform(0.01, 0.99) * (image.shape[0] - h))
        return imageops.as_output(image[y:y + h, x:x + w].contiguous(), out.torch_dtype)
    return _image_op("crop", run, inputs[0], {"pos": (float(crop_pos_x), float(crop_pos_y)), "size": (width, height)},
                     out)


@operator(boxes=UNMOVED)
def random_crop(*inputs, crop_area_factor=[0.08, 1], crop_aspect_ratio=[0.75, 1.333333], crop_pox_x=0,
                crop_pox_y=0, num_attempts=20, device=None, all_boxes_above_threshold=True, allow_no_crop=True,
                ltrb=True, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.random_crop``: rocAL's RandomCropNode, a window of the image at its own size (imageops.
    random_crop_window_xywh: 5 draws of rocAL's area, aspect-ratio and drift ranges, else the central crop).

    rocAL's wrapper hands the four parameters to rocalRandomCrop unconverted, where they are RocalFloatParam
    handles (void*, which pybind11 takes as None or a capsule): a list or a number -- the wrapper's own
    defaults included -- fails there with a TypeError, as it does here. None gives rocAL's built-in draws;
    a parameter handle (fn.uniform's, renewed at each attempt) is not supported yet (NotImplementedError).
    num_attempts and the box arguments are not read by rocAL either."""
    given = {"crop_area_factor": crop_area_factor, "crop_aspect_ratio": crop_aspect_ratio,
             "crop_pox_x": crop_pox_x, "crop_pox_y": crop_pox_y}
    handles = [name for name, value in given.items() if isinstance(value, (DataNode, RocalParam))]
    if handles:
        raise NotImplementedError(f"{PREFIX}: fn.random_crop: a parameter handle for {', '.join(handles)} (rocAL "
                                  f"renews it at each of its five attempts) is not supported yet; give None")
    passed = [name for name, value in given.items() if value is not None]
    if passed:
        raise TypeError(f"{PREFIX}: fn.random_crop: rocAL passes {', '.join(passed)} to rocalRandomCrop as "
                        f"RocalFloatParam handles, unconverted, so lists and numbers (its own defaults too) fail "
                        f"there; give None for each: rocAL then draws area factors in [0.08, 0.99], aspect "
                        f"ratios in [0.75, 1.333] and positions in [0.01, 0.99] of the free space")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)  # rocAL keeps the input's buffer; the ROI is the crop

    def run(ctx, op, image):
        rng = ctx.rng(op)
        x, y, w, h = imageops.random_crop_window_xywh(image.shape[1], image.shape[0],
                                                 lambda low, high: float(rng.uniform(low, high)))
        return imageops.as_output(image[y:y + h, x:x + w].contiguous(), out.torch_dtype)
    return _image_op("random_crop", run, inputs[0], {}, out)


@operator(output=TRANSPOSED, boxes=UNMOVED)
def transpose(*inputs, perm=[], output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.transpose`` of an image: ``perm`` orders its three dimensions as its layout names them (HWC for
    NHWC, CHW for NCHW; rocalTranspose: the batch dimension stays first), so it can swap height and width,
    move the channels to the other end, or both. ``output_layout`` must name the layout that gives (rocAL
    takes it as written, and a wrong one describes the buffer wrongly); the type stays the input's (rocAL
    does not read output_dtype). Refused: the channels in the middle (no image layout names it), sequences.

    The region rocAL hands on: rocalTranspose sets the output's dims, which resets its regions to the
    whole buffer (TensorInfo::set_max_shape), and TransposeNode::update_node sets them to the image's again
    only for perms [2, 1, 0] and [1, 0, 2]. So with any other perm rocAL hands on the whole buffer -- memory
    its transpose did not write where an image is smaller -- and fastload refuses such an image when it
    meets one (images of the buffer's size, after a resize or crop, are what rocAL hands on too)."""
    source = _source(inputs)
    if meta(inputs[0]).frames is not None:
        raise NotImplementedError(f"{PREFIX}: fn.transpose of fn.readers.video's sequences is not supported")
    perm = [int(p) for p in perm]
    if sorted(perm) != [0, 1, 2]:
        raise ValueError(f"{PREFIX}: fn.transpose: perm {perm} must order an image's three dimensions (rocAL: "
                         f"\"Transpose permutation must match with the input dims\")")
    names = "CHW" if source.layout == RocalTensorLayout.NCHW else "HWC"
    order = "".join(names[p] for p in perm)
    if order[1] == "C":
        raise NotImplementedError(f"{PREFIX}: fn.transpose: perm {perm} puts a {source.layout.name} image's "
                                  f"channels between its rows and columns ({order}), which no layout names")
    swap = order.index("W") < order.index("H")
    layout = RocalTensorLayout.NHWC if order[2] == "C" else RocalTensorLayout.NCHW
    if RocalTensorLayout(output_layout) != layout:
        raise ValueError(f"{PREFIX}: fn.transpose: perm {perm} of a {source.layout.name} image gives {order}: "
                         f"give output_layout=types.{layout.name} (rocAL would label the buffer "
                         f"{RocalTensorLayout(output_layout).name})")
    height, width = source.buffer
    out = Rocal((width, height) if swap else (height, width), layout, source.dtype)
    whole_buffer = perm not in ([2, 1, 0], [1, 0, 2])

    def run(ctx, op, image):
        if whole_buffer and tuple(image.shape[:2]) != (height, width):
            raise NotImplementedError(
                f"{PREFIX}: fn.transpose: perm {perm} of a {image.shape[0]}x{image.shape[1]} image in a "
                f"{height}x{width} buffer: rocAL hands on the whole buffer as the image (only perms [2, 1, 0] "
                f"and [1, 0, 2] keep the image's region), memory its transpose did not write; resize or crop "
                f"to the buffer's size first")
        return image.transpose(0, 1).contiguous() if swap else image
    return _image_op("transpose", run, inputs[0], {}, out)


@operator(output=SIZE, legacy=("centre_crop",))
def center_crop(*inputs, crop=(0, 0), crop_h=0, crop_w=0, crop_d=1, device=None,
                output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.center_crop``: the centred window (anchors 0.5, imageops.anchored_crop)."""
    height, width = _crop_size(crop, crop_h, crop_w)
    if not height or not width:
        raise ValueError("fn.center_crop: give crop=(height, width) (rocAL refuses a zero size)")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal((height, width), layout, dtype)

    def run(ctx, op, image):
        x, y, w, h = imageops.anchored_crop(image.shape[1], image.shape[0], width, height, 0.5, 0.5)
        return imageops.as_output(image[y:y + h, x:x + w].contiguous(), out.torch_dtype)
    return _image_op("center_crop", run, inputs[0], {}, out)


@operator(boxes=MOVE)
def flip(*inputs, horizontal=0, vertical=0, device=None, output_layout=RocalTensorLayout.NHWC,
         output_dtype=RocalTensorOutputType.UINT8):
    """``fn.flip``: horizontal and/or vertical (0/1, or a per-sample coin flip)."""
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, image, horizontal, vertical):
        dims = [d for d, on in ((1, horizontal), (0, vertical)) if int(on)]
        return imageops.as_output(image.flip(dims) if dims else image, out.torch_dtype)
    return _image_op("flip", run, inputs[0], {"horizontal": _flag(horizontal), "vertical": _flag(vertical)}, out)


def _numbers(operator: str, value, count: int, what: str) -> list[float]:
    """``value`` as ``count`` floats: a list or tuple of that many numbers (not bools), else a ValueError
    saying ``what`` the operator's argument is."""
    if not isinstance(value, (list, tuple)) or len(value) != count or \
            not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise ValueError(f"fn.{operator}: {what}, not {value!r}")
    return [float(v) for v in value]


def _warp_op(name: str, warp, inputs, interpolation_type, dest_width, dest_height, output_layout, output_dtype,
             args: dict) -> DataNode:
    """An RPP warp of each image at its own size (``warp(image, kind, **values)``), at the top left of a
    dest_width x dest_height buffer (0: the input's), cut to it; LINEAR or NEAREST_NEIGHBOR, as RPP's."""
    kind = _interpolation(interpolation_type)
    if kind not in ("linear", "nn"):
        raise NotImplementedError(f"{PREFIX}: fn.{name}: interpolation_type "
                                  f"{RocalResizeInterpolationType(interpolation_type).name} is not supported "
                                  f"(LINEAR, NEAREST_NEIGHBOR, as RPP's {name})")
    layout, dtype = _kind(output_layout, output_dtype)
    buffer = (int(dest_height), int(dest_width)) if dest_width and dest_height else _source(inputs).buffer
    out = Rocal(buffer, layout, dtype)

    def run(ctx, op, image, **values):
        warped = warp(ctx, op, image, kind, **values)[:buffer[0], :buffer[1]]
        return imageops.as_output(warped.contiguous(), out.torch_dtype)
    return _image_op(name, run, inputs[0], args, out)


@operator(output=SIZE)
def rotate(*inputs, angle=None, dest_width=0, dest_height=0,
           interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION, device=None, fill_value=None,
           output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.rotate``: each image turned ``angle`` degrees (a number, a per-sample fn.uniform, or None for
    rocAL's default, uniform in [0, 180): node_rotate.h) about its centre at its own size, outside filled
    with 0 (RPP's warp: imageops.rotate), at the top left of a dest_width x dest_height buffer (0: the
    input's). rocAL ignores ``fill_value`` and so does fastload; where the buffer is smaller than the image
    rocAL writes past it, fastload cuts the image to it."""
    def turn(ctx, op, image, kind, angle):
        return imageops.rotate(image, float(ctx.rng(op).uniform(0.0, 180.0) if angle is None else angle), kind)
    return _warp_op("rotate", turn, inputs, interpolation_type, dest_width, dest_height, output_layout,
                    output_dtype, {"angle": _param(angle)})


@operator(output=SIZE, boxes=UNMOVED)
def warp_affine(*inputs, dest_width=0, dest_height=0, matrix=(0, 0, 0, 0, 0, 0),
                interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION, device=None,
                output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.warp_affine``: each image warped about its centre at its own size (imageops.warp_affine), at the
    top left of a dest_width x dest_height buffer (0: the input's). ``matrix`` is rocAL's
    ``[x0, x1, y0, y1, o0, o1]``, which its WarpAffineNode hands RPP as the row-major 2x3 matrix
    ``[x0, y0, x1, y1, o0, o1]`` (rocAL/source/augmentations/geometry_augmentations/node_warp_affine.cpp)."""
    x0, x1, y0, y1, o0, o1 = _numbers("warp_affine", list(matrix), 6, "matrix is six numbers [x0, x1, y0, y1, o0, o1]")
    affine = (x0, y0, x1, y1, o0, o1)
    return _warp_op("warp_affine", lambda ctx, op, image, kind: imageops.warp_affine(image, affine, kind), inputs,
                    interpolation_type, dest_width, dest_height, output_layout, output_dtype, {})


@operator(output=SIZE)
def resize_crop_mirror(*inputs, resize_width=0, resize_height=0, crop_w=0, crop_h=0, mirror=1, device=None,
                       max_size=(), resize_longer=0, resize_shorter=0,
                       scaling_mode=RocalResizeScalingMode.SCALING_MODE_DEFAULT,
                       interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION,
                       output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.resize_crop_mirror``: the top-left crop of the image (cut to the image), resized to
    resize_width x resize_height with RPP's bilinear, mirrored (1 by default, or a coin flip). rocAL's Python
    passes crop_w where its C API takes the crop height and crop_h where it takes the width
    (rocAL_pybind/amd/rocal/fn.py into rocalResizeCropMirrorFixed), so the window is crop_w high and crop_h
    wide, and so it is here; ResizeCropMirrorNode::init puts it at (0, 0)."""
    if not resize_width or not resize_height:
        raise ValueError("fn.resize_crop_mirror: resize_width and resize_height must not be 0 (rocAL refuses it)")
    refuse("fn.resize_crop_mirror", max_size=bool(max_size), resize_longer=bool(resize_longer),
           resize_shorter=bool(resize_shorter),
           interpolation_type=_interpolation(interpolation_type) != "linear")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal((int(resize_height), int(resize_width)), layout, dtype)
    window_h, window_w = int(crop_w), int(crop_h)  # rocAL's swap, see above

    def run(ctx, op, image, mirror):
        resized = imageops.resize_crop_mirror(image, window_w, window_h, int(resize_width), int(resize_height),
                                              bool(int(mirror)))
        return imageops.as_output(resized, out.torch_dtype)
    return _image_op("resize_crop_mirror", run, inputs[0], {"mirror": _param(mirror)}, out)


@operator(output=SIZE, ranges={"area": (0.08, 0.99), "ratio": (0.75, 1.333), "x": (0.01, 0.99), "y": (0.01, 0.99)})
def resize_crop(*inputs, resize_width=0, resize_height=0, crop_area_factor=None, crop_aspect_ratio=None,
                x_drift=None, y_drift=None, device=None, max_size=(), resize_longer=0, resize_shorter=0,
                scaling_mode=RocalResizeScalingMode.SCALING_MODE_DEFAULT,
                interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION,
                output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.resize_crop``: rocAL's CropResizeNode: a window of crop_area_factor of the image's area at
    crop_aspect_ratio, placed by x_drift / y_drift (imageops.crop_resize_window, RocalRandomCropParam's
    rule), resized to resize_width x resize_height with RPP's bilinear. A value left None is drawn per
    sample from rocAL's range (parameter_random_crop.h: area [0.08, 0.99], aspect [0.75, 1.333];
    parameter_crop.h: drifts [0.01, 0.99])."""
    if not resize_width or not resize_height:
        raise ValueError("fn.resize_crop: resize_width and resize_height must not be 0 (rocAL refuses it)")
    refuse("fn.resize_crop", max_size=bool(max_size), resize_longer=bool(resize_longer),
           resize_shorter=bool(resize_shorter), interpolation_type=_interpolation(interpolation_type) != "linear")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal((int(resize_height), int(resize_width)), layout, dtype)
    ranges = resize_crop.spec.ranges

    def run(ctx, op, image, area, ratio, x, y):
        rng = ctx.rng(op)
        given = {"area": area, "ratio": ratio, "x": x, "y": y}
        values = {k: float(rng.uniform(*ranges[k])) if v is None else float(v) for k, v in given.items()}
        resized = imageops.crop_resize(image, values["area"], values["ratio"], values["x"], values["y"],
                                       int(resize_width), int(resize_height))
        return imageops.as_output(resized, out.torch_dtype)
    args = {"area": _param(crop_area_factor), "ratio": _param(crop_aspect_ratio), "x": _param(x_drift),
            "y": _param(y_drift)}
    return _image_op("resize_crop", run, inputs[0], args, out)
