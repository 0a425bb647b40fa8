"""DALI's image filters: ``fn.gaussian_blur``, ``fn.laplacian``, ``fn.filter`` (and its deprecated
``fn.experimental.filter``) and ``fn.experimental.debayer`` (and ``fn.debayer``).

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_filters.py); the rules below
are the ones measured there:

- ``gaussian_blur`` / ``laplacian``: DALI's separable convolution, one 1-D pass per spatial axis (the
  layout's axes less ``C`` and ``F``; ``F`` and ``C`` are run through untouched), innermost axis first,
  each pass a float32 sum over the window from its first tap to its last, the borders reflected without
  repeating the edge (reflect-101, also for windows wider than the image); the outermost pass also scales.
  Integer outputs are rounded half away from zero and saturated (ConvertSat). Per-axis values are in the
  layout's order (``[sigma_H, sigma_W]`` for HWC).
- ``gaussian_blur``'s window: ``exp(-x^2 / (2 sigma^2))`` in float32, normalised by the reciprocal of its
  sum (the centre tap is that reciprocal); no ``window_size`` means ``2 ceil(3 sigma) + 1``, no ``sigma``
  means OpenCV's ``0.3 (r - 1) + 0.8``.
- ``laplacian``: OpenCV's windows: smoothing ones are binomial coefficients, derivative ones those
  convolved with ``[1, -2, 1]``. Each axis's partial derivative is its own separable convolution (one 1-D
  pass when every smoothing window is 1); without ``smoothing_size``, derivative ``i`` is smoothed with
  ``window_size[i]`` along every other axis (not each axis's own ``window_size``). Each is scaled by
  ``scale`` (or ``2^-(s - n - 2)`` with ``normalized_kernel``, ``s`` the sum of that derivative's window
  sizes), summed in float32 from the outermost axis, converted once.
- Exact (tolerance 0) for uint8, int16 and float32 inputs; float64 inputs are refused (DALI computes them
  in double).
- ``filter``: DALI's CPU operator is OpenCV's ``filter2D``: a correlation (the filter not flipped), its
  non-zero taps summed in row-major order in float32 from 0, the filter's anchor at ``anchor`` (default
  its middle, rounded down); borders reflect-101, reflect-1001, wrap, clamp or ``constant`` (the scalar
  third input, 0 without it); ``mode="valid"`` keeps only the positions the filter covers fully. Integer
  outputs are rounded half to even (OpenCV's cvRound), not half away, and saturated. OpenCV's
  vectorised loop (8 floats of a row at a time, measured on an AVX2 machine) multiplies and adds in one
  fused step for float32 inputs and for 16-bit inputs kept in their type, and the row's last
  ``(W * C) % 8`` values in two steps; uint8 inputs, and float outputs of integer inputs, always in two.
  All of this is reproduced: exact for uint8, int16, uint16 and float32. Filters of 50 taps or more (130
  for uint8 to uint8 and float32 to float32; zero taps counted) OpenCV applies through a DFT instead,
  except with border ``wrap``, a non-zero ``fill_value`` or ``mode="valid"`` (all measured through DALI):
  fastload computes those correlations in float64 with numpy's FFT, in time independent of the filter's
  size, rounded to float32: exact for float32 and 16-bit inputs (OpenCV's DFT is in float64 there); float
  outputs of uint8 inputs within a few float32 ulps (measured: 3e-5 at values up to 255); uint8 outputs
  within 1, where a value lies near a rounding tie (OpenCV's DFT of uint8 outputs is in float32; one
  pixel of a 201 x 201 filter's 64 x 64 x 3 output differed, none in the tests). The direct sum (smaller
  filters, and wrap, fill, valid) takes one pass over the image per non-zero tap: a 201 x 201 filter with
  ``border="wrap"`` on a 64 x 64 RGB image takes about 1 s (uint8) to 20 s (float32, the fused steps) per
  sample, growing as OpenCV's direct sum does.
- ``debayer``: OpenCV's ``cvtColor`` from a Bayer mosaic (``blue_position`` (y, x) is the blue sensor of
  the 2x2 tile starting at row 1, column 1), in integers: ``bilinear_ocv`` (the default) averages the 4
  cross or 4 diagonal neighbours ``(sum + 2) >> 2`` or the 2 neighbours in line ``(a + b + 1) >> 1``;
  ``gray_ocv`` weighs R, G, B by 4899, 9617, 1868 (/ 2^14) at the same neighbours, rounded by shifting;
  the first and last columns then rows repeat their neighbours; a mosaic 2 pixels high or wide comes out
  black. Exact for uint8 and uint16.
  ``edgeaware_ocv`` and ``vng_ocv`` are refused.

DALI's GPU variants of these operators are other kernels (CUDA convolutions, NPP), not matched here: each
is refused on the GPU by name (``cpu_only``); run it before ``.gpu()``.

Where the extension is built, the convolution passes of uint8 and float32 data (and gaussian_blur of an HWC
image, both passes at once) run in native code (``_native_effects.c``), the numpy version their fallback and
their tests' reference (tests/compat/test_dali_native_effects.py).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..engine.conversions import convert_sat
from ..float32 import fmaf
from ..engine.graph import Op
from .operators import _device, _one, check_args
from .spec import operator
from .types import torch_dtype

try:  # the passes in native code where the extension was built (fastload.compat.dali._native_effects)
    from . import _native_effects as _native
except ImportError:  # pragma: no cover - the numpy versions below are the fallback (and the tests' reference)
    _native = None

_F32 = np.float32
_NATIVE_TYPES = {np.dtype(np.uint8): "B", np.dtype(np.float32): "f"}
_NATIVE_OUT = {torch.uint8: "B", torch.float32: "f"}
# input types whose products with a float32 window are float32 in DALI's kernels (float64 would be double)
_FLOAT32_MATH = (torch.uint8, torch.int8, torch.uint16, torch.int16, torch.int32, torch.float16, torch.float32)


# ------------------------------------------------------------------------------------- shared machinery

def cpu_only(operator: str, inputs: list, device: str | None, gpu_kernel: str) -> str:
    """The device to run on, "cpu"; a refusal naming ``operator`` where it would be the GPU: DALI's GPU operator
    is another kernel (``gpu_kernel``), whose values were not matched; fastload gives the CPU operator's."""
    if _device(inputs, device) != "cpu":
        raise NotImplementedError(f"fastload.compat.dali: {operator} on the GPU is not supported (DALI's GPU operator "
                                  f"is {gpu_kernel}, not checked against its CPU operator, whose values fastload "
                                  f"gives): run it before .gpu()")
    return "cpu"


def spatial_axes(operator: str, layout: str, ndim: int) -> list[int]:
    """The data axes DALI's convolutions run along: the layout's less channels (C) and frames (F); data
    without a layout is taken as 2-D (HW) only."""
    if not layout:
        if ndim != 2:
            raise NotImplementedError(f"fastload.compat.dali: {operator} of {ndim}-D data without a layout is not "
                                      f"supported; give the input a layout (HWC, CHW, FHWC, DHWC...)")
        return [0, 1]
    if len(layout) != ndim:
        raise ValueError(f"fastload.compat.dali: {operator}: layout {layout!r} does not match {ndim}-D data")
    axes = [i for i, name in enumerate(layout) if name not in "CF"]
    if not 1 <= len(axes) <= 3:
        raise ValueError(f"fastload.compat.dali: {operator}: {len(axes)} spatial axes in layout {layout!r} "
                         f"(1, 2 or 3 are supported, as in DALI)")
    return axes


def reflect_101(index: np.ndarray, extent: int) -> np.ndarray:
    """Positions reflected into [0, extent) without repeating the edge (``dcb|abcd|cba``), any distance out."""
    if extent == 1:
        return np.zeros_like(index)
    period = 2 * extent - 2
    folded = np.mod(np.abs(index), period)
    return np.where(folded < extent, folded, period - folded)


def correlate_axis(data: np.ndarray, window: np.ndarray, axis: int, scale=None) -> np.ndarray:
    """One 1-D pass of DALI's CPU convolution along ``axis``: the window's taps (not flipped) summed
    from the first to the last in the window's type (float32), reflect-101 borders; times ``scale``."""
    window = np.asarray(window)
    if _native is not None and window.dtype == _F32 and data.dtype in _NATIVE_TYPES and len(window):
        return _native_correlate(data, window, axis, scale)
    radius = (len(window) - 1) // 2
    extent = data.shape[axis]
    acc = np.zeros(data.shape, dtype=window.dtype)
    positions = np.arange(extent)
    for k, tap in enumerate(window):
        taken = np.take(data, reflect_101(positions - radius + k, extent), axis=axis).astype(window.dtype)
        acc = acc + tap * taken
    if scale is not None:
        acc = acc * window.dtype.type(scale)
    return acc


def _native_correlate(data: np.ndarray, window: np.ndarray, axis: int, scale) -> np.ndarray:
    """``correlate_axis`` in native code (``_native_effects.c`` correlate): each value's taps summed in the same
    order in float32, one pass with the GIL released, instead of a gather and two full temporaries per tap."""
    src = np.ascontiguousarray(data)
    shape = src.shape
    out = np.empty(shape, dtype=_F32)
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    _native.correlate(src, out, outer, shape[axis], inner, _NATIVE_TYPES[src.dtype], np.ascontiguousarray(window),
                      None if scale is None else float(_F32(scale)))
    return out


def separable(data: np.ndarray, windows: list[np.ndarray], axes: list[int], scale=None) -> np.ndarray:
    """DALI's SeparableConvolutionCpu: ``windows[i]`` along ``axes[i]``, innermost axis first, the last
    pass (the outermost axis) scaled."""
    out = data
    for i in reversed(range(len(axes))):
        out = correlate_axis(out, windows[i], axes[i], scale if i == 0 else None)
    return out


def _per_axis(operator: str, name: str, value, count: int, kind=float) -> list:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(values) == 1:
        values = values * count
    if len(values) != count:
        raise ValueError(f"fastload.compat.dali: {operator}: {name} has {len(values)} values for {count} spatial "
                         f"axes (give one, or one per axis)")
    return [kind(v) for v in values]


def _working_array(operator: str, data: torch.Tensor) -> np.ndarray:
    if data.dtype not in _FLOAT32_MATH:
        raise NotImplementedError(f"fastload.compat.dali: {operator} of {data.dtype} input is not supported "
                                  f"(DALI computes it in another precision); uint8, int8, uint16, int16, int32, "
                                  f"float16 and float32 are")
    return data.cpu().numpy()


def _out_type(operator: str, dtype) -> torch.dtype | None:
    if dtype is None:
        return None
    out = torch_dtype(dtype)
    if out != torch.float32:
        raise ValueError(f"fastload.compat.dali: {operator}: dtype must be FLOAT or left out (the input's type), "
                         f"as in DALI")
    return out


def _finish(values: np.ndarray, like: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    if _native is not None and values.dtype == _F32 and (dtype or like.dtype) == torch.uint8:
        src = np.ascontiguousarray(values)
        out = np.empty(src.shape, dtype=np.uint8)
        _native.to_uint8(src, out, src.size)  # ConvertSat in one pass (_native_effects.c)
        return torch.from_numpy(out)
    return convert_sat(torch.from_numpy(np.ascontiguousarray(values)), dtype or like.dtype)


def _check_dtype(operator: str, image: torch.Tensor, dtype) -> None:
    if dtype is not None and dtype != image.dtype and dtype != torch.float32:
        raise ValueError(f"fastload.compat.dali: {operator}: dtype must be FLOAT or the input's type")


# -------------------------------------------------------------------------------------- gaussian blur

def gaussian_window(sigma: float, size: int) -> np.ndarray:
    """DALI's Gaussian window of ``size`` taps (float32): the half left of the centre as
    ``exp(-x^2 * (0.5 / sigma^2))``, normalised by the reciprocal of the sum (which is the centre tap)."""
    radius = (size - 1) // 2
    exp_scale = _F32(0.5) / (_F32(sigma) * _F32(sigma))
    window = np.zeros(size, dtype=_F32)
    total = _F32(0)
    for x in range(-radius, 0):
        window[x + radius] = _F32(math.exp(-float(_F32(x * x) * exp_scale)))
        total = _F32(total + window[x + radius])
    total = _F32(_F32(total * _F32(2)) + _F32(1))
    scale = _F32(_F32(1) / total)
    window[radius] = scale
    for x in range(radius):
        window[x] = _F32(window[x] * scale)
        window[2 * radius - x] = window[x]
    return window


def gaussian_params(sigmas: list[float], sizes: list[int]) -> list[tuple[float, int]]:
    """(sigma, window size) per axis as DALI fills in the one left out (0)."""
    params = []
    for sigma, size in zip(sigmas, sizes):
        if sigma < 0 or size < 0:
            raise ValueError(f"fastload.compat.dali: fn.gaussian_blur: sigma ({sigma}) and window_size ({size}) "
                             f"must not be negative")
        if sigma == 0 and size == 0:
            raise ValueError("fastload.compat.dali: fn.gaussian_blur: sigma or window_size must be given (and not 0)")
        if size == 0:
            size = int(2 * math.ceil(float(_F32(sigma) * _F32(3))) + 1)
        elif size % 2 == 0:
            raise ValueError(f"fastload.compat.dali: fn.gaussian_blur: window_size must be odd, got {size}")
        if sigma == 0:
            sigma = float(_F32(((size - 1) // 2 - 1) * 0.3 + 0.8))
        params.append((sigma, size))
    return params


def gaussian_blur_image(data: torch.Tensor, layout: str, sigma, window_size, dtype=None) -> torch.Tensor:
    """One sample blurred as DALI's CPU fn.gaussian_blur (the rules in the module docstring)."""
    axes = spatial_axes("fn.gaussian_blur", layout, data.dim())
    _check_dtype("fn.gaussian_blur", data, dtype)
    sigmas = _per_axis("fn.gaussian_blur", "sigma", sigma, len(axes))
    sizes = _per_axis("fn.gaussian_blur", "window_size", window_size, len(axes), int)
    windows = [gaussian_window(s, n) for s, n in gaussian_params(sigmas, sizes)]
    out_dtype = dtype or data.dtype
    if (_native is not None and axes == [0, 1] and data.dim() == 3 and not data.is_cuda
            and data.dtype in _NATIVE_OUT and out_dtype in _NATIVE_OUT):
        return _native_blur_hwc(data, windows, out_dtype)
    return _finish(separable(_working_array("fn.gaussian_blur", data), windows, axes), data, dtype)


def _native_blur_hwc(data: torch.Tensor, windows: list[np.ndarray], out_dtype: torch.dtype) -> torch.Tensor:
    """``separable`` and ``_finish`` of an HWC image in native code (``_native_effects.c`` blur_hwc): the row
    pass, the column pass and the conversion row by row, the image read once, with the GIL released."""
    src = data.contiguous()
    out = torch.empty(src.shape, dtype=out_dtype)
    _native.blur_hwc(src.numpy(), out.numpy(), *src.shape, _NATIVE_OUT[src.dtype], _NATIVE_OUT[out_dtype],
                     np.ascontiguousarray(windows[0], dtype=_F32), np.ascontiguousarray(windows[1], dtype=_F32))
    return out


@operator("gaussian_blur", "GaussianBlur")
def gaussian_blur(data, *, sigma=0.0, window_size=0, dtype=None, device=None, **args):
    """``fn.gaussian_blur``: a Gaussian blur along every spatial axis of images, sequences or volumes;
    ``sigma`` and ``window_size`` one value or one per axis (per sample allowed), ``dtype`` FLOAT or the
    input's type."""
    check_args("fn.gaussian_blur", args, set())
    out = _out_type("fn.gaussian_blur", dtype)
    layout = data.layout()
    settings = {"sigma": sigma, "window_size": window_size}

    def run(ctx, op, image, sigma, window_size):
        return gaussian_blur_image(image, layout, sigma, window_size, out)
    device = cpu_only("fn.gaussian_blur", [data], device, "its own CUDA separable convolution")
    return _one(Op("gaussian_blur", run, [data], settings, device=device, layouts=(layout,), fusable=False))


# ------------------------------------------------------------------------------------------ laplacian

_LAPLACIAN_MAX_WINDOW = 23


def smoothing_window(size: int) -> np.ndarray:
    """OpenCV's (and DALI's) smoothing window: binomial coefficients, ``size`` taps."""
    window = np.array([1.0])
    for _ in range(size - 1):
        window = np.convolve(window, [1.0, 1.0])
    return window.astype(_F32)


def derivative_window(size: int) -> np.ndarray:
    """The second-derivative window: ``[1, -2, 1]`` convolved with the smoothing window of ``size - 2``."""
    return np.convolve(smoothing_window(size - 2).astype(np.float64), [1.0, -2.0, 1.0]).astype(_F32)


def laplacian_image(data: torch.Tensor, layout: str, window_size, smoothing_size, scale, normalized: bool,
                    dtype=None) -> torch.Tensor:
    """One sample's Laplacian as DALI's CPU fn.laplacian (the rules in the module docstring)."""
    name = "fn.laplacian"
    axes = spatial_axes(name, layout, data.dim())
    _check_dtype(name, data, dtype)
    n = len(axes)
    derivs = _per_axis(name, "window_size", window_size, n, int)
    smooths = derivs if smoothing_size is None else _per_axis(name, "smoothing_size", smoothing_size, n, int)
    for size in derivs:
        if not (3 <= size <= _LAPLACIAN_MAX_WINDOW and size % 2):
            raise ValueError(f"fastload.compat.dali: {name}: window_size must be an odd integer between 3 and "
                             f"{_LAPLACIAN_MAX_WINDOW}, got {size}")
    for size in smooths:
        if not (1 <= size <= _LAPLACIAN_MAX_WINDOW and size % 2):
            raise ValueError(f"fastload.compat.dali: {name}: smoothing_size must be an odd integer between 1 and "
                             f"{_LAPLACIAN_MAX_WINDOW}, got {size}")
    if smoothing_size is None:  # DALI smooths derivative i with its own window_size[i] along every axis
        sizes = [[derivs[i]] * n for i in range(n)]
    else:
        sizes = [[derivs[i] if i == j else smooths[j] for j in range(n)] for i in range(n)]
    if normalized:
        scales = [float(_F32(2.0 ** -(sum(row) - n - 2))) for row in sizes]
    else:
        scales = _per_axis(name, "scale", scale, n)
    source = _working_array(name, data)
    total = None
    for i in range(n):
        windows = [derivative_window(s) if i == j else smoothing_window(s) for j, s in enumerate(sizes[i])]
        if all(sizes[i][j] == 1 for j in range(n) if j != i):
            part = correlate_axis(source, windows[i], axes[i], scales[i])
        else:
            part = separable(source, windows, axes, scales[i])
        total = part if total is None else total + part
    return _finish(total, data, dtype)


@operator("laplacian", "Laplacian")
def laplacian(data, *, window_size=3, smoothing_size=None, scale=None, normalized_kernel=False, dtype=None,
              device=None, **args):
    """``fn.laplacian``: the sum of the second derivatives along every spatial axis (OpenCV's windows);
    ``window_size``, ``smoothing_size`` and ``scale`` one value or one per axis (per sample allowed);
    ``normalized_kernel`` scales each derivative by its windows' total; ``dtype`` FLOAT or the input's."""
    check_args("fn.laplacian", args, set())
    if normalized_kernel and scale is not None:
        raise ValueError("fastload.compat.dali: fn.laplacian: scale cannot be given when normalized_kernel is True")
    out = _out_type("fn.laplacian", dtype)
    layout = data.layout()
    settings = {"window_size": window_size, "smoothing_size": smoothing_size,
                "scale": 1.0 if scale is None else scale}

    def run(ctx, op, image, window_size, smoothing_size, scale):
        return laplacian_image(image, layout, window_size, smoothing_size, scale, bool(normalized_kernel), out)
    device = cpu_only("fn.laplacian", [data], device, "its own CUDA separable convolution")
    return _one(Op("laplacian", run, [data], settings, device=device, layouts=(layout,), fusable=False))



# ------------------------------------------------------------------------------------------- filter

_BORDERS = ("reflect_101", "reflect_1001", "wrap", "clamp", "constant")
_FILTER_TYPES = (torch.uint8, torch.int16, torch.uint16, torch.float32)  # DALI's CPU filter's inputs
_OCV_LANES = 8  # floats per step of OpenCV's vectorised filter loop (AVX2), fused multiply-add there
_DFT_TAPS, _DFT_TAPS_SAME = 50, 130  # OpenCV's filter2D through a DFT from these sizes (uint8/float32 kept: 130)


def _border_index(index: np.ndarray, extent: int, border: str) -> np.ndarray:
    if border == "reflect_101":
        return reflect_101(index, extent)
    if border == "reflect_1001":
        folded = np.mod(index, 2 * extent)
        return np.where(folded < extent, folded, 2 * extent - 1 - folded)
    if border == "wrap":
        return np.mod(index, extent)
    return np.clip(index, 0, extent - 1)


def _cv_round(values: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """OpenCV's saturate_cast of float32 results: rounded half to even, clamped to the type's range."""
    info = np.iinfo({torch.uint8: np.uint8, torch.int16: np.int16, torch.uint16: np.uint16}[dtype])
    return torch.from_numpy(np.clip(np.rint(values), info.min, info.max).astype(info.dtype))


def dft_taps(in_type: torch.dtype, out_type: torch.dtype) -> int:
    """The filter size (taps, zeros counted) from which OpenCV's filter2D goes through a DFT."""
    same = in_type == out_type and in_type in (torch.uint8, torch.float32)
    return _DFT_TAPS_SAME if same else _DFT_TAPS


def _padded(plane: np.ndarray, kernel_shape: tuple[int, int], anchor: tuple[int, int], border: str, fill: float,
            valid: bool, dtype) -> tuple[np.ndarray, int, int]:
    """The values every output position's window reads, as one array (the borders filled in), in ``dtype``;
    the output's height and width: output ``(y, x)`` reads ``padded[y:y + kh, x:x + kw]``."""
    height, width = plane.shape[:2]
    kh, kw = kernel_shape
    if valid:
        out_h, out_w, (ay, ax) = height - kh + 1, width - kw + 1, (0, 0)
    else:
        out_h, out_w, (ay, ax) = height, width, anchor
    rows, cols = np.arange(out_h + kh - 1) - ay, np.arange(out_w + kw - 1) - ax
    values = plane.astype(dtype)
    if valid:
        return values[rows][:, cols], out_h, out_w
    if border == "constant":
        inside = ((rows >= 0) & (rows < height))[:, None] & ((cols >= 0) & (cols < width))[None, :]
        taken = values[np.clip(rows, 0, height - 1)][:, np.clip(cols, 0, width - 1)]
        filler = np.asarray(_F32(fill), dtype=dtype)
        return np.where(inside.reshape(inside.shape + (1,) * (values.ndim - 2)), taken, filler), out_h, out_w
    return values[_border_index(rows, height, border)][:, _border_index(cols, width, border)], out_h, out_w


def filter_plane_dft(plane: np.ndarray, kernel: np.ndarray, anchor: tuple[int, int], border: str, fill: float,
                     valid: bool) -> np.ndarray:
    """``filter_plane`` for the filters OpenCV applies through a DFT: the correlation computed in float64
    through numpy's FFT (O(n log n) in the padded image's size, whatever the filter's), rounded to float32."""
    kh, kw = kernel.shape
    padded, out_h, out_w = _padded(plane, kernel.shape, anchor, border, fill, valid, np.float64)
    size = (padded.shape[0] + kh - 1, padded.shape[1] + kw - 1)
    flipped = kernel[::-1, ::-1].astype(np.float64).reshape(kernel.shape + (1,) * (padded.ndim - 2))
    full = np.fft.irfftn(np.fft.rfftn(padded, size, axes=(0, 1)) * np.fft.rfftn(flipped, size, axes=(0, 1)),
                         size, axes=(0, 1))
    return full[kh - 1:kh - 1 + out_h, kw - 1:kw - 1 + out_w].astype(_F32)


def filter_plane(plane: np.ndarray, kernel: np.ndarray, anchor: tuple[int, int], border: str, fill: float,
                 valid: bool, fused: bool) -> np.ndarray:
    """OpenCV's filter2D of one image (H, W) or (H, W, C) as DALI calls it, in float32 (the module's rules);
    ``fused``: the vectorised part of each row multiplies and adds in one rounding (FMA). A direct sum, one
    pass over the output per non-zero tap: O(taps x pixels)."""
    kh, kw = kernel.shape
    padded, out_h, out_w = _padded(plane, kernel.shape, anchor, border, fill, valid, _F32)
    acc = np.zeros((out_h, out_w) + plane.shape[2:], dtype=_F32)
    if fused:
        split = (acc[0].size // _OCV_LANES) * _OCV_LANES  # the row's values the vector loop computes
        fused_part = np.zeros(acc[0].size, dtype=bool)
        fused_part[:split] = True
        fused_part = fused_part.reshape(acc.shape[1:])
    for i in range(kh):
        for j in range(kw):
            tap = kernel[i, j]
            if tap == 0:  # OpenCV drops zero taps
                continue
            taken = padded[i:i + out_h, j:j + out_w]
            two_steps = acc + tap * taken
            if fused:
                acc = np.where(fused_part, fmaf(tap, taken, acc), two_steps)
            else:
                acc = two_steps
    return acc


def filter_image(data: torch.Tensor, kernel: torch.Tensor, fill, layout: str, *, anchor, border: str, valid: bool,
                 dtype: torch.dtype | None) -> torch.Tensor:
    """One sample filtered as DALI's CPU fn.filter; leading frames/channels (F, C, FC) filtered one by one."""
    name = "fn.filter"
    if data.dtype not in _FILTER_TYPES:
        raise NotImplementedError(f"fastload.compat.dali: {name} of {data.dtype} input is not supported (DALI's "
                                  f"CPU operator takes uint8, int16, uint16 and float32)")
    out_type = dtype or data.dtype
    if out_type not in (data.dtype, torch.float32):
        raise ValueError(f"fastload.compat.dali: {name}: dtype must be FLOAT or the input's type")
    kernel = kernel.cpu()
    if kernel.dim() != 2:
        raise NotImplementedError(f"fastload.compat.dali: {name}: a {kernel.dim()}-D filter is not supported "
                                  f"(2-D filters; per-frame filters and volumes are not)")
    if kernel.dtype != torch.float32:
        raise TypeError(f"fastload.compat.dali: {name}: the filter must be float32, got {kernel.dtype}")
    kernel = kernel.numpy()
    if kernel.shape[0] < 1 or kernel.shape[1] < 1:
        raise ValueError(f"fastload.compat.dali: {name}: empty filter {kernel.shape}")
    if not layout:
        layout = "HW" if data.dim() == 2 else ""
    spatial = layout.replace("F", "").replace("C", "")
    lead = len(layout) - len(layout.lstrip("FC"))
    if spatial != "HW" or layout[lead:] not in ("HW", "HWC") or len(layout) != data.dim():
        raise NotImplementedError(f"fastload.compat.dali: {name} of layout {layout or 'none'!r} is not supported "
                                  f"(HW, HWC, CHW, FHW, FHWC, FCHW: DALI's CPU filter is 2-D)")
    anchors = _per_axis(name, "anchor", anchor, 2, int)
    for a, extent in zip(anchors, kernel.shape):
        if not -1 <= a < extent:
            raise ValueError(f"fastload.compat.dali: {name}: anchor {anchors} must lie within the filter "
                             f"{kernel.shape}")
    anchors = tuple(extent // 2 if a < 0 else a for a, extent in zip(anchors, kernel.shape))
    if valid and any(s < k for s, k in zip(data.shape[lead:lead + 2], kernel.shape)):
        raise ValueError(f"fastload.compat.dali: {name}: in 'valid' mode the filter {kernel.shape} must fit in the "
                         f"sample {tuple(data.shape)}")
    fill_value = 0.0
    if fill is not None:
        fill = fill.cpu()
        if fill.numel() != 1:
            raise NotImplementedError(f"fastload.compat.dali: {name}: a fill_value of {fill.numel()} values is not "
                                      f"supported (one scalar per sample)")
        fill_value = float(fill.reshape(()).item())
    fused = data.dtype == torch.float32 or (data.dtype != torch.uint8 and out_type == data.dtype)
    source = data.cpu().numpy()
    planes = source.reshape((-1,) + source.shape[lead:])
    direct = valid or border == "wrap" or (border == "constant" and fill_value != 0)  # measured through DALI
    if not direct and kernel.size >= dft_taps(data.dtype, out_type):
        results = [filter_plane_dft(p, kernel, anchors, border, fill_value, False) for p in planes]
    else:
        results = [filter_plane(p, kernel, anchors, border, fill_value, valid, fused) for p in planes]
    out = np.stack(results).reshape(source.shape[:lead] + results[0].shape)
    if out_type == torch.float32:
        return torch.from_numpy(np.ascontiguousarray(out))
    return _cv_round(out, out_type)


@operator("filter", "Filter", aliases={"experimental.filter": "experimental.Filter"})
def filter(data, filter, fill_value=None, *, anchor=-1, border="reflect_101", mode="same", dtype=None, device=None,
           **args):
    """``fn.filter``: each sample correlated with its 2-D float32 ``filter`` (the second input) as OpenCV's
    filter2D, DALI's CPU operator; ``fill_value`` (third input) pads for ``border="constant"``; ``anchor``
    (per sample allowed), ``mode`` "same" or "valid", ``dtype`` FLOAT or the input's type."""
    check_args("fn.filter", args, set())
    if border not in _BORDERS:
        raise ValueError(f"fastload.compat.dali: fn.filter: border {border!r} is not one of {', '.join(_BORDERS)}")
    if mode not in ("same", "valid"):
        raise ValueError(f"fastload.compat.dali: fn.filter: mode {mode!r} is not 'same' or 'valid'")
    out = _out_type("fn.filter", dtype)
    layout = data.layout()
    inputs = [data, filter] + ([fill_value] if fill_value is not None else [])

    def run(ctx, op, image, kernel, fill=None, *, anchor):
        return filter_image(image, kernel, fill, layout, anchor=anchor, border=border, valid=mode == "valid",
                            dtype=out)
    device = cpu_only("fn.filter", inputs, device, "its own CUDA kernel, not OpenCV's filter2D")
    return _one(Op("filter", run, inputs, {"anchor": anchor}, device=device, layouts=(layout,), fusable=False))


# ------------------------------------------------------------------------------------------- debayer

_DEBAYER_ALGORITHMS = ("bilinear_ocv", "gray_ocv")
_R2Y, _G2Y, _B2Y, _GRAY_SHIFT = 4899, 9617, 1868, 14  # OpenCV's Bayer-to-gray weights (0.299, 0.587, 0.114)


def _repeat_edges(out: np.ndarray) -> np.ndarray:
    out[:, 0], out[:, -1] = out[:, 1], out[:, -2]
    out[0], out[-1] = out[1], out[-2]
    return out


def debayer_plane(mosaic: np.ndarray, blue_y: int, blue_x: int, algorithm: str) -> np.ndarray:
    """One (H, W) Bayer mosaic to RGB (H, W, 3), or gray (H, W, 1), as OpenCV's cvtColor (the module's rules)."""
    height, width = mosaic.shape
    if height <= 2 or width <= 2:  # OpenCV leaves a mosaic this small black (measured through DALI)
        return np.zeros((height, width, 1 if algorithm == "gray_ocv" else 3), dtype=mosaic.dtype)
    x = mosaic.astype(np.int64)
    p = np.pad(x, 1, mode="edge")  # the border values are overwritten by _repeat_edges
    cross = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]
    diagonal = p[:-2, :-2] + p[:-2, 2:] + p[2:, :-2] + p[2:, 2:]
    horizontal, vertical = p[1:-1, :-2] + p[1:-1, 2:], p[:-2, 1:-1] + p[2:, 1:-1]
    ys, xs = np.mgrid[0:height, 0:width]
    blue_row = ys % 2 == (1 + blue_y) % 2
    blue = blue_row & (xs % 2 == (1 + blue_x) % 2)
    red = ~blue_row & (xs % 2 == blue_x % 2)
    if algorithm == "gray_ocv":
        half = 1 << _GRAY_SHIFT
        at_blue = (diagonal * _R2Y + cross * _G2Y + x * 4 * _B2Y + 2 * half) >> (_GRAY_SHIFT + 2)
        at_red = (diagonal * _B2Y + cross * _G2Y + x * 4 * _R2Y + 2 * half) >> (_GRAY_SHIFT + 2)
        green_blue_row = (horizontal * _B2Y + vertical * _R2Y + x * 2 * _G2Y + half) >> (_GRAY_SHIFT + 1)
        green_red_row = (horizontal * _R2Y + vertical * _B2Y + x * 2 * _G2Y + half) >> (_GRAY_SHIFT + 1)
        out = np.where(blue, at_blue, np.where(red, at_red, np.where(blue_row, green_blue_row, green_red_row)))
        return _repeat_edges(out[..., None]).astype(mosaic.dtype)
    cross, diagonal = (cross + 2) >> 2, (diagonal + 2) >> 2
    horizontal, vertical = (horizontal + 1) >> 1, (vertical + 1) >> 1
    r = np.where(red, x, np.where(blue, diagonal, np.where(blue_row, vertical, horizontal)))
    b = np.where(blue, x, np.where(red, diagonal, np.where(blue_row, horizontal, vertical)))
    g = np.where(blue | red, cross, x)
    return _repeat_edges(np.stack([r, g, b], -1)).astype(mosaic.dtype)


def debayer_image(data: torch.Tensor, layout: str, blue_position, algorithm: str) -> torch.Tensor:
    """One sample (HW, HWC with one channel, or FHW) demosaiced as DALI's CPU fn.debayer."""
    name = "fn.debayer"
    if data.dtype not in (torch.uint8, torch.uint16):
        raise NotImplementedError(f"fastload.compat.dali: {name} of {data.dtype} input is not supported "
                                  f"(uint8 and uint16, as DALI)")
    frames = layout.startswith("F")
    if layout.endswith("C"):
        if data.shape[-1] != 1:
            raise ValueError(f"fastload.compat.dali: {name}: the input must have one channel, got {data.shape[-1]}")
        data = data[..., 0]
    height, width = data.shape[-2:]
    if height % 2 or width % 2:
        raise ValueError(f"fastload.compat.dali: {name}: the height and width of the image must be even, got "
                         f"{height} x {width}")
    position = [int(v) for v in (blue_position if isinstance(blue_position, (list, tuple)) else [blue_position])]
    if len(position) != 2 or any(v not in (0, 1) for v in position):
        raise ValueError(f"fastload.compat.dali: {name}: blue_position must be two values of 0 or 1, got {position}")
    planes = data.cpu().numpy().reshape((-1, height, width))
    out = np.stack([debayer_plane(plane, position[0], position[1], algorithm) for plane in planes])
    return torch.from_numpy(out if frames else out[0])


@operator("debayer", "Debayer", aliases={"experimental.debayer": "experimental.Debayer"})
def debayer(data, *, blue_position=None, algorithm=None, device=None, **args):
    """``fn.debayer``: Bayer mosaics (HW, one-channel HWC, or FHW sequences; uint8 or uint16) to RGB (HWC),
    or gray with ``algorithm="gray_ocv"``; ``blue_position`` (per sample allowed) says where the blue
    sensor is. DALI's CPU algorithms ``bilinear_ocv`` (the default) and ``gray_ocv``."""
    name = "fn.debayer"
    check_args(name, args, set())
    if blue_position is None:
        raise ValueError(f"fastload.compat.dali: {name} needs blue_position")
    device = cpu_only(name, [data], device, "NPP's default_npp demosaicing")
    algorithm = "bilinear_ocv" if algorithm is None else algorithm
    if algorithm not in _DEBAYER_ALGORITHMS:
        raise NotImplementedError(f"fastload.compat.dali: {name}(algorithm={algorithm!r}) is not supported "
                                  f"({', '.join(_DEBAYER_ALGORITHMS)} are: OpenCV's edge-aware and VNG "
                                  f"demosaicing are not reproduced)")
    layout = data.layout() or "HW"
    if layout not in ("HW", "HWC", "FHW", "FHWC"):
        raise NotImplementedError(f"fastload.compat.dali: {name} of layout {layout!r} is not supported "
                                  f"(HW, HWC, FHW, FHWC with one channel)")

    def run(ctx, op, image, blue_position):
        return debayer_image(image, layout, blue_position, algorithm)
    out_layout = "FHWC" if layout.startswith("F") else "HWC"
    return _one(Op("debayer", run, [data], {"blue_position": blue_position}, device=device, layouts=(out_layout,),
                   fusable=False))
