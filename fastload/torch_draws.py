"""The fast path's draws taken as torchvision takes them (``draws="torch"`` over torch's datasets): from the
generator torch's worker would draw from, in the Compose's call order, with torchvision's own calls, so that
the same seed gives torch's pixels. ``fastload.transforms`` compiles the transforms into the ``Plan`` these
draws fill in; fastload's own sources draw from ``fastload.rng``'s per-sample streams instead.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from fastload.kernels.augment import BRIGHTNESS, CONTRAST, GRAYSCALE, HUE, NONE, SATURATION

from ._torchvision import v1, v2
from .sizes import fallback_crop
from .transforms import (Draw, Plan, RandomResizedCropGeometry, UnsupportedTransform, _color_step, _flatten,
                         _float32)


class TorchDraws:
    """A plan's draws taken as torchvision takes them: from a torch generator, in the Compose's call order.

    Over torch's datasets (``draws="torch"``) a sample's draws must be the
    ones torch's DataLoader gives under the same seed, so they come from the
    generator torch's worker would draw them from (its global one:
    ``fastload.workers.worker_generator``), sample after sample, with
    torchvision's own calls: RandomResizedCrop's get_params / make_params
    (v1 and v2 draw alike: per try ``torch.empty(1).uniform_`` for the area,
    then for the log ratio, ``torch.exp`` of it, and two ``torch.randint`` for
    the corner; after 10 failed tries the centre crop, drawing nothing more);
    one ``torch.rand(1)`` per flip, RandomApply and RandomGrayscale whatever
    its ``p``, compared in float32 as torch compares a float tensor with a
    Python float; a rotation's or affine map's parameters in make_params'
    order (``AffineGeometry.draw`` on a ``_TorchStream``); ColorJitter's
    ``torch.randperm(4)`` and then its factors, even where it has none.

    ``steps`` are the random calls in order: "crop", ("hflip", p), ("vflip", p),
    "affine", ("color", p or None, inner) -- a colour transform, with the
    ``p`` of its own ``torch.rand(1)`` (RandomApply, RandomGrayscale) and its
    inner steps: ("jitter", brightness, contrast, saturation, hue) (ranges or
    None), ("gray",), ("randgray",) (a RandomGrayscale inside a RandomApply).
    """

    def __init__(self, plan: "Plan", steps: tuple):
        self.plan, self.steps = plan, steps
        geometry = plan.geometry
        self.crop = type(geometry) is RandomResizedCropGeometry
        self.sized = "crop" in steps  # whether the draws depend on the image's size
        if self.crop:  # v1 computes it per call and v2 once: the same float32 values
            low, high = torch.log(torch.tensor(geometry.ratio)).tolist()
            self.log_ratio = (low, high)

    def draw(self, width: int, height: int, generator: torch.Generator) -> Draw:
        """One sample's draw for a ``width`` x ``height`` image, its random calls made on ``generator``;
        put together as ``Plan.sample`` puts its own draws together."""
        hflip = vflip = False
        draw, matrix, color = None, None, []
        for step in self.steps:
            if step == "crop":
                draw = self._crop(width, height, generator)
            elif step == "affine":
                matrix = self.plan.affine.matrix(**self.plan.affine.draw(_TorchStream(generator)))
            elif step[0] == "hflip":
                hflip = torch.rand(1, generator=generator).item() < step[1]
            elif step[0] == "vflip":
                vflip = torch.rand(1, generator=generator).item() < step[1]
            else:
                color.extend(_torch_color(step[1], step[2], generator))
        if draw is None:  # Resize / CenterCrop: nothing drawn
            draw = self.plan.geometry.sample(width, height, None)
        if matrix is not None:
            first_h, first_v = self.plan.affine.pre_flips
            draw = dataclasses.replace(draw, affine=matrix, pre_flips=(hflip and first_h, vflip and first_v))
            hflip, vflip = hflip and not first_h, vflip and not first_v
        if hflip or vflip:
            draw = draw.with_flips(hflip, vflip)
        if color:
            draw = dataclasses.replace(draw, color=tuple(color))
        return draw

    def _crop(self, width: int, height: int, generator: torch.Generator) -> Draw:
        """torchvision's RandomResizedCrop.get_params (v1) / make_params (v2), call for call."""
        geometry = self.plan.geometry
        scale, ratio, (log_low, log_high) = geometry.scale, geometry.ratio, self.log_ratio
        area = height * width
        for _ in range(10):
            target_area = area * torch.empty(1).uniform_(scale[0], scale[1], generator=generator).item()
            aspect_ratio = torch.exp(torch.empty(1).uniform_(log_low, log_high, generator=generator)).item()
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                top = torch.randint(0, height - h + 1, size=(1,), generator=generator).item()
                left = torch.randint(0, width - w + 1, size=(1,), generator=generator).item()
                return geometry.crop_draw(top, left, h, w)
        return geometry.crop_draw(*fallback_crop(width, height, ratio))


class _TorchStream:
    """``SampleRandom``'s ``uniform`` on a torch generator, as torchvision draws a float:
    ``torch.empty(1).uniform_(low, high)`` (what ``AffineGeometry.draw`` calls, in make_params' order)."""

    def __init__(self, generator: torch.Generator):
        self.generator = generator

    def uniform(self, low: float, high: float) -> float:
        return torch.empty(1).uniform_(low, high, generator=self.generator).item()


_COLOR_OPS = (BRIGHTNESS, CONTRAST, SATURATION, HUE)


def _torch_color(p: float | None, inner: tuple, generator: torch.Generator) -> list[tuple[int, float]]:
    """One colour transform's slots (as ``Plan._sample_color`` lays them out), drawn as torchvision v2 draws
    them: its own ``torch.rand(1)`` where it has a ``p``, then per inner step ColorJitter's randperm(4) and
    factors, or a RandomGrayscale's rand(1)."""
    applied = p is None or torch.rand(1, generator=generator).item() < p
    slots = []
    for step in inner:
        if step[0] == "jitter":
            ranges = step[1:]
            if not applied:
                slots.extend([(NONE, 0.0)] * 4 if any(r is not None for r in ranges) else [])
                continue
            order = torch.randperm(4, generator=generator).tolist()
            factors = [None if r is None else torch.empty(1).uniform_(r[0], r[1], generator=generator).item()
                       for r in ranges]
            if any(r is not None for r in ranges):  # (one without ranges draws, but compiles to no slots)
                slots.extend((_COLOR_OPS[k], factors[k]) if factors[k] is not None else (NONE, 0.0) for k in order)
        else:
            if step[0] == "randgray" and applied:
                torch.rand(1, generator=generator)  # p is 1 (compile_plan): applied, a draw all the same
            slots.append((GRAYSCALE, 0.0) if applied else (NONE, 0.0))
    return slots


# Transforms that draw nothing: torch's draws pass them by.
_DRAWLESS = tuple(t for t in (v1.Resize, v2.Resize, v1.CenterCrop, v2.CenterCrop, v1.ToTensor, v2.ToTensor,
                              v1.PILToTensor, v2.PILToTensor, v2.ToImage, v2.ToPureTensor, v2.ToDtype,
                              v1.ConvertImageDtype, v1.Normalize, v2.Normalize) if isinstance(t, type))


def torch_draws(transform, plan: "Plan") -> TorchDraws:
    """The torch-generator draws of ``transform`` (which compiled to ``plan``), in its call order, or
    UnsupportedTransform where they cannot be torchvision's: a flip before the crop or resize (the plan
    flips after it)."""
    steps, resampled = [], False

    def refuse(t, why: str):
        return UnsupportedTransform(f"{type(t).__module__}.{type(t).__name__} ({why}, with torch's draws: "
                                    "draws='fastload' takes the fast path)")

    def colour(t) -> tuple:
        if isinstance(t, v2.RandomGrayscale):
            return ("randgray",)
        return _color_step(t, refuse) or ("jitter", None, None, None, None)

    for t in _flatten(transform):
        if isinstance(t, (v1.RandomResizedCrop, v2.RandomResizedCrop)):
            steps.append("crop")
            resampled = True
        elif isinstance(t, (v1.RandomHorizontalFlip, v2.RandomHorizontalFlip,
                            v1.RandomVerticalFlip, v2.RandomVerticalFlip)):
            if not resampled:
                raise refuse(t, "before the crop or resize")
            vertical = isinstance(t, (v1.RandomVerticalFlip, v2.RandomVerticalFlip))
            steps.append(("vflip" if vertical else "hflip", _float32(float(t.p))))
        elif isinstance(t, (v1.RandomRotation, v2.RandomRotation, v1.RandomAffine, v2.RandomAffine)):
            steps.append("affine")
        elif isinstance(t, v2.RandomApply):
            inner = tuple(colour(x) for part in t.transforms for x in _flatten(part))
            steps.append(("color", _float32(float(t.p)), inner))
        elif isinstance(t, v2.RandomGrayscale):
            steps.append(("color", _float32(float(t.p)), (("gray",),)))
        elif isinstance(t, (v2.ColorJitter, v2.Grayscale)):
            steps.append(("color", None, (colour(t),)))
        elif isinstance(t, (v1.Resize, v2.Resize, v1.CenterCrop, v2.CenterCrop)):
            resampled = True
        elif not isinstance(t, _DRAWLESS):
            raise refuse(t, "its draws are fastload's own")
    return TorchDraws(plan, tuple(steps))
