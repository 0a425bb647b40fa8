"""RPP's warps and effects on HWC pixels: rotate and warp_affine, lens correction (its remap tables and
bilinear remap), per-pixel noise and weather (salt and pepper, jitter, snow, rain), and the
legacy fish-eye with the SSE atan2 / sincos it vectorizes with.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..float32 import fmaf


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
