"""DALI's operators that move or mask pixels by a coordinate rule: ``fn.grid_mask`` and
``fn.experimental.warp_perspective``.

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_remap.py); the rules below are
the ones measured there:

- ``grid_mask``: pixel (y, x) is kept where ``frac(fx) >= ratio`` or ``frac(fy) >= ratio``, with, in
  float32, ``ca = cosf(angle) / tile``, ``sa = sinf(angle) / tile``, ``fx = (-shift_x / tile - y sa) + x ca``
  and ``fy = (-shift_y / tile + y ca) + x sa``; the others are zeroed, every channel. Exact (tolerance 0).
  DALI reads any 3-D sample as (H, W, C); uint8, int16, int32 and float32, as DALI. uint8 and float32 run
  in native code where the extension is built (``_native_effects.c``), the numpy mask their fallback and
  their tests' reference.
- ``experimental.warp_perspective``: DALI's CPU operator is OpenCV 5's ``warpPerspective``. The 3x3 matrix
  (float32) is first, for ``pixel_origin="corner"`` (the default), conjugated by half-pixel shifts in float32
  (``shift_back @ (M @ shift)``), then, for ``inverse_map=False``, inverted in double (OpenCV's adjugate over
  the determinant). uint8, uint16 and float32 images take OpenCV's float32 kernels: the matrix as float32,
  source points ``fma(M0, x, M1 y + M2) / fma(M6, x, M7 y + M8)`` on each row's first ``W // 16 * 16`` output
  columns (its AVX2 loop) and ``(fma(x, M0, y M1) + M2) / (...)`` on the rest; nearest rounds the point half
  to even; linear takes ``floor`` and interpolates ``p0 + a (p1 - p0)`` with one rounding, along x then y,
  rounded half to even into integers. int16 images take OpenCV's older kernel: double points quantised to
  1/32 pixel, float32 bilinear weights. Borders: constant (``fill_value``, rounded half to even; a point
  whose 2x2 block is wholly outside is the fill value), replicate, reflect, reflect_101, wrap. Exact
  (tolerance 0) for all four types, both interpolations, every border, measured on an AVX2 machine (the
  16-column split is the vector width). DALI reads a batch's channel count from its first sample: keep
  one channel count per batch. Where the extension is built, the float32 kernels run in native code
  (``_native_warp.c``), the numpy version their fallback and their tests' reference.

Both are refused on the GPU (DALI's GPU operators are its own CUDA kernel and CV-CUDA's, not matched).
DALI 2.4 has no CPU operator for ``fn.experimental.remap``, ``fn.experimental.median_blur``,
``fn.experimental.erode``, ``fn.experimental.dilate`` or ``fn.jitter`` (GPU-only: ``GPU_ONLY``); fastload runs
the CPU operators, so those names are refused.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ..engine.graph import DataNode, Op
from ..float32 import fmaf, libm_float, round_c
from .filters import cpu_only
from .operators import _one, check_args
from .gpu_only import REASON as GPU_ONLY_REASON
from .spec import operator, refused
from .types import interp_name

try:  # grid_mask in native code where the extension was built
    from . import _native_effects as _native
except ImportError:  # pragma: no cover - the numpy version below is the fallback (and the tests' reference)
    _native = None

try:  # warp_perspective's float32 kernels in native code where the extension was built
    from . import _native_warp
except ImportError:
    _native_warp = None

_F32 = np.float32

# DALI 2.4 operators registered for the GPU only (checked against its registry by the tests): fn name -> ops name
GPU_ONLY = {"experimental.remap": "experimental.Remap", "experimental.median_blur": "experimental.MedianBlur",
            "experimental.erode": "experimental.Erode", "experimental.dilate": "experimental.Dilate",
            "jitter": "Jitter"}
for _name, _ops in GPU_ONLY.items():
    refused(_name, _ops, GPU_ONLY_REASON)


# ------------------------------------------------------------------------------------------ grid mask

_GRID_TYPES = (torch.uint8, torch.int16, torch.int32, torch.float32)
_GRID_NATIVE = {torch.uint8: "B", torch.float32: "f"}  # the types _native_effects.grid_mask takes


def _grid_constants(tile: int, angle: float, shift_x: float, shift_y: float):
    """fn.grid_mask's float32 constants: the rotation's cosine and sine and the shifts, over the tile."""
    tile_f = _F32(tile)
    ca = _F32(libm_float("cos", _F32(angle)) / tile_f)
    sa = _F32(libm_float("sin", _F32(angle)) / tile_f)
    return ca, sa, _F32(_F32(shift_x) / tile_f), _F32(_F32(shift_y) / tile_f)


def grid_keep(height: int, width: int, tile: int, ratio: float, angle: float, shift_x: float,
              shift_y: float) -> np.ndarray:
    """(height, width) booleans: True where fn.grid_mask keeps the pixel (the module docstring's rule)."""
    ca, sa, sx, sy = _grid_constants(tile, angle, shift_x, shift_y)
    ys = np.arange(height, dtype=_F32)[:, None]
    xs = np.arange(width, dtype=_F32)[None, :]
    fx = (-sx + ys * -sa) + xs * ca
    fy = (-sy + ys * ca) + xs * sa
    return ((fx - np.floor(fx)) >= _F32(ratio)) | ((fy - np.floor(fy)) >= _F32(ratio))


def grid_mask_image(image: torch.Tensor, tile, ratio, angle, shift_x, shift_y) -> torch.Tensor:
    """One (H, W, C) sample with fn.grid_mask's squares zeroed."""
    if image.dim() != 3:
        raise ValueError(f"fastload.compat.dali: fn.grid_mask: expected 3-D (HWC) samples, got shape "
                         f"{tuple(image.shape)}")
    if image.dtype not in _GRID_TYPES:
        raise NotImplementedError(f"fastload.compat.dali: fn.grid_mask of {image.dtype} input is not supported "
                                  f"(uint8, int16, int32, float32, as DALI)")
    if int(tile) <= 0:
        raise ValueError(f"fastload.compat.dali: fn.grid_mask: tile must be positive, got {tile}")
    if _native is not None and image.dtype in _GRID_NATIVE and not image.is_cuda:
        src = image.contiguous()
        out = torch.empty(src.shape, dtype=src.dtype)
        ca, sa, sx, sy = _grid_constants(int(tile), float(angle), float(shift_x), float(shift_y))
        _native.grid_mask(src.numpy(), out.numpy(), *src.shape, _GRID_NATIVE[src.dtype], float(ca), float(sa),
                          float(sx), float(sy), float(_F32(float(ratio))))  # one pass (_native_effects.c)
        return out
    keep = grid_keep(image.shape[0], image.shape[1], int(tile), float(ratio), float(angle), float(shift_x),
                     float(shift_y))
    return image * torch.from_numpy(keep).to(image.device, image.dtype).unsqueeze(-1)


@operator("grid_mask", "GridMask")
def grid_mask(data, *, tile=100, ratio=0.5, angle=0.0, shift_x=0.0, shift_y=0.0, device=None, **args):
    """``fn.grid_mask``: GridMask (squares of ``ratio * tile`` zeroed every ``tile`` pixels, the grid
    rotated by ``angle`` radians and shifted by ``shift_x``/``shift_y``); every argument per sample allowed."""
    check_args("fn.grid_mask", args, set())
    settings = {"tile": tile, "ratio": ratio, "angle": angle, "shift_x": shift_x, "shift_y": shift_y}

    def run(ctx, op, image, **a):
        return grid_mask_image(image, **a)
    device = cpu_only("fn.grid_mask", [data], device, "its own CUDA kernel")
    return _one(Op("grid_mask", run, [data], settings, device=device, layouts=(data.layout(),), fusable=False))


# ------------------------------------------------------------------------------------ warp perspective

_WARP_TYPES = {torch.uint8: np.uint8, torch.int16: np.int16, torch.uint16: np.uint16, torch.float32: np.float32}
_BORDER_MODES = ("constant", "replicate", "reflect", "reflect_101", "wrap")
_INTER_BITS = 5
_INTER_TAB_SIZE = 1 << _INTER_BITS


def _det3(m: np.ndarray) -> float:
    return (m[0, 0] * (m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1]) - m[0, 1] * (m[1, 0] * m[2, 2] - m[1, 2] * m[2, 0])
            + m[0, 2] * (m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0]))


def invert_3x3(m: np.ndarray) -> np.ndarray:
    """OpenCV's ``invert`` of a 3x3 double matrix (the adjugate times 1 / det, in that order of operations)."""
    m = [[float(v) for v in row] for row in m]
    a = np.array(m)
    det = _det3(a)
    if det == 0:
        return np.zeros((3, 3))
    d = 1.0 / det
    return np.array([
        [(m[1][1] * m[2][2] - m[1][2] * m[2][1]) * d, (m[0][2] * m[2][1] - m[0][1] * m[2][2]) * d,
         (m[0][1] * m[1][2] - m[0][2] * m[1][1]) * d],
        [(m[1][2] * m[2][0] - m[1][0] * m[2][2]) * d, (m[0][0] * m[2][2] - m[0][2] * m[2][0]) * d,
         (m[0][2] * m[1][0] - m[0][0] * m[1][2]) * d],
        [(m[1][0] * m[2][1] - m[1][1] * m[2][0]) * d, (m[0][1] * m[2][0] - m[0][0] * m[2][1]) * d,
         (m[0][0] * m[1][1] - m[0][1] * m[1][0]) * d]])


def corner_to_center(m: np.ndarray) -> np.ndarray:
    """DALI's pixel_origin="corner": ``shift_back @ (m @ shift)`` in float32 (shift moves by half a pixel)."""
    m = np.asarray(m, dtype=_F32)
    shift = np.array([[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1]], dtype=_F32)
    back = np.array([[1, 0, -0.5], [0, 1, -0.5], [0, 0, 1]], dtype=_F32)

    def matmul(a, b):  # Matx's product: a float32 sum from 0, k in order
        out = np.zeros((3, 3), dtype=_F32)
        for i in range(3):
            for j in range(3):
                s = _F32(0)
                for k in range(3):
                    s = _F32(s + _F32(a[i, k] * b[k, j]))
                out[i, j] = s
        return out
    return matmul(back, matmul(m, shift))


def _block_width(out_h: int, out_w: int) -> int:
    """The width of OpenCV's warpPerspective blocks, whose first column's point is computed directly."""
    return min(32 * 32 // min(16, out_h), out_w)


def perspective_map(m: np.ndarray, out_h: int, out_w: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV's warpPerspective source points (double): per block of columns starting at ``xb``,
    ``X0 = M0 xb + M1 y + M2`` then ``(X0 + M0 x1) * (scale / (W0 + M6 x1))``; cvRound'ed (half to even)."""
    xs = np.arange(out_w)
    block = _block_width(out_h, out_w)
    xb, x1 = (xs // block * block).astype(np.float64), (xs % block).astype(np.float64)
    y = np.arange(out_h, dtype=np.float64)[:, None]
    m = m.reshape(-1)
    x0 = m[0] * xb + m[1] * y + m[2]
    y0 = m[3] * xb + m[4] * y + m[5]
    w0 = m[6] * xb + m[7] * y + m[8]
    w = w0 + m[6] * x1
    with np.errstate(divide="ignore"):
        w = np.where(w != 0, scale / np.where(w != 0, w, 1), 0.0)
    limit = float(2 ** 31)
    fx = np.clip((x0 + m[0] * x1) * w, -limit, limit - 1)
    fy = np.clip((y0 + m[3] * x1) * w, -limit, limit - 1)
    return np.rint(fx).astype(np.int64), np.rint(fy).astype(np.int64)


def _border(index: np.ndarray, extent: int, mode: str) -> np.ndarray:
    """OpenCV's borderInterpolate; -1 (read the fill value) for "constant" outside."""
    if mode == "constant":
        return np.where((index >= 0) & (index < extent), index, -1)
    if mode == "replicate":
        return np.clip(index, 0, extent - 1)
    if mode == "wrap":
        return np.mod(index, extent)
    if extent == 1:
        return np.zeros_like(index)
    if mode == "reflect":
        folded = np.mod(index, 2 * extent)
        return np.where(folded < extent, folded, 2 * extent - 1 - folded)
    period = 2 * extent - 2
    folded = np.mod(np.abs(index), period)
    return np.where(folded < extent, folded, period - folded)


def _short(v: np.ndarray) -> np.ndarray:
    return np.clip(v, -32768, 32767)


def _taps(image: np.ndarray, ys: np.ndarray, xs: np.ndarray, mode: str, fill: np.ndarray) -> np.ndarray:
    height, width = image.shape[:2]
    by, bx = _border(ys, height, mode), _border(xs, width, mode)
    outside = (by < 0) | (bx < 0)
    values = image[np.clip(by, 0, height - 1), np.clip(bx, 0, width - 1)]
    return np.where(outside[..., None], fill, values)


_VECTOR_COLUMNS = 16  # output columns per step of OpenCV's AVX2 warp loop (2 x 8 floats); the rest are scalar


def float_map(m: np.ndarray, out_h: int, out_w: int) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV 5's warpPerspective source points (float32; ``m`` as float32): on the row's first
    ``out_w // 16 * 16`` columns (its vector loop) ``fma(M0, x, M1 y + M2) / fma(M6, x, M7 y + M8)``, on the
    others (its scalar loop, as the compiler contracts it) ``(fma(x, M0, y M1) + M2) / (...)``."""
    m = np.asarray(m, dtype=_F32).reshape(-1)
    y = np.arange(out_h, dtype=_F32)[:, None] + np.zeros((1, out_w), dtype=_F32)
    x = np.arange(out_w, dtype=_F32)[None, :] + np.zeros((out_h, 1), dtype=_F32)
    vector = (np.arange(out_w) < out_w - out_w % _VECTOR_COLUMNS)[None, :]

    def row(b, c):  # the vector loop's per-row term: y * b + c, two roundings
        return (y * b).astype(_F32) + c

    def scalar(a, b, c):
        return fmaf(x, a, (y * b).astype(_F32)) + c

    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(vector, fmaf(m[6], x, row(m[7], m[8])), scalar(m[6], m[7], m[8]))
        sx = np.where(vector, fmaf(m[0], x, row(m[1], m[2])), scalar(m[0], m[1], m[2])) / w
        sy = np.where(vector, fmaf(m[3], x, row(m[4], m[5])), scalar(m[3], m[4], m[5])) / w
    return sx.astype(_F32), sy.astype(_F32)


def _fill_values(fill_value, channels: int, kind) -> np.ndarray:
    values = [float(v) for v in fill_value] or [0.0]
    if len(values) > 1 and len(values) != channels:
        raise ValueError(f"fastload.compat.dali: fn.experimental.warp_perspective: {len(values)} fill values for "
                         f"{channels} channels")
    values = values * channels if len(values) == 1 else values
    if kind == np.float32:
        return np.array(values, dtype=np.float32)
    info = np.iinfo(kind)
    return np.clip(np.rint(values), info.min, info.max).astype(kind)  # saturate_cast: half to even


def _to_type(values: np.ndarray, kind) -> np.ndarray:
    if kind == np.float32:
        return values.astype(np.float32)
    info = np.iinfo(kind)
    return np.clip(np.rint(values), info.min, info.max).astype(kind)


def _warp_float(data: np.ndarray, m: np.ndarray, out_h: int, out_w: int, interp: str, border: str,
                fill: np.ndarray) -> np.ndarray:
    """OpenCV 5's float32 warp kernels (uint8, uint16, float32): source points from :func:`float_map`;
    nearest rounds them half to even; linear interpolates ``p0 + a (p1 - p0)`` with one rounding (FMA),
    first along x, then y; constant borders write the fill value where the 2x2 block is wholly outside."""
    kind = data.dtype.type
    height, width = data.shape[:2]
    sx, sy = float_map(m, out_h, out_w)
    if interp == "nn":
        return _taps(data, np.rint(sy).astype(np.int64), np.rint(sx).astype(np.int64), border, fill).astype(kind)
    ix, iy = np.floor(sx).astype(np.int64), np.floor(sy).astype(np.int64)
    ax, ay = (sx - ix.astype(_F32))[..., None], (sy - iy.astype(_F32))[..., None]
    p00, p01, p10, p11 = (_taps(data, iy + dy, ix + dx, border, fill).astype(_F32) for dy, dx in
                          ((0, 0), (0, 1), (1, 0), (1, 1)))
    top = fmaf(ax, p01 - p00, p00)
    bottom = fmaf(ax, p11 - p10, p10)
    out = _to_type(fmaf(ay, bottom - top, top), kind)
    if border == "constant":
        away = (ix < -1) | (ix >= width) | (iy < -1) | (iy >= height)
        out = np.where(away[..., None], fill, out)
    return out


_NATIVE_TYPES = {np.uint8: "B", np.uint16: "H", np.float32: "f"}
_NATIVE_BORDERS = {"constant": 0, "replicate": 1, "reflect": 2, "reflect_101": 3, "wrap": 4}


def _warp_native(data: np.ndarray, m: np.ndarray, out_h: int, out_w: int, interp: str, border: str,
                 fill: np.ndarray) -> np.ndarray:
    """:func:`_warp_float` in native code (``_native_warp.c`` warp_perspective): the same float32 points,
    taps and fused multiply-adds, in one pass without the GIL instead of numpy's full-image temporaries."""
    kind = data.dtype.type
    data = np.ascontiguousarray(data)
    height, width, channels = data.shape
    out = np.empty((out_h, out_w, channels), dtype=kind)
    _native_warp.warp_perspective(data, out, height, width, channels, _NATIVE_TYPES[kind], out_h, out_w,
                                  np.ascontiguousarray(m, dtype=_F32).reshape(-1), interp != "nn",
                                  _NATIVE_BORDERS[border], np.ascontiguousarray(fill, dtype=kind))
    return out


def _warp_fixed(data: np.ndarray, m: np.ndarray, out_h: int, out_w: int, interp: str, border: str,
                fill: np.ndarray) -> np.ndarray:
    """OpenCV's older warpPerspective, which int16 images still take: double source points quantised to
    1/32 pixel (:func:`perspective_map`), then remap's bilinear weights in float32."""
    kind = data.dtype.type
    height, width = data.shape[:2]
    if interp == "nn":
        sx, sy = perspective_map(m, out_h, out_w, 1.0)
        return _taps(data, _short(sy), _short(sx), border, fill)
    sx, sy = perspective_map(m, out_h, out_w, float(_INTER_TAB_SIZE))
    fx, fy = sx & (_INTER_TAB_SIZE - 1), sy & (_INTER_TAB_SIZE - 1)
    x0, y0 = _short(sx >> _INTER_BITS), _short(sy >> _INTER_BITS)
    taps = [_taps(data, y0 + dy, x0 + dx, border, fill) for dy in (0, 1) for dx in (0, 1)]
    ax = (fx / _INTER_TAB_SIZE).astype(_F32)[..., None]
    ay = (fy / _INTER_TAB_SIZE).astype(_F32)[..., None]
    weights = [(1 - ay) * (1 - ax), (1 - ay) * ax, ay * (1 - ax), ay * ax]
    total = taps[0].astype(_F32) * weights[0]
    for t, w in zip(taps[1:], weights[1:]):
        total = total + t.astype(_F32) * w
    out = _to_type(total, kind)
    if border == "constant":  # OpenCV writes the fill value itself where all four taps are outside
        away = (x0 >= width) | (x0 + 1 < 0) | (y0 >= height) | (y0 + 1 < 0)
        out = np.where(away[..., None], fill, out)
    return out


def source_matrix(matrix, corner: bool, inverse_map: bool) -> np.ndarray:
    """The float64 3x3 matrix OpenCV's warpPerspective maps output points to input points with: ``matrix`` in
    float32, moved to pixel centres (:func:`corner_to_center`) where ``corner``, inverted where not
    ``inverse_map``."""
    m = np.asarray(torch.as_tensor(matrix, dtype=torch.float32).reshape(3, 3).numpy(), dtype=_F32)
    if corner:
        m = corner_to_center(m)
    m = m.astype(np.float64)
    if not inverse_map:
        m = invert_3x3(m)
    return m


# A constant matrix argument is prepared once per (matrix, corner, inverse_map): corner_to_center's float32
# products and the inversion are Python arithmetic, which cost more per sample than a small image's warp. Keyed by
# the values' bytes: a tuple would take -0.0 for 0.0 (equal, with one hash) and give the other's matrix.
_cache_matrices = True


@functools.lru_cache(maxsize=64)
def _constant_source_matrix(matrix: bytes, corner: bool, inverse_map: bool) -> np.ndarray:
    return source_matrix(tuple(np.frombuffer(matrix, dtype=np.float64).tolist()), corner, inverse_map)


def warp_perspective_image(image: torch.Tensor, matrix, out_h: int, out_w: int, *, inverse_map: bool,
                           corner: bool, interp: str, border: str, fill_value) -> torch.Tensor:
    """One HWC (or HW) image through OpenCV's warpPerspective as DALI's CPU operator calls it (the module's
    rules)."""
    name = "fn.experimental.warp_perspective"
    if image.dtype not in _WARP_TYPES:
        raise NotImplementedError(f"fastload.compat.dali: {name} of {image.dtype} input is not supported (uint8, "
                                  f"int16, uint16, float32, as DALI)")
    plain = image.dim() == 2
    data = image.cpu().numpy()
    data = data[..., None] if plain else data
    channels = data.shape[-1]
    if channels > 4:
        raise ValueError(f"fastload.compat.dali: {name}: images with more than 4 channels are not supported")
    if isinstance(matrix, tuple) and _cache_matrices:  # a constant argument: the same matrix every sample
        m = _constant_source_matrix(np.array(matrix, dtype=np.float64).tobytes(), corner, inverse_map).copy()
    else:
        m = source_matrix(matrix, corner, inverse_map)
    fill = _fill_values(fill_value, channels, data.dtype.type)
    warp = _warp_fixed if image.dtype == torch.int16 else _warp_float
    if (warp is _warp_float and _native_warp is not None and data.dtype.type in _NATIVE_TYPES
            and min(data.shape) > 0):
        warp = _warp_native
    out = np.ascontiguousarray(warp(data, m, out_h, out_w, interp, border, fill))
    return torch.from_numpy(out[..., 0].copy() if plain else out)


def _output_size(size, height: int, width: int) -> tuple[int, int]:
    if size is None or (isinstance(size, (list, tuple)) and not size):
        return height, width
    values = list(size) if isinstance(size, (list, tuple)) else [size]
    if len(values) != 2:
        raise ValueError(f"fastload.compat.dali: fn.experimental.warp_perspective: size must have 2 values "
                         f"(height, width), got {len(values)}")
    return tuple(max(int(round_c(v)), 1) for v in values)


@operator("experimental.warp_perspective", "experimental.WarpPerspective")
def warp_perspective(images, matrix=None, *, size=None, border_mode="constant", fill_value=(), interp_type=None,
                     inverse_map=True, pixel_origin="corner", device=None, **args):
    """``fn.experimental.warp_perspective`` of HW, HWC or FHWC images (uint8, int16, uint16, float32; at most 4
    channels): the 3x3 ``matrix`` (an argument, per sample allowed, or the second input) maps output points to
    input points (input to output with ``inverse_map=False``), as OpenCV's warpPerspective, which DALI's CPU
    operator calls; NN or linear interpolation, OpenCV's border modes, ``size`` (height, width)."""
    name = "fn.experimental.warp_perspective"
    check_args(name, args, set())
    cpu_only(name, [images], device, "CV-CUDA's warp")
    inputs = [images]
    if isinstance(matrix, DataNode):
        inputs.append(matrix)
        matrix = None
    elif matrix is None:
        raise ValueError(f"fastload.compat.dali: {name}: matrix must be given (as an argument or a second input)")
    else:
        matrix = tuple(float(v) for v in torch.as_tensor(matrix, dtype=torch.float64).reshape(-1).tolist())
        if len(matrix) != 9:
            raise ValueError(f"fastload.compat.dali: {name}: matrix must have 9 elements (3x3), got {len(matrix)}")
    if border_mode not in _BORDER_MODES:
        raise ValueError(f"fastload.compat.dali: {name}: border_mode {border_mode!r} is not one of "
                         f"{', '.join(_BORDER_MODES)}")
    if pixel_origin not in ("corner", "center"):
        raise ValueError(f"fastload.compat.dali: {name}: pixel_origin must be 'corner' or 'center', got "
                         f"{pixel_origin!r}")
    interp = interp_name(interp_type) if interp_type is not None else "linear"
    if interp not in ("nn", "linear"):
        raise NotImplementedError(f"fastload.compat.dali: {name}: interp_type {interp_type} is not supported "
                                  f"(INTERP_NN and INTERP_LINEAR are; OpenCV's cubic is not reproduced)")
    layout = images.layout() or "HW"
    if layout not in ("HW", "HWC", "FHW", "FHWC"):
        raise NotImplementedError(f"fastload.compat.dali: {name} of layout {layout!r} is not supported (HW, HWC, "
                                  f"FHWC: DALI's CPU operator needs the channels last)")
    fills = tuple(float(v) for v in (fill_value if isinstance(fill_value, (list, tuple)) else [fill_value]))
    settings = {"size": size, "matrix": matrix}

    def run(ctx, op, image, mtx=None, *, size, matrix):
        frames = layout.startswith("F")
        if image.dim() != len(layout):
            raise ValueError(f"fastload.compat.dali: {name}: {image.dim()}-D sample for layout {layout!r} (give a "
                             f"layout: HW, HWC or FHWC)")
        spatial = image.shape[1:3] if frames else image.shape[:2]
        out_h, out_w = _output_size(size, int(spatial[0]), int(spatial[1]))
        m = mtx if mtx is not None else matrix
        one = functools.partial(warp_perspective_image, matrix=m, out_h=out_h, out_w=out_w,
                                inverse_map=bool(inverse_map), corner=pixel_origin == "corner", interp=interp,
                                border=border_mode, fill_value=fills)
        if frames:
            return torch.stack([one(frame) for frame in image]) if len(image) else image
        return one(image)
    return _one(Op("experimental.warp_perspective", run, inputs, settings, device="cpu", layouts=(layout,),
                   fusable=False))
