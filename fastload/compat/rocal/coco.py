"""rocAL's COCO reader (``fn.readers.coco`` + ``fn.decoders.image(annotations_file=...)``) and the way
rocAL moves its boxes with the image operators.

rocAL's rules, from ROCm/rocAL at 0981d5bb (rocAL/source/meta_data/coco_meta_data_reader.cpp, the reader
rocAL/source/readers/image/coco_file_source_reader.cpp, the meta nodes rocAL/source/meta_data/):

* Samples are the decoder's ``file_root`` files (sorted by path; one level of folders when the root's
  first entry is one) whose name is the ``file_name`` of a json image with at least one annotation;
  other files are skipped (rocAL warns per file). An image's annotations are all those of its
  ``file_name`` (crowd ones too).
* A box is the annotation's [x, y, w, h] as [l, t, r, b] = [x, y, x + w, y + h] in float pixels, not
  clamped or normalized (``ratio`` is not read by rocAL). Labels are int32: the categories numbered
  1..N in the order the json lists them, or the category ids with ``avoid_class_remapping``.
* The decoder's boxes follow the decoded size (scaled by decoded / the JPEG's own size when the image is
  capped at max_decoded_width x max_decoded_height: bounding_box_graph.cpp).
* Operators move the boxes in the order they are defined (one chain of meta nodes): fn.resize scales
  them (meta_node_resize.cpp); fn.crop_mirror_normalize and fn.crop keep a box when at least a quarter of
  it lies in the window, clip it to the window and shift it there (meta_node.h, meta_node_crop*.cpp),
  a box-less result being [0, 0, window width, window height] with label 0; the mirror and fn.flip flip
  them in pixels (l' = W - r). Colour operators leave them.
* ``get_bounding_box_cords()`` gives per image a flat float32 array [l, t, r, b, ...],
  ``get_bounding_box_labels()`` an int32 array, ``get_image_id(array)`` the json ids and
  ``get_img_sizes(array)`` the json width and height (rocal_pybind.cpp; rocal_api_meta_data.cpp). With
  ``ltrb=False`` and no operator moving the boxes they come as [x, y, w, h] (rocAL loses the format
  after a meta node: master_graph.cpp clones a fresh LTRB batch).

The box encoder and IoU matcher run on the batch's boxes (``anchors.py``). Refused by name: masks, pixelwise
masks, aspect-ratio grouping; the operators whose meta node fastload does not reproduce (rotate,
resize_crop_mirror, resize_crop, roi_resize, resize_mirror_normalize, center_crop, a random fn.crop),
random_crop, transpose, warp_affine and lens_correction (rocAL has no meta node for them and leaves the boxes
where they were, off the moved image), and box-moving operators on two branches (rocAL would move one set of
boxes through both). Where rocAL errs, fastload does not copy it: it always scales boxes to the decoded size
(rocAL forgets to when no operator moves them) and reads ``ltrb=False`` as above.
"""

from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import DecodeError
from ..engine.coco import category_numbers, load_instances
from . import imageops
from . import spec
from .reading import refuse

PREFIX = "fastload.compat.rocal"
KEEP = 0.25  # meta_node.h: a box is kept when this share of it lies in the crop window


@dataclass(frozen=True)
class COCOReader:
    """What ``fn.readers.coco`` records: the annotations and how rocAL reads them."""

    annotations_file: str
    ltrb: bool
    avoid_class_remapping: bool
    is_box_iou_matcher: bool = False  # fn.box_iou_matcher needs it (MasterGraph::box_iou_matcher)
    sharded = True

    def decoder_samples(self, decoder: str, definition, file_root: str, path: str, key_map, num_shards: int):
        """``reading.RecordedReader``: fn.decoders.image reads the annotated images; their annotations go on
        the pipeline's ``definition.coco``."""
        if decoder != "fn.decoders.image":
            raise NotImplementedError(f"{PREFIX}: {decoder} after fn.readers.coco is not supported (use "
                                      f"fn.decoders.image)")
        refuse(decoder, user_feature_key_map=key_map, path=path)
        definition.coco = COCOSamples(decoder, self, file_root)
        return definition.coco.samples, None


def coco_reader(annotations_file, ltrb, masks, ratio, avoid_class_remapping, pixelwise_masks, is_box_encoder,
                is_box_iou_matcher, aspect_ratio_grouping) -> COCOReader:
    """is_box_encoder only sizes rocAL's box buffers for the anchors (create_coco_meta_data_reader), so it is
    accepted and not read."""
    for name, given in (("masks", masks), ("pixelwise_masks", pixelwise_masks),
                        ("aspect_ratio_grouping", aspect_ratio_grouping)):
        if given:
            raise NotImplementedError(f"{PREFIX}: readers.coco({name}=True) is not supported")
    if ratio:
        warnings.warn(f"{PREFIX}: readers.coco(ratio=True): rocAL does not read ratio; its boxes stay in pixels, "
                      f"and so do fastload's", stacklevel=3)
    if not annotations_file or not os.path.isfile(annotations_file):
        raise ValueError(f"{PREFIX}: readers.coco: annotations_file {annotations_file!r} is not a file")
    return COCOReader(str(annotations_file), bool(ltrb), bool(avoid_class_remapping), bool(is_box_iou_matcher))


class COCOSamples:
    """The decoder's samples: ``samples`` [(path, 0)] and per sample (image id, json width, json height,
    boxes [[l, t, r, b, label]])."""

    def __init__(self, decoder: str, reader: COCOReader, root: str):
        annotated = _annotations(reader)
        if not os.path.isdir(root):
            raise ValueError(f"{PREFIX}: {decoder}: file_root {root!r} is not a folder")
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
        folders = [entry.path for entry in entries if entry.is_dir()] if entries and entries[0].is_dir() else [root]
        loose = [entry.name for entry in entries if not entry.is_dir()] if folders != [root] else []
        if loose:
            raise ValueError(f"{PREFIX}: {decoder}: {root!r} holds folders and files ({loose[0]!r}); rocAL reads "
                             f"every entry as a folder when the first is one, and fails on a file")
        paths = sorted(entry.path for folder in folders for entry in os.scandir(folder)
                       if entry.is_file(follow_symlinks=False))
        kept = [path for path in paths if os.path.basename(path) in annotated]
        if len(kept) < len(paths):
            warnings.warn(f"{PREFIX}: {decoder}: {len(paths) - len(kept)} files of {root!r} have no annotation in "
                          f"{reader.annotations_file} and are skipped, as rocAL skips them", stacklevel=4)
        if not kept:
            raise ValueError(f"{PREFIX}: {decoder}: no file of {root!r} is an annotated image of "
                             f"{reader.annotations_file}")
        self.samples = [(path, 0) for path in kept]
        self.meta = [annotated[os.path.basename(path)] for path in kept]


def _annotations(reader: COCOReader) -> dict:
    """file_name -> (image id, width, height, boxes) for the json's annotated images."""
    where = reader.annotations_file
    try:
        data = load_instances(where)
        images = {image["id"]: image for image in data["images"]}
        order = category_numbers(data["categories"])
        annotated = {}
        for annotation in data["annotations"]:
            image = images.get(annotation["image_id"])
            if image is None:
                raise ValueError(f"annotation {annotation.get('id')} names image {annotation['image_id']}, which "
                                 f"'images' does not list")
            category = annotation["category_id"]
            if category not in order:
                raise ValueError(f"annotation {annotation.get('id')} names category {category}, which "
                                 f"'categories' does not list")
            x, y, w, h = (float(v) for v in annotation["bbox"])
            label = category if reader.avoid_class_remapping else order[category]
            entry = annotated.setdefault(image["file_name"], (image["id"], image["width"], image["height"], []))
            entry[3].append((x, y, x + w, y + h, label))
    except (OSError, KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{PREFIX}: readers.coco: {where}: {type(error).__name__}: {error}") from None
    return annotated


def _table(image_id, width, height, boxes) -> torch.Tensor:
    """One sample's meta data as the graph carries it: row 0 (image id, json width, json height, 0, 0),
    then a row (l, t, r, b, label) per box; float64 holds the ids exactly."""
    return torch.tensor([(image_id, width, height, 0, 0)] + [tuple(box) for box in boxes], dtype=torch.float64)


def decoded_boxes(samples: COCOSamples):
    """The impl of the decoder's boxes op: the sample's boxes scaled to its decoded size."""
    def run(ctx, op, data, image):
        from PIL import Image
        image_id, width, height, boxes = samples.meta[ctx.index]
        try:
            jpeg_width, jpeg_height = Image.open(io.BytesIO(bytes(data.numpy()))).size
        except Exception as error:
            raise DecodeError(ctx.index, ctx.name, f"cannot read the image's size: {error}") from error
        table = _table(image_id, width, height, boxes)
        table[1:, 0:4:2] *= np.float32(image.shape[1]) / np.float32(jpeg_width)
        table[1:, 1:4:2] *= np.float32(image.shape[0]) / np.float32(jpeg_height)
        return _float32(table)
    return run


def _float32(table: torch.Tensor) -> torch.Tensor:
    """The boxes rounded to float32, as rocAL's meta nodes store them after each step."""
    table[1:, :4] = table[1:, :4].float().double()
    return table


def _resized(ctx, op, table, before, after):
    table = table.clone()
    table[1:, 0:4:2] *= np.float32(after.shape[1]) / np.float32(before.shape[1])
    table[1:, 1:4:2] *= np.float32(after.shape[0]) / np.float32(before.shape[0])
    return _float32(table)


def _cropped(table: torch.Tensor, x: int, y: int, w: int, h: int, mirror: bool) -> torch.Tensor:
    boxes = table[1:]
    left, top = boxes[:, 0].clamp(min=x), boxes[:, 1].clamp(min=y)
    right, bottom = boxes[:, 2].clamp(max=x + w), boxes[:, 3].clamp(max=y + h)
    inside = (right - left).clamp(min=0) * (bottom - top).clamp(min=0)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = inside >= KEEP * area
    keep &= area > 0  # rocAL's share of a zero-area box is NaN, never kept
    kept = torch.stack([left - x, top - y, right - x, bottom - y, boxes[:, 4]], dim=1)[keep]
    if mirror:
        kept[:, [0, 2]] = w - kept[:, [2, 0]]
    if not len(kept):
        kept = torch.tensor([[0, 0, w, h, 0]], dtype=table.dtype)
    return _float32(torch.cat([table[:1], kept]))


def _crop_mirror_normalized(ctx, op, table, image, size, pos, mirror):
    x, y, w, h = imageops.anchored_crop(image.shape[1], image.shape[0], size[0], size[1], *pos)
    return _cropped(table, x, y, w, h, bool(int(mirror)))


def _crop_fixed(ctx, op, table, image, size, pos):
    return _cropped(table, *imageops.fixed_crop(image.shape[1], image.shape[0], size[0], size[1], *pos), False)


def _flipped(ctx, op, table, image, horizontal, vertical):
    table = table.clone()
    boxes = table[1:]
    if int(horizontal):
        boxes[:, [0, 2]] = image.shape[1] - boxes[:, [2, 0]]
    if int(vertical):
        boxes[:, [1, 3]] = image.shape[0] - boxes[:, [3, 1]]
    return _float32(table)


def moved(definition, name: str, boxes, before, after, args: dict, size: tuple[int, int]):
    """The boxes after operator ``name`` made ``after`` from ``before``: the same node for a colour
    operator, a new one where rocAL's meta node moves them, NotImplementedError where fastload does not
    reproduce it. ``size`` is the operator's (width, height) where it crops; ``definition`` is the
    pipeline's (its boxes so far)."""
    from ..engine.graph import Op
    rule = spec.boxes_rule(name)  # each operator's, declared with it (spec.OpSpec.boxes)
    if rule == spec.KEEP:  # rocAL has no meta node for it and moves no pixel: the boxes stay
        return boxes
    rules = {"resize": (_resized, [boxes, before, after], {}),
             "crop_mirror_normalize": (_crop_mirror_normalized, [boxes, before],
                                       {"size": size, "pos": args.get("pos"), "mirror": args.get("mirror")}),
             "crop": (_crop_fixed, [boxes, before], {"size": size, "pos": args.get("pos")}),
             "flip": (_flipped, [boxes, before], {"horizontal": args.get("horizontal"),
                                                  "vertical": args.get("vertical")})}
    if rule == spec.UNMOVED:  # it moves pixels, but rocAL has no meta node for it (rocal_api_augmentation.cpp adds
        # none; random_crop's is commented out): rocAL leaves the boxes where they were
        raise NotImplementedError(f"{PREFIX}: fn.{name} on images of fn.readers.coco: rocAL has no meta node for it "
                                  f"and hands on the boxes where they were, off the moved image; fastload refuses "
                                  f"rather than give boxes that do not follow their image")
    if name not in rules or (name == "crop" and not all(size)):
        what = "a random fn.crop" if name == "crop" else f"fn.{name}"
        raise NotImplementedError(f"{PREFIX}: {what} on images of fn.readers.coco: moving their boxes as rocAL "
                                  f"does is not supported (fn.resize, fn.crop with a size, fn.crop_mirror_normalize, "
                                  f"fn.flip and the colour operators are)")
    if boxes is not definition.boxes:
        raise NotImplementedError(f"{PREFIX}: fn.{name} moves boxes on a second branch of fn.readers.coco's images: "
                                  f"rocAL moves one set of boxes through every box-moving operator in the order "
                                  f"they are defined; fastload follows one chain")
    impl, inputs, op_args = rules[name]
    node = Op("rocal.boxes." + name, impl, inputs, op_args).outputs[0]
    definition.boxes = node
    return node


def as_xywh(table: torch.Tensor) -> torch.Tensor:
    table = table.clone()
    table[1:, 2:4] -= table[1:, 0:2]
    return table
