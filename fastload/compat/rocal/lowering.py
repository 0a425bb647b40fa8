"""rocAL's classification training graph, compiled to a fastload ``Plan`` (the fast path, or the device path).

The graph of rocAL's ImageNet training example (docs/examples/pytorch/
imagenet_training/imagenet_training.py) -- ``decoders.image_slice`` (or
``image_random_crop``) -> ``resize`` to a fixed width x height with
TRIANGULAR interpolation -> ``crop_mirror_normalize`` to float with a
coin-flip or constant mirror, cropping nothing -- is one random window
resampled to a fixed size, a flip and a normalization: a ``Plan``. Its
geometry draws the window and the mirror from the same per-operator streams
as the operator run (``SampleContext.rng``), so both see the same windows
and flips; the triangle filter that rocAL's TRIANGULAR resize is (RPP's
separable resample, antialiased when shrinking) is Pillow's bilinear, so
the pixels differ only by rounding and at image borders, as for DALI. Other
graphs (a LINEAR resize, which is RPP's plain bilinear, among them) run
operator by operator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from PIL import Image

from ...transforms import Draw, Plan, _largest_reduction
from ..dali import imageops as dali_imageops
from ..dali.lowering import DaliRandomCropGeometry, Lowered, Mirror
from . import ops_decoders, ops_geometry  # noqa: F401 (they declare the operators named here)
from .meta import meta
from .spec import OPERATORS
from .types import RocalTensorLayout, RocalTensorOutputType

# the nodes it looks for, named as the operators declare them (spec.OpSpec.node)
_DECODERS = (OPERATORS["decoders.image_slice"].node, OPERATORS["decoders.image_random_crop"].node)
_CMN, _RESIZE = OPERATORS["crop_mirror_normalize"].node, OPERATORS["resize"].node


@dataclass(frozen=True)
class RocalRandomCropGeometry(DaliRandomCropGeometry):
    """rocAL's random-crop decoder's window (the rule DALI has, drawn from the decoder's stream), cut to the
    decoder's max_decoded_height x max_decoded_width, resized to ``size``."""

    cap: tuple[int, int] = (1 << 30, 1 << 30)  # (height, width)

    def sample(self, width: int, height: int, rng) -> Draw:
        y, x, h, w = dali_imageops.random_crop_window(height, width, rng.fork(self.salt), self.scale, self.ratio,
                                                      self.num_attempts)
        h, w = min(h, self.cap[0]), min(w, self.cap[1])
        out_h, out_w = self.size
        box = (x, y, x + w, y + h)
        return Draw(crop=box, resize=(out_w, out_h), source_box=box, hflip=self.mirror.draw(rng),
                    max_reduction=_largest_reduction(min(w / out_w, h / out_h)))


def lower(graph) -> Lowered | str:
    """The graph as a plan, or why it runs operator by operator."""
    if len(graph.outputs) != 2:
        return f"it has {len(graph.outputs) - 1} outputs, not one image output"
    image = graph.outputs[0]
    cmn = image.source
    if cmn is None or cmn.name != _CMN:
        return "its output does not come from crop_mirror_normalize"
    out = meta(image).image
    if out.dtype not in (RocalTensorOutputType.FLOAT, RocalTensorOutputType.FLOAT16):
        return "its crop_mirror_normalize does not output floats"
    resize = cmn.inputs[0].source
    if resize is None or resize.name != _RESIZE or resize.args["interpolation"] != "triangular":
        return "its crop_mirror_normalize does not follow a TRIANGULAR resize"
    sizes = resize.args["sizes"]
    if not (sizes["resize_width"] and sizes["resize_height"]) or sizes["resize_shorter"] or \
            sizes["resize_longer"] or sizes["max_size"] or sizes["scaling_mode"] not in (0, 1) or \
            meta(cmn.inputs[0]).image.dtype != RocalTensorOutputType.UINT8:
        return "its resize is not to a fixed width and height in uint8"
    size = (sizes["resize_height"], sizes["resize_width"])
    if out.buffer != size:
        return f"its crop_mirror_normalize crops {out.buffer} out of {size}"
    decoder = resize.inputs[0].source
    if decoder is None or decoder.name not in _DECODERS or decoder.args["color"] != "RGB":
        return "its resize does not follow an RGB random-crop decoder"
    coin = cmn.arg_inputs.get("mirror")
    if coin is None:
        mirror = Mirror(1.0 if cmn.args["mirror"] else 0.0)
    elif coin.source is not None and coin.source.name == "random.coin_flip" and not coin.source.arg_inputs \
            and coin.source.seed is None:
        mirror = Mirror(float(coin.source.args["probability"]), coin.source.ordinal)
    else:
        return "its mirror is neither a constant nor a coin flip"
    mean, std = cmn.args["mean"], cmn.args["std"]
    mean, std = (mean * 3 if len(mean) == 1 else mean), (std * 3 if len(std) == 1 else std)
    if len(mean) != 3 or len(std) != 3 or 0.0 in std:
        return "its mean/std are not one value or three, or a std is 0"
    geometry = RocalRandomCropGeometry(size=size, scale=decoder.args["area"], ratio=decoder.args["ratio"],
                                       num_attempts=decoder.args["attempts"], salt=decoder.ordinal, mirror=mirror,
                                       cap=(decoder.args["max_height"], decoder.args["max_width"]))
    dtype = torch.float16 if out.dtype == RocalTensorOutputType.FLOAT16 else torch.float32
    plan = Plan(geometry=geometry, resample=Image.BILINEAR, hflip_p=0.0, output_size=size, dtype=dtype,
                scale=tuple(1 / s for s in std), shift=tuple(-m / s for m, s in zip(mean, std)))
    return Lowered(plan, 0, 1, "CHW" if out.layout == RocalTensorLayout.NCHW else "HWC")
