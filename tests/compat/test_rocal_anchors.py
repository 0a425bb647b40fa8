"""fastload.compat.rocal's anchor matching (``fn.box_encoder``, ``fn.box_iou_matcher``) against the
references rocAL ports: real DALI's CPU ``fn.box_encoder`` and torchvision's detection ``Matcher``, on fresh
random boxes and anchors; and in a COCO pipeline, on the boxes its operators moved."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fastload.compat.rocal.fn as fn
from fastload.compat.rocal import anchors

from test_rocal_coco import coco, coco_pipeline  # noqa: F401 (the COCO fixture)


def random_boxes(rng, count: int, low=0.0, high=1.0) -> np.ndarray:
    corners = rng.uniform(low, high, (count, 2, 2)).astype(np.float32)
    return np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)


def dali_box_encoder(boxes, labels, anchor_list, **args):
    """Real DALI's CPU box encoder on one sample."""
    dali_fn = pytest.importorskip("nvidia.dali.fn")
    from nvidia.dali import pipeline_def

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def encode():
        b = dali_fn.external_source(source=[[boxes]], batch=True, cycle=False)
        lab = dali_fn.external_source(source=[[labels]], batch=True, cycle=False)
        return tuple(dali_fn.box_encoder(b, lab, anchors=anchor_list.reshape(-1).tolist(), **args))

    pipe = encode()
    pipe.build()
    out_boxes, out_labels = pipe.run()
    return np.array(out_boxes[0]), np.array(out_labels[0])


@pytest.mark.parametrize("args", [{}, {"criteria": 0.3},
                                  {"offset": True, "scale": 300.0, "means": [0.1, -0.2, 0.05, 0.0],
                                   "stds": [0.1, 0.1, 0.2, 0.2]}])
def test_box_encoder_matches_dalis(args):
    """Random boxes (awkward counts: 1, 7, 13) against 97 random anchors: each anchor's box and label
    as DALI's box encoder gives them; float32, within 2e-6 relative (the same float ops, maybe reordered)."""
    rng = np.random.default_rng(11)
    anchor_list = random_boxes(rng, 97)
    for count in (1, 7, 13):
        boxes = random_boxes(rng, count)
        labels = rng.integers(1, 90, count).astype(np.int32)
        rules = anchors.box_encoder(anchor_list.reshape(-1).tolist(), args.get("criteria", 0.5), args.get("means"),
                                    args.get("offset", False), args.get("scale", 1.0), args.get("stds"))
        ours, our_labels = rules.encode(boxes, labels)
        theirs, their_labels = dali_box_encoder(boxes, labels, anchor_list, **args)
        assert ours.dtype == np.float32 and our_labels.dtype == np.int32
        assert np.array_equal(our_labels, their_labels)
        assert (our_labels > 0).sum() >= count  # each box matches at least its best anchor
        np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("allow_low_quality", [True, False])
def test_box_iou_matcher_matches_torchvisions_matcher(allow_low_quality):
    """torchvision's Matcher (the rule rocAL's box_iou_matcher ports) on the IoU torchvision's box_iou
    computes: each anchor's box, -1 below the low threshold, -2 between; low-quality matches kept."""
    from torchvision.models.detection._utils import Matcher
    from torchvision.ops import box_iou
    rng = np.random.default_rng(12)
    anchor_list = random_boxes(rng, 211)
    matcher = Matcher(0.5, 0.4, allow_low_quality_matches=allow_low_quality)
    for count in (1, 5, 17):
        boxes = random_boxes(rng, count)
        ours = anchors.box_iou_matcher(anchor_list, 0.5, 0.4, allow_low_quality).match(boxes)
        theirs = matcher(box_iou(torch.from_numpy(boxes), torch.from_numpy(anchor_list))).numpy()
        assert ours.dtype == np.int32 and np.array_equal(ours, theirs)
        assert set(np.unique(ours)) <= set(range(-2, count))


def test_ties_follow_rocals_loops():
    """Ties: a box's best anchor is the first of equals; an anchor takes the last of equally good boxes in
    the encoder (find_best_box_for_anchor's >=) and the first in the matcher (its strict >); an anchor of
    no area matches nothing."""
    anchor_list = np.array([[0, 0, 2, 2], [0, 0, 2, 2], [5, 5, 6, 6], [8, 8, 8, 8]], np.float32)
    boxes = np.array([[0, 0, 2, 2], [0, 0, 2, 2], [5, 5, 6, 6]], np.float32)
    encoded, labels = anchors.box_encoder(anchor_list, 0.5, None, False, 1.0, None).encode(boxes,
                                                                                          np.array([1, 2, 3]))
    assert labels.tolist() == [2, 2, 3, 0]
    assert encoded[3].tolist() == [8, 8, 0, 0]  # unmatched: the anchor itself as (xc, yc, w, h)
    assert anchors.box_iou_matcher(anchor_list, 0.5, 0.4, False).match(boxes).tolist() == [0, 0, 2, -1]
    assert anchors.box_iou_matcher(anchor_list, 0.5, 0.4, True).match(boxes[:0]).tolist() == [-1] * 4


def test_a_box_and_an_anchor_of_no_area_follow_rocals_nan_comparisons():
    """A zero-area box against a zero-area anchor has IoU 0/0 = NaN: rocAL's comparisons are false for
    NaN, so as anchor 0 it stays the box's best anchor (nothing beats it) and, as box 0, the anchor's box
    (nothing is >= it); it never passes the criteria. The matcher never counts a NaN IoU."""
    anchor_list = np.array([[4, 4, 4, 4], [0, 0, 2, 2], [0, 0, 2, 1]], np.float32)
    boxes = np.array([[4, 4, 4, 4], [0, 0, 2, 2]], np.float32)
    encoded, labels = anchors.box_encoder(anchor_list, 0.4, None, False, 1.0, None).encode(boxes, np.array([7, 8]))
    # box 0's IoUs are NaN, 0, 0: nothing beats the NaN, so anchor 0 is its best anchor (IoU 2) and takes it
    assert labels.tolist() == [7, 8, 8]
    assert encoded[0].tolist() == [4, 4, 0, 0]
    matches = anchors.box_iou_matcher(anchor_list, 0.5, 0.4, False).match(boxes)
    assert matches.tolist() == [-1, 1, 1]  # anchor 0: box 0's NaN never counts, box 1's IoU 0 is below 0.4
    with pytest.raises(ValueError, match="four floats an anchor, not 5"):
        anchors.box_encoder([0, 0, 1, 1, 2], 0.5, None, False, 1.0, None)
    with pytest.raises(ValueError, match="low_threshold=0.6 is above"):
        anchors.box_iou_matcher([0, 0, 1, 1], 0.5, 0.6, True)


def test_a_coco_pipeline_encodes_and_matches_the_boxes_its_operators_moved(coco):  # noqa: F811
    """fn.box_encoder and fn.box_iou_matcher after a resize: get_encoded_boxes_and_lables and
    get_matched_indices are the rules applied to the batch's resized boxes; the count is batch x anchors;
    copy_encoded_boxes_and_lables copies the resized (not encoded) boxes, as rocAL's does."""
    rng = np.random.default_rng(13)
    anchor_list = random_boxes(rng, 50, 0, 300).reshape(-1).tolist()

    def build(images):
        resized = fn.resize(images, resize_width=300, resize_height=300)
        assert fn.box_encoder(anchors=anchor_list, criteria=0.3, offset=True, scale=1.0) == (None, [])
        assert fn.box_iou_matcher(anchors=anchor_list, high_threshold=0.5, low_threshold=0.3) == (None, [])
        return resized
    pipe = coco_pipeline(coco, build, is_box_encoder=True, is_box_iou_matcher=True)
    pipe.run()
    cords, box_labels = pipe.get_bounding_box_cords(), pipe.get_bounding_box_labels()
    labels, boxes = pipe.get_encoded_boxes_and_lables(4, 50)
    assert labels.shape == (4, 50) and labels.dtype == np.int32 and boxes.shape == (800,)
    encoder = anchors.box_encoder(anchor_list, 0.3, None, True, 1.0, None)
    matcher = anchors.box_iou_matcher(anchor_list, 0.5, 0.3, True)
    matches = pipe.get_matched_indices()
    assert matches.shape == (200,) and matches.dtype == np.int32
    for n in range(4):
        expected, expected_labels = encoder.encode(cords[n].reshape(-1, 4), box_labels[n])
        assert np.array_equal(labels[n], expected_labels) and np.array_equal(boxes[n * 200:(n + 1) * 200],
                                                                              expected.reshape(-1))
        assert np.array_equal(matches[n * 50:(n + 1) * 50], matcher.match(cords[n].reshape(-1, 4)))
    assert pipe.get_bounding_box_count() == 200
    flat = np.zeros(64, np.float32)
    flat_labels = np.zeros(16, np.int32)
    pipe.copy_encoded_boxes_and_lables(flat, flat_labels)
    every = np.concatenate(cords)
    assert np.array_equal(flat[:every.size], every)
    assert flat_labels[:every.size // 4].tolist() == np.concatenate(box_labels).tolist()
    with pytest.raises(ValueError, match="num_encoded_boxes is not correct"):
        pipe.get_encoded_boxes_and_lables(4, 49)


def test_boxes_read_as_xywh_are_encoded_and_matched_as_ltrb(coco):  # noqa: F811
    """readers.coco(ltrb=False) with no box-moving operator: the getters give x, y, w, h, but rocAL encodes
    and matches before it turns its boxes to xywh (and skips that with an encoder), so the encoder, the
    matcher and copy_encoded_boxes_and_lables see l, t, r, b."""
    anchor_list = [0, 0, 100, 100, 100, 100, 200, 150]
    encoded = coco_pipeline(coco, lambda images: (fn.box_encoder(anchors=anchor_list), images)[1], ltrb=False,
                            is_box_iou_matcher=True)
    matched = coco_pipeline(coco, lambda images: (fn.box_iou_matcher(anchors=anchor_list), images)[1], ltrb=False,
                            is_box_iou_matcher=True)
    reference = coco_pipeline(coco)  # ltrb=True, nothing else
    for pipe in (encoded, matched, reference):
        pipe.run()
    xywh, ltrb = encoded.get_bounding_box_cords(), reference.get_bounding_box_cords()
    assert xywh[0].tolist() == [10, 20, 50, 40, 150, 100, 40, 40] and ltrb[0].tolist()[:4] == [10, 20, 60, 60]
    rules = anchors.box_encoder(anchor_list, 0.5, None, False, 1.0, None)
    labels, boxes = encoded.get_encoded_boxes_and_lables(4, 2)
    for n in range(4):
        expected, expected_labels = rules.encode(ltrb[n].reshape(-1, 4), reference.get_bounding_box_labels()[n])
        assert np.array_equal(boxes[n * 8:(n + 1) * 8], expected.reshape(-1)) and np.array_equal(labels[n],
                                                                                              expected_labels)
    matcher = anchors.box_iou_matcher(anchor_list, 0.5, 0.4, True)
    assert matched.get_matched_indices().tolist() == np.concatenate([matcher.match(t.reshape(-1, 4))
                                                                     for t in ltrb]).tolist()
    flat, flat_labels = np.zeros(32, np.float32), np.zeros(8, np.int32)
    encoded.copy_encoded_boxes_and_lables(flat, flat_labels)
    every = np.concatenate(ltrb)
    assert np.array_equal(flat[:every.size], every)


def test_what_rocal_cannot_run_is_refused(coco):  # noqa: F811
    """The matcher without readers.coco(is_box_iou_matcher=True) (rocAL throws), either rule without COCO
    boxes, the getters without their operator, and rocAL's broken random crops for boxes."""
    with pytest.raises(ValueError, match="is_box_iou_matcher=True"):
        coco_pipeline(coco, lambda images: (fn.box_iou_matcher(anchors=[0, 0, 1, 1]), images)[1])
    with pytest.raises(ValueError, match="different anchors: rocAL keeps one anchor list"):
        coco_pipeline(coco, lambda images: (fn.box_encoder(anchors=[0, 0, 1, 1]),
                                            fn.box_iou_matcher(anchors=[0, 0, 2, 2]), images)[2],
                      is_box_iou_matcher=True)
    from fastload.compat.rocal.pipeline import Pipeline
    with pytest.raises(ValueError, match="box_encoder encodes fn.readers.coco's boxes"):
        with Pipeline(batch_size=1, num_threads=1, rocal_cpu=True):
            fn.box_encoder(anchors=[0, 0, 1, 1])
    pipe = coco_pipeline(coco)
    pipe.run()
    with pytest.raises(RuntimeError, match="no fn.box_encoder"):
        pipe.get_encoded_boxes_and_lables(4, 1)
    with pytest.raises(RuntimeError, match="no fn.box_iou_matcher"):
        pipe.get_matched_indices()
    with pytest.raises(NotImplementedError, match="random_bbox_crop is not supported: rocAL tests its crop windows"):
        fn.random_bbox_crop()
    with pytest.raises(NotImplementedError, match="ssd_random_crop is not supported: rocAL's own wrapper fails"):
        fn.ssd_random_crop()
