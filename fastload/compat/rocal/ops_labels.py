"""rocAL's per-sample random values (``fn.random.coin_flip``, ``fn.uniform``), labels (``fn.one_hot``)
and COCO boxes (``fn.box_encoder``, ``fn.box_iou_matcher``; the box crops rocAL gets wrong are refused).
"""

from __future__ import annotations

import numpy as np

from ..dali.operators import random_coin_flip, random_uniform
from . import anchors as anchor_rules
from .definition import defining
from .ops_common import PREFIX, unsupported
from .spec import NOT_IMAGE, OpSpec, declare, operator
from .types import RocalTensorLayout, RocalTensorOutputType

# ------------------------------------------------------------------------------------------ random, labels

@operator("random.coin_flip", output=NOT_IMAGE)
def coin_flip(*inputs, probability=0.5):
    """``fn.random.coin_flip``: a per-sample 0/1, 1 with ``probability`` (an operator's mirror, flips)."""
    return random_coin_flip(probability=float(probability))


@operator(output=NOT_IMAGE, legacy=("random.uniform",))
def uniform(*inputs, range=(-1.0, 1.0), device=None):
    """``fn.uniform`` (and ``fn.random.uniform``): a per-sample float in [range[0], range[1]), for an
    operator's argument."""
    low, high = (float(v) for v in range)
    return random_uniform(range=(low, high))


@operator(output=NOT_IMAGE)
def one_hot(*inputs, num_classes=0, device=None):
    """``fn.one_hot``: the iterators hand labels one-hot over ``num_classes`` (rocAL's rule: label L at
    L - 1, label 0 at the last place; rocalGetOneHotImageLabels, rocAL/source/api/rocal_api_meta_data.cpp)."""
    if int(num_classes) < 1:
        raise ValueError("fn.one_hot: num_classes must be positive")
    definition = defining()
    definition.num_classes, definition.one_hot_encoding = int(num_classes), True
    return []


def _coco_boxes(name: str):
    definition = defining()
    if definition.boxes is None:
        raise ValueError(f"{PREFIX}: fn.{name} encodes fn.readers.coco's boxes: read them first (fn.readers.coco, "
                         f"then fn.decoders.image(..., annotations_file=...))")
    return definition


@operator(output=NOT_IMAGE)
def box_encoder(*inputs, anchors, criteria=0.5, means=None, offset=False, scale=1.0, stds=None, device=None):
    """``fn.box_encoder``: each run encodes the batch's boxes, as the operators left them, against
    ``anchors`` (``fastload.compat.rocal.anchors``); ``pipe.get_encoded_boxes_and_lables(batch, anchors)``
    gives them. Returns (None, []) as rocAL's does (its binding returns nothing)."""
    definition = _coco_boxes("box_encoder")
    definition.box_encoder = anchor_rules.box_encoder(anchors, criteria, means, offset, scale, stds)
    _one_anchor_list(definition)
    return None, []


def _one_anchor_list(definition) -> None:
    """rocAL keeps one anchor list for both (MasterGraph::box_iou_matcher overwrites the encoder's _anchors,
    which the matcher then points at): the last given would serve both, so two different lists are refused."""
    if definition.box_encoder is not None and definition.box_iou_matcher is not None and \
            not np.array_equal(definition.box_encoder.anchors, definition.box_iou_matcher.anchors):
        raise ValueError(f"{PREFIX}: fn.box_encoder and fn.box_iou_matcher with different anchors: rocAL keeps one "
                         f"anchor list, the last given, for both; give them the same anchors")


@operator(output=NOT_IMAGE)
def box_iou_matcher(*inputs, anchors, high_threshold=0.5, low_threshold=0.4, allow_low_quality_matches=True,
                    device=None):
    """``fn.box_iou_matcher``: each run matches the batch's boxes to ``anchors``
    (``fastload.compat.rocal.anchors``); ``pipe.get_matched_indices()`` gives them. As in rocAL it needs
    ``readers.coco(is_box_iou_matcher=True)``. Returns (None, [])."""
    definition = _coco_boxes("box_iou_matcher")
    if not definition.reader.is_box_iou_matcher:
        raise ValueError(f"{PREFIX}: fn.box_iou_matcher needs fn.readers.coco(..., is_box_iou_matcher=True) (rocAL: "
                         f"\"Box IOU matcher variable not set cannot return matched idx\")")
    definition.box_iou_matcher = anchor_rules.box_iou_matcher(anchors, high_threshold, low_threshold,
                                                               allow_low_quality_matches)
    _one_anchor_list(definition)
    return None, []


@operator(output=NOT_IMAGE, supported=False)
def random_bbox_crop(*inputs, all_boxes_above_threshold=True, allow_no_crop=True, aspect_ratio=None, bbox_layout="",
                     threshold_type="iou", thresholds=None, crop_shape=None, num_attempts=1, scaling=None, seed=1,
                     shape_layout="", input_shape=None, total_num_attempts=0, device=None, ltrb=True, labels=None):
    """``fn.random_bbox_crop``: refused. rocAL's windows are fractions of the image but are tested against
    the COCO boxes in pixels (RandomBBoxCropReader::get_batch_crop_coords), and the boxes are then moved by
    a window whose right edge is (left in pixels + width fraction) x image width
    (BoundingBoxGraph::update_random_bbox_meta_data): its boxes are not the cropped image's."""
    raise NotImplementedError(f"{PREFIX}: fn.random_bbox_crop is not supported: rocAL tests its crop windows "
                              f"(fractions of the image) against pixel boxes and moves the boxes by a wrongly scaled "
                              f"window (randombboxcrop_reader.cpp, bounding_box_graph.cpp at 0981d5bb), so its boxes "
                              f"do not follow the crop")


@operator(supported=False)
def ssd_random_crop(*inputs, p_threshold=None, crop_area_factor=None, crop_aspect_ratio=None, crop_pos_x=None,
                    crop_pos_y=None, num_attempts=20, device=None, all_boxes_above_threshold=True, allow_no_crop=True,
                    ltrb=True, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.ssd_random_crop``: refused. rocAL's wrapper passes ``_num_attempts``, a name it never defines
    (rocAL_pybind/amd/rocal/fn.py at 0981d5bb), so the call raises NameError in rocAL."""
    raise NotImplementedError(f"{PREFIX}: fn.ssd_random_crop is not supported: rocAL's own wrapper fails with a "
                              f"NameError (_num_attempts), and its node seeds its draws from std::random_device, not "
                              f"the pipeline's seed")


declare(OpSpec("random.normal", unsupported("random.normal"), output=NOT_IMAGE, supported=False))
