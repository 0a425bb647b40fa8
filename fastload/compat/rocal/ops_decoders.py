"""rocAL's image decoders (``fn.decoders.image`` / ``image_raw`` / ``image_random_crop`` /
``image_slice``) and ``fn.external_source``: the ops that turn what a reader read into images, capped as
rocAL caps them (``imageops.decode``).
"""

from __future__ import annotations

import os

import torch

from ..dali import imageops as dali_imageops
from ..engine.graph import Op
from . import coco, imageops
from .caffe import CaffeReader
from .definition import defining
from .meta import describe
from .ops_common import PREFIX, Rocal, refuse, unsupported
from .ops_readers import TFRecordReader, _reader_node
from .spec import READ, OpSpec, declare, operator
from .types import RocalImageColor, RocalLastBatchPolicy
from .webdataset import WebDatasetReader


def _color(output_type) -> str:
    color = RocalImageColor(output_type)
    if color == RocalImageColor.RGB_PLANAR:
        raise NotImplementedError(f"{PREFIX}: output_type RGB_PLANAR is not supported (RGB, BGR, GRAY)")
    return color.name


def _decode(ctx, op, data, color, max_width, max_height, keep_original=True):
    from ...errors import DecodeError
    try:
        return imageops.decode(bytes(data.numpy()), color, max_width, max_height, keep_original)
    except Exception as error:
        raise DecodeError(ctx.index, ctx.name, f"cannot decode: {error}") from error


@operator(output=READ)
def decoders_image(*inputs, user_feature_key_map=None, path="", file_root="", annotations_file="", index_path="",
                   shard_id=0, num_shards=1, random_shuffle=False, output_type=RocalImageColor.RGB,
                   decoder_type=0, device=None, decode_size_policy=3, max_decoded_width=1000,
                   max_decoded_height=1000, last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL,
                   pad_last_batch=True, stick_to_shard=True, shard_size=-1):
    """``fn.decoders.image``: reads and decodes the recorded folder, capped at max_decoded_width x
    max_decoded_height by ``decode_size_policy``'s rule (rocAL_pybind/amd/rocal/decoders.py; imageops.decode).
    ``device="gpu"`` (rocAL's rocJPEG) decodes on the CPU too, TurboJPEG's way."""
    reader = inputs[0] if inputs else None
    if isinstance(reader, coco.COCOReader) and annotations_file and \
            os.path.abspath(annotations_file) != os.path.abspath(reader.annotations_file):
        raise ValueError(f"{PREFIX}: fn.decoders.image(annotations_file={annotations_file!r}) after "
                         f"fn.readers.coco(annotations_file={reader.annotations_file!r}): give both the same file")
    refuse("fn.decoders.image", annotations_file=annotations_file and not isinstance(reader, coco.COCOReader),
           index_path=index_path and not isinstance(reader, WebDatasetReader),
           decode_size_policy=decode_size_policy not in (1, 3))
    if int(decode_size_policy) == 1:
        imageops.require_dct_scaling("fn.decoders.image(decode_size_policy=USER_GIVEN_SIZE)")
    data = _reader_node("fn.decoders.image", inputs, file_root, shard_id, num_shards, random_shuffle,
                        last_batch_policy, pad_last_batch, stick_to_shard, shard_size, path, user_feature_key_map)
    node = Op("rocal.decoders.image", _decode, [data],
              {"color": _color(output_type), "max_width": int(max_decoded_width),
               "max_height": int(max_decoded_height), "keep_original": int(decode_size_policy) == 3},
              layouts=("HWC",)).outputs[0]
    describe(node, image=Rocal((int(max_decoded_height), int(max_decoded_width))))
    if isinstance(reader, coco.COCOReader):  # the boxes, at the decoded size, follow the image's operators
        definition = defining()
        boxes = definition.boxes = definition.decoded_boxes = Op(
            "rocal.boxes.decoded", coco.decoded_boxes(definition.coco), [data, node], {}).outputs[0]
        definition.unlabelled = ("fn.readers.coco gives boxes: get_bounding_box_labels() and "
                                 "get_bounding_box_cords() (rocAL's plugins would give the first box labels of the "
                                 "batch as its labels)")
        describe(node, boxes=boxes)
    return node


def _raw_image(ctx, op, data, width, height, planes):
    from ...errors import DecodeError
    if data.numel() != width * height * planes:
        raise DecodeError(ctx.index, ctx.name, f"{data.numel()} bytes, not the {width}x{height}x{planes} "
                          f"= {width * height * planes} of max_decoded_width x max_decoded_height pixels "
                          f"(rocAL copies the bytes as they are: fewer leave the buffer's old bytes, more "
                          f"overrun it)")
    return data.view(height, width, planes)


@operator(output=READ)
def decoders_image_raw(*inputs, user_feature_key_map=None, path="", random_shuffle=False,
                       output_type=RocalImageColor.RGB, max_decoded_width=1000, max_decoded_height=1000,
                       last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL, pad_last_batch=True,
                       stick_to_shard=True, shard_size=-1):
    """``fn.decoders.image_raw``: after fn.readers.tfrecord, each record's ``image/encoded`` bytes taken as
    max_decoded_height x max_decoded_width HWC uint8 pixels (3 planes, 1 for GRAY), undecoded: rocAL's
    rocalRawTFRecordSource (rocAL/source/api/rocal_api_data_loaders.cpp) reads with SKIP_DECODE, which
    copies the bytes into the image's buffer and gives every image the whole buffer as its region
    (image_read_and_decode.cpp); the colour format only names the buffer (no channel swap). fastload
    refuses a record of another byte count. rocAL's own Python wrapper at 0981d5bb passes
    tfImageDecoderRaw one argument fewer than the C function takes (no record_name_prefix), so this
    runs what the C function does, which rocAL's Python cannot reach."""
    if not inputs or not isinstance(inputs[0], TFRecordReader):
        raise ValueError(f"{PREFIX}: fn.decoders.image_raw reads what fn.readers.tfrecord recorded (rocAL's returns "
                         f"nothing after any other reader)")
    width, height = int(max_decoded_width), int(max_decoded_height)
    if width <= 0 or height <= 0:
        raise ValueError(f"{PREFIX}: fn.decoders.image_raw: max_decoded_width x max_decoded_height {width}x{height} "
                         f"(rocAL: \"Invalid output width and height\")")
    color = _color(output_type)
    data = _reader_node("fn.decoders.image_raw", inputs, "", 0, 1, random_shuffle, last_batch_policy,
                        pad_last_batch, stick_to_shard, shard_size, path, user_feature_key_map)
    node = Op("rocal.decoders.image_raw", _raw_image, [data],
              {"width": width, "height": height, "planes": 1 if color == "GRAY" else 3}, layouts=("HWC",)).outputs[0]
    describe(node, image=Rocal((height, width)))
    return node


def _crop_decode(ctx, op, data, color, max_width, max_height, area, ratio, attempts):
    from ...errors import DecodeError
    try:
        image = imageops.decode(bytes(data.numpy()), color, 1 << 30, 1 << 30)
    except Exception as error:
        raise DecodeError(ctx.index, ctx.name, f"cannot decode: {error}") from error
    y, x, h, w = dali_imageops.random_crop_window(image.shape[0], image.shape[1], ctx.rng(op), area, ratio,
                                                  attempts)
    # the window is then cut to the cap, not scaled (rocAL/source/decoders/image/fused_crop_decoder.cpp)
    return image[y:y + min(h, max_height), x:x + min(w, max_width)].contiguous()


def _random_crop_decoder(name, inputs, file_root, path, shard_id, num_shards, random_shuffle, output_type,
                         random_area, random_aspect_ratio, num_attempts, max_decoded_width, max_decoded_height,
                         last_batch_policy, pad_last_batch, stick_to_shard, shard_size):
    if not isinstance(inputs[0] if inputs else None, CaffeReader):  # the only readers whose path they read
        refuse(name, path=path)
    data = _reader_node(name, inputs, file_root, shard_id, num_shards, random_shuffle, last_batch_policy,
                        pad_last_batch, stick_to_shard, shard_size, path)
    node = Op("rocal." + name.removeprefix("fn."), _crop_decode, [data],
              {"color": _color(output_type), "max_width": int(max_decoded_width),
               "max_height": int(max_decoded_height), "area": tuple(float(v) for v in random_area),
               "ratio": tuple(float(v) for v in random_aspect_ratio), "attempts": int(num_attempts)},
              layouts=("HWC",)).outputs[0]
    describe(node, image=Rocal((int(max_decoded_height), int(max_decoded_width))))
    return node


@operator(output=READ)
def decoders_image_random_crop(*inputs, user_feature_key_map=None, path="", file_root="", annotations_file="",
                               num_shards=1, shard_id=0, random_shuffle=False, num_attempts=10,
                               output_type=RocalImageColor.RGB, random_area=(0.08, 1.0),
                               random_aspect_ratio=(0.8, 1.25), decode_size_policy=3, max_decoded_width=1000,
                               max_decoded_height=1000, decoder_type=0,
                               last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL, pad_last_batch=True,
                               stick_to_shard=True, shard_size=-1):
    """``fn.decoders.image_random_crop``: decodes a random window (area, aspect ratio in log space,
    ``num_attempts``, then the whole image -- rocAL/source/parameters/parameter_random_crop_decoder.cpp, the
    rule DALI has), cut to the cap. The windows are rocAL's in distribution, not in value."""
    refuse("fn.decoders.image_random_crop", annotations_file=annotations_file,
           decode_size_policy=decode_size_policy not in (1, 3))
    if isinstance(defining().reader, TFRecordReader):
        # after fn.readers.tfrecord rocAL's image_random_crop calls the same b.tfImageDecoder as image: the
        # whole image, capped, no random window (rocAL_pybind/amd/rocal/decoders.py, image_random_crop)
        return decoders_image(*inputs, user_feature_key_map=user_feature_key_map, path=path,
                              shard_id=shard_id, num_shards=num_shards, random_shuffle=random_shuffle,
                              output_type=output_type, decoder_type=decoder_type,
                              decode_size_policy=decode_size_policy, max_decoded_width=max_decoded_width,
                              max_decoded_height=max_decoded_height, last_batch_policy=last_batch_policy,
                              pad_last_batch=pad_last_batch, stick_to_shard=stick_to_shard,
                              shard_size=shard_size)
    refuse("fn.decoders.image_random_crop", user_feature_key_map=user_feature_key_map)
    return _random_crop_decoder("fn.decoders.image_random_crop", inputs, file_root, path, shard_id, num_shards,
                                random_shuffle, output_type, random_area, random_aspect_ratio, num_attempts,
                                max_decoded_width, max_decoded_height, last_batch_policy, pad_last_batch,
                                stick_to_shard, shard_size)


@operator(output=READ)
def decoders_image_slice(*inputs, file_root="", path="", annotations_file="", shard_id=0, num_shards=1,
                         random_shuffle=False, random_aspect_ratio=(0.75, 1.33333), random_area=(0.08, 1.0),
                         num_attempts=100, output_type=RocalImageColor.RGB, decode_size_policy=3,
                         max_decoded_width=1000, max_decoded_height=1000,
                         last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL, pad_last_batch=True,
                         stick_to_shard=True, shard_size=-1):
    """``fn.decoders.image_slice``: in rocAL the same random-window decoder as image_random_crop
    (b.fusedDecoderCropShard), with its own defaults (aspect [0.75, 1.33333], 100 attempts)."""
    refuse("fn.decoders.image_slice", annotations_file=annotations_file,
           decode_size_policy=decode_size_policy not in (1, 3))
    if isinstance(defining().reader, TFRecordReader):
        raise NotImplementedError(f"{PREFIX}: fn.decoders.image_slice after fn.readers.tfrecord: rocAL's has no "
                                  f"TFRecord branch (it reads file_root as a folder of images); use "
                                  f"fn.decoders.image")
    return _random_crop_decoder("fn.decoders.image_slice", inputs, file_root, path, shard_id, num_shards,
                                random_shuffle, output_type, random_area, random_aspect_ratio, num_attempts,
                                max_decoded_width, max_decoded_height, last_batch_policy, pad_last_batch,
                                stick_to_shard, shard_size)


# ---------------------------------------------------------------------------------------------- external

def _external_image(ctx, op, value, mode, color, max_width, max_height):
    """One external-source sample as an HWC uint8 image: a file name (read and decoded), encoded bytes
    (decoded), or the pixels themselves (already cut to the sample's ROI by the pipeline)."""
    from ...errors import DecodeError
    if mode == 2:
        return value
    data, name = value, ctx.name
    if mode == 0:
        name = bytes(value.tolist()).decode()
        try:
            with open(name, "rb") as file:
                data = torch.frombuffer(bytearray(file.read()), dtype=torch.uint8)
        except OSError as error:
            raise DecodeError(ctx.index, name, f"cannot read: {error}") from error
    try:  # rocAL's fn.external_source decodes with USER_GIVEN_SIZE (rocAL_pybind/amd/rocal/fn.py)
        return imageops.decode(bytes(data.numpy()), color, max_width, max_height, keep_original=False)
    except Exception as error:
        raise DecodeError(ctx.index, name, f"cannot decode: {error}") from error


@operator(output=READ)
def external_source(source, device=None, color_format=RocalImageColor.RGB, random_shuffle=False, mode=0,
                    max_width=2000, max_height=2000, last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL,
                    pad_last_batch_repeated=False, stick_to_shard=True, shard_size=-1):
    """``fn.external_source``: images from ``source``, an iterator whose ``iter()`` has ``n`` (the sample
    count) and whose ``next()`` gives ``(items, labels[, roi_height, roi_width[, height, width]])`` per
    batch. ``mode``: EXTSOURCE_FNAME (items are file names), EXTSOURCE_RAW_COMPRESSED (encoded bytes,
    decoded capped at max_width x max_height) or EXTSOURCE_RAW_UNCOMPRESSED (HWC uint8 pixels, each cut to
    its ROI). An epoch is ceil(n / batch_size) batches (rocAL_pybind/amd/rocal/plugin/generic.py)."""
    from ..dali.operators import ExternalSourceOp
    refuse("fn.external_source", random_shuffle=random_shuffle, pad_last_batch_repeated=pad_last_batch_repeated,
           shard_size=shard_size not in (-1, None))
    if int(mode) != 2:
        imageops.require_dct_scaling("fn.external_source (it decodes with USER_GIVEN_SIZE)")
    definition = defining()
    items = ExternalSourceOp(None, None, True, False, None, [None], ("",), "cpu", None)
    definition.external = (items, iter(source), int(mode))
    node = Op("rocal.external_source", _external_image, [items.outputs[0]],
              {"mode": int(mode), "color": _color(color_format), "max_width": int(max_width),
               "max_height": int(max_height)}, layouts=("HWC",)).outputs[0]
    describe(node, image=Rocal((int(max_height), int(max_width))))
    return node, []


declare(OpSpec("decoders.video", unsupported("decoders.video", "rocAL has none (DALI has); rocAL reads and decodes "
                                                           "videos with fn.readers.video, which fastload runs"),
               output=READ, supported=False))
