"""Transforms with torchvision.transforms.v2 names and meanings, and the plan they compile to.

The classes are torchvision's own (``ToDtype`` also accepts PIL images, so a
Compose needs no ``ToImage``): used anywhere else they behave exactly as in
torchvision. On the fast path, ``compile_plan`` translates a Compose of these
-- v2, or the classic v1 with ToTensor / PILToTensor / ConvertImageDtype --
into a ``Plan``: one crop box and output size per sample (drawn from the
sample's own random stream), flip flags, the sample's color operations
(ColorJitter's random order and factors, grayscale) as the parameters of
``fastload.kernels.augment``, and for the whole batch the value steps
torchvision takes from uint8 pixels to the output, op by op
(``fastload.kernels.normalize.Normalization``: v1's divide by 255 or v2's
multiply by 1/255, each Normalize, each dtype). A RandomRotation or RandomAffine after the resampling step
becomes one inverse affine map per sample (``AffineGeometry``). Anything else
raises ``UnsupportedTransform`` and the loader runs the transform as given.

Color operations compile when they follow the crop or resize (they do not
commute with resampling) and come from torchvision.transforms.v2 (or
fastload.transforms, the same classes): their meaning is v2's on a uint8
image tensor, or on a float one after ``ToDtype(float, scale=True)``.
Classic v1 ColorJitter and Grayscale on PIL images round as Pillow's
ImageEnhance does, so they keep their own slow path.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import struct
from dataclasses import dataclass

import torch
from PIL import Image

from fastload.kernels.augment import BRIGHTNESS, CONTRAST, GRAYSCALE, HUE, NONE, SATURATION
from fastload.kernels.normalize import TABLE_DTYPES, Affine, Normalization, ValueMap

from ._torchvision import (InterpolationMode, _get_inverse_affine_matrix,
                           _interpolation_modes_from_int, v1, v2)
from .rng import SampleRandom, draw_resized_crop
from .sizes import (center_offset as _center_offset, expanded_size as _expanded_size,
                    largest_reduction as _largest_reduction, pair as _pair, resized_size as _resized_size,
                    rotation_matrix as _rotation_matrix, rrc_params as _rrc_params)

# torchvision's v2 classes under their own names (stand-ins where torchvision cannot be imported)
CenterCrop = v2.CenterCrop
ColorJitter = v2.ColorJitter
Compose = v2.Compose
Grayscale = v2.Grayscale
Normalize = v2.Normalize
RandomAffine = v2.RandomAffine
RandomApply = v2.RandomApply
RandomGrayscale = v2.RandomGrayscale
RandomHorizontalFlip = v2.RandomHorizontalFlip
RandomResizedCrop = v2.RandomResizedCrop
RandomRotation = v2.RandomRotation
RandomVerticalFlip = v2.RandomVerticalFlip
Resize = v2.Resize
ToImage = v2.ToImage

__all__ = ["Compose", "RandomResizedCrop", "Resize", "CenterCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "RandomRotation", "RandomAffine", "ColorJitter", "RandomGrayscale", "Grayscale",
           "RandomApply", "Normalize", "ToDtype", "ToImage", "Plan", "Draw", "RandomResizedCropGeometry",
           "ResizeGeometry", "CenterCropGeometry", "AffineGeometry", "compile_plan", "UnsupportedTransform"]


class ToDtype(v2.ToDtype):
    """torchvision's v2.ToDtype, which also converts a PIL image to a tensor first (like v2.ToImage)."""

    def forward(self, *inputs):
        return super().forward(*[ToImage()(x) if isinstance(x, Image.Image) else x for x in inputs])


class UnsupportedTransform(ValueError):
    """The fast path cannot express this transform; it names the first offending one."""


_PIL_RESAMPLE = {
    InterpolationMode.NEAREST: Image.NEAREST, InterpolationMode.BILINEAR: Image.BILINEAR,
    InterpolationMode.BICUBIC: Image.BICUBIC, InterpolationMode.LANCZOS: Image.LANCZOS,
    InterpolationMode.BOX: Image.BOX, InterpolationMode.HAMMING: Image.HAMMING,
}


@dataclass(frozen=True)
class Draw:
    """One sample's draw: what its decoded image goes through, in Pillow terms (boxes are (left, top,
    right, bottom), ``resize`` is (width, height)), and its colour operations. Its distribution is the
    plan's ``geometry`` (a ``*Geometry`` class: ``RandomResizedCropGeometry``, ``ResizeGeometry``,
    ``CenterCropGeometry``), whose ``sample`` makes it; ``Plan.draw`` adds the flips, the affine map
    and the colours.

    At full scale: ``crop`` (an integer box in source pixels, padded with
    zeros outside the image as PIL/torchvision crops are), ``resize`` the
    result to (width, height), ``post_crop`` (a CenterCrop after a Resize),
    then, with a rotation or affine step, the flips drawn before it
    (``pre_flips``: horizontal, vertical) and ``affine``, its inverse map
    (see ``AffineGeometry``), then horizontal and vertical flips --
    torchvision's own steps, so its pixels exactly. ``color`` holds the
    sample's color operations for ``fastload.kernels.augment``: (operation
    id, factor) per slot of the plan. When the JPEG is decoded at 1/s scale
    (s <= ``max_reduction``, the largest DCT scale that still covers the
    output), the resampling steps become one resize that reads
    ``source_box`` (float source pixels) straight to ``resampled_size``;
    ``box_resize`` asks for that at full scale too (a resize whose scale is
    not the ratio of integer sizes: DALI's, fastload.compat.dali).
    """

    crop: tuple[int, int, int, int] | None = None
    resize: tuple[int, int] | None = None
    post_crop: tuple[int, int, int, int] | None = None
    hflip: bool = False
    vflip: bool = False
    color: tuple[tuple[int, float], ...] = ()
    max_reduction: int = 1
    source_box: tuple[float, float, float, float] | None = None
    affine: tuple[float, float, float, float, float, float] | None = None
    pre_flips: tuple[bool, bool] = (False, False)
    box_resize: bool = False

    def with_flips(self, hflip: bool, vflip: bool) -> "Draw":
        """This geometry with these flips: ``dataclasses.replace``'s result, made without its per-field
        machinery (a sample's draw runs on a loader thread, under the GIL)."""
        flipped = object.__new__(Draw)
        flipped.__dict__.update(self.__dict__, hflip=hflip, vflip=vflip)
        return flipped

    @staticmethod
    def resized_crop(box: tuple[int, int, int, int], resize: tuple[int, int], max_reduction: int,
                     hflip: bool = False, vflip: bool = False) -> "Draw":
        """``Draw(crop=box, resize=resize, source_box=box, max_reduction=..., hflip=..., vflip=...)``
        without the frozen dataclass's per-field ``__setattr__`` (about 4 us of a loader thread's GIL time
        per sample): a RandomResizedCrop's draw."""
        made = object.__new__(Draw)
        made.__dict__.update(_DRAW_DEFAULTS, crop=box, resize=resize, source_box=box,
                             max_reduction=max_reduction, hflip=hflip, vflip=vflip)
        return made

    def region(self, width: int, height: int, scale: int) -> tuple[int, int, int, int]:
        """The integer box of the image decoded at 1/``scale`` that these steps read.

        A JPEG decoder that can skip the rest (fastload._jpeg) decodes only
        this. At full scale it is the crop when the crop lies inside the
        image, so pixels stay exactly torchvision's. At a reduced scale it is
        the source box plus a margin wider than any resampling filter's reach,
        so the resize sees the same neighbours as on the whole image.
        """
        scaled_w, scaled_h = -(-width // scale), -(-height // scale)
        if scale == 1:
            if self.crop is not None:
                left, top, right, bottom = self.crop
                if left >= 0 and top >= 0 and right <= width and bottom <= height:
                    return self.crop
            return 0, 0, width, height
        left, top, right, bottom = (c / scale for c in self.source_box)
        margin = 8
        return (max(0, math.floor(left) - margin), max(0, math.floor(top) - margin),
                min(scaled_w, math.ceil(right) + margin), min(scaled_h, math.ceil(bottom) + margin))

    @property
    def resampled_size(self) -> tuple[int, int]:
        """(height, width) of the resampled image (the input of any affine step), as ``Plan.resampled_size``."""
        if self.post_crop is not None:
            left, top, right, bottom = self.post_crop
            return bottom - top, right - left
        if self.resize is not None:
            width, height = self.resize
            return height, width
        left, top, right, bottom = self.crop
        return bottom - top, right - left

    @property
    def warp(self) -> tuple[float, float, float, float, float, float] | None:
        """``affine`` with ``pre_flips`` folded in (each mirrors the map's input), for the fused kernel,
        which flips only after it."""
        if self.affine is None:
            return None
        a, b, c, d, e, f = self.affine
        height, width = self.resampled_size
        if self.pre_flips[0]:
            a, b, c = -a, -b, width - c
        if self.pre_flips[1]:
            d, e, f = -d, -e, height - f
        return a, b, c, d, e, f


_DRAW_DEFAULTS = {field.name: field.default for field in dataclasses.fields(Draw)}
Geometry = Draw  # the draw's old name, kept importable: "geometry" is the plan's distribution now


@dataclass(frozen=True)
class RandomResizedCropGeometry:
    """RandomResizedCrop: a random box of the source (``scale`` of its area, aspect ``ratio``), resized to
    ``size``, (height, width)."""

    size: tuple[int, int]
    scale: tuple[float, float]
    ratio: tuple[float, float]

    @property
    def output_size(self) -> tuple[int, int]:
        """(height, width) of every output."""
        return self.size

    def sample(self, width: int, height: int, rng: SampleRandom) -> Draw:
        """This sample's crop and resize for a source image of ``width`` x ``height``."""
        return self.crop_draw(*_rrc_params(width, height, self.scale, self.ratio, rng))

    def crop_draw(self, top: int, left: int, h: int, w: int, hflip: bool = False, vflip: bool = False) -> Draw:
        """The draw of the crop (top, left, h, w), resized to ``size``, with these flips."""
        out_h, out_w = self.size
        box = (left, top, left + w, top + h)
        return Draw.resized_crop(box, (out_w, out_h), _largest_reduction(min(w / out_w, h / out_h)), hflip, vflip)

    @functools.cached_property
    def draw_arguments(self) -> tuple[float, float, float, float, float, float]:
        """scale and ratio as ``rng.draw_resized_crop`` takes them: (scale lo, hi, log ratio lo, hi, min and
        max ratio), as ``_rrc_params`` computes them per call."""
        return (self.scale[0], self.scale[1], math.log(self.ratio[0]), math.log(self.ratio[1]),
                min(self.ratio), max(self.ratio))


@dataclass(frozen=True)
class ResizeGeometry:
    """Resize(size, max_size), then, if ``crop`` (height, width) is set, a CenterCrop of the result.

    ``size`` is torchvision's: an int or a 1-tuple (the short side), a (height,
    width) pair, or None (v2: the long side becomes ``max_size``).
    """

    size: int | tuple[int, ...] | None
    max_size: int | None
    crop: tuple[int, int] | None = None

    @property
    def output_size(self) -> tuple[int, int] | None:
        """(height, width) of every output, or None where it depends on the image's aspect."""
        if self.crop is not None:
            return self.crop
        if isinstance(self.size, tuple) and len(self.size) == 2:
            return self.size
        return None

    def sample(self, width: int, height: int, rng: SampleRandom) -> Draw:
        """This sample's resize (and crop) for a source image of ``width`` x ``height``; draws nothing."""
        rw, rh = _resized_size(width, height, self.size, self.max_size)
        reduction = _largest_reduction(min(width / rw, height / rh))
        if self.crop is None:
            return Draw(resize=(rw, rh), max_reduction=reduction,
                        source_box=(0.0, 0.0, float(width), float(height)))
        ch, cw = self.crop
        top, left = _center_offset(rh, ch), _center_offset(rw, cw)
        post_crop = (left, top, left + cw, top + ch)
        if top < 0 or left < 0:  # the crop pads: no reduced decode
            return Draw(resize=(rw, rh), post_crop=post_crop)
        sx, sy = width / rw, height / rh
        return Draw(resize=(rw, rh), post_crop=post_crop, max_reduction=reduction,
                    source_box=(left * sx, top * sy, (left + cw) * sx, (top + ch) * sy))


@dataclass(frozen=True)
class CenterCropGeometry:
    """CenterCrop of the source image to ``size``, (height, width), padding where it is larger."""

    size: tuple[int, int]

    @property
    def output_size(self) -> tuple[int, int]:
        """(height, width) of every output."""
        return self.size

    def sample(self, width: int, height: int, rng: SampleRandom) -> Draw:
        """This sample's crop for a source image of ``width`` x ``height``; draws nothing."""
        ch, cw = self.size
        top, left = _center_offset(height, ch), _center_offset(width, cw)
        return Draw(crop=(left, top, left + cw, top + ch))


@dataclass(frozen=True)
class AffineGeometry:
    """A RandomRotation (``rotation``) or RandomAffine after the resampling step, drawn and applied as
    torchvision draws and applies it.

    ``sample`` gives a sample's inverse affine map (a, b, c, d, e, f): output
    point (x, y), pixel centres at i + 0.5, reads the resampled image at
    (a x + b y + c, d x + e y + f). It is the matrix torchvision hands
    Pillow's ``Image.transform`` (for a rotation, Pillow's ``rotate``'s own);
    torchvision's tensor kernel samples through the same map in coordinates
    centred on the image. ``pil`` says which one the step meets: a PIL
    image (Pillow: points outside the image take ``fill``, those inside it
    clamp at the edge) or a tensor (grid_sample: zeros outside, then the fill
    blended in by torchvision's mask). ``fill`` is in uint8 levels per
    channel; None is a tensor's ``fill=None`` (zeros, no mask).
    ``pre_flips`` says whether the plan's horizontal / vertical flip comes
    before the step. ``input_size`` and ``output_size`` are (height, width);
    they differ only for ``expand=True``, which compiles for a fixed angle.
    """

    input_size: tuple[int, int]
    output_size: tuple[int, int]
    degrees: tuple[float, float]
    translate: tuple[float, float] | None = None
    scale: tuple[float, float] | None = None
    shear: tuple[float, ...] | None = None
    center: tuple[float, float] | None = None
    rotation: bool = False
    nearest: bool = True
    fill: tuple[float, float, float] | None = (0.0, 0.0, 0.0)
    pil: bool = True
    pre_flips: tuple[bool, bool] = (False, False)

    def draw(self, rng: SampleRandom) -> dict:
        """torchvision's make_params, in its order: the angle, then translate, scale and shear where set (as
        the keyword arguments of its functional ``affine``; a rotation's is the angle alone)."""
        angle = _float32(rng.uniform(*self.degrees))
        if self.rotation:
            return dict(angle=angle)
        translate = (0, 0)
        if self.translate is not None:
            height, width = self.input_size
            max_dx, max_dy = float(self.translate[0] * width), float(self.translate[1] * height)
            translate = (int(round(_float32(rng.uniform(-max_dx, max_dx)))),
                         int(round(_float32(rng.uniform(-max_dy, max_dy)))))
        scale = _float32(rng.uniform(*self.scale)) if self.scale is not None else 1.0
        shear = [0.0, 0.0]
        if self.shear is not None:
            shear[0] = _float32(rng.uniform(self.shear[0], self.shear[1]))
            if len(self.shear) == 4:
                shear[1] = _float32(rng.uniform(self.shear[2], self.shear[3]))
        return dict(angle=angle, translate=translate, scale=scale, shear=tuple(shear))

    def matrix(self, angle: float, translate=(0, 0), scale: float = 1.0, shear=(0.0, 0.0)) -> tuple[float, ...]:
        """The inverse map of these parameters, as torchvision computes it for a PIL image."""
        height, width = self.input_size
        if self.rotation:
            return _rotation_matrix(angle, width, height, self.center, self.output_size[::-1])
        center = list(self.center) if self.center is not None else [width * 0.5, height * 0.5]
        return tuple(_get_inverse_affine_matrix(center, angle, [float(v) for v in translate], scale, list(shear)))

    def sample(self, rng: SampleRandom) -> tuple[float, ...]:
        """This sample's inverse map."""
        return self.matrix(**self.draw(rng))


PlanGeometry = RandomResizedCropGeometry | ResizeGeometry | CenterCropGeometry


@dataclass(frozen=True)
class Plan:
    """A fused description of a supported Compose of transforms.

    ``geometry`` is the one resampling step: a ``RandomResizedCropGeometry``,
    a ``ResizeGeometry`` (with the CenterCrop that may follow it) or a
    ``CenterCropGeometry``; its ``sample`` gives each sample's ``Draw``.
    ``affine``, an ``AffineGeometry`` or None, is a rotation or affine map
    of the resampled image (of ``resampled_size``) to ``output_size``.
    All fields are immutable values, so two plans compare equal with == when
    they do the same thing. Output values, NCHW, are ``values`` of the uint8
    pixels: ``normalization``, torchvision's value steps op by op (what
    ``compile_plan`` records, and what every path computes to the bit), or
    for plans made without it (fastload.compat's DALI and rocAL lowerings) the
    affine map ``dtype(scale[c] * x + shift[c])`` in float32. ``scale`` and
    ``shift`` are that affine map in any case (for a normalization only close
    to its values: torchvision rounds after each op); ``scale`` is None when
    the output is the uint8 image itself.

    ``color`` is a tuple of groups ``(p, steps)``, applied together with
    probability p (a RandomApply, or 1.0); a step is ("jitter", brightness,
    contrast, saturation, hue), each a (low, high) range or None, taking
    four slots, or ("gray",), one slot. ``color_quantized`` says whether they
    act on uint8 levels (the image was a PIL image or uint8 tensor there) or
    on floats in [0, 1].
    """

    geometry: PlanGeometry
    resample: int
    hflip_p: float
    output_size: tuple[int, int]
    dtype: torch.dtype
    scale: tuple[float, float, float] | None
    shift: tuple[float, float, float] | None
    vflip_p: float = 0.0
    color: tuple = ()
    color_quantized: bool = True
    affine: AffineGeometry | None = None
    normalization: Normalization | None = None

    @property
    def values(self) -> ValueMap | None:
        """The map of uint8 levels to output values that every path computes, or None for uint8 output."""
        if self.scale is None:
            return None
        return self.normalization if self.normalization is not None else Affine(self.scale, self.shift, self.dtype)

    @property
    def resampled_size(self) -> tuple[int, int]:
        """(height, width) of the resampled image: the output, or the input of ``affine``."""
        return self.affine.input_size if self.affine is not None else self.output_size

    @property
    def output_dtype(self) -> torch.dtype:
        """The images' dtype: ``dtype``, or uint8 when the transforms do not convert (``scale`` is None)."""
        return self.dtype if self.scale is not None else torch.uint8

    @property
    def color_slots(self) -> int:
        """How many (operation, factor) slots each sample's ``Draw.color`` has."""
        return sum(4 if step[0] == "jitter" else 1 for _, steps in self.color for step in steps)

    def _sample_color(self, rng: SampleRandom) -> tuple[tuple[int, float], ...]:
        """Each slot's (operation, factor), drawn as torchvision v2 draws them; NONE where not applied."""
        slots = []
        for p, steps in self.color:
            applied = p >= 1.0 or rng.random() < p
            for step in steps:
                if step[0] == "gray":
                    slots.append((GRAYSCALE, 0.0) if applied else (NONE, 0.0))
                    continue
                if not applied:
                    slots.extend([(NONE, 0.0)] * 4)
                    continue
                order = [0, 1, 2, 3]  # ColorJitter: a random order of its four operations, then the factors
                for i in range(3, 0, -1):
                    j = rng.randint(0, i + 1)
                    order[i], order[j] = order[j], order[i]
                ranges = step[1:]
                factors = [None if r is None else _float32(rng.uniform(*r)) for r in ranges]
                ops = (BRIGHTNESS, CONTRAST, SATURATION, HUE)
                slots.extend((ops[k], factors[k]) if factors[k] is not None else (NONE, 0.0) for k in order)
        return tuple(slots)

    def draw(self, width: int, height: int, seed: int, epoch: int, index: int, repeat: int) -> Draw:
        """``sample`` with the stream of (seed, epoch, index, repeat) (fastload.rng). A RandomResizedCrop
        with flips and nothing else random is drawn in native code (``rng.draw_resized_crop``: the very
        values, without the ~10 us of Python a loader thread would spend on them under the GIL)."""
        if self.native_draw:
            geometry = self.geometry
            top, left, h, w, hflip, vflip = draw_resized_crop(seed, epoch, index, repeat, width, height,
                                                              *geometry.draw_arguments, self.hflip_p, self.vflip_p)
            return geometry.crop_draw(top, left, h, w, hflip, vflip)
        return self.sample(width, height, SampleRandom(seed, epoch, index, repeat))

    @functools.cached_property
    def native_draw(self) -> bool:
        """Whether ``draw`` takes the native route: torchvision's RandomResizedCrop (not a front end's
        subclass), flips, no affine step or colors."""
        return (draw_resized_crop is not None and type(self.geometry) is RandomResizedCropGeometry
                and self.affine is None and not self.color)  # a subclass (DALI's, rocAL's) draws its own way

    def sample(self, width: int, height: int, rng: SampleRandom) -> Draw:
        """This sample's geometry for a source image of ``width`` x ``height``."""
        geometry = self.geometry.sample(width, height, rng)
        matrix = self.affine.sample(rng) if self.affine is not None else None
        hflip = self.hflip_p > 0 and rng.random() < self.hflip_p
        vflip = self.vflip_p > 0 and rng.random() < self.vflip_p
        if matrix is not None:
            first_h, first_v = self.affine.pre_flips
            geometry = dataclasses.replace(geometry, affine=matrix, pre_flips=(hflip and first_h, vflip and first_v))
            hflip, vflip = hflip and not first_h, vflip and not first_v
        if hflip or vflip:
            geometry = geometry.with_flips(hflip, vflip)
        if self.color:
            geometry = dataclasses.replace(geometry, color=self._sample_color(rng))
        return geometry


def _float32(value: float) -> float:
    """Round to float32, the precision torchvision draws factors in and the kernel computes with."""
    return struct.unpack("f", struct.pack("f", value))[0]


# Methods a subclass may override without changing what a transform does to an image.
_DESCRIPTIVE = frozenset({"__init__", "__repr__", "__str__", "extra_repr", "__getstate__", "__setstate__",
                          "__init_subclass__", "_extract_params_for_v1_transform"})


def overridden_behaviour(t) -> list[str]:
    """The methods through which ``type(t)``, a subclass of a torchvision (or fastload) transform, changes
    its behaviour: every method it defines that the torchvision class it derives from also has (forward,
    v2's transform / make_params, v1's __call__ / get_params, ...), except the descriptive ones. The plan
    knows only torchvision's behaviour, so such a transform must run as given."""
    candidates = set()
    for cls in type(t).__mro__:
        if cls.__module__.startswith(("torchvision.", "fastload._standin_transforms")) or cls is ToDtype:
            known = cls
            break
        candidates.update(vars(cls))
    else:
        return []
    # An attribute the subclass defines that is the very same object as the known class's (v2 rebinds
    # v1's get_params on every subclass) changes nothing.
    return sorted(name for name in candidates - _DESCRIPTIVE
                  if hasattr(known, name) and getattr(type(t), name) is not getattr(known, name)
                  and (callable(getattr(known, name)) or isinstance(getattr(known, name), property)))


def _flatten(transform) -> list:
    overrides = overridden_behaviour(transform)
    if overrides:
        raise UnsupportedTransform(f"{type(transform).__module__}.{type(transform).__qualname__} (a subclass "
                                   f"that overrides {', '.join(overrides)}: run as given)")
    if isinstance(transform, (v1.Compose, v2.Compose)):
        return [t for inner in transform.transforms for t in _flatten(inner)]
    return [transform]


def _interpolation(t) -> InterpolationMode:
    """``t.interpolation`` as an InterpolationMode, whichever of its spellings torchvision accepted."""
    mode = t.interpolation
    if isinstance(mode, int):  # a PIL constant, accepted by torchvision for compatibility
        mode = _interpolation_modes_from_int(mode)
    return InterpolationMode(mode)  # v2 keeps the mode as its string value


def _affine_step(t, state: str, size: tuple[int, int], pre_flips: tuple[bool, bool], unsupported) -> AffineGeometry:
    """A RandomRotation or RandomAffine meeting the resampled image of ``size`` (height, width) in ``state``
    ("pil", "uint8", or "float" holding ToDtype(scale=True) values)."""
    mode = _interpolation(t)
    if mode not in (InterpolationMode.NEAREST, InterpolationMode.BILINEAR):
        raise unsupported(t, f"interpolation {mode.value}: nearest and bilinear compile")
    pil = state == "pil"
    fill = t.fill
    if isinstance(fill, dict):
        raise unsupported(t, "a fill per input type")
    if fill is None and pil:
        fill = 0  # torchvision fills a PIL image with 0; a tensor with fill=None gets no fill mask
    if fill is not None:
        fill = [float(fill)] * 3 if isinstance(fill, (int, float)) else [float(v) for v in fill]
        fill = fill * 3 if len(fill) == 1 else fill
        if len(fill) != 3:
            raise unsupported(t, "a fill of neither 1 nor 3 values")
        fill = tuple(float(int(v)) if pil else v * 255.0 if state == "float" else v for v in fill)
        if not all(0.0 <= v <= 255.0 for v in fill):
            raise unsupported(t, "a fill outside the image's range of values")
    center = None if t.center is None else (float(t.center[0]), float(t.center[1]))
    degrees = (float(t.degrees[0]), float(t.degrees[1]))
    output = size
    if getattr(t, "expand", False):
        if degrees[0] != degrees[1] or center is not None:
            raise unsupported(t, "expand=True with a random angle or a center: each sample's output size "
                                 "differs, so samples cannot be batched")
        output = _expanded_size(_float32(degrees[0]), size[1], size[0], pil)

    def pair(value):
        return None if value is None else tuple(float(v) for v in value)

    return AffineGeometry(size, output, degrees, pair(getattr(t, "translate", None)), pair(getattr(t, "scale", None)),
                          pair(getattr(t, "shear", None)), center,
                          rotation=isinstance(t, (v1.RandomRotation, v2.RandomRotation)),
                          nearest=mode == InterpolationMode.NEAREST, fill=fill, pil=pil, pre_flips=pre_flips)


def compile_plan(transform) -> Plan:
    """Translate a torchvision (v1 or v2) or fastload transform into a Plan, or raise UnsupportedTransform."""
    if transform is None:
        raise UnsupportedTransform("no transform: samples stay PIL images, which cannot be batched")
    geometry, resample, hflip_p, vflip_p, affine = None, Image.BILINEAR, 0.0, 0.0, None
    state = "pil"                     # "pil", then "uint8" or "float" once converted to a tensor
    dtype, scale, shift = torch.uint8, [1.0] * 3, [0.0] * 3
    unit, unit_dtype, value_steps = None, None, []  # the Normalization's, once converted to float
    color, color_quantized = [], None

    def unsupported(t, why: str = "") -> UnsupportedTransform:
        return UnsupportedTransform(f"{type(t).__module__}.{type(t).__name__}"
                                    + (f" ({why})" if why else ""))

    def color_group(t, p: float, inner: list) -> None:
        nonlocal color_quantized
        if geometry is None:
            raise unsupported(t, "color before the crop or resize: it does not commute with resampling")
        quantized = state != "float"
        if not quantized and (any(abs(s * 255 - 1) > 1e-12 for s in scale) or any(shift)):
            raise unsupported(t, "color on floats that are not ToDtype(scale=True) values in [0, 1]")
        if not quantized and (dtype != torch.float32 or value_steps):
            raise unsupported(t, f"color on {dtype} values: fastload's color operations compute in float32")
        if color_quantized is not None and quantized != color_quantized:
            raise unsupported(t, "color operations both before and after the float conversion")
        color_quantized = quantized
        steps = [_color_step(step, unsupported) for step in inner]
        steps = [step for step in steps if step is not None]
        if steps:
            color.append((p, tuple(steps)))

    for t in _flatten(transform):
        if isinstance(t, (v1.ColorJitter, v1.Grayscale, v1.RandomGrayscale)) and not isinstance(t, v2.Transform):
            raise unsupported(t, "v1's color operations on PIL images round as Pillow's ImageEnhance does; "
                                 "torchvision.transforms.v2's (or fastload.transforms') fuse")
        if isinstance(t, (v2.ColorJitter, v2.Grayscale, v2.RandomGrayscale)):
            color_group(t, float(getattr(t, "p", 1.0)), [t])
            continue
        if isinstance(t, v2.RandomApply):
            inner = [x for part in t.transforms for x in _flatten(part)]
            if any(isinstance(x, v2.RandomGrayscale) and x.p < 1.0 for x in inner):
                raise unsupported(t, "a RandomGrayscale with p < 1 inside it")
            color_group(t, float(t.p), inner)
            continue
        if isinstance(t, (v1.RandomRotation, v2.RandomRotation, v1.RandomAffine, v2.RandomAffine)):
            if geometry is None or geometry.output_size is None:
                raise unsupported(t, "before a crop or resize to a fixed size")
            if affine is not None:
                raise unsupported(t, "a second rotation or affine map")
            if color:
                raise unsupported(t, "after color operations, which do not commute with it")
            if state == "float" and (any(abs(s * 255 - 1) > 1e-12 for s in scale) or any(shift)):
                raise unsupported(t, "on floats that are not ToDtype(scale=True) values in [0, 1]")
            affine = _affine_step(t, state, geometry.output_size, (bool(hflip_p), bool(vflip_p)), unsupported)
            continue
        if isinstance(t, (v1.RandomVerticalFlip, v2.RandomVerticalFlip)):
            if vflip_p:
                raise unsupported(t, "more than one vertical flip")
            vflip_p = float(t.p)
            continue
        if isinstance(t, (v1.RandomResizedCrop, v2.RandomResizedCrop, v1.Resize, v2.Resize,
                          v1.CenterCrop, v2.CenterCrop)):
            if affine is not None:
                raise unsupported(t, "a crop or resize after a rotation or affine map")
            if isinstance(t, (v1.RandomResizedCrop, v2.RandomResizedCrop, v1.Resize, v2.Resize)):
                mode = _interpolation(t)
                if mode not in _PIL_RESAMPLE:
                    raise unsupported(t, f"interpolation {mode.value}")
                if state != "pil" and mode != InterpolationMode.NEAREST and getattr(t, "antialias", True) is not True:
                    # on a PIL image torchvision always antialiases, as the plan does; on a tensor it obeys this
                    raise unsupported(t, "antialias=False on a tensor image")
                resample = _PIL_RESAMPLE[mode]
            if isinstance(t, (v1.CenterCrop, v2.CenterCrop)):
                crop = _pair(t.size)
                if geometry is None:
                    geometry = CenterCropGeometry(crop)
                elif isinstance(geometry, ResizeGeometry) and geometry.crop is None:
                    geometry = dataclasses.replace(geometry, crop=crop)
                else:
                    raise unsupported(t, "a second crop after a crop")
            elif geometry is not None:
                raise unsupported(t, "a second resampling step")
            elif isinstance(t, (v1.RandomResizedCrop, v2.RandomResizedCrop)):
                geometry = RandomResizedCropGeometry(_pair(t.size), tuple(t.scale), tuple(t.ratio))
            else:
                size = t.size if t.size is None or isinstance(t.size, int) else tuple(t.size)
                geometry = ResizeGeometry(size, t.max_size)
        elif isinstance(t, (v1.RandomHorizontalFlip, v2.RandomHorizontalFlip)):
            if hflip_p:
                raise unsupported(t, "more than one horizontal flip")
            hflip_p = float(t.p)
        elif isinstance(t, (v1.ToTensor, v2.ToTensor)) and state == "pil":
            if torch.get_default_dtype() != torch.float32:
                raise unsupported(t, f"it converts to the default dtype, {torch.get_default_dtype()}")
            state, dtype, scale = "float", torch.float32, [s / 255.0 for s in scale]
            unit, unit_dtype = "divide", torch.float32  # img.to(float32).div(255)
        elif isinstance(t, (v1.PILToTensor, v2.PILToTensor, v2.ToImage)) and state == "pil":
            state = "uint8"
        elif isinstance(t, v2.ToPureTensor) and state != "pil":
            pass
        elif isinstance(t, (v2.ToDtype, v1.ConvertImageDtype)):
            target = t.dtype
            scaled = t.scale if isinstance(t, v2.ToDtype) else True
            if state == "pil" and not isinstance(t, ToDtype):
                raise unsupported(t, "applied to a PIL image it changes nothing; add ToImage first")
            if not isinstance(target, torch.dtype) or target not in (torch.uint8,) + TABLE_DTYPES:
                raise unsupported(t, f"dtype {target}")  # (float64: its values do not fit the float32 tables)
            if target == torch.uint8:
                if state == "float":
                    raise unsupported(t, "float back to uint8")
                state = "uint8"
            else:
                if state != "float":  # v2: x.to(target).mul_(1.0 / 255); v1 ConvertImageDtype: x.to(target) / 255.0
                    scale = [s / 255.0 for s in scale] if scaled else scale
                    unit = ("multiply" if isinstance(t, v2.ToDtype) else "divide") if scaled else "none"
                    unit_dtype = target
                elif target != dtype:  # float to float: x.to(target), whether scaled or not
                    value_steps.append(("to", target))
                state, dtype = "float", target
        elif isinstance(t, (v1.Normalize, v2.Normalize)) and state == "float":
            mean, std = list(t.mean), list(t.std)
            if len(mean) == 1:
                mean, std = mean * 3, std * 3
            if len(mean) != 3 or len(std) != 3:
                raise unsupported(t, "needs 1 or 3 channel statistics")
            # as Normalize converts them: torch.as_tensor(mean, dtype=the image's dtype)
            mean_t = torch.as_tensor(t.mean, dtype=dtype).flatten().expand(3)
            std_t = torch.as_tensor(t.std, dtype=dtype).flatten().expand(3)
            if not bool(torch.isfinite(mean_t).all() and torch.isfinite(std_t).all() and (std_t != 0).all()):
                raise unsupported(t, f"a mean or std that is not finite, or a std that is 0, in {dtype}")
            value_steps.append(("normalize", tuple(mean_t.tolist()), tuple(std_t.tolist())))
            scale = [s / d for s, d in zip(scale, std)]
            shift = [(b - m) / d for b, m, d in zip(shift, mean, std)]
        else:
            raise unsupported(t)
    if state == "pil":
        raise UnsupportedTransform("the transforms end with a PIL image, which cannot be batched")
    if geometry is None or geometry.output_size is None:
        raise UnsupportedTransform("no fixed output size (needs RandomResizedCrop, CenterCrop "
                                   "or Resize to (h, w)) so samples cannot be batched")
    output_size = affine.output_size if affine is not None else geometry.output_size
    identity = state == "uint8"
    normalization = None if identity else Normalization(unit, unit_dtype, tuple(value_steps))
    if color_quantized is False and not normalization.fits_float_chain:
        raise UnsupportedTransform("after color operations on floats only one Normalize (in float32) and a "
                                   "last dtype conversion compile")
    return Plan(geometry=geometry, resample=resample, hflip_p=hflip_p, output_size=output_size,
                dtype=dtype, scale=None if identity else tuple(scale),
                shift=None if identity else tuple(shift), vflip_p=vflip_p, color=tuple(color),
                color_quantized=color_quantized is not False, affine=affine,
                normalization=normalization)


def _color_step(t, unsupported) -> tuple | None:
    """One color transform as a plan step, None for one that does nothing."""
    if isinstance(t, v2.ColorJitter):
        ranges = (t.brightness, t.contrast, t.saturation, t.hue)
        if all(r is None for r in ranges):
            return None
        return ("jitter",) + tuple(None if r is None else (float(r[0]), float(r[1])) for r in ranges)
    if isinstance(t, (v2.Grayscale, v2.RandomGrayscale)):
        if getattr(t, "num_output_channels", 3) != 3:
            raise unsupported(t, "one output channel; batches are RGB")
        return ("gray",)
    raise unsupported(t, "inside RandomApply only ColorJitter and Grayscale compile")
