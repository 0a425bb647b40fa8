"""rocAL's anchor matching of a batch's COCO boxes: ``fn.box_encoder`` (SSD) and ``fn.box_iou_matcher``
(RetinaNet). Both run on the batch's boxes as the operators left them (``coco.py``: pixels, ltrb) and give
what rocAL's pipeline hands out after each run.

rocAL's rules, from ROCm/rocAL at 0981d5bb (rocAL/source/meta_data/bounding_box_graph.cpp,
update_box_encoder_meta_data and update_box_iou_matcher; MasterGraph::box_encoder, box_iou_matcher and
get_bbox_encoded_buffers in rocAL/source/pipeline/master_graph.cpp; rocal_pybind.cpp):

* ``anchors`` are a flat ltrb list, four floats an anchor, in the boxes' units: rocAL compares them with the
  boxes as they are (its COCO boxes are pixels; SSD's default boxes are fractions of the image, so a
  pipeline must resize its images and scale its anchors to agree).
* box_encoder: each box's IoU with every anchor, its best anchor's set to 2 (first best on ties); each
  anchor takes the box of highest IoU (last on ties) if that IoU exceeds ``criteria``, as
  (xc, yc, w, h), or with ``offset`` the SSD regression targets ((xc - axc) / aw - mean) / std,
  (log(w / aw) - mean) / std over boxes and anchors multiplied by ``scale``; an unmatched anchor gets
  label 0 and itself as (xc, yc, w, h), or zeros with ``offset``. float32 throughout.
  ``get_encoded_boxes_and_lables(batch, anchors)`` gives (int32 labels [batch, anchors], float32 boxes
  [batch * anchors * 4]).
* box_iou_matcher: each anchor's best box (first on ties; -1 when there is none), then -1 below
  ``low_threshold``, -2 below ``high_threshold``, except, with ``allow_low_quality_matches``, anchors whose
  IoU with some box is within 1e-6 of that box's best. ``get_matched_indices()`` gives int32
  [batch * anchors]. It needs ``readers.coco(is_box_iou_matcher=True)``.

Both are torchvision's and DALI's algorithms (rocAL ports DALI's box encoder and torchvision's Matcher);
the tests check them against real DALI's ``fn.box_encoder`` and torchvision's ``Matcher``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

PREFIX = "fastload.compat.rocal"


def _anchors(name: str, anchors) -> np.ndarray:
    values = np.asarray(anchors, dtype=np.float32).reshape(-1)
    if values.size == 0 or values.size % 4:
        raise ValueError(f"{PREFIX}: fn.{name}: anchors is a flat ltrb list of four floats an anchor, not "
                         f"{values.size} values")
    return values.reshape(-1, 4)


def ious(boxes: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """[boxes, anchors] IoU in float32, as ssd_BBoxIntersectionOverUnion computes it (the box's area from
    its own sides, the union as box + anchor - intersection)."""
    boxes, anchors = boxes[:, None, :], anchors[None, :, :]
    width = np.maximum(np.float32(0), np.minimum(boxes[..., 2], anchors[..., 2]) - np.maximum(boxes[..., 0],
                                                                                           anchors[..., 0]))
    height = np.maximum(np.float32(0), np.minimum(boxes[..., 3], anchors[..., 3]) - np.maximum(boxes[..., 1],
                                                                                            anchors[..., 1]))
    inter = width * height
    box_area = (boxes[..., 3] - boxes[..., 1]) * (boxes[..., 2] - boxes[..., 0])
    anchor_area = (anchors[..., 3] - anchors[..., 1]) * (anchors[..., 2] - anchors[..., 0])
    with np.errstate(divide="ignore", invalid="ignore"):
        return (inter / (box_area + anchor_area - inter)).astype(np.float32)


def _centre(ltrb: np.ndarray, scale: np.float32) -> np.ndarray:
    half = np.float32(0.5) * scale
    return np.stack([(ltrb[:, 0] + ltrb[:, 2]) * half, (ltrb[:, 1] + ltrb[:, 3]) * half,
                     (ltrb[:, 2] - ltrb[:, 0]) * scale, (ltrb[:, 3] - ltrb[:, 1]) * scale], axis=1)


@dataclass(frozen=True)
class BoxEncoder:
    """What ``fn.box_encoder`` was told."""

    anchors: np.ndarray  # [anchors, 4] ltrb float32
    criteria: float
    offset: bool
    scale: float
    means: tuple[float, float, float, float]
    stds: tuple[float, float, float, float]

    def encode(self, boxes: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One image's (float32 [anchors, 4] encoded boxes, int32 [anchors] labels)."""
        anchors = self.anchors
        if not len(boxes):  # rocAL reads past its IoU table then; fastload matches nothing
            return self._unmatched().copy(), np.zeros(len(anchors), np.int32)
        overlap = ious(boxes.astype(np.float32), anchors)
        # each box's best anchor (the first of equals: calculate_ious_for_box's >) matches it, IoU 2
        counted = np.where(np.isnan(overlap), np.float32(-1), overlap)
        best_anchor = np.where(np.isnan(overlap[:, 0]), 0, np.argmax(counted, axis=1))
        overlap[np.arange(len(boxes)), best_anchor] = 2.0
        # each anchor's box of highest IoU, the last of equals (find_best_box_for_anchor's >=); a NaN
        # IoU never wins, and box 0's NaN wins over all (nothing is >= it)
        counted = np.where(np.isnan(overlap), np.float32(-1), overlap)
        best = len(boxes) - 1 - np.argmax(counted[::-1], axis=0)
        best[np.isnan(overlap[0])] = 0
        matched = overlap[best, np.arange(len(anchors))] > np.float32(self.criteria)
        out_labels = np.where(matched, labels[best], 0).astype(np.int32)
        if self.offset:
            box, anchor = _centre(boxes[best].astype(np.float32), np.float32(self.scale)), self._anchor_centres
            means = np.float32(self.means)  # rocAL's float vectors; inv_stds as (float)(1. / stds[i])
            inv_stds = (1.0 / np.float32(self.stds).astype(np.float64)).astype(np.float32)
            encoded = np.empty_like(box)
            encoded[:, :2] = ((box[:, :2] - anchor[:, :2]) / anchor[:, 2:] - means[:2]) * inv_stds[:2]
            with np.errstate(divide="ignore", invalid="ignore"):
                encoded[:, 2:] = (np.log(box[:, 2:] / anchor[:, 2:]) - means[2:]) * inv_stds[2:]
            encoded[~matched] = 0
        else:
            encoded = np.where(matched[:, None], _centre(boxes[best].astype(np.float32), np.float32(1)),
                               self._unmatched())
        return encoded.astype(np.float32), out_labels

    @functools.cached_property
    def _anchor_centres(self) -> np.ndarray:
        """The anchors as (xc, yc, w, h), times ``scale`` with offset: the same for every image, made once."""
        return _centre(self.anchors, np.float32(self.scale if self.offset else 1))

    def _unmatched(self) -> np.ndarray:
        """What an unmatched anchor gets: zeros with offset, else the anchor as (xc, yc, w, h)."""
        return np.zeros_like(self.anchors) if self.offset else self._anchor_centres


@dataclass(frozen=True)
class BoxIouMatcher:
    """What ``fn.box_iou_matcher`` was told."""

    anchors: np.ndarray
    high_threshold: float
    low_threshold: float
    allow_low_quality_matches: bool

    def match(self, boxes: np.ndarray) -> np.ndarray:
        """One image's int32 [anchors]: each anchor's box, -1 or -2."""
        count = len(self.anchors)
        if not len(boxes):
            return np.full(count, -1, np.int32)
        overlap = ious(boxes.astype(np.float32), self.anchors)
        # rocAL's running maxima start at -1 and take a strictly greater IoU: a NaN one (a box and an
        # anchor both of no area) never counts, and the first of equals wins
        counted = np.where(np.isnan(overlap), np.float32(-1), overlap)
        best = np.max(counted, axis=0)
        matches = np.where(best > -1, np.argmax(counted, axis=0), -1).astype(np.int32)
        keep = np.zeros(count, bool)
        if self.allow_low_quality_matches:  # anchors within 1e-6 of some box's best IoU
            keep = (np.abs(overlap - np.max(counted, axis=1, keepdims=True)) < 1e-6).any(axis=0)
        low = ~keep & (best < np.float32(self.low_threshold))
        between = ~keep & ~low & (best < np.float32(self.high_threshold))
        matches[low], matches[between] = -1, -2
        return matches


def box_encoder(anchors, criteria, means, offset, scale, stds) -> BoxEncoder:
    means = tuple(float(v) for v in (means or (0.0, 0.0, 0.0, 0.0)))
    stds = tuple(float(v) for v in (stds or (1.0, 1.0, 1.0, 1.0)))
    if len(means) != 4 or len(stds) != 4:
        raise ValueError(f"{PREFIX}: fn.box_encoder: means and stds are four values (x, y, w, h), not "
                         f"{len(means)} and {len(stds)}")
    if not 0 <= float(criteria) <= 1:
        raise ValueError(f"{PREFIX}: fn.box_encoder: criteria={criteria} is no IoU in [0, 1]")
    return BoxEncoder(_anchors("box_encoder", anchors), float(criteria), bool(offset), float(scale), means, stds)


def box_iou_matcher(anchors, high_threshold, low_threshold, allow_low_quality_matches) -> BoxIouMatcher:
    if float(low_threshold) > float(high_threshold):
        raise ValueError(f"{PREFIX}: fn.box_iou_matcher: low_threshold={low_threshold} is above "
                         f"high_threshold={high_threshold}")
    return BoxIouMatcher(_anchors("box_iou_matcher", anchors), float(high_threshold), float(low_threshold),
                         bool(allow_low_quality_matches))
