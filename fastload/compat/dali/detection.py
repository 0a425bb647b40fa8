"""DALI's detection chain: ``fn.readers.coco``, ``fn.random_bbox_crop``, ``fn.bb_flip``, ``fn.box_encoder``,
``fn.paste`` with ``fn.bbox_paste``, and ``fn.decoders.image_slice``, with DALI 2.4's semantics.

The rules are DALI's sources (dali/operators/reader/loader/coco_loader.cc, image/crop/bbox_crop.cc,
pipeline/util/bounding_box_utils.h, bbox/bb_flip.cc, bbox/bbox_paste.cc, detection/box_encoder.cc, image/paste/paste.cu,
generic/slice/slice_attr.h) checked against DALI 2.4's CPU operators output by output
(tests/compat/test_dali_detection.py). DALI computes boxes in float32; so does this module, step for step
in numpy float32, so the deterministic outputs are DALI's bit for bit (box_encoder's logarithm aside, one
float32 ulp). The random operator (random_bbox_crop) draws from fastload's per-sample streams, not DALI's
mt19937: its windows follow DALI's rules and distribution, not its values.

Refused by name: COCO masks (polygon and pixelwise) and preprocessed annotation files; random_bbox_crop's
fixed ``crop_shape`` / ``input_shape`` and 3-D boxes; image_slice's named slice arguments (start, rel_start,
...) and outputs other than uint8.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ..engine.coco import category_numbers, load_instances
from ..engine.graph import Op, ReaderOp
from ..engine.readers import read_sample
from .operators import ReaderSpec, _device, _fast_idct, _one, _seeded, check_args, decode_window
from .spec import operator
from .types import image_type_name, torch_dtype

F32 = np.float32
PREFIX = "fastload.compat.dali"


def _refuse(operator: str, **given) -> None:
    for name, used in given.items():
        if used:
            raise NotImplementedError(f"{PREFIX}: {operator}: {name} is not supported")


# ------------------------------------------------------------------------------------------ fn.readers.coco

@dataclass
class COCOSample:
    """One sample's annotations, as DALI's loader stores them: float32 boxes [M, 4] and int32 labels [M]."""

    boxes: np.ndarray
    labels: np.ndarray
    image_id: int


def coco_samples(file_root: str, annotations_file: str, *, ltrb: bool, ratio: bool, skip_empty: bool,
                 size_threshold: float, include_iscrowd: bool, avoid_class_remapping: bool,
                 images=None) -> tuple[list[str], list[COCOSample]]:
    """The reader's files (in DALI's order) and their annotations, as CocoLoader::ParseJsonAnnotations makes
    them: images sorted by id (or ``images`` in its order, repeats kept, names the json lacks skipped); a
    box is kept when its width and height are at least ``size_threshold`` and it is not a crowd one left out;
    boxes are float32 ([x, y, w, h], or [l, t, r, b] summed in float32), divided by the json's width and
    height with ``ratio``; labels are the categories numbered 1..N in json order (an id the json does not
    list: 0, as std::map::operator[] gives), or the ids with ``avoid_class_remapping``."""
    try:
        data = load_instances(annotations_file)
        infos = [(int(image["id"]), str(image["file_name"]), int(image.get("width", 0)),
                  int(image.get("height", 0))) for image in data["images"] if isinstance(image, dict)]
        numbers = category_numbers([c for c in data["categories"] if isinstance(c, dict)])
        threshold = F32(size_threshold)
        per_image: dict[int, list] = {}
        for annotation in data["annotations"]:
            if not isinstance(annotation, dict):
                continue
            box = np.array(annotation["bbox"], dtype=np.float64).astype(F32)
            if box.shape != (4,):
                raise ValueError(f"`bbox` must contain exactly 4 values, got {box.size}")
            if annotation.get("iscrowd", 0) != 0 and not include_iscrowd:
                continue
            if not (box[2] >= threshold and box[3] >= threshold):
                continue
            if ltrb:
                box[2:] += box[:2]
            category = int(annotation["category_id"])
            label = category if avoid_class_remapping else numbers.get(category, 0)
            per_image.setdefault(int(annotation["image_id"]), []).append((box, label))
    except (OSError, KeyError, TypeError, ValueError) as error:
        raise ValueError(f"fn.readers.coco: {annotations_file}: {type(error).__name__}: {error}") from None
    if not images:  # DALI reads an empty list as none given
        infos_in_order = sorted(infos, key=lambda info: info[0])
        names = [info[1] for info in infos_in_order]
        infos = infos_in_order
    else:
        names = [str(name) for name in ([images] if isinstance(images, str) else images)]
    by_name = {info[1]: info for info in infos}  # a name listed twice: its last entry, as DALI's map keeps
    files, samples = [], []
    for name in names:
        info = by_name.get(name)
        if info is None:
            continue
        image_id, _, width, height = info
        found = per_image.get(image_id, [])
        if skip_empty and not found:
            continue
        boxes = np.stack([box for box, _ in found]) if found else np.zeros((0, 4), F32)
        if ratio and found:
            boxes = boxes / np.array([width, height, width, height], dtype=F32)
        files.append(os.path.join(file_root, name))
        samples.append(COCOSample(boxes.astype(F32), np.array([label for _, label in found], np.int32), image_id))
    if not files:
        raise ValueError(f"fn.readers.coco: no files found ({annotations_file} with file_root={file_root!r})")
    return files, samples


@operator("readers.coco", "readers.COCO", aliases={"coco_reader": "COCOReader"})
def readers_coco(*, file_root=None, annotations_file="", ltrb=False, ratio=False, skip_empty=False,
                 size_threshold=0.1, include_iscrowd=True, avoid_class_remapping=False, image_ids=False,
                 save_img_ids=None, images=None, shard_id=0, num_shards=1, random_shuffle=False, initial_fill=1024,
                 shuffle_after_epoch=False, stick_to_shard=False, pad_last_batch=False, seed=-1, name=None,
                 polygon_masks=False, masks=False, pixelwise_masks=False, preprocessed_annotations="",
                 save_preprocessed_annotations=False, device="cpu", **hints):
    """``fn.readers.coco``: (encoded image, float32 boxes [M, 4], int32 labels [M][, int32 image id [1]]) per
    sample, in the reader order fn.readers.file has (DALI's COCO loader is its file loader over the
    annotated list: the same sharding, shuffle and padding).

    The reader is two ops: a ``readers.file`` op reading the files (so the pipeline runs it as its reader,
    sharding, shuffling and ``reader_meta`` included), whose hidden second output is the sample's place in
    the annotation table, and a ``readers.coco`` op giving that sample's boxes, labels and id. The split
    also keeps the graph off the classification fast path, which would take the boxes for labels."""
    check_args("fn.readers.coco", hints, set())
    _refuse("fn.readers.coco", polygon_masks=polygon_masks, masks=masks, pixelwise_masks=pixelwise_masks,
            preprocessed_annotations=preprocessed_annotations,
            save_preprocessed_annotations=save_preprocessed_annotations)
    if device != "cpu":
        raise ValueError("fn.readers.coco runs on the CPU (device='cpu'), as in DALI")
    if not file_root:
        raise ValueError("fn.readers.coco needs file_root (the folder the json's file_name values are in)")
    if not annotations_file:
        raise ValueError("fn.readers.coco needs annotations_file")
    with_ids = bool(image_ids if save_img_ids is None else save_img_ids or image_ids)
    files, samples = coco_samples(str(file_root), str(annotations_file), ltrb=bool(ltrb), ratio=bool(ratio),
                                  skip_empty=bool(skip_empty), size_threshold=float(size_threshold),
                                  include_iscrowd=bool(include_iscrowd),
                                  avoid_class_remapping=bool(avoid_class_remapping), images=images)
    spec = ReaderSpec([(path, k) for k, path in enumerate(files)], [os.path.relpath(p, file_root) for p in files],
                      int(shard_id), int(num_shards), bool(random_shuffle), int(initial_fill),
                      bool(shuffle_after_epoch), bool(stick_to_shard), bool(pad_last_batch), int(seed), name)
    reader = ReaderOp("readers.file", read_sample, spec)

    def annotations(ctx, op, place):
        sample = samples[int(place.reshape(-1)[0])]
        out = (torch.from_numpy(sample.boxes.copy()), torch.from_numpy(sample.labels.copy()))
        return out + (torch.tensor([sample.image_id], dtype=torch.int32),) if with_ids else out

    meta = Op("readers.coco", annotations, [reader.outputs[1]], {}, num_outputs=3 if with_ids else 2)
    return [reader.outputs[0], *meta.outputs]


# ------------------------------------------------------------------------------------------------ boxes

def _layout_perm(layout: str) -> tuple[str, bool]:
    """The canonical layout a 2-D box layout permutes ("xyXY" or "xyWH") and whether it is start + shape."""
    if sorted(layout) == sorted("xyXY"):
        return "xyXY", False
    if sorted(layout) == sorted("xyWH"):
        return "xyWH", True
    raise ValueError(f"`bbox_layout` should be a permutation of `xyXY` or `xyWH`. Got: `{layout}`")


def read_boxes(coords: np.ndarray, layout: str, check: bool = True) -> np.ndarray:
    """Boxes [N, 4] in ``layout`` -> [N, 4] float32 (lo x, lo y, hi x, hi y), as DALI's ReadBoxes: start +
    shape summed in float32; with ``check``, every box must lie in [0, 1] (DALI enforces it)."""
    canon, shaped = _layout_perm(layout)
    coords = np.asarray(coords, dtype=F32).reshape(-1, 4)
    boxes = coords[:, [layout.index(c) for c in canon]].copy()
    if shaped:
        boxes[:, 2:] = boxes[:, :2] + boxes[:, 2:]
    if check and len(boxes) and not ((boxes[:, :2] >= 0).all() and (boxes[:, 2:] <= 1).all()):
        bad = boxes[~(((boxes[:, :2] >= 0) & (boxes[:, 2:] <= 1)).all(1))][0]
        raise ValueError(f"box {tuple(float(v) for v in bad)} is out of bounds [0, 1] (DALI refuses it too)")
    return boxes


def write_boxes(boxes: np.ndarray, layout: str) -> np.ndarray:
    """The inverse of ``read_boxes``: shape = hi - lo in float32, then the coordinates in ``layout``'s order."""
    canon, shaped = _layout_perm(layout)
    out = boxes.astype(F32).copy()
    if shaped:
        out[:, 2:] = out[:, 2:] - out[:, :2]
    return np.ascontiguousarray(out[:, [canon.index(c) for c in layout]])


def _volume(boxes: np.ndarray) -> np.ndarray:
    return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])


def _intersection_volume(crop: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """The intersection's volume, 0 where the boxes do not overlap (DALI's ``intersection`` then ``volume``)."""
    lo = np.maximum(crop[..., :2], boxes[..., :2])
    hi = np.minimum(crop[..., 2:], boxes[..., 2:])
    empty = (hi <= lo).any(-1)
    return np.where(empty, F32(0), (hi[..., 0] - lo[..., 0]) * (hi[..., 1] - lo[..., 1])).astype(F32)


def iou(crop: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """DALI's intersection_over_union in float32 (0 without an intersection)."""
    inter = _intersection_volume(crop, boxes)
    with np.errstate(divide="ignore", invalid="ignore"):
        union = (_volume(crop) + _volume(boxes)) - inter
        return np.where(inter == 0, F32(0), inter / union).astype(F32)


def overlap(crop: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """The share of each box's area inside ``crop`` (threshold_type="overlap"), float32."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (_intersection_volume(crop, boxes) / _volume(boxes)).astype(F32)


def crop_boxes(crop: np.ndarray, boxes: np.ndarray, prune_threshold: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The boxes random_bbox_crop keeps for window ``crop`` (lo x, lo y, hi x, hi y) and their indices, mapped
    into the window (DALI's RemapBox: clipped to it, relative to it, clamped to [0, 1]). Kept: a box whose
    centroid the window contains (lo <= c < hi), or with ``prune_threshold``, one whose share of area in the
    window is at least it (and above 0)."""
    if not len(boxes):
        return np.zeros((0, 4), F32), np.zeros(0, np.int64)
    if prune_threshold is None:
        centre = (boxes[:, :2] + boxes[:, 2:]) * F32(0.5)
        keep = ((centre >= crop[:2]) & (centre < crop[2:])).all(1)
    else:
        share = overlap(crop, boxes)
        keep = (share >= F32(prune_threshold)) & (_intersection_volume(crop, boxes) > 0)
    kept = boxes[keep]
    extent = crop[2:] - crop[:2]
    start = (np.maximum(crop[:2], kept[:, :2]) - crop[:2]) / extent
    end = (np.minimum(crop[2:], kept[:, 2:]) - crop[:2]) / extent
    mapped = np.clip(np.concatenate([start, end], 1), F32(0), F32(1)).astype(F32)
    return mapped, np.nonzero(keep)[0]


@dataclass
class BBoxCropSettings:
    thresholds: tuple
    metric: str
    aspect_ratio: tuple
    scaling: tuple
    layout: str
    num_attempts: int
    total_num_attempts: int
    allow_no_crop: bool
    all_boxes_above_threshold: bool
    prune_threshold: float | None
    quiet: bool = False


# DALI loops until a window is valid when total_num_attempts is not given; a sample that can never have one
# (no boxes and no allow_no_crop) would hang it: fastload stops here and says so.
MAX_ATTEMPTS = 1_000_000


def find_crop(boxes: np.ndarray, s: BBoxCropSettings, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DALI's RandomBBoxCropImpl::FindProspectiveCrop for 2-D boxes: (window, kept boxes, their indices).

    Each round draws an option (a threshold, or no crop); a no-crop round returns the whole image with all
    boxes as they came. Otherwise ``num_attempts`` windows are drawn: extents uniform in ``scaling``, fixed
    to the aspect ratio when its range is one value (the dimensions fixed in a random order, then rescaled
    to the larger extent), refused outside the aspect-ratio range, placed uniformly; a window whose metric
    (the smallest IoU or overlap over the boxes, or the largest without ``all_boxes_above_threshold``) beats
    the best so far or reaches the threshold becomes the candidate, valid when it reaches the threshold
    and keeps a box. As in DALI's source, the attempts of a round all run and the last candidate stands, so
    a round's windows are drawn and measured together (the draws are fastload's, in its own order)."""
    options = [(False, F32(t)) for t in s.thresholds] + ([(True, F32(0))] if s.allow_no_crop else [])
    ar_lo, ar_hi = F32(s.aspect_ratio[0]), F32(s.aspect_ratio[1])
    sc_lo, sc_hi = float(s.scaling[0]), float(s.scaling[1])
    limit = s.total_num_attempts if s.total_num_attempts > 0 else MAX_ATTEMPTS
    if not len(boxes) and not s.allow_no_crop and s.total_num_attempts <= 0:
        raise RuntimeError(f"{PREFIX}: fn.random_bbox_crop of a sample without boxes, with allow_no_crop=False and "
                           f"no total_num_attempts: no window can keep a box, and DALI would loop forever")
    n = s.num_attempts
    count, best = 0, -1.0  # a float32 metric, held as a float
    crop, kept, indices, success = np.array([0, 0, 1, 1], F32), boxes, np.arange(len(boxes)), False
    while not success and count < limit:
        no_crop, threshold = options[rng.randint(0, len(options))]
        if no_crop:
            return np.array([0, 0, 1, 1], F32), boxes, np.arange(len(boxes))
        count += n
        draws = rng.randoms(5 * n).reshape(n, 5)
        shape = (sc_lo + (sc_hi - sc_lo) * draws[:, :2]).astype(F32)  # uniform_real_distribution<float>
        if ar_lo == ar_hi:
            largest = shape.max(1)
            # std::random_shuffle of the dimensions (0, 1), then shape[d1] = shape[d0] * fixed[d1][d0], where
            # fixed[1][0] = float(1.0 / ar) and fixed[0][1] = ar; then rescaled to the larger extent
            swapped = draws[:, 2] < 0.5
            shape[~swapped, 1] = shape[~swapped, 0] * F32(1.0 / float(ar_lo))
            shape[swapped, 0] = shape[swapped, 1] * ar_lo
            shape = (largest[:, None] * shape) / shape.max(1)[:, None]
        ratio = shape[:, 0] / shape[:, 1]
        shaped = (ratio >= ar_lo) & (ratio <= ar_hi)
        anchor = ((F32(1) - shape).astype(np.float64) * draws[:, 3:5]).astype(F32)
        windows = np.concatenate([anchor, anchor + shape], 1).astype(F32)
        if len(boxes):
            values = (iou if s.metric == "iou" else overlap)(windows[:, None, :], boxes[None, :, :])
            metrics = values.min(1) if s.all_boxes_above_threshold else values.max(1)
        else:
            metrics = np.zeros(n, F32)
        candidate = None
        values, least = metrics.tolist(), float(threshold)  # float32 values: compared exactly as floats
        for i in np.flatnonzero(shaped).tolist():
            valid = values[i] >= least
            if values[i] <= best and not valid:
                continue
            best, candidate, candidate_valid = values[i], i, valid
        if candidate is None:
            continue
        crop = windows[candidate]
        kept, indices = crop_boxes(crop, boxes, s.prune_threshold)
        success = bool(candidate_valid and len(kept))
    if not success and s.total_num_attempts > 0 and not s.quiet:
        warnings.warn(f"{PREFIX}: fn.random_bbox_crop: could not find a valid cropping window to satisfy the "
                      f"specified requirements (attempted {count} times); using the best cropping window so far "
                      f"(best_metric={float(best)}), as DALI does", stacklevel=2)
    if not success and s.total_num_attempts <= 0:
        raise RuntimeError(f"{PREFIX}: fn.random_bbox_crop found no valid window in {MAX_ATTEMPTS} attempts "
                           f"(DALI would loop forever: give total_num_attempts or allow_no_crop)")
    return crop, kept, indices


@operator("random_bbox_crop", "RandomBBoxCrop")
def random_bbox_crop(boxes, labels=None, *, thresholds=(0.0,), threshold_type="iou", aspect_ratio=(1.0, 1.0),
                     scaling=(1.0, 1.0), ltrb=None, bbox_layout=None, num_attempts=1, total_num_attempts=-1,
                     allow_no_crop=True, all_boxes_above_threshold=True, bbox_prune_threshold=None,
                     output_bbox_indices=False, quiet=False, crop_shape=None, input_shape=None, shape_layout=None,
                     device="cpu", **args):
    """``fn.random_bbox_crop`` for 2-D boxes in relative coordinates: outputs anchor [2], shape [2] (float32,
    the window's x, y and width, height), the kept boxes in ``bbox_layout`` (default "xyXY", or "xyWH" with
    ``ltrb=False``), the kept labels (when given) and their indices (``output_bbox_indices``)."""
    check_args("fn.random_bbox_crop", args, set())
    _refuse("fn.random_bbox_crop", crop_shape=crop_shape is not None, input_shape=input_shape is not None,
            shape_layout=shape_layout is not None)
    if device != "cpu":
        raise ValueError("fn.random_bbox_crop runs on the CPU (device='cpu'), as in DALI")
    if ltrb is not None and bbox_layout is not None:
        raise ValueError("`ltrb` and `bbox_layout` can't be provided at the same time")
    layout = str(bbox_layout) if bbox_layout else ("xyXY" if ltrb is None or ltrb else "xyWH")
    _layout_perm(layout)
    thresholds = tuple(float(t) for t in (thresholds if isinstance(thresholds, (list, tuple)) else [thresholds]))
    aspect = tuple(float(v) for v in (aspect_ratio if isinstance(aspect_ratio, (list, tuple)) else [aspect_ratio]))
    scale = tuple(float(v) for v in (scaling if isinstance(scaling, (list, tuple)) else [scaling]))
    if len(aspect) == 6:
        raise NotImplementedError(f"{PREFIX}: fn.random_bbox_crop: 3-D boxes (six aspect_ratio values) "
                                  f"are not supported")
    if len(aspect) != 2 or not 0 <= aspect[0] <= aspect[1]:
        raise ValueError(f"`aspect_ratio` must be a range [min, max] with 0 <= min <= max, got {aspect}")
    if len(scale) != 2 or not 0 <= scale[0] <= scale[1]:
        raise ValueError(f"`scaling` must be a range [min, max] with 0 <= min <= max, got {scale}")
    if not thresholds or not all(0.0 <= t <= 1.0 for t in thresholds):
        raise ValueError(f"`thresholds` must be values in [0, 1], got {thresholds}")
    if threshold_type not in ("iou", "overlap"):
        raise ValueError(f'Not supported ``threshold_type`` value: "{threshold_type}". Supported values are: '
                         f'"iou", "overlap".')
    if int(num_attempts) < 1:
        raise ValueError("Minimum number of attempts must be greater than zero")
    settings = BBoxCropSettings(thresholds, threshold_type, aspect, scale, layout, int(num_attempts),
                                int(total_num_attempts), bool(allow_no_crop), bool(all_boxes_above_threshold),
                                None if bbox_prune_threshold is None else float(bbox_prune_threshold), bool(quiet))

    def run(ctx, op, box_values, *label_values):
        values = box_values.cpu().numpy()
        if values.ndim != 2 or values.shape[1] not in (4, 6):
            raise ValueError(f"fn.random_bbox_crop: boxes must be [N, 4], got {list(values.shape)}")
        if values.shape[1] == 6:
            raise NotImplementedError(f"{PREFIX}: fn.random_bbox_crop: 3-D boxes are not supported")
        read = read_boxes(values, layout)
        window, kept, indices = find_crop(read, settings, ctx.rng(op))
        out = [torch.from_numpy(window[:2].copy()), torch.from_numpy((window[2:] - window[:2]).astype(F32)),
               torch.from_numpy(write_boxes(kept, layout))]
        if label_values:
            given = label_values[0]
            if given.shape[0] != len(read):
                raise ValueError(f"Unexpected number of labels. Expected: {len(read)}, got {given.shape[0]}")
            out.append(given[torch.from_numpy(indices).to(given.device)].contiguous())
        if output_bbox_indices:
            out.append(torch.from_numpy(indices.astype(np.int32)))
        return tuple(out)

    inputs = [boxes] + ([labels] if labels is not None else [])
    count = 3 + (labels is not None) + bool(output_bbox_indices)
    return _one(_seeded(Op("random_bbox_crop", run, inputs, {}, num_outputs=count, fusable=False), args))


@operator("bb_flip", "BbFlip")
def bb_flip(boxes, *, ltrb=False, horizontal=1, vertical=0, device=None, **args):
    """``fn.bb_flip``: boxes in relative coordinates mirrored (x -> 1 - x) horizontally and/or vertically;
    ``horizontal`` and ``vertical`` may be per-sample. Same shape and float32, computed as DALI does (read
    into lo/hi corners, 1 - hi and 1 - lo, written back)."""
    check_args("fn.bb_flip", args, set())
    layout = "xyXY" if ltrb else "xyWH"

    def run(ctx, op, values, horizontal, vertical):
        if values.numel() % 4:
            raise ValueError(f"fn.bb_flip: {values.numel()} coordinates are not whole boxes of 4")
        corners = read_boxes(values.cpu().numpy(), layout, check=False)
        if int(horizontal):
            corners[:, [0, 2]] = F32(1) - corners[:, [2, 0]]
        if int(vertical):
            corners[:, [1, 3]] = F32(1) - corners[:, [3, 1]]
        return torch.from_numpy(write_boxes(corners, layout)).reshape(values.shape)

    return _one(Op("bb_flip", run, [boxes], {"horizontal": horizontal, "vertical": vertical},
                   device=_device([boxes], device), layouts=(boxes.layout(),), fusable=False))


@operator("bbox_paste", "BBoxPaste")
def bbox_paste(boxes, *, ratio, paste_x=0.5, paste_y=0.5, ltrb=False, device="cpu", **args):
    """``fn.bbox_paste``: relative boxes moved as fn.paste moves their image: scaled by 1 / ratio and shifted
    by paste * (ratio - 1) / ratio (pulled back, ulp by ulp, so a box in [0, 1] stays there), in float32 as
    DALI computes it; per-sample ratio, paste_x and paste_y allowed."""
    check_args("fn.bbox_paste", args, set())
    if device != "cpu":
        raise ValueError("fn.bbox_paste runs on the CPU (device='cpu'), as in DALI")

    def offset(scale, position, factor):
        shift = F32(position) * factor
        if scale + shift > 1:
            shift = F32(1) - scale
            while scale + shift > 1:
                shift = np.nextafter(shift, F32(-1))
        return shift

    def run(ctx, op, values, ratio, paste_x, paste_y):
        if values.numel() % 4:
            raise ValueError(f"fn.bbox_paste: {values.numel()} coordinates are not whole boxes of 4")
        ratio = F32(ratio)
        scale = F32(1) / ratio
        factor = (ratio - F32(1)) / ratio
        shift_x, shift_y = offset(scale, paste_x, factor), offset(scale, paste_y, factor)
        coords = values.cpu().numpy().astype(F32).reshape(-1, 4) * scale
        coords[:, 0] += shift_x
        coords[:, 1] += shift_y
        if ltrb:
            coords[:, 2] += shift_x
            coords[:, 3] += shift_y
        return torch.from_numpy(coords.astype(F32)).reshape(values.shape)

    return _one(Op("bbox_paste", run, [boxes], {"ratio": ratio, "paste_x": paste_x, "paste_y": paste_y},
                   layouts=(boxes.layout(),), fusable=False))


def _floats(value, count: int, name: str) -> np.ndarray:
    values = np.array(value if isinstance(value, (list, tuple)) else [value], dtype=np.float64).astype(F32)
    if values.size != count:
        raise ValueError(f"fn.box_encoder: `{name}` needs {count} values, got {values.size}")
    return values


def _centre_wh(boxes: np.ndarray) -> np.ndarray:
    """ltrb -> (centre x, centre y, w, h) in float32, as DALI's AsCenterWh."""
    return np.stack([F32(0.5) * (boxes[:, 0] + boxes[:, 2]), F32(0.5) * (boxes[:, 1] + boxes[:, 3]),
                     boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]], 1).astype(F32)


def encode_boxes(boxes: np.ndarray, labels: np.ndarray, anchors: np.ndarray, criteria: float, offset: bool,
                 scale: float, means: np.ndarray, stds: np.ndarray,
                 anchors_cwh: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """DALI's BoxEncoder for one sample: each box claims its best anchor (IoU set to 2, the last best on a
    tie); each anchor takes its best box (the last on a tie) when that IoU is above ``criteria``. Matched
    anchors carry the box (centre-wh, or SSD offsets from the anchor normalized by means/stds after
    ``scale``) and its label; the rest the anchor (or zeros with ``offset``) and label 0. ``anchors_cwh``:
    the anchors in centre-wh, when the caller keeps them between samples."""
    count = len(anchors)
    anchors_cwh = _centre_wh(anchors) if anchors_cwh is None else anchors_cwh
    out_boxes = np.zeros((count, 4), F32) if offset else anchors_cwh.copy()
    out_labels = np.zeros(count, np.int32)
    if len(boxes):
        ious = iou(boxes[:, None, :], anchors[None, :, :]).reshape(len(boxes), count).copy()
        best_anchor = count - 1 - np.argmax(ious[:, ::-1], axis=1)
        ious[np.arange(len(boxes)), best_anchor] = F32(2.0)
        best_box = len(boxes) - 1 - np.argmax(ious[::-1, :], axis=0)
        matched = ious[best_box, np.arange(count)] > F32(criteria)
        where = np.nonzero(matched)[0]
        box = _centre_wh(boxes)[best_box[where]]
        if offset:
            s = F32(scale)
            b, a = box * s, anchors_cwh[where] * s
            with np.errstate(divide="ignore", invalid="ignore"):
                encoded = np.stack([((b[:, 0] - a[:, 0]) / a[:, 2] - means[0]) / stds[0],
                                    ((b[:, 1] - a[:, 1]) / a[:, 3] - means[1]) / stds[1],
                                    (np.log(b[:, 2] / a[:, 2]) - means[2]) / stds[2],
                                    (np.log(b[:, 3] / a[:, 3]) - means[3]) / stds[3]], 1).astype(F32)
            out_boxes[where] = encoded
        else:
            out_boxes[where] = box
        out_labels[where] = labels.reshape(-1)[best_box[where]]
    return out_boxes, out_labels


@operator("box_encoder", "BoxEncoder")
def box_encoder(boxes, labels, *, anchors, criteria=0.5, offset=False, scale=1.0, means=(0.0, 0.0, 0.0, 0.0),
                stds=(1.0, 1.0, 1.0, 1.0), device=None, **args):
    """``fn.box_encoder``: ltrb boxes [N, 4] and int32 labels [N] encoded onto the anchors (a flat ltrb list):
    float32 [A, 4] and int32 [A] (``encode_boxes``)."""
    check_args("fn.box_encoder", args, set())
    flat = np.array(anchors, dtype=np.float64).astype(F32).reshape(-1)
    if flat.size == 0 or flat.size % 4:
        raise ValueError(f"fn.box_encoder: anchors must be ltrb boxes (a multiple of 4 values), got {flat.size}")
    if not 0.0 <= float(criteria) <= 1.0:
        raise ValueError(f"fn.box_encoder: criteria must be in [0, 1], got {criteria}")
    anchor_boxes = flat.reshape(-1, 4)
    anchor_centres = _centre_wh(anchor_boxes)
    mean_values, std_values = _floats(means, 4, "means"), _floats(stds, 4, "stds")
    if (std_values == 0).any():
        raise ValueError("fn.box_encoder: stds must not be 0")

    def run(ctx, op, box_values, label_values):
        values = box_values.cpu().numpy().astype(F32).reshape(-1, 4)
        labels_np = label_values.cpu().numpy().astype(np.int32).reshape(-1)
        if len(labels_np) != len(values):
            raise ValueError(f"fn.box_encoder: {len(values)} boxes but {len(labels_np)} labels")
        encoded, encoded_labels = encode_boxes(values, labels_np, anchor_boxes, float(criteria), bool(offset),
                                               float(scale), mean_values, std_values, anchor_centres)
        return torch.from_numpy(encoded), torch.from_numpy(encoded_labels)

    return _one(Op("box_encoder", run, [boxes, labels], {}, num_outputs=2, device=_device([boxes], device),
                   fusable=False))


# ------------------------------------------------------------------------------------------------ images

def paste_geometry(height: int, width: int, ratio, paste_x, paste_y, min_canvas_size) -> tuple[int, int, int, int]:
    """DALI's paste geometry: canvas (H', W') = int(ratio * (H, W)) in float32, at least int(min_canvas_size);
    the image's top-left corner at int(paste_y * (H' - H)), int(paste_x * (W' - W))."""
    ratio = F32(ratio)
    if not ratio >= 1:
        raise ValueError("fn.paste: ratio of less than 1 is not supported")
    if not F32(min_canvas_size) >= 0:
        raise ValueError("fn.paste: min_canvas_size of less than 0 is not supported")
    for name, value in (("paste_x", paste_x), ("paste_y", paste_y)):
        if not 0 <= F32(value) <= 1:
            raise ValueError(f"fn.paste: {name} must be in [0, 1], got {value}")
    least = int(F32(min_canvas_size))
    new_h, new_w = max(int(ratio * F32(height)), least), max(int(ratio * F32(width)), least)
    return new_h, new_w, int(F32(paste_y) * F32(new_h - height)), int(F32(paste_x) * F32(new_w - width))


@operator("paste", "Paste")
def paste(images, *, ratio, fill_value=(0, 0, 0), paste_x=0.5, paste_y=0.5, min_canvas_size=0.0, n_channels=3,
          device=None, **args):
    """``fn.paste``: uint8 HWC images on a canvas ``ratio`` times larger filled with ``fill_value``
    (``paste_geometry``); ratio, paste_x, paste_y and min_canvas_size may be per-sample."""
    check_args("fn.paste", args, set())
    fill = tuple(int(v) for v in (fill_value if isinstance(fill_value, (list, tuple)) else [fill_value]))
    if len(fill) != int(n_channels):
        raise ValueError(f"fn.paste: fill_value has {len(fill)} values for n_channels={n_channels}")

    def run(ctx, op, image, ratio, paste_x, paste_y, min_canvas_size):
        if image.dim() != 3 or image.dtype != torch.uint8:
            raise ValueError(f"fn.paste: expects uint8 HWC images, got {image.dtype} {list(image.shape)}")
        if image.shape[2] != len(fill):
            raise ValueError(f"fn.paste: the image has {image.shape[2]} channels, fill_value {len(fill)}")
        height, width = image.shape[0], image.shape[1]
        new_h, new_w, top, left = paste_geometry(height, width, ratio, paste_x, paste_y, min_canvas_size)
        # in numpy: a row broadcast down the canvas and one block copy (torch's strided uint8 copies of
        # the same are ten times slower)
        row = np.empty((new_w, len(fill)), np.uint8)
        row[:] = fill
        canvas = np.empty((new_h, new_w, len(fill)), np.uint8)
        canvas[:] = row
        canvas[top:top + height, left:left + width] = image.cpu().numpy()[: new_h - top, : new_w - left]
        return torch.from_numpy(canvas)

    settings = {"ratio": ratio, "paste_x": paste_x, "paste_y": paste_y, "min_canvas_size": min_canvas_size}
    return _one(Op("paste", run, [images], settings, device=_device([images], device), layouts=("HWC",),
                   fusable=False))


def slice_window(shape: tuple[int, ...], anchor, extent, axes: list[int], normalized_anchor: bool,
                 normalized_shape: bool) -> tuple[list[int], list[int]]:
    """DALI's slice window (slice_attr.h) over ``shape``: per axis, float anchors and shapes scaled by the
    extent when normalized (integers are absolute), in double; end = llround(anchor + shape) -- of their sum
    scaled once when both are normalized --, start = llround(anchor)."""
    start, size = [0] * len(shape), list(shape)
    for i, dim in enumerate(axes):
        a, s = anchor[i], extent[i]
        scale_a = normalized_anchor and isinstance(a, float)
        scale_s = normalized_shape and isinstance(s, float)
        a, s = float(a), float(s)
        if scale_a and scale_s:
            end = _llround((a + s) * shape[dim])
            a *= shape[dim]
        else:
            a = a * shape[dim] if scale_a else a
            s = s * shape[dim] if scale_s else s
            end = _llround(a + s)
        start[dim] = _llround(a)
        size[dim] = end - start[dim]
    return start, size


def _llround(value: float) -> int:
    """C's llround: nearest, halves away from zero."""
    whole = int(value)
    return whole + (1 if value - whole >= 0.5 else -1 if value - whole <= -0.5 else 0)


def _values(tensor: torch.Tensor) -> list:
    """A slice argument's values: floats for a float tensor (relative when normalized), ints otherwise."""
    values = tensor.reshape(-1)
    return [float(v) for v in values.float().tolist()] if values.is_floating_point() else [int(v) for v in
                                                                                               values.tolist()]


@operator("decoders.image_slice", "decoders.ImageSlice",
          aliases={"image_decoder_slice": "ImageDecoderSlice",
                   "experimental.decoders.image_slice": "experimental.decoders.ImageSlice"})
def decoders_image_slice(data, anchor=None, shape=None, *, device="cpu", output_type=None, normalized_anchor=True,
                         normalized_shape=True, axis_names=None, axes=None, dtype=None, use_fast_idct=False,
                         **args):
    """``fn.decoders.image_slice``: the decoded image's window given by the ``anchor`` and ``shape`` inputs
    (per axis of ``axis_names``, "WH" by default: x, y and width, height), as ``slice_window`` computes it;
    a window past the image's edges is an error, as DALI's default out_of_bounds_policy makes it."""
    check_args("fn.decoders.image_slice", args, set())
    _fast_idct("fn.decoders.image_slice", use_fast_idct)
    named = sorted(k for k in ("start", "rel_start", "end", "rel_end", "shape", "rel_shape") if k in args)
    if named:
        raise NotImplementedError(f"{PREFIX}: fn.decoders.image_slice: the named slice arguments "
                                  f"({', '.join(named)}) are not supported; give anchor and shape as inputs")
    if dtype is not None and torch_dtype(dtype) != torch.uint8:
        raise NotImplementedError(f"{PREFIX}: fn.decoders.image_slice(dtype={dtype}) is not supported "
                                  f"(uint8 is)")
    if anchor is None or shape is None:
        raise ValueError("fn.decoders.image_slice needs the anchor and shape inputs")
    kind = image_type_name(output_type) if output_type is not None else "RGB"
    letters = str(axis_names) if axis_names is not None else ("WH" if axes is None else None)
    dims = None if letters is None else ["HWC".index(c) for c in letters]
    if letters is not None and any(c not in "HWC" for c in letters):
        raise ValueError(f"fn.decoders.image_slice: axis_names {letters!r} are not axes of HWC")
    if dims is None:
        dims = [int(a) for a in (axes if isinstance(axes, (list, tuple)) else [axes])]

    def run(ctx, op, encoded, anchor_value, shape_value):
        where = [d % 3 for d in dims]
        starts, sizes = _values(anchor_value), _values(shape_value)
        if len(starts) != len(where) or len(sizes) != len(where):
            raise ValueError(f"fn.decoders.image_slice: anchor and shape need {len(where)} values "
                             f"({len(starts)} and {len(sizes)} given)")

        def window(shape):
            start, size = slice_window(shape, starts, sizes, where, normalized_anchor, normalized_shape)
            if any(start[d] < 0 or size[d] < 0 or start[d] + size[d] > shape[d] for d in range(3)):
                raise ValueError(f"fn.decoders.image_slice: slice window (start {start}, shape {size}) is out "
                                 f"of bounds of the image {list(shape)} (DALI's out_of_bounds_policy 'error')")
            return start, size
        return decode_window(ctx, op, encoded, kind, window)

    return _one(Op("decoders.image_slice", run, [data, anchor, shape], {}, device=device, layouts=("HWC",),
                   fusable=False))
