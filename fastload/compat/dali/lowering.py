"""The common classification graph of a DALI pipeline, compiled to a fastload ``Plan``.

The graph DALI's ResNet-50 example and most training scripts use --
``readers.file`` -> ``decoders.image_random_crop`` -> ``resize`` to a fixed
size -> ``crop_mirror_normalize`` with a coin-flip mirror, or the validation
form ``decoders.image`` -> ``resize`` -> centred ``crop_mirror_normalize``
-- is one resampling step, a flip and a normalization: what a ``Plan``
describes. crop_mirror_normalize may output float32 or float16 (any
mean/std) or uint8 (no normalization), CHW or HWC (the loader's
channels_last batch, viewed as NHWC); a graph may also end at the resize
(uint8 HWC, normalized later by the script). Lowered, it takes fastload's
CPU fast path (region decoding, each thread writing its normalized row)
and, with a CUDA device, the device path. The geometries below draw each
sample's crop window and mirror from the same per-operator streams as the
operator-by-operator run (``SampleContext.rng``), so both give the same
windows and flips; the pixels differ only by the resampling arithmetic
(Pillow's triangle filter against ``resampling``'s, within a level or two).

``lower(graph)`` returns a ``Lowered`` or, when the graph is anything else,
the reason it runs operator by operator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from PIL import Image

from ...transforms import Draw, Plan, RandomResizedCropGeometry, _largest_reduction
from . import crops, resampling

_COPIES = ("gpu", "cpu")
_LINEAR = ("linear", "triangular")  # DALI's linear filter antialiases when shrinking: a triangle, as Pillow's


@dataclass(frozen=True)
class Mirror:
    """crop_mirror_normalize's ``mirror``: a constant, or a coin flip drawn from the coin's own stream."""

    probability: float
    salt: int | None = None  # the coin operator's place in the pipeline; None for a constant

    def draw(self, rng) -> bool:
        if self.salt is None:
            return self.probability >= 1.0
        return rng.fork(self.salt).random() < self.probability


@dataclass(frozen=True)
class DaliRandomCropGeometry(RandomResizedCropGeometry):
    """DALI's random crop window (``crops.random_crop_window``: its area/aspect rule, attempts and
    fallback), resized to ``size`` (height, width); the window from the cropping operator's stream."""

    num_attempts: int = 10
    salt: int = 0
    mirror: Mirror = Mirror(0.0)

    def sample(self, width: int, height: int, rng) -> Draw:
        y, x, h, w = crops.random_crop_window(height, width, rng.fork(self.salt), self.scale, self.ratio,
                                                 self.num_attempts)
        out_h, out_w = self.size
        box = (x, y, x + w, y + h)
        return Draw(crop=box, resize=(out_w, out_h), source_box=box, hflip=self.mirror.draw(rng),
                    max_reduction=_largest_reduction(min(w / out_w, h / out_h)))


@dataclass(frozen=True)
class DaliResizeCropGeometry:
    """DALI's resize (``resampling.resize_output_size``: its modes and rounding), then a
    crop_mirror_normalize window at (crop_pos_x, crop_pos_y) with DALI's anchor rounding."""

    resize: tuple  # sorted (name, value) pairs of fn.resize's size arguments
    crop: tuple[int, int] | None
    crop_pos: tuple[float, float] = (0.5, 0.5)
    mirror: Mirror = Mirror(0.0)
    # its samples resize a fractional source box (Draw.box_resize), which the fused kernel's integer
    # boxes cannot say: fastload.device.unsupported keeps it on the CPU fast path
    box_resize = True

    @property
    def output_size(self) -> tuple[int, int]:
        if self.crop is not None:
            return self.crop
        args = dict(self.resize)
        return int(args["resize_y"]), int(args["resize_x"])

    def sample(self, width: int, height: int, rng) -> Draw:
        (rh, rw), (y_lo, y_hi), (x_lo, x_hi) = resampling._resize_plan(height, width, **dict(self.resize))
        top, left, ch, cw = 0, 0, rh, rw
        if self.crop is not None:
            (top, ch), (left, cw) = crops._crop_window(rh, rw, self.crop[0], self.crop[1], self.crop_pos[0],
                                                           self.crop_pos[1], "round")
            if top < 0 or left < 0 or top + ch > rh or left + cw > rw:
                raise ValueError(f"crop_mirror_normalize: a {ch}x{cw} window does not fit the {rh}x{rw} "
                                 f"resized image (as in DALI, out_of_bounds_policy='error')")
        # DALI keeps the requested scale when it rounds the output size (subpixel_scale): the window's
        # source box, at that scale, resized straight to the window (kept inside the image for Pillow)
        sx, sy = (float(x_hi) - float(x_lo)) / rw, (float(y_hi) - float(y_lo)) / rh
        box = (max(0.0, float(x_lo) + left * sx), max(0.0, float(y_lo) + top * sy),
               min(float(width), float(x_lo) + (left + cw) * sx), min(float(height), float(y_lo) + (top + ch) * sy))
        post_crop = (left, top, left + cw, top + ch) if self.crop is not None else None
        return Draw(resize=(rw, rh), post_crop=post_crop, source_box=box, box_resize=True,
                    hflip=self.mirror.draw(rng))


@dataclass
class Lowered:
    """A lowered graph: its plan, and which pipeline output is the images and which the labels."""

    plan: Plan
    image_output: int
    label_output: int
    layout: str = "CHW"  # of the image output: "HWC" takes the loader's channels_last batch, permuted


def _source(node):
    """The node behind any .gpu() / .cpu() copies."""
    while node.source is not None and node.source.name in _COPIES:
        node = node.source.inputs[0]
    return node


def lower(graph) -> Lowered | str:
    """The graph as a plan, or why it cannot be one."""
    if len(graph.outputs) != 2:
        return f"it has {len(graph.outputs)} outputs, not (images, labels)"
    roles = {}
    for i, node in enumerate(graph.outputs):
        base = _source(node)
        if base.source is not None and base.source.name == "readers.file" and base.index == 1:
            roles["label"] = i
        else:
            roles["image"], image = i, base
    if set(roles) != {"image", "label"}:
        return "its outputs are not (images, labels of the reader)"
    last = image.source
    if last is not None and last.name in ("resize", "random_resized_crop"):
        # the resized uint8 images themselves, HWC (a script that normalizes later, on the GPU say)
        dtype, scale, shift, layout = torch.uint8, None, None, "HWC"
        crop, crop_pos, mirror = None, (0.5, 0.5), Mirror(0.0)
        step = last
    elif last is None or last.name != "crop_mirror_normalize":
        return (f"its image output comes from {last.name if last else 'a constant'}, not crop_mirror_normalize "
                f"or resize")
    else:
        normalize = _normalization(last)
        if isinstance(normalize, str):
            return normalize
        dtype, scale, shift, crop, crop_pos, mirror, layout = normalize
        step = _source(last.inputs[0]).source
    resize_args = None
    if step is not None and step.name == "resize":
        if step.arg_inputs or step.args.get("interp_type") not in _LINEAR or not step.args.get("antialias") \
                or step.args.get("dtype") is not None:
            return "its resize has per-sample arguments, a filter other than linear, or an output dtype"
        resize_args = tuple(sorted((k, v) for k, v in step.args.items()
                                   if k not in ("interp_type", "antialias", "dtype") and v is not None))
        step = _source(step.inputs[0]).source
    rrc = None
    if step is not None and step.name == "random_resized_crop" and resize_args is None:
        if step.arg_inputs or step.args["interp_type"] not in _LINEAR or not step.args["antialias"] \
                or step.args["dtype"] is not None:
            return "its random_resized_crop has per-sample arguments, another filter, or an output dtype"
        rrc = step
        step = _source(step.inputs[0]).source
    if step is None:
        return "its images do not come from an image decoder"
    if step.name not in ("decoders.image", "decoders.image_random_crop"):
        return (f"its {step.name} runs between the image decoder and the resize (the fused plan decodes, crops, "
                f"resizes, flips and normalizes, nothing else)")
    if step.arg_inputs or step.args["output_type"] != "RGB":
        return "its image decoder has per-sample arguments or does not decode to RGB"
    reader = _source(step.inputs[0])
    if reader.source is None or reader.source.name != "readers.file" or reader.index != 0:
        return "its decoder does not read the reader's files"
    random_crop = step if step.name == "decoders.image_random_crop" else rrc
    if random_crop is not None and random_crop.seed is not None:
        return "its random crop has a seed of its own (the fused plan draws from the pipeline's)"
    if random_crop is not None:
        if random_crop is step and resize_args is None:
            return "its random-crop decoder is not followed by a resize"
        if random_crop is rrc:
            size = tuple(int(v) for v in rrc.args["size"])
        else:
            args = dict(resize_args)
            if set(args) != {"resize_x", "resize_y"}:
                return "its resize after the random-crop decoder is not to a fixed resize_x, resize_y"
            size = (int(args["resize_y"]), int(args["resize_x"]))
        if crop is not None and crop != size:
            return f"its crop_mirror_normalize crops {crop} out of {size}"
        geometry = DaliRandomCropGeometry(size=size, scale=tuple(random_crop.args["random_area"]),
                                          ratio=tuple(random_crop.args["random_aspect_ratio"]),
                                          num_attempts=random_crop.args["num_attempts"],
                                          salt=random_crop.ordinal, mirror=mirror)
    else:
        if resize_args is None:
            return "its images are not resized"
        geometry = DaliResizeCropGeometry(resize_args, crop, crop_pos, mirror)
        if crop is None and {"resize_x", "resize_y"} - {k for k, _ in resize_args}:
            return "its images have no fixed size (no crop, and the resize keeps the aspect ratio)"
    plan = Plan(geometry=geometry, resample=Image.BILINEAR, hflip_p=0.0, output_size=geometry.output_size,
                dtype=dtype, scale=scale, shift=shift)
    return Lowered(plan, roles["image"], roles["label"], layout)


def _normalization(cmn):
    """crop_mirror_normalize's (dtype, scale, shift, crop, crop_pos, mirror, layout), or why it does not
    lower. uint8 lowers only without normalization (scale, shift None: the resized pixels)."""
    args = dict(cmn.args)
    layout, dtype = args.get("output_layout"), args.get("dtype")
    if layout not in ("CHW", "HWC") or dtype not in (torch.float32, torch.float16, torch.uint8):
        return "its crop_mirror_normalize does not output float32, float16 or uint8 in CHW or HWC"
    if args.get("pad_output") or set(cmn.arg_inputs) - {"mirror"}:
        return "its crop_mirror_normalize pads its output or has per-sample arguments other than mirror"
    if args.get("out_of_bounds_policy", "error") != "error":
        return "its crop_mirror_normalize pads or trims windows outside the image"
    mean = _per_channel(args.get("mean", 0.0))
    std = _per_channel(args.get("std", 1.0))
    out_scale, out_shift = float(args.get("scale", 1.0)), float(args.get("shift", 0.0))
    if mean is None or std is None:
        return "its mean/std are not one value or three"
    scale = tuple(out_scale / s for s in std)
    shift = tuple(out_shift - out_scale * m / s for m, s in zip(mean, std))
    if dtype == torch.uint8:
        if scale != (1.0,) * 3 or shift != (0.0,) * 3:
            return "its crop_mirror_normalize normalizes to uint8 (DALI's rounding and clamping there)"
        scale = shift = None  # the resized uint8 pixels themselves
    crop_h, crop_w = int(args.get("crop_h", 0) or 0), int(args.get("crop_w", 0) or 0)
    crop = (crop_h, crop_w) if crop_h and crop_w else None
    if (crop_h or crop_w) and crop is None:
        return "its crop_mirror_normalize crops one axis only"
    crop_pos = (float(args.get("crop_pos_x", 0.5)), float(args.get("crop_pos_y", 0.5)))
    coin = cmn.arg_inputs.get("mirror")
    if coin is None:
        mirror = Mirror(1.0 if args.get("mirror") else 0.0)
    else:
        op = coin.source
        if op is None or op.name != "random.coin_flip" or op.arg_inputs or op.args.get("probability") is None:
            return "its mirror is a per-sample value other than a coin flip"
        if op.seed is not None:
            return "its mirror's coin flip has a seed of its own (the fused plan draws from the pipeline's)"
        mirror = Mirror(float(op.args["probability"]), op.ordinal)
    return dtype, scale, shift, crop, crop_pos, mirror, layout


def _per_channel(value) -> tuple[float, float, float] | None:
    values = [float(v) for v in value] if isinstance(value, (list, tuple)) else [float(value)]
    if len(values) == 1:
        values *= 3
    return tuple(values) if len(values) == 3 else None
