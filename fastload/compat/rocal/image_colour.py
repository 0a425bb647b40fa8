"""RPP's colour rules on HWC pixels: HSV hue and saturation, colour twist, gamma, exposure, colour
temperature, vignette (with RPP's fast exponential) and blend, each in float32 as RPP's host kernels compute it.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..float32 import expf


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


def blend(first: torch.Tensor, second: torch.Tensor, ratio: float) -> torch.Tensor:
    """RPP's blend (src/modules/tensor/cpu/kernel/blend.cpp): (first - second) * ratio + second over the
    first image's region; the second is read at the same pixels, zeros where it is smaller (the padding of
    its buffer)."""
    height, width = first.shape[:2]
    other = torch.zeros_like(first, dtype=torch.float32)
    h, w = min(height, second.shape[0]), min(width, second.shape[1])
    other[:h, :w] = second[:h, :w].float()
    return (first.float() - other) * float(np.float32(ratio)) + other
