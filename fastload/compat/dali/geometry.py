"""DALI's geometry operators beyond resize/crop/rotate: ``fn.warp_affine``, ``fn.slice``, ``fn.pad``,
``fn.peek_image_shape`` and ``fn.color_space_conversion``, per sample, as DALI 2.4's CPU operators compute
them (tests/compat/test_dali_geometry.py compares each with real DALI, output by output).

They run per sample in the loader threads (``engine.execution.GraphPath``); none is lowered to the fused plan.
The fused kernel's warp (``kernels.augment.Warp``) is torchvision's: it follows a resize, reads zeros
outside the image where DALI without ``fill_value`` clamps to the border, and rounds nearest-neighbour
taps half to even where DALI floors; with a ``fill_value`` and bilinear taps it would agree with DALI's
only to float32 rounding. Per sample, the results are DALI's.
"""

from __future__ import annotations

import builtins
import io
import math

import numpy as np
import torch

from ..float32 import round_c as _round_c
from .colour import _rgb_to_ycbcr
from .crops import _EXACT_IN_DOUBLE
from ..engine.conversions import convert_sat
from ..engine.graph import DataNode, Op
from .operators import _device, _layout, _one, check_args
from .spec import operator
from .types import image_type_name, interp_name, torch_dtype
from .warping import warp

_F32 = np.float32


def _flat(value, name: str) -> tuple:
    """A constant list argument as a tuple of floats (a scalar as one value); a DataNode is kept (per sample)."""
    if value is None or isinstance(value, DataNode):
        return value
    return tuple(float(v) for v in torch.as_tensor(value, dtype=torch.float64).reshape(-1).tolist())


# ---------------------------------------------------------------------------------------------- warp


def _inverse_2x3(m: np.ndarray) -> np.ndarray:
    """The inverse of the affine map [A t]: [A^-1, -A^-1 t], in float32 as DALI's ``affine_mat_inv``
    computes it when ``inverse_map=False`` (the 2x2 inverse by its adjugate over the determinant)."""
    a, b, c, d = m[0, 0], m[0, 1], m[1, 0], m[1, 1]
    inv_det = _F32(1) / (a * d - b * c)
    inv = np.array([[d * inv_det, -b * inv_det], [-c * inv_det, a * inv_det]], dtype=_F32)
    t = -(inv[:, 0] * m[0, 2] + inv[:, 1] * m[1, 2])
    return np.concatenate([inv, t[:, None]], axis=1).astype(_F32)


def _warp_size(size, height: int, width: int) -> tuple[int, int]:
    """DALI's WarpParamProvider: no ``size`` keeps the input's; a constant one was rounded (roundf, at
    least 1) when the operator was made; a per-sample one (a DataNode) is converted to integers (truncated)."""
    if size is None:
        return height, width
    values = size if isinstance(size, (list, tuple)) else (size,)
    if len(values) != 2:
        raise ValueError(f"fn.warp_affine: size must have 2 values (height, width), got {len(values)}")
    return int(values[0]), int(values[1])


@operator("warp_affine", "WarpAffine")
def warp_affine(images, matrix=None, *, size=None, fill_value=None, interp_type=None, inverse_map=True,
                dtype=None, output_dtype=None, device=None, **args):
    """``fn.warp_affine`` of HWC images: the 2x3 ``matrix`` (6 values, per sample as a DataNode argument or
    as the second input, e.g. a ``fn.transforms`` output) maps output points to input points, or input to
    output with ``inverse_map=False`` (then inverted). ``size`` (height, width) defaults to the input's.
    NN and linear interpolation, as DALI; volumetric (DHWC) and sequence (FHWC) inputs are refused."""
    check_args("fn.warp_affine", args, set())
    _layout("fn.warp_affine", images)
    inputs = [images]
    if isinstance(matrix, DataNode):
        # DALI's second positional input ``mtx`` or the argument input ``matrix``: the same per sample
        inputs.append(matrix)
        matrix = None
    elif matrix is None:
        raise ValueError("fn.warp_affine: `matrix` must be given (as an argument or a second input)")
    else:
        matrix = _flat(matrix, "matrix")
        if len(matrix) != 6:
            raise ValueError(f"fn.warp_affine: `matrix` must have 6 elements, got {len(matrix)}")
    if isinstance(interp_type, DataNode):
        raise NotImplementedError("fastload.compat.dali: fn.warp_affine: a per-sample interp_type is not supported")
    interp = interp_name(interp_type) if interp_type is not None else "linear"
    if interp not in ("nn", "linear"):
        raise ValueError("fn.warp_affine: only nearest and linear interpolation is supported (as in DALI)")
    out_type = dtype if dtype is not None else output_dtype
    constant_size = size is not None and not isinstance(size, DataNode)
    settings = {"size": tuple(max(1, int(_round_c(v))) for v in _flat(size, "size"))
                if constant_size else size, "fill_value": fill_value, "interp": interp,
                "inverse_map": bool(inverse_map), "dtype": torch_dtype(out_type) if out_type is not None else None}

    def run(ctx, op, image, mtx=None, *, size, fill_value, interp, inverse_map, dtype):
        m = np.asarray(torch.as_tensor(mtx if mtx is not None else matrix).float().reshape(2, 3).numpy(),
                       dtype=_F32)
        if not inverse_map:
            m = _inverse_2x3(m)
        out_h, out_w = _warp_size(size, image.shape[0], image.shape[1])
        return warp(image, m, out_h, out_w, fill_value=fill_value, interp=interp, dtype=dtype)
    return _one(Op("warp_affine", run, inputs, settings, device=_device(inputs, device),
                   layouts=(images.layout(),), fusable=False))


# ----------------------------------------------------------------------------------------- slice, pad


_POLICIES = {"error": "error", "pad": "pad", "constant": "pad", "trim_to_shape": "trim_to_shape",
             "edge": "clamp", "clamp": "clamp", "reflect": "reflect_1001", "reflect_1001": "reflect_1001",
             "reflect_101": "reflect_101", "wrap": "wrap"}


def _axes(layout: str, ndim: int, axes, axis_names, operator: str) -> list[int]:
    """The data axes the slice arguments name, in order: ``axis_names`` (looked up in the layout) when
    given or when ``axes`` is not; else ``axes`` (negative ones count from the back); without either, "WH",
    or (1, 0) for data without a layout."""
    if axis_names is None and axes is None and not layout:
        axes = (1, 0)  # data without a layout: DALI's default axes, (x, y) of a 2-D array (measured)
    if axis_names is not None or axes is None:
        names = axis_names if axis_names is not None else "WH"
        missing = [n for n in names if n not in layout]
        if missing:
            raise ValueError(f"{operator}: axis_names {names!r} are not all in the input's layout {layout!r}"
                             f" (give `axes` for data without a layout)")
        return [layout.index(n) for n in names]
    values = [int(a) for a in (axes if isinstance(axes, (list, tuple)) else [axes])]
    for a in values:
        if not -ndim <= a < ndim:
            raise ValueError(f"{operator}: axis {a} is out of range for {ndim}-D data")
    return [a % ndim for a in values]


def _llround(x: float) -> int:
    """C's llround: to nearest, halves away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def _per_axis(value, count: int, name: str):
    if value is None:
        return None
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(values) == 1 and count > 1:
        values = values * count
    if len(values) != count:
        raise ValueError(f"fn.slice: {name} has {len(values)} values for {count} axes")
    return [float(v) for v in values]


def _named_window(extents, args) -> list[tuple[int, int]]:
    """(anchor, size) per sliced axis from start/rel_start and end/rel_end/shape/rel_shape (DALI's
    NamedSliceAttr): positions in float64 (relative ones times the extent), each end rounded (llround)."""
    count = len(extents)
    get = {k: _per_axis(args.get(k), count, k) for k in ("start", "rel_start", "end", "rel_end", "shape",
                                                            "rel_shape")}
    if get["start"] is not None and get["rel_start"] is not None:
        raise ValueError("fn.slice: start and rel_start are mutually exclusive")
    ends = [k for k in ("end", "rel_end", "shape", "rel_shape") if get[k] is not None]
    if len(ends) > 1:
        raise ValueError(f"fn.slice: {' and '.join(ends)} are mutually exclusive")
    window = []
    for i, extent in enumerate(extents):
        start = get["start"][i] if get["start"] is not None else (
            get["rel_start"][i] * extent if get["rel_start"] is not None else 0.0)
        if get["end"] is not None:
            end = get["end"][i]
        elif get["rel_end"] is not None:
            end = get["rel_end"][i] * extent
        elif get["shape"] is not None:
            end = start + get["shape"][i]
        elif get["rel_shape"] is not None:
            end = start + get["rel_shape"][i] * extent
        else:
            end = float(extent)
        anchor = _llround(start)
        window.append((anchor, _llround(end) - anchor))
    return window


def _input_window(extents, anchor: torch.Tensor, shape: torch.Tensor, normalized_anchor: bool,
                  normalized_shape: bool) -> list[tuple[int, int]]:
    """(anchor, size) per sliced axis from the positional anchor and shape inputs (DALI's SliceAttr):
    integer inputs are absolute; float ones relative where normalized; the end is rounded once from the
    sum when both are relative (DALI's special case, fewer rounding errors)."""
    a_rel = normalized_anchor and anchor.dtype.is_floating_point
    s_rel = normalized_shape and shape.dtype.is_floating_point
    a_vals = [float(v) for v in anchor.reshape(-1).double().tolist()]
    s_vals = [float(v) for v in shape.reshape(-1).double().tolist()]
    if len(a_vals) != len(extents) or len(s_vals) != len(extents):
        raise ValueError(f"fn.slice: anchor and shape must have {len(extents)} values (one per sliced axis), "
                         f"got {len(a_vals)} and {len(s_vals)}")
    window = []
    for a, s, extent in zip(a_vals, s_vals, extents):
        if a_rel and s_rel:
            end = _llround((a + s) * extent)
            a, s = a * extent, s * extent
        else:
            a = a * extent if a_rel else a
            s = s * extent if s_rel else s
            end = _llround(a + s)
        anchor_i = _llround(a)
        window.append((anchor_i, end - anchor_i))
    return window


def _source_index(index: torch.Tensor, extent: int, policy: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Where each output position along one axis reads, and whether it is inside (for "pad")."""
    inside = (index >= 0) & (index < extent)
    if policy == "clamp":
        index = index.clamp(0, extent - 1)
    elif policy == "wrap":
        index = index % extent
    elif policy == "reflect_1001":
        m = index % (2 * extent)
        index = torch.where(m < extent, m, 2 * extent - 1 - m)
    elif policy == "reflect_101":
        if extent == 1:
            index = torch.zeros_like(index)
        else:
            m = index % (2 * extent - 2)
            index = torch.where(m < extent, m, 2 * extent - 2 - m)
    return index.clamp(0, max(0, extent - 1)), inside


def slice_window(data: torch.Tensor, axes: list[int], window, policy: str, fill: torch.Tensor,
                 channel_axis: int | None) -> torch.Tensor:
    """``data`` cut to ``window`` ((anchor, size) for each of ``axes``), DALI's out-of-bounds policy
    applied; float64 values (exact for every integer input type)."""
    extents = [int(data.shape[a]) for a in axes]
    if any(size < 0 for _, size in window):
        raise ValueError(f"fn.slice: the slice shape must not be negative, got {[s for _, s in window]}")
    out_of_bounds = any(a < 0 or a + s > e for (a, s), e in zip(window, extents))
    if policy == "error" and out_of_bounds:
        raise ValueError(f"fn.slice: the slice (anchor, shape) {window} of axes {axes} is out of the input's "
                         f"bounds {extents} with out_of_bounds_policy='error'; use 'pad' or 'trim_to_shape'")
    if policy == "trim_to_shape":
        window = [(max(0, a), max(0, min(e, a + s) - max(0, a))) for (a, s), e in zip(window, extents)]
    if any(e == 0 for e in extents) and policy not in ("pad", "error", "trim_to_shape") and out_of_bounds:
        raise ValueError("fn.slice: cannot read out of bounds of an empty axis except with 'pad'")
    out = data.double()
    inside = torch.ones(data.shape, dtype=torch.bool)
    for axis, (anchor, size), extent in zip(axes, window, extents):
        index, valid = _source_index(torch.arange(anchor, anchor + size), extent, policy)
        if extent == 0:  # nothing to read: every position is padding
            shape = list(out.shape)
            shape[axis] = size
            out = torch.zeros(shape, dtype=torch.float64)
            inside = torch.zeros(shape, dtype=torch.bool)
            continue
        out, inside = out.index_select(axis, index), inside.index_select(axis, index)
        view = [1] * out.dim()
        view[axis] = -1
        inside = inside & valid.view(view)
    if policy != "pad":
        return out
    view = [1] * out.dim()
    if channel_axis is not None and fill.numel() > 1:
        view[channel_axis] = -1
        cut = [w for a, w in zip(axes, window) if a == channel_axis]
        if cut:  # the channel axis itself sliced: each kept channel keeps its own fill value
            anchor, size = cut[-1]
            if anchor < 0 or anchor + size > fill.numel():
                raise NotImplementedError("fastload.compat.dali: fn.slice: a window past the channels with a "
                                          "fill value per channel is not supported")
            fill = fill[anchor:anchor + size]
    return torch.where(inside, out, fill.view(view) if fill.numel() > 1 else fill.reshape(()))


def sliced(data: torch.Tensor, axes: list[int], window, policy: str, fill: torch.Tensor, channel_axis: int | None,
           target: torch.dtype) -> torch.Tensor:
    """fn.slice of one sample: :func:`slice_window` converted to ``target`` as DALI's ConvertSat; a window
    inside the data, to the data's own type, is a copy of the slice (the same values, without the float64 pass)."""
    extents = [int(data.shape[a]) for a in axes]
    if (target == data.dtype and target in _EXACT_IN_DOUBLE and _inside(window, extents)
            and len(set(axes)) == len(axes)):
        return _cut(data, axes, window)
    return convert_sat(slice_window(data, axes, window, policy, fill, channel_axis), target)


def _inside(window, extents) -> bool:
    """Whether every (anchor, size) of ``window`` lies inside its axis: no policy applies, nothing is filled."""
    return all(0 <= anchor and 0 <= size and anchor + size <= extent for (anchor, size), extent in zip(window, extents))


def _cut(data: torch.Tensor, axes: list[int], window) -> torch.Tensor:
    """:func:`slice_window` of a window inside ``data``, to its own type: a contiguous copy of the slice, which
    the float64 values and their conversion back (``_EXACT_IN_DOUBLE``: no value changes) come to."""
    index = [builtins.slice(None)] * data.dim()
    for axis, (anchor, size) in zip(axes, window):
        index[axis] = builtins.slice(anchor, anchor + size)  # (this module's `slice` is fn.slice)
    return data[tuple(index)].clone(memory_format=torch.contiguous_format)


def _cast_fill(values, dtype: torch.dtype) -> torch.Tensor:
    """Fill values in ``dtype``, as float64: DALI converts them with a plain C cast (measured: -1 pads
    uint8 with 255), truncated toward zero and wrapped into an integer type."""
    values = [float(v) for v in values]
    if dtype.is_floating_point:
        return torch.tensor(values, dtype=torch.float64).to(dtype).double()
    return torch.tensor([math.trunc(v) for v in values], dtype=torch.int64).to(dtype).double()


def _fill(fill_values, dtype: torch.dtype, channels: int | None) -> torch.Tensor:
    values = list(fill_values) if isinstance(fill_values, (list, tuple)) else [fill_values]
    if len(values) > 1 and channels is not None and len(values) != channels:
        raise ValueError(f"fn.slice: fill_values has {len(values)} values for {channels} channels")
    return _cast_fill(values, dtype)


_SLICE_NAMED = ("start", "rel_start", "end", "rel_end", "shape", "rel_shape")


@operator("slice", "Slice")
def slice(data, anchor=None, shape=None, *, axes=None, axis_names=None, normalized_anchor=True,
          normalized_shape=True, out_of_bounds_policy="error", fill_values=0.0, dtype=None, output_dtype=None,
          image_type=None, device=None, **args):
    """``fn.slice``: a window of any-dimensional data, given by ``anchor``/``shape`` inputs or by the
    named arguments start/rel_start with end/rel_end/shape/rel_shape, along ``axis_names`` (default "WH")
    or ``axes``; out of bounds: "error", "pad"/"constant" (``fill_values``, per channel when the layout has
    C), "trim_to_shape", "edge"/"clamp", "reflect"/"reflect_1001", "reflect_101", "wrap". ``dtype``
    converts (saturating, rounding halves away from zero)."""
    named = {k: args.pop(k) for k in _SLICE_NAMED if k in args}
    check_args("fn.slice", args, set())
    if anchor is not None and shape is None and not isinstance(anchor, DataNode):
        raise ValueError("fn.slice: give both anchor and shape inputs, or neither")
    positional = isinstance(anchor, DataNode)
    if not positional and shape is not None:  # fn.slice(data, shape=[...]): the named argument
        named["shape"], shape = shape, None
    if positional and named:
        raise ValueError(f"fn.slice: named arguments {', '.join(sorted(named))} are incompatible with the "
                         f"anchor and shape inputs")
    policy = _POLICIES.get(str(out_of_bounds_policy))
    if policy is None:
        raise ValueError(f"fn.slice: unknown out_of_bounds_policy {out_of_bounds_policy!r}")
    layout = data.layout()
    out_type = dtype if dtype is not None else output_dtype
    settings = {name: (value if isinstance(value, DataNode) else _flat(value, name)) for name, value in
                named.items()}
    settings.update(policy=policy, fill=_flat(fill_values, "fill_values"),
                    dtype=torch_dtype(out_type) if out_type is not None else None)
    axes_arg = axes if not isinstance(axes, (list, tuple)) else tuple(int(a) for a in axes)

    def run(ctx, op, x, *window_inputs, policy, fill, dtype, **named_values):
        axis_list = _axes(layout, x.dim(), axes_arg, axis_names, "fn.slice")
        extents = [int(x.shape[a]) for a in axis_list]
        if window_inputs:
            window = _input_window(extents, window_inputs[0], window_inputs[1], bool(normalized_anchor),
                                   bool(normalized_shape))
        else:
            window = _named_window(extents, named_values)
        target = x.dtype if dtype is None else dtype
        channel_axis = layout.index("C") if "C" in layout and len(layout) == x.dim() else None
        values = _fill(fill, target, x.shape[channel_axis] if channel_axis is not None else None)
        return sliced(x, axis_list, window, policy, values, channel_axis, target)
    inputs = [data, anchor, shape] if positional else [data]
    return _one(Op("slice", run, inputs, settings, device=_device(inputs, device), layouts=(layout,),
                   fusable=False))


def _pad_sample(x: torch.Tensor, axes: list[int], shape, align, fill_value) -> torch.Tensor:
    extents = list(x.shape)
    out_shape = list(x.shape)
    for i, axis in enumerate(axes):
        target = int(shape[i]) if shape is not None else -1
        if target <= 0:
            raise NotImplementedError("fastload.compat.dali: fn.pad without a positive `shape` for every padded "
                                      "axis pads to the batch's largest sample, which needs the whole batch; "
                                      "fastload runs operators per sample: give `shape` (1 for alignment only)")
        extent = max(target, extents[axis])
        a = int(align[i]) if align is not None else 1
        if a > 1:
            extent = (extent + a - 1) // a * a
        out_shape[axis] = extent
    out = _cast_fill([fill_value], x.dtype).to(x.dtype).expand(out_shape).clone()
    out[tuple(builtins.slice(0, n) for n in extents)] = x
    return out


@operator("pad", "Pad")
def pad(data, *, axes=None, axis_names=None, shape=None, align=None, fill_value=0.0, device=None, **args):
    """``fn.pad``: each sample padded at the end of ``axes`` (or ``axis_names``; default all) with
    ``fill_value`` to ``shape`` (a sample larger keeps its extent), then up to a multiple of ``align``.
    Padding to the batch's largest sample (no ``shape``, or -1) is refused: it needs the whole batch."""
    check_args("fn.pad", args, set())
    if axes is not None and axis_names is not None:
        raise ValueError("fn.pad: axes and axis_names are mutually exclusive")
    layout = data.layout()
    axes_arg = tuple(int(a) for a in (axes if isinstance(axes, (list, tuple)) else [axes])) \
        if axes is not None else None
    settings = {"shape": shape if isinstance(shape, DataNode) else (
                    tuple(int(v) for v in _flat(shape, "shape")) if shape is not None else None),
                "align": align if isinstance(align, DataNode) else (
                    tuple(int(v) for v in _flat(align, "align")) if align is not None else None),
                "fill_value": fill_value}
    if shape is None or (not isinstance(shape, DataNode) and min(settings["shape"]) <= 0):
        raise NotImplementedError("fastload.compat.dali: fn.pad without a positive `shape` for every padded axis "
                                  "pads to the batch's largest sample, which needs the whole batch; fastload runs "
                                  "operators per sample: give `shape` (1 for alignment only)")

    def run(ctx, op, x, shape, align, fill_value):
        if axis_names:
            axis_list = [layout.index(n) for n in axis_names]
        elif axes_arg:
            axis_list = [a % x.dim() for a in axes_arg]
        else:
            axis_list = list(range(x.dim()))
        shape = shape if isinstance(shape, tuple) else (shape,)
        if len(shape) == 1 and len(axis_list) > 1:
            shape = shape * len(axis_list)
        if align is not None:
            align = align if isinstance(align, tuple) else (align,)
            align = align * len(axis_list) if len(align) == 1 else align
        return _pad_sample(x, axis_list, shape, align, fill_value)
    return _one(Op("pad", run, [data], settings, device=_device([data], device), layouts=(layout,),
                   fusable=False))


# ---------------------------------------------------------------------------------------------- color


@operator("peek_image_shape", "PeekImageShape",
          aliases={"experimental.peek_image_shape": "experimental.PeekImageShape"})
def peek_image_shape(data, *, dtype=None, image_type=None, adjust_orientation=True, device=None, **args):
    """``fn.peek_image_shape``: (H, W, C) of each encoded image from its header, without decoding it
    (int64 unless ``dtype``); H and W swapped for an EXIF orientation that turns the image (5-8) when
    ``adjust_orientation``; C is 3 for RGB/BGR/YCbCr, 1 for GRAY."""
    check_args("fn.peek_image_shape", args, set())
    kind = image_type_name(image_type) if image_type is not None else "RGB"
    channels = {"RGB": 3, "BGR": 3, "YCbCr": 3, "GRAY": 1}.get(kind)
    if channels is None:
        raise NotImplementedError(f"fastload.compat.dali: fn.peek_image_shape(image_type={kind}) is not "
                                  f"supported (RGB, BGR, YCbCr, GRAY)")
    target = torch_dtype(dtype) if dtype is not None else torch.int64

    def run(ctx, op, encoded):
        from PIL import Image
        try:
            image = Image.open(io.BytesIO(bytes(encoded.numpy())))
        except Exception as error:
            from ...errors import DecodeError
            raise DecodeError(ctx.index, ctx.name, f"cannot read the image's header: {error}") from error
        width, height = image.size
        if adjust_orientation and image.getexif().get(0x0112, 1) in (5, 6, 7, 8):
            width, height = height, width
        return convert_sat(torch.tensor([height, width, channels], dtype=torch.int64), target)
    return _one(Op("peek_image_shape", run, [data], {}, device="cpu", layouts=("",), fusable=False))


# ITU-R BT.601 studio range: Y = 16 + 219/255 * luma, chroma = 128 + 224/255 * (colour difference), with
# Kr = 0.299, Kb = 0.114 (measured: DALI 2.4's CPU operator gives exactly these, as its YCbCr decoder does)
_KR, _KB = 0.299, 0.114
_KG = 1 - _KR - _KB
_Y_SCALE, _C_SCALE = 255 / 219, 255 / 224


def _ycbcr_to_rgb(x: torch.Tensor) -> torch.Tensor:
    """YCbCr (studio range) values to RGB, the exact inverse in float64, rounded and saturated."""
    x = x.double()
    y, cb, cr = (x[..., 0] - 16) * _Y_SCALE, (x[..., 1] - 128) * _C_SCALE, (x[..., 2] - 128) * _C_SCALE
    r = y + 2 * (1 - _KR) * cr
    g = y - 2 * (1 - _KB) * _KB / _KG * cb - 2 * (1 - _KR) * _KR / _KG * cr
    b = y + 2 * (1 - _KB) * cb
    return convert_sat(torch.stack([r, g, b], -1), torch.uint8)


def _rgb_to_gray(rgb: torch.Tensor) -> torch.Tensor:
    """RGB (uint8) to luma as OpenCV's cvtColor(RGB2GRAY), which DALI's CPU operator calls: 15-bit fixed
    point, (9798 R + 19235 G + 3735 B + 2^14) >> 15 (0.299, 0.587, 0.114; measured equal on 16,384 pixels)."""
    x = rgb.to(torch.int64)
    y = (x[..., 0] * 9798 + x[..., 1] * 19235 + x[..., 2] * 3735 + (1 << 14)) >> 15
    return y.to(torch.uint8).unsqueeze(-1)


def convert_color(image: torch.Tensor, source: str, target: str) -> torch.Tensor:
    """One uint8 image (channels last) from colour space ``source`` to ``target``: RGB/BGR swap channels,
    GRAY to colour repeats the channel, colour to GRAY is OpenCV's fixed-point luma (``_rgb_to_gray``),
    YCbCr is BT.601 studio range (colour._rgb_to_ycbcr and its exact inverse), GRAY <-> YCbCr rescales
    Y (Cb = Cr = 128)."""
    if source == target:
        return image.clone()
    if source == "GRAY":
        if target == "YCbCr":
            y = convert_sat(image.double() / _Y_SCALE + 16, torch.uint8)
            return torch.cat([y, torch.full_like(y, 128), torch.full_like(y, 128)], -1)
        return image.expand(*image.shape[:-1], 3).contiguous()
    if source == "YCbCr" and target == "GRAY":
        return convert_sat((image[..., :1].double() - 16) * _Y_SCALE, torch.uint8)
    rgb = {"RGB": image, "BGR": image.flip(-1), "YCbCr": None}[source]
    if rgb is None:
        rgb = _ycbcr_to_rgb(image)
    if target == "RGB":
        return rgb.contiguous()
    if target == "BGR":
        return rgb.flip(-1).contiguous()
    if target == "GRAY":
        return _rgb_to_gray(rgb)
    return _rgb_to_ycbcr(rgb)


_SPACES = {"RGB": 3, "BGR": 3, "YCbCr": 3, "GRAY": 1}


@operator("color_space_conversion", "ColorSpaceConversion")
def color_space_conversion(images, *, image_type, output_type, device=None, **args):
    """``fn.color_space_conversion`` between RGB, BGR, YCbCr (BT.601 studio range) and GRAY (OpenCV's luma),
    on uint8 images (channels last), as DALI's CPU operator computes them; other types and spaces refused."""
    check_args("fn.color_space_conversion", args, set())
    source, target = image_type_name(image_type), image_type_name(output_type)
    for kind in (source, target):
        if kind not in _SPACES:
            raise NotImplementedError(f"fastload.compat.dali: fn.color_space_conversion of {kind} is not supported "
                                      f"(RGB, BGR, YCbCr, GRAY)")

    def run(ctx, op, image):
        if image.dtype != torch.uint8:
            raise NotImplementedError(f"fastload.compat.dali: fn.color_space_conversion of {image.dtype} is not "
                                      f"supported (uint8)")
        if image.shape[-1] != _SPACES[source]:
            raise ValueError(f"fn.color_space_conversion: {source} input must have {_SPACES[source]} channels, "
                             f"got {image.shape[-1]}")
        return convert_color(image, source, target)
    return _one(Op("color_space_conversion", run, [images], {}, device=_device([images], device),
                   layouts=(images.layout(),), fusable=False))
