"""What every rocAL operator builds on: the node description (``Rocal``), parameter handles, the
image-operator node and refusals.

rocAL's Python API is modelled on DALI's, so its operators add ``Op``s to
the same graph (``..engine.graph``) and its pipelines run on the same
executor and loader; what differs is rocAL's rules, each cited from its
sources (ROCm/rocAL at 0981d5bb): the reader lives in the decoder
(``fn.readers.file`` only records the folder), decoded images are capped at
``max_decoded_width`` x ``max_decoded_height``, image operators output NHWC
uint8 unless asked otherwise, crop_mirror_normalize mirrors by default, and
every output is a buffer of the operator's largest size with each image at
its top left. Every image operator's node carries that buffer size and its
output layout and type (``Rocal``), which the pipeline uses when it hands
batches out. Arguments rocAL has but fastload does not run as rocAL does
raise NotImplementedError naming them. The operators themselves are one
module per family: ``ops_readers``, ``ops_decoders``, ``ops_geometry``,
``ops_colour``, ``ops_effects``, ``ops_labels``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from ..engine.graph import DataNode, Op
from . import coco
from .definition import defining
from .meta import Rocal, describe, meta  # noqa: F401 (Rocal: the operators import it from here)
from .reading import refuse  # noqa: F401 (the operators import it from here)
from .spec import supported_names
from .types import RocalTensorLayout, RocalTensorOutputType

PREFIX = "fastload.compat.rocal"


def _source(inputs) -> Rocal:
    """What an image operator's input is: rocAL's description of an image, else a TypeError saying why."""
    image = inputs[0] if inputs else None
    described = meta(image)
    array = described.array
    if array is not None and described.image is None:
        raise TypeError(f"{PREFIX}: an image operator takes an image: fn.readers.numpy's output is one when its "
                        f"output_layout is NHWC or NCHW and its arrays uint8 of three dimensions, 1 or 3 "
                        f"channels (here {array.layout}, {array.dtype} of shape {array.max_shape})")
    if described.image is None:
        raise TypeError(f"{PREFIX}: an image operator takes an image output of a decoder or another image operator")
    return described.image


def _per_frame(impl):
    """An image operator's impl run on each frame of a sequence (fn.readers.video's samples), with the
    sequence's one set of random parameters, as rocAL replicates an operator's parameters over the
    frames; ``ctx.frame`` tells per-pixel noise which frame it draws for (RPP's are separate images)."""
    def run(ctx, op, frames, **args):
        return torch.stack([impl(replace(ctx, frame=n), op, frame, **args) for n, frame in enumerate(frames)])
    return run


def _image_op(name: str, impl, image: DataNode, args: dict, out: Rocal, others=()) -> DataNode:
    """The node of image operator ``name``: ``impl`` on ``image`` (and ``others``, further inputs such as
    blend's second image), per frame for fn.readers.video's sequences, its output described by ``out``,
    with fn.readers.coco's boxes moved as rocAL's meta node for the operator moves them."""
    _source([image])
    sequence = meta(image).frames
    if sequence is None and out.layout in SEQUENCE_LAYOUTS:
        raise ValueError(f"{PREFIX}: fn.{name}: output_layout {out.layout.name} is for fn.readers.video's "
                         f"sequences: give NHWC or NCHW")
    if sequence is not None and out.layout not in SEQUENCE_LAYOUTS:  # each frame in that layout
        out = replace(out, layout={v: k for k, v in SEQUENCE_LAYOUTS.items()}[out.layout])
    node = Op("rocal." + name, impl if sequence is None else _per_frame(impl), [image, *others], args,
              layouts=("HWC" if sequence is None else "FHWC",)).outputs[0]
    boxes = meta(image).boxes
    if boxes is not None:  # fn.readers.coco's boxes, moved as rocAL's meta node for the operator moves them
        boxes = coco.moved(defining(), name, boxes, image, node, args,
                           args.get("size") or (out.buffer[1], out.buffer[0]))
    describe(node, image=out, frames=sequence, boxes=boxes)
    return node


SEQUENCE_LAYOUTS = {RocalTensorLayout.NFHWC: RocalTensorLayout.NHWC, RocalTensorLayout.NFCHW: RocalTensorLayout.NCHW}


def _kind(layout, dtype) -> tuple[RocalTensorLayout, RocalTensorOutputType]:
    layout, dtype = RocalTensorLayout(layout), RocalTensorOutputType(dtype)
    if layout not in (RocalTensorLayout.NHWC, RocalTensorLayout.NCHW, *SEQUENCE_LAYOUTS):
        raise NotImplementedError(f"{PREFIX}: output_layout {layout.name} not supported (NHWC, NCHW; NFHWC, NFCHW "
                                  f"for fn.readers.video's sequences)")
    return layout, dtype


class RocalParam:
    """rocAL's parameter handle (RocalIntParam / RocalFloatParam, from ``Pipeline.create_int_param`` /
    ``create_float_param``): a value the operators it is given read when they run, which the script may
    change between runs (``update_int_param`` / ``update_float_param``). As in rocAL, whose prefetch queue
    holds batches made ahead, the batches the loader has already made keep the value they were made with,
    and a batch reads it once: the value its first sample finds holds for all its samples
    (``SampleContext.batch``)."""

    def __init__(self, value, kind: type):
        if kind is int and not isinstance(value, (int, np.integer)):  # pybind11 takes no float for an int
            raise TypeError(f"{PREFIX}: create_int_param({value!r}): an int parameter takes an int")
        self.kind, self.value = kind, kind(value)

    def __repr__(self) -> str:
        return f"RocalParam({self.value!r})"


def _param(value):
    """An argument rocAL takes as a fixed value or a per-sample parameter (a coin flip, fn.uniform, a
    parameter handle, read once for each batch)."""
    if isinstance(value, RocalParam):
        handle = value

        def read(ctx, op) -> torch.Tensor:
            return torch.tensor(float(ctx.batch.setdefault(handle, handle.value)), dtype=torch.float64)
        return Op("rocal.parameter", read, [], {}).outputs[0]
    if isinstance(value, DataNode) or value is None:
        return value
    return float(value)


def _flag(value):
    """A 0/1 argument: a per-sample node (a coin flip, a parameter handle) or the int given."""
    return _param(value) if isinstance(value, RocalParam) else value


def _mirror(mirror):
    """A mirror argument: a per-sample node (a coin flip, a parameter handle) or a constant 0/1."""
    mirror = _flag(mirror)
    return mirror if isinstance(mirror, DataNode) else int(bool(mirror))


def unsupported(name: str, why: str = ""):
    """A stand-in for rocAL's ``fn.<name>`` that fastload does not run: it raises NotImplementedError naming
    itself, with ``why`` where there is a reason beyond "not yet"."""
    def refuse_operator(*inputs, **args):
        if why:
            raise NotImplementedError(f"{PREFIX}: fn.{name} is not supported: {why}")
        raise NotImplementedError(f"{PREFIX}: fn.{name} is not supported yet (supported: "
                                  f"{', '.join(supported_names())})")
    refuse_operator.__name__ = name
    refuse_operator.__doc__ = f"``fn.{name}``: not supported yet (raises NotImplementedError)."
    return refuse_operator
