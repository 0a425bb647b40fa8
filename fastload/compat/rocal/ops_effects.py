"""rocAL's effect operators: pixelate, lens correction, per-pixel noise and weather (snp_noise, jitter,
snow, rain), fish eye; fog and blur are refused, saying why. The noise operators draw their pixels from
the sample's stream (or their own seed's), per frame for sequences.
"""

from __future__ import annotations

import torch

from ..engine.graph import DataNode
from . import imageops
from .ops_common import PREFIX, Rocal, RocalParam, _image_op, _kind, _param, _source
from .ops_geometry import _numbers
from .spec import KEEP, OPERATORS, UNMOVED, operator
from .types import RocalTensorLayout, RocalTensorOutputType


@operator(boxes=KEEP)
def pixelate(*inputs, device=None, pixelate_percent=50.0, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.pixelate``: RPP's pixelate at a fixed ``pixelate_percent`` (rocAL draws nothing): the image down
    to (100 - percent) % of each side with RPP's bilinear resize and back with its nearest-neighbour
    resize (imageops.pixelate; rocAL/source/augmentations/effects_augmentations/node_pixelate.cpp ->
    rppt_pixelate_host)."""
    percent = float(pixelate_percent)
    if not 0 <= percent < 100:
        raise ValueError(f"fn.pixelate: pixelate_percent {pixelate_percent} is not in [0, 100)")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, image, percent):
        return imageops.as_output(imageops.pixelate(image, percent), out.torch_dtype)
    return _image_op("pixelate", run, inputs[0], {"percent": percent}, out)


@operator(boxes=UNMOVED)
def lens_correction(*inputs, camera_matrix=None, distortion_coeffs=None, device=None,
                    output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8, strength=None,
                    zoom=None):
    """``fn.lens_correction``: RPP's lens correction (imageops.lens_correction) of each image at its own
    size. ``camera_matrix`` is rocAL's [fx, cx, fy, cy] and ``distortion_coeffs`` its [k1, k2, p1, p2, k3];
    rocAL's LensCorrectionNode hands RPP [fx, 0, cx, 0, fy, cy, 0, 0, 1] and [k1, k2, p1, p2, k3, 0, 0, 0]
    (rocAL/source/augmentations/geometry_augmentations/node_lens_correction.cpp). rocAL's Python needs both
    lists, and so does fastload. Older rocAL releases took ``strength`` and ``zoom`` instead (another RPP
    kernel); they are refused by name."""
    if strength is not None or zoom is not None:
        raise NotImplementedError(f"{PREFIX}: fn.lens_correction(strength=, zoom=) is the older rocAL API; fastload "
                                  f"follows rocAL 0981d5bb: camera_matrix=[fx, cx, fy, cy], "
                                  f"distortion_coeffs=[k1, k2, p1, p2, k3]")
    fx, cx, fy, cy = _numbers("lens_correction", camera_matrix, 4,
                              "camera_matrix ([fx, cx, fy, cy]) is a list of 4 numbers")
    k1, k2, p1, p2, k3 = _numbers("lens_correction", distortion_coeffs, 5,
                                   "distortion_coeffs ([k1, k2, p1, p2, k3]) is a list of 5 numbers")
    camera, distortion = [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0], [k1, k2, p1, p2, k3, 0.0, 0.0, 0.0]
    if fx * fy == 0:
        raise ValueError("fn.lens_correction: fx and fy must not be 0 (the camera matrix has no inverse)")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, image):
        return imageops.as_output(imageops.lens_correction(image, camera, distortion), out.torch_dtype)
    return _image_op("lens_correction", run, inputs[0], {}, out)


def _generator(rng, frame: int = 0) -> torch.Generator:
    """A torch generator for one sample's (or one frame's) per-pixel draws, seeded from its stream."""
    return torch.Generator().manual_seed(int(rng.random() * (1 << 62)) + frame)


_SEEDED = 1 << 40  # the streams of operators with a seed of their own: the sample's, forked by it


def _noise_op(name: str, effect, inputs, values: dict, output_layout, output_dtype,
              seed: int | None = None) -> DataNode:
    """An RPP noise or weather effect (imageops) on a uint8 image. A value left None is drawn per sample
    from rocAL's range, one uniform draw shared by all of them: each of the node's default UniformRand
    parameters is an mt19937 seeded with the pipeline's seed, so rocAL draws them alike. An operator with
    a ``seed`` of its own (fn.snp_noise, fn.jitter: RPP's generator's in rocAL) draws its pixels from the
    sample's stream forked by it: another seed, other noise; the same seed, the same noise."""
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)
    defaults = OPERATORS[name].ranges

    def run(ctx, op, image, **given):
        rng = ctx.rng(op)
        u = rng.random()
        drawn = {key: defaults[key][0] + u * (defaults[key][1] - defaults[key][0]) if value is None else value
                 for key, value in given.items()}
        pixels = rng if seed is None else ctx.stream().fork(_SEEDED + int(seed))
        return imageops.as_output(effect(image, generator=_generator(pixels, ctx.frame), **drawn), out.torch_dtype)
    return _image_op(name, run, inputs[0], {key: _param(value) for key, value in values.items()}, out)


def _unit(operator: str, **values) -> None:
    for name, value in values.items():
        if value is not None and not isinstance(value, (DataNode, RocalParam)) and not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"{PREFIX}: {operator}: {name}={value} is not in [0, 1] (RPP refuses it)")


@operator(boxes=KEEP, ranges={"p_noise": (0.1, 1.0), "p_salt": (0.1, 1.0), "salt": (0.1, 1.0), "pepper": (0.0, 0.5)})
def snp_noise(*inputs, p_noise=0.0, p_salt=0.0, noise_val=0.0, salt_val=0.0, seed=0, device=None,
              output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.snp_noise``: RPP's salt and pepper (imageops.snp_noise), a pixel noisy with probability p_noise
    and then salt with probability p_salt. rocAL's binding hands ``noise_val`` to RPP's salt value and
    ``salt_val`` to its pepper value (rocalSnPNoise(noise_prob, salt_prob, salt_value, pepper_value)), so
    here too noise_val is the salt (bright) value and salt_val the pepper one, both on 0-1. None: drawn
    per sample from [0.1, 1], [0.1, 1], [0.1, 1], [0, 0.5] (node_snp_noise.h). ``seed`` seeds RPP's own
    generator, whose draws fastload does not reproduce (and whose mask rocAL repeats every batch); the
    noise here comes from the pipeline's seed and this one, new for every sample and epoch."""
    _unit("fn.snp_noise", p_noise=p_noise, p_salt=p_salt, noise_val=noise_val, salt_val=salt_val)

    def effect(image, generator, p_noise, p_salt, salt, pepper):  # a parameter handle's value checked as read
        _unit("fn.snp_noise", p_noise=p_noise, p_salt=p_salt, noise_val=salt, salt_val=pepper)
        return imageops.snp_noise(image, p_noise, p_salt, salt, pepper, generator)
    return _noise_op("snp_noise", effect, inputs,
                     {"p_noise": p_noise, "p_salt": p_salt, "salt": noise_val, "pepper": salt_val},
                     output_layout, output_dtype, seed)


@operator(boxes=KEEP, ranges={"kernel_size": (2.0, 5.0)})
def jitter(*inputs, kernel_size=None, seed=0, fill_value=0.0, device=None, output_layout=RocalTensorLayout.NHWC,
           output_dtype=RocalTensorOutputType.UINT8):
    """``fn.jitter``: RPP's jitter (imageops.jitter), each pixel taken from a random one in its
    kernel_size window. None: drawn per sample as int(uniform(2, 5)), so 2, 3 or 4 (node_jitter.h);
    ``fill_value`` is not read, as in rocAL; ``seed`` as in fn.snp_noise."""
    if kernel_size is not None and not isinstance(kernel_size, (DataNode, RocalParam)) and int(kernel_size) < 1:
        raise ValueError(f"{PREFIX}: fn.jitter: kernel_size={kernel_size} is not a window")

    def effect(image, generator, kernel_size):  # a parameter handle's value checked as read
        if int(kernel_size) < 1:
            raise ValueError(f"{PREFIX}: fn.jitter: kernel_size={kernel_size} is not a window")
        return imageops.jitter(image, int(kernel_size), generator)
    return _noise_op("jitter", effect, inputs, {"kernel_size": kernel_size},
                     output_layout, output_dtype, seed)


@operator(boxes=KEEP, ranges={"snow": (0.1, 0.8)})
def snow(*inputs, snow=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
         output_dtype=RocalTensorOutputType.UINT8):
    """``fn.snow``: the snow rocAL runs (MIVisionX's Snow node on RPP's batchPD host kernel:
    imageops.snow), snow / 100 * width * height * channels flakes. None: drawn per sample from [0.1, 0.8]
    (node_snow.h). RPP draws the flakes with an unseeded rand(); fastload from the pipeline's seed."""
    def effect(image, generator, snow):
        return imageops.snow(image, snow, generator)
    return _noise_op("snow", effect, inputs, {"snow": snow}, output_layout, output_dtype)


@operator(boxes=KEEP, ranges={"rain": (0.0, 0.0), "alpha": (0.2, 0.3)})
def rain(*inputs, rain=None, rain_width=0, rain_height=0, rain_transparency=None, rain_slant_angle=0.0,
         device=None, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.rain``: RPP's rain (imageops.rain): ``rain`` (required: rocAL's binding takes a number) times
    0.004 * width * height drops, ``rain_width`` pixels wide and ``rain_height`` long (rocAL's defaults of 0
    draw none, leaving only the darkening), slanted by ``rain_slant_angle`` radians, blended with
    ``rain_transparency`` (None: per sample from [0.2, 0.3], node_rain.h). RPP draws one rain layer per
    batch from an unseeded generator; fastload draws one per image from the pipeline's seed."""
    if rain is None:
        raise TypeError(f"{PREFIX}: fn.rain: give rain= (rocAL's binding takes a number)")
    _unit("fn.rain", rain_transparency=rain_transparency)

    def effect(image, generator, rain, alpha):
        _unit("fn.rain", rain_transparency=alpha)
        return imageops.rain(image, rain, int(rain_width), int(rain_height), alpha, float(rain_slant_angle),
                             generator)
    return _noise_op("rain", effect, inputs,
                     {"rain": rain, "alpha": rain_transparency}, output_layout, output_dtype)


@operator(supported=False)
def fog(*inputs, intensity_factor=0.5, gray_factor=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
        output_dtype=RocalTensorOutputType.UINT8):
    """``fn.fog``: refused. RPP's fog blends each image with windows of a built-in 1920x1080 alpha and
    intensity mask (src/include/tensor/fog_mask.hpp), data fastload does not have."""
    raise NotImplementedError(f"{PREFIX}: fn.fog is not supported: RPP's fog blends a built-in 1920x1080 mask "
                              f"(fog_mask.hpp) that fastload does not have")


@operator()
def fish_eye(*inputs, device=None, fill_value=0.0, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.fish_eye``: RPP's fisheye (imageops.fish_eye), which MIVisionX's FishEye node runs as
    rppi_fisheye_u8_pkd3_batchPD_host on 3-channel images (ROCm/MIVisionX amd_rpp/source/tensor/FishEye.cpp).
    ``fill_value`` is not read, as in rocAL. Refused: 1-channel images (RPP's planar path), an NCHW or a
    non-uint8 input (the node hands RPP the buffer as packed uint8), an output other than NHWC uint8 (the node
    writes packed uint8 whatever the output says), and at run an image smaller than its buffer (RPP's scalar
    path then strides rows by the image's width through a buffer of another width: other rows, and padding)."""
    source = _source(inputs)
    if source.layout in (RocalTensorLayout.NCHW, RocalTensorLayout.NFCHW) or \
            source.dtype != RocalTensorOutputType.UINT8:
        raise NotImplementedError(f"{PREFIX}: fn.fish_eye of an {source.layout.name} {source.dtype.name} input: "
                                  f"MIVisionX's FishEye node hands RPP the buffer as packed uint8 pixels; give it "
                                  f"NHWC uint8 images")
    layout, dtype = _kind(output_layout, output_dtype)
    if layout not in (RocalTensorLayout.NHWC, RocalTensorLayout.NFHWC) or dtype != RocalTensorOutputType.UINT8:
        raise NotImplementedError(f"{PREFIX}: fn.fish_eye(output_layout={layout.name}, output_dtype={dtype.name}): "
                                  f"MIVisionX's FishEye node writes packed uint8 whatever the output says; only "
                                  f"NHWC uint8 is supported")
    out = Rocal(source.buffer, layout, dtype)

    def run(ctx, op, image):
        if image.shape[2] != 3:
            raise NotImplementedError(f"{PREFIX}: fn.fish_eye of {image.shape[2]}-channel images is not supported "
                                      f"(RPP's planar fisheye path)")
        if tuple(image.shape[:2]) != tuple(source.buffer):
            raise ValueError(f"{PREFIX}: fn.fish_eye: a {image.shape[1]}x{image.shape[0]} image in a "
                             f"{source.buffer[1]}x{source.buffer[0]} buffer: RPP's fisheye then strides rows by the "
                             f"image's width through the buffer (other rows, and padding); resize to a fixed size "
                             f"first")
        return imageops.as_output(imageops.fish_eye(image), out.torch_dtype)
    return _image_op("fish_eye", run, inputs[0], {}, out)


@operator(supported=False)
def blur(*inputs, window_size=None, sigma=0.0, device=None, output_layout=RocalTensorLayout.NHWC,
         output_dtype=RocalTensorOutputType.UINT8):
    """``fn.blur``: refused. rocAL runs a 3x3 box filter (window_size and sigma are ignored) through
    MIVisionX's Blur node, which sets the source's offsetInBytes to 12 for RPP's padded layout; rocAL's
    tensors are not padded, so RPP reads each pixel 4 pixels to the right, and the last rows' pixels from
    past the image (the next one in the batch, or past the buffer) -- an output that depends on memory
    fastload cannot reproduce (MIVisionX amd_rpp/source/tensor/Blur.cpp, rocm-7.0.0)."""
    raise NotImplementedError(f"{PREFIX}: fn.blur is not supported: rocAL's 3x3 box filter reads its input 12 "
                              f"bytes off (MIVisionX's Blur node assumes a padded tensor rocAL does not have), so "
                              f"its result depends on memory past the image")
