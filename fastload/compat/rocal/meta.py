"""What rocAL knows of a graph node's output, in one typed slot: ``DataNode.meta`` holds a ``RocalMeta``.

Why: rocAL describes every tensor (its buffer, layout and type; a sequence's frames; the boxes travelling
beside an image; an array's shape; an audio tensor's dimensions and sample rates), and its operators and
pipeline read those descriptions. They used to hang off DALI's ``DataNode`` as separate ad-hoc attributes
probed with getattr/hasattr; now a node's description is one frozen dataclass, read with ``meta(node)``
(an empty description for a node of no rocAL operator: a constant, a coin flip) and set with
``describe(node, ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from ..engine.graph import DataNode
from .npy import NpyLayout
from .types import DTYPE_NAMES, TORCH_DTYPES, RocalTensorLayout, RocalTensorOutputType


@dataclass(frozen=True)
class Rocal:
    """An image operator's output as rocAL describes it: its buffer (height, width), layout and type."""

    buffer: tuple[int, int]
    layout: RocalTensorLayout = RocalTensorLayout.NHWC
    dtype: RocalTensorOutputType = RocalTensorOutputType.UINT8

    @property
    def torch_dtype(self) -> torch.dtype:
        return TORCH_DTYPES[self.dtype]

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES[self.dtype]


@dataclass(frozen=True)
class AudioShape:
    """An audio tensor's buffer: ``dims`` per sample ((X, Y), or (1,) for [batch, 1] values), rocAL's
    layout name and the dtype's name."""

    dims: tuple[int, ...]
    layout: str = "NHW"
    dtype: str = "float32"


@dataclass(frozen=True)
class RocalMeta:
    """A node's output as rocAL describes it; None where it is not that kind of tensor.

    Attributes:
        image: an image's buffer (height, width), layout and type (``Rocal``).
        frames: the frames of each sample of a sequence (fn.readers.video, fn.readers.sequence_reader).
        boxes: the node of fn.readers.coco's boxes that follow this image through the operators.
        array: fn.readers.numpy's (or fn.log1p's) arrays: their largest shape, type and layout.
        audio: an audio tensor's dimensions, layout and type.
        rates: the audio's sample rates (fn.resample reads them; rocAL shares them between tensors).
        downmixed: the audio was mixed down to one channel by its decoder.
    """

    image: Rocal | None = None
    frames: int | None = None
    boxes: DataNode | None = None
    array: NpyLayout | None = None
    audio: AudioShape | None = None
    rates: Any = None
    downmixed: bool = False


NONE = RocalMeta()


def meta(node) -> RocalMeta:
    """``node``'s description (``NONE`` for a node no rocAL operator described, or for what is no node)."""
    return node.meta if isinstance(node, DataNode) and isinstance(node.meta, RocalMeta) else NONE


def describe(node, **fields) -> None:
    """Set ``fields`` of ``node``'s description, keeping the others."""
    node.meta = replace(meta(node), **fields)
