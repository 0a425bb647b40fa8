"""What a rocAL pipeline's operators record while it is defined (``Definition``), and the DALI graph
pipeline that records and runs its operators (``RocalGraph``).

Why: a rocAL pipeline hands out more than its graph's outputs -- the labels of its one reader, COCO's
boxes and annotations, fn.one_hot's class count, the box encoder's anchors, an external source's
iterator -- and each is decided by an operator as the pipeline is defined. These used to be attributes
the operators set on the pipeline object; here they are one typed record with one owner (the rocAL
``Pipeline``), which the operators reach through ``defining()``.

The rocAL ``Pipeline`` is no DALI pipeline: it owns a ``RocalGraph`` (its ``_dali_pipeline``:
fastload.compat.dali's pipeline, with rocAL's lowering) that records the operators inside ``with pipe:``
and runs the graph, and builds rocAL's API on that pipeline's public one (``set_outputs``, ``build``,
``run``, ``feed_input``, ``loader``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..dali import pipeline as dali_pipeline
from ..engine.graph import DataNode, current_pipeline

PREFIX = "fastload.compat.rocal"


@dataclass
class Definition:
    """What the operators of one rocAL pipeline decided beside its graph.

    Attributes:
        batch_size: the pipeline's (fn.readers.sequence_reader pads its sequences to whole batches).
        reader: the one recorded reader (``reading.RecordedReader``), as rocAL's one meta data reader.
        label_reader: whether that reader makes rocAL's label reader (fn.readers.file, fn.readers.cifar10),
            whose labels rocAL's generic iterator gives (it gives None after every other reader).
        labels: the reading op's labels output (rocAL's labelReader), which the pipeline runs beside its
            outputs and hands out through ``get_image_labels()``.
        last_batch_policy: the reading op's (the iterators pad or drop by it).
        unlabelled: why ``get_image_labels()`` refuses, for a reader without labels.
        coco: fn.readers.coco's samples and annotations (``coco.COCOSamples``).
        boxes: their boxes as the last box-moving operator left them; ``decoded_boxes``: the decoder's.
        webdataset: fn.readers.webdataset's samples, whose members the iterators give in place of labels.
        external: fn.external_source's (DALI source op, the user's iterator, rocAL's mode).
        num_classes: fn.one_hot's; ``one_hot_encoding`` whether there is one.
        box_encoder, box_iou_matcher: fn.box_encoder's and fn.box_iou_matcher's rules (``anchors``).
    """

    batch_size: int
    reader: object | None = None
    label_reader: bool = False
    labels: DataNode | None = None
    last_batch_policy: object | None = None
    unlabelled: str | None = None
    coco: object | None = None
    boxes: DataNode | None = None
    decoded_boxes: DataNode | None = None
    webdataset: object | None = None
    external: tuple | None = None
    num_classes: int | None = None
    one_hot_encoding: bool = False
    box_encoder: object | None = None
    box_iou_matcher: object | None = None


class RocalGraph(dali_pipeline.Pipeline):
    """fastload.compat.dali's pipeline with rocAL's lowering (``lowering.lower``, given: the operators'
    modules import this one), holding the rocAL pipeline's ``Definition``; the rocAL ``Pipeline`` that
    owns it drives it through DALI's API."""

    _says_unfused = False  # rocAL's graphs that do not fuse say so in loader.stats only

    def __init__(self, definition: Definition, lower: Callable, **kwargs):
        super().__init__(**kwargs)
        self.definition = definition
        self._lowering = lower

    def _lower(self, graph):
        return self._lowering(graph)

    @property
    def fused(self) -> bool:
        """Whether the graph runs as one fused plan, whose batches are dense already."""
        self.build()
        return self._lowered is not None

    def reseed(self, seed: int) -> None:
        """rocAL's ``set_seed``: before the graph is built."""
        if self._built:
            raise RuntimeError(f"{PREFIX}: set_seed after build() is not supported")
        self._seed = int(seed)

    def restart(self) -> None:
        """Drop what is left of the reader's stream: the next batch starts an epoch (rocAL's reset)."""
        if self._batches is not None:
            self._batches.close()
            self._batches = None


def defining() -> Definition:
    """The definition of the rocAL pipeline being defined (``with pipe:`` or a ``pipeline_def``
    function) on this thread; a RuntimeError outside one (a DALI pipeline's included)."""
    graph = current_pipeline()
    if not isinstance(graph, RocalGraph):
        raise RuntimeError(f"{PREFIX}: operators are called inside a rocAL pipeline's definition (with pipe: ..., "
                           f"or a @pipeline_def function)")
    return graph.definition
