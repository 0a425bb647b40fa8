"""rocAL's operators as graph builders, on the graph fastload.compat.dali traces and runs.

rocAL's Python API is modelled on DALI's, so its operators add ``Op``s to
the same graph (``..dali.graph``) and its pipelines run on the same
executor and loader; what differs is rocAL's rules, each cited from its
sources (ROCm/rocAL at 0981d5bb): the reader lives in the decoder
(``fn.readers.file`` only records the folder), decoded images are capped at
``max_decoded_width`` x ``max_decoded_height``, image operators output NHWC
uint8 unless asked otherwise, crop_mirror_normalize mirrors by default, and
every output is a buffer of the operator's largest size with each image at
its top left. Every image operator's node carries that buffer size and its
output layout and type (``Rocal``), which the pipeline uses when it hands
batches out. Arguments rocAL has but fastload does not run as rocAL does
raise NotImplementedError naming them.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from dataclasses import dataclass, replace

import numpy as np
import torch

from .order import RocalOrder
from ..dali import imageops as dali_imageops
from ..dali.graph import DataNode, Op, current_pipeline
from ..dali.operators import _read_sample, random_coin_flip, random_uniform
from . import anchors as anchor_rules
from . import caffe, cifar10, coco, imageops, mxnet, npy, sequence, video
from .caffe import CaffeReader
from .types import (DTYPE_NAMES, TORCH_DTYPES, RocalImageColor, RocalLastBatchPolicy, RocalMissingComponentsBehavior,
                    RocalResizeInterpolationType, RocalResizeScalingMode, RocalTensorLayout, RocalTensorOutputType)
from .mxnet import MXNetReader
from .webdataset import WebDatasetReader, WebDatasetSamples, webdataset_reader

PREFIX = "fastload.compat.rocal"


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


def refuse(operator: str, **given) -> None:
    """NotImplementedError for arguments given that fastload does not run as rocAL does."""
    named = [name for name, value in given.items() if value]
    if named:
        raise NotImplementedError(f"{PREFIX}: {operator}: {', '.join(named)} not supported")


def _pipeline():
    pipe = current_pipeline()
    if pipe is None:
        raise RuntimeError(f"{PREFIX}: operators are called inside a pipeline definition (with pipe: ..., or a "
                           f"@pipeline_def function)")
    return pipe


def _source(inputs) -> Rocal:
    """What an image operator's input is: rocAL's description of an image, else a TypeError saying why."""
    image = inputs[0] if inputs else None
    array = getattr(image, "rocal_array", None)
    if array is not None and not hasattr(image, "rocal"):
        raise TypeError(f"{PREFIX}: an image operator takes an image: fn.readers.numpy's output is one when its "
                        f"output_layout is NHWC or NCHW and its arrays uint8 of three dimensions, 1 or 3 "
                        f"channels (here {array.layout}, {array.dtype} of shape {array.max_shape})")
    if not isinstance(image, DataNode) or not hasattr(image, "rocal"):
        raise TypeError(f"{PREFIX}: an image operator takes an image output of a decoder or another image operator")
    return image.rocal


def _per_frame(impl):
    """An image operator's impl run on each frame of a sequence (fn.readers.video's samples), with the
    sequence's one set of random parameters, as rocAL replicates an operator's parameters over the
    frames; ``ctx.frame`` tells per-pixel noise which frame it draws for (RPP's are separate images)."""
    def run(ctx, op, frames, **args):
        return torch.stack([impl(replace(ctx, frame=n), op, frame, **args) for n, frame in enumerate(frames)])
    return run


def _image_op(name: str, impl, image: DataNode, args: dict, out: Rocal) -> DataNode:
    _source([image])
    sequence = getattr(image, "rocal_frames", None)
    if sequence is None and out.layout in SEQUENCE_LAYOUTS:
        raise ValueError(f"{PREFIX}: fn.{name}: output_layout {out.layout.name} is for fn.readers.video's "
                         f"sequences: give NHWC or NCHW")
    if sequence is not None and out.layout not in SEQUENCE_LAYOUTS:  # each frame in that layout
        out = replace(out, layout={v: k for k, v in SEQUENCE_LAYOUTS.items()}[out.layout])
    node = Op("rocal." + name, impl if sequence is None else _per_frame(impl), [image], args,
              layouts=("HWC" if sequence is None else "FHWC",)).outputs[0]
    node.rocal = out
    if sequence is not None:
        node.rocal_frames = sequence
    boxes = getattr(image, "rocal_boxes", None)
    if boxes is not None:  # fn.readers.coco's boxes, moved as rocAL's meta node for the operator moves them
        node.rocal_boxes = coco.moved(_pipeline(), name, boxes, image, node, args,
                                      args.get("size") or (out.buffer[1], out.buffer[0]))
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


# ------------------------------------------------------------------------------------------------ readers

class FileReader:
    """What ``fn.readers.file`` records: the folder (or list) the decoder will read, as in rocAL, where
    the reader only makes the label reader and the decoder does the reading."""

    def __init__(self, file_root: str, file_list: str):
        self.file_root, self.file_list = file_root, file_list


def _record(reader) -> None:
    """Make ``reader`` the pipeline's: one per pipeline, as rocAL's ("A metadata reader has already been
    created", rocAL/source/pipeline/master_graph.cpp)."""
    pipe = _pipeline()
    if getattr(pipe, "_rocal_reader", None) is not None:
        raise RuntimeError(f"{PREFIX}: the pipeline already has a reader ({type(pipe._rocal_reader).__name__}); "
                           f"rocAL takes one per pipeline (\"A metadata reader has already been created\")")
    pipe._rocal_reader = reader


def readers_file(file_root, file_filters=None, file_list="", stick_to_shard=False, pad_last_batch=False,
                 shard_id=None, num_shards=None, random_shuffle=None):
    """``fn.readers.file``: records ``file_root`` (and ``file_list``); rocAL ignores its file_filters,
    stick_to_shard and pad_last_batch (they are the decoder's), and so does fastload
    (rocAL_pybind/amd/rocal/readers.py). shard_id, num_shards and random_shuffle, which rocAL's older API
    (and its Python API page) pass here, are accepted and ignored too: the decoder's decide."""
    reader = FileReader(str(file_root), file_list or "")
    _record(reader)
    return reader, []


class TFRecordReader:
    """What ``fn.readers.tfrecord`` records (reader_type 0, classification): the folder and the user's
    feature key map; as with the file reader, the decoder does the reading (rocAL_pybind/amd/rocal/readers.py,
    tfrecord; decoders.py, image: b.tfImageDecoder)."""

    def __init__(self, path: str, key_map: dict):
        self.path, self.key_map = path, key_map


def readers_tfrecord(path, user_feature_key_map, features, reader_type=0, stick_to_shard=False,
                     pad_last_batch=False):
    """``fn.readers.tfrecord``: records the folder and the key map, and returns ``features`` with
    ``"image/encoded"`` set to the reader (what the decoder takes) and ``"image/class/label"`` to ``[]``, as
    rocAL does; the labels reach the iterators. rocAL needs ``image/class/label`` and ``image/filename`` in
    the key map, and every key of ``features`` there (it prints that and exits; fastload raises). The
    features' values (tf.io.FixedLenFeature) are not read, and stick_to_shard / pad_last_batch here do
    nothing (they are the decoder's), in rocAL as here."""
    if int(reader_type) != 0:
        raise NotImplementedError(f"{PREFIX}: readers.tfrecord(reader_type={reader_type}): only image "
                                  f"classification (0) is supported, not detection (1)")
    for key in ("image/class/label", "image/filename"):
        if key not in user_feature_key_map:
            raise KeyError(f"{PREFIX}: readers.tfrecord: user_feature_key_map has no {key!r} (rocAL reads it)")
    missing = [key for key in features if key not in user_feature_key_map]
    if missing:
        raise ValueError(f"{PREFIX}: readers.tfrecord: features {missing} are not in user_feature_key_map "
                         f"(rocAL's classification reader needs image/encoded and image/class/label there)")
    reader = TFRecordReader(str(path), dict(user_feature_key_map))
    _record(reader)
    features["image/encoded"] = reader
    features["image/class/label"] = []
    return features


def tfrecord_samples(decoder: str, reader: TFRecordReader, folder: str, key_map) -> tuple[list, object]:
    """rocAL's TFRecord reading, as (samples, read): the folder is the decoder's ``path`` (decoders.py,
    image), its entries sorted by name, each a TFRecord file, records in file order
    (rocAL/source/readers/image/tf_record_reader.cpp, folder_reading, read_image_names); the image is the
    bytes feature ``key_map["image/encoded"]``, the label the int64 feature the reader's
    ``user_feature_key_map["image/class/label"]`` names, as it is (no offset;
    rocAL/source/meta_data/tf_meta_data_reader.cpp, read_record). rocAL keys records by their
    ``image/filename`` feature across all files: a record without one stops it, and a name used twice
    makes it read the first record for both (or another file's offset), so fastload refuses both, naming
    the records. fastload checks the CRCs, which rocAL reads and ignores, so a corrupt record is that
    sample's error (``on_error``). fastload's own index files in the folder are not TFRecord files."""
    from ...tfrecords import TFRecords
    if not folder:
        raise ValueError(f"{decoder}: path= names the folder of TFRecord files (rocAL's decoder reads its own "
                         f"path argument after fn.readers.tfrecord)")
    if not isinstance(key_map, dict) or not {"image/encoded", "image/filename"} <= set(key_map):
        raise ValueError(f"{decoder}: after fn.readers.tfrecord, user_feature_key_map= with 'image/encoded' and "
                         f"'image/filename' is required (rocAL's decoder reads both)")
    if not os.path.isdir(folder):
        raise NotADirectoryError(f"{decoder}: {folder}: not a folder (rocAL's TFRecord reader reads every file "
                                 f"of the folder it is given)")
    names = sorted(entry.name for entry in os.scandir(folder)  # (not fastload's indexes, nor one being written)
                   if not entry.name.endswith(".fastload-idx.json") and ".fastload-idx.json." not in entry.name)
    for name in names:
        if os.path.isdir(os.path.join(folder, name)):
            raise ValueError(f"{decoder}: {os.path.join(folder, name)}: a folder among the TFRecord files "
                             f"(rocAL reads every entry of {folder} as a TFRecord file)")
    if not names:
        raise ValueError(f"{decoder}: no TFRecord files in {folder!r}")
    source = TFRecords([os.path.join(folder, name) for name in names], image_feature=key_map["image/encoded"],
                       label_feature=reader.key_map["image/class/label"], name_feature=key_map["image/filename"])
    first: dict[str, int] = {}
    for index, name in enumerate(source.names):
        if index in source.problems:
            continue  # its own error when read
        if name is None:
            raise ValueError(f"{decoder}: {source.samples[index][0]} has no bytes feature "
                             f"{key_map['image/filename']!r}, which rocAL keys each record by")
        if name in first:
            raise ValueError(f"{decoder}: {source.samples[first[name]][0]} and {source.samples[index][0]} are both "
                             f"named {name!r} ({key_map['image/filename']}): rocAL keys records by that name and "
                             f"would read the first record for both")
        first[name] = index
    return source.samples, source.read


def list_folder(root: str, file_list: str = "") -> list[tuple[str, int]]:
    """rocAL's folder reading (rocAL/source/readers/file_source_reader.cpp, open_folder;
    rocAL/source/meta_data/label_reader_folders.cpp): the root's entries sorted; each folder, empty or
    not, is the next label, its files (not sub-folders) sorted; a root holding images is read flat, all
    label 0. Kept: the extensions rocAL keeps (any case) and files without one. Labels are looked up by
    file name, as rocAL does: a name in two folders gets the first one's label. With ``file_list`` (its
    label reader's), only the names it lists are kept, with its labels (``list_labels``): rocAL's image
    loaders are not given the list, so they walk the folder and ask the label reader
    (rocal_api_data_loaders.cpp passes "" as the loader's file list; file_source_reader.cpp open_folder)."""
    found, by_name, collisions = [], {}, 0
    entries = sorted(os.scandir(root), key=lambda e: e.name)
    folders = [e for e in entries if e.is_dir()]
    if any(e.is_file() and _kept(e.name) for e in entries):
        folders = [None]
    for label, folder in enumerate(folders):
        directory, own = (root, 0) if folder is None else (folder.path, label)
        for name in sorted(e.name for e in os.scandir(directory) if e.is_file()):
            if _kept(os.path.join(directory, name)):
                label_of = by_name.setdefault(name, own)
                collisions += label_of != own
                found.append((os.path.join(directory, name), label_of))
    if collisions and not file_list:
        warnings.warn(f"{PREFIX}: {root}: {collisions} files share a name with a file of an earlier folder and get "
                      f"that folder's label, as rocAL looks labels up by file name; give each file a unique name "
                      f"(ImageNet's do) for one label per folder", stacklevel=3)
    if file_list:
        labels = list_labels(file_list)[1]
        found = [(path, labels[os.path.basename(path)]) for path, _ in found if os.path.basename(path) in labels]
    return found


C_BLANKS = re.compile("[ \t\n\v\f\r]+")  # what C's isspace and so ``>>`` skip between words


def list_labels(file_list: str) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """rocAL's label reader of a file list (rocAL/source/meta_data/text_file_meta_data_reader.cpp read_all):
    per line a path and an int label (``line >> name >> label``: lines that do not parse are skipped);
    ([(line number, path)] in order, {file name: its first line's label}). As std::getline and ``>>`` read
    them: lines end at "\\n" only, words at C's six blanks (a no-break space is part of a name), bytes as
    they are."""
    paths, labels = [], {}
    with open(file_list, encoding="utf-8", errors="surrogateescape", newline="\n") as lines:
        for number, line in enumerate(lines, 1):
            words = C_BLANKS.split(line.strip(" \t\n\v\f\r"))
            label = re.match(r"[+-]?[0-9]+", words[1]) if len(words) >= 2 else None
            if label is None or not -2 ** 31 <= int(label.group()) < 2 ** 31:
                continue
            paths.append((number, words[0]))
            labels.setdefault(os.path.basename(words[0]), int(label.group()))
    return paths, labels


def listed_files(root: str, file_list: str) -> list[tuple[str, int]]:
    """The files of a list in the list's order, as rocAL's audio loader reads them (it is given the list:
    file_source_reader.cpp iterates the label reader's relative paths): paths relative to ``root`` at any
    depth, those that are regular files; a name listed twice is read twice, with its first label. An
    absolute path is refused: rocAL reads the previous line's file in its place (it sets the path only
    for relative ones)."""
    paths, labels = list_labels(file_list)
    found = []
    for number, path in paths:
        if os.path.isabs(path):
            raise NotImplementedError(f"{PREFIX}: {file_list} line {number}: an absolute path ({path}); rocAL "
                                      f"reads the previous line's file in its place: list paths relative to "
                                      f"file_root")
        if os.path.isfile(os.path.join(root, path)):
            found.append((os.path.join(root, path), labels[os.path.basename(path)]))
    return found


def _kept(path: str) -> bool:
    dot = path.rfind(".")
    return dot < 0 or path[dot + 1:].lower() in imageops.EXTENSIONS


@dataclass
class RocalReaderSpec:
    """The reading a rocAL decoder was told to do: its samples and rocAL's sharding arguments."""

    samples: list
    shard_id: int
    num_shards: int
    random_shuffle: bool
    stick_to_shard: bool
    last_batch_policy: RocalLastBatchPolicy
    pad: bool = True
    seed: int = -1
    name: str | None = "Reader"
    read: object = None  # for a reader of records (TFRecord): read(index) -> the sample's encoded bytes
    reshuffle: bool = True  # False: one permutation for every epoch (rocAL's sequence reader)

    def order(self, batch_size: int, seed: int) -> RocalOrder:
        return RocalOrder(len(self.samples), shard_id=self.shard_id, num_shards=self.num_shards,
                          batch_size=batch_size, stick_to_shard=self.stick_to_shard,
                          random_shuffle=self.random_shuffle,
                          drop=self.last_batch_policy == RocalLastBatchPolicy.LAST_BATCH_DROP, seed=seed,
                          pad=self.pad, reshuffle=self.reshuffle)


def readers_coco(annotations_file="", ltrb=True, masks=False, ratio=False, avoid_class_remapping=False,
                 pixelwise_masks=False, is_box_encoder=False, is_box_iou_matcher=False, aspect_ratio_grouping=False,
                 stick_to_shard=False, pad_last_batch=False):
    """``fn.readers.coco``: records the annotations; ``fn.decoders.image(jpegs, file_root=...,
    annotations_file=...)`` reads the annotated images and their boxes (``fastload.compat.rocal.coco`` for
    rocAL's rules). Returns (the reader, [], []) as rocAL returns (meta data, labels, bboxes); as in rocAL,
    stick_to_shard and pad_last_batch here are not read (the decoder's are)."""
    reader = coco.coco_reader(annotations_file, ltrb, masks, ratio, avoid_class_remapping, pixelwise_masks,
                              is_box_encoder, is_box_iou_matcher, aspect_ratio_grouping)
    _record(reader)
    return reader, [], []


def readers_video(sequence_length, file_list_frame_num=False, file_root="", image_type=RocalImageColor.RGB,
                  num_shards=1, random_shuffle=False, step=1, stride=1, decoder_mode=0, enable_frame_num=False,
                  enable_timestamps=False, file_list="", stick_to_shard=False, pad_last_batch=False,
                  file_list_include_preceding_frame=False, normalized=False, skip_vfr_check=False,
                  last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL, pad_last_batch_repeated=False,
                  shard_size=-1, decoder_type=0):
    """``fn.readers.video``: sequences of ``sequence_length`` frames of the videos of ``file_root`` (a
    folder, a video or a .txt list), NFHWC uint8 (``fastload.compat.rocal.video`` for rocAL's rules), with
    their videos' labels. As in rocAL, file_list, enable_frame_num, enable_timestamps,
    file_list_include_preceding_frame, normalized, skip_vfr_check and the sharding and last-batch
    arguments are not read: every batch is full."""
    color = RocalImageColor(image_type)
    if color not in (RocalImageColor.RGB, RocalImageColor.BGR):
        raise NotImplementedError(f"{PREFIX}: readers.video(image_type={color.name}): RGB and BGR frames only")
    if int(num_shards) != 1:
        raise NotImplementedError(f"{PREFIX}: readers.video(num_shards={num_shards}): rocAL splits one process's "
                                  f"reading over internal loaders, batch by batch; not supported")
    length = int(sequence_length)
    if length < 1:
        raise ValueError(f"{PREFIX}: readers.video: sequence_length={sequence_length}")
    reader = video.VideoReader(str(file_root), length, int(step) or length, int(stride) or 1,
                               bool(file_list_frame_num), color.name)
    sequences = video.VideoSequences(reader)
    return _sequence_node("readers.video", sequences, sequences.read, bool(random_shuffle),
                          lambda ctx, op, data: data.view(*sequences.shape), length)


def _sequence_node(name: str, sequences, read, random_shuffle: bool, frames, length: int,
                   reshuffle: bool = True) -> DataNode:
    """A sequence reader's node: ``sequences`` recorded as the pipeline's reader, read in rocAL's order
    (every batch full, the last filled with the last sequence), each sample's bytes made its NFHWC uint8
    frames by ``frames``, in a buffer of the reader's largest frame."""
    pipe = _pipeline()
    _record(sequences)
    data = _reading(pipe, RocalReaderSpec(sequences.samples, 0, 1, random_shuffle, True,
                                          RocalLastBatchPolicy.LAST_BATCH_FILL, name=name, read=read,
                                          reshuffle=reshuffle))
    node = Op("rocal." + name, frames, [data], {}, layouts=("FHWC",)).outputs[0]
    node.rocal = Rocal((sequences.height, sequences.width), RocalTensorLayout.NFHWC, RocalTensorOutputType.UINT8)
    node.rocal_frames = length
    return node


def readers_video_resize(sequence_length, resize_width, resize_height, file_list_frame_num=False, file_root="",
                         image_type=RocalImageColor.RGB, num_shards=1, random_shuffle=False, step=3, stride=3,
                         decoder_mode=0, scaling_mode=RocalResizeScalingMode.SCALING_MODE_DEFAULT,
                         interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION, resize_longer=0,
                         resize_shorter=0, max_size=(), enable_frame_num=False, enable_timestamps=False,
                         file_list="", stick_to_shard=True, pad_last_batch=False,
                         file_list_include_preceding_frame=False, normalized=False, skip_vfr_check=False,
                         last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL, pad_last_batch_repeated=False,
                         shard_size=-1, decoder_type=0):
    """``fn.readers.video_resize``: fn.readers.video's sequences resized as fn.resize resizes them, and
    rocAL's meta data handle (here ``[]``); rocAL's defaults differ from readers.video's (step 3, stride 3).

    rocalVideoFileResize (rocAL/source/api/rocal_api_data_loaders.cpp) adds its ResizeNode only when
    resize_width differs from the video's width and resize_height from its height, and otherwise returns
    no tensor; fastload refuses that case. Its size rules are fn.resize's (rocalResize's)."""
    node = readers_video(sequence_length, file_list_frame_num, file_root, image_type, num_shards, random_shuffle,
                         step, stride, decoder_mode)
    width, height = node.rocal.buffer[1], node.rocal.buffer[0]
    if int(resize_width) == width or int(resize_height) == height:
        raise ValueError(f"{PREFIX}: readers.video_resize(resize_width={resize_width}, resize_height={resize_height})"
                         f" of {width}x{height} videos: rocAL resizes only when both sides differ from the video's "
                         f"and otherwise returns no tensor; use fn.readers.video (and fn.resize)")
    _resize_args("fn.readers.video_resize", max_size, resize_longer, resize_shorter, resize_width, resize_height,
                 scaling_mode)
    resized = resize(node, max_size=max_size, resize_longer=resize_longer, resize_shorter=resize_shorter,
                     resize_width=resize_width, resize_height=resize_height, scaling_mode=scaling_mode,
                     interpolation_type=interpolation_type, output_layout=RocalTensorLayout.NFHWC)
    return resized, []


def readers_sequence_reader(file_root, sequence_length, image_type=RocalImageColor.RGB, num_shards=1,
                            random_shuffle=False, step=3, stride=1, stick_to_shard=False,
                            last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL, pad_last_batch_repeated=False,
                            shard_size=-1):
    """``fn.readers.sequence_reader``: sequences of ``sequence_length`` JPEG frames from each folder of
    ``file_root``, NFHWC uint8, without labels (``fastload.compat.rocal.sequence`` for rocAL's rules). As in
    rocAL, stick_to_shard and the last-batch arguments are not read: every batch is full."""
    color = RocalImageColor(image_type)
    if color not in (RocalImageColor.RGB, RocalImageColor.BGR):
        raise NotImplementedError(f"{PREFIX}: readers.sequence_reader(image_type={color.name}): RGB and BGR "
                                  f"frames only")
    if int(num_shards) != 1:
        raise NotImplementedError(f"{PREFIX}: readers.sequence_reader(num_shards={num_shards}): rocAL splits one "
                                  f"process's reading over internal loaders, batch by batch; not supported")
    length = int(sequence_length)
    if length < 1:
        raise ValueError(f"{PREFIX}: readers.sequence_reader: sequence_length={sequence_length} (rocAL: \"Sequence "
                         f"length passed should be bigger than 0\")")
    if int(step) < 0 or int(stride) < 0:
        raise ValueError(f"{PREFIX}: readers.sequence_reader: step={step}, stride={stride}: rocAL's are unsigned")
    sequences = sequence.FrameSequences(str(file_root), length, int(step), int(stride), color.name,
                                        _pipeline()._batch_size)
    # rocAL shuffles its padded sequences once, at the start, and reads that order every epoch
    node = _sequence_node("readers.sequence_reader", sequences, sequences.read, bool(random_shuffle),
                          sequences.frames, length, reshuffle=False)
    _pipeline()._unlabelled = ("fn.readers.sequence_reader gives no labels (rocAL makes no meta data reader for "
                               "it): use run()'s outputs, or plugin.generic's iterator, whose labels are None")
    return node


def readers_mxnet(path, stick_to_shard=False, pad_last_batch=False):
    """``fn.readers.mxnet``: records the folder of the .rec and .idx files; ``fn.decoders.image(path=...)``
    reads the records (``fastload.compat.rocal.mxnet`` for rocAL's rules). As in rocAL, stick_to_shard and
    pad_last_batch here are not read (the decoder's are)."""
    reader = MXNetReader(str(path))
    mxnet.record_files(reader.path)  # a folder without its two files is an error here, as in rocAL
    _record(reader)
    return reader


def _readers_caffe(path, bbox, caffe2: bool):
    reader = CaffeReader(str(path), caffe2)
    if bbox:
        detail = ("rocAL reads NormalizedBBox's xmax/ymax as a width and height (r = xmin + xmax) from the first "
                  "annotation group only (caffe_meta_data_reader_detection.cpp)" if not caffe2 else
                  "fastload does not yet move Caffe2's boxes through the operators as rocAL's meta nodes do")
        raise NotImplementedError(f"{PREFIX}: {reader.name}(bbox=True) is not supported: {detail}; "
                                  f"bbox=False reads the labels")
    caffe.open_lmdb(reader)  # a folder that is no LMDB is an error here, as in rocAL
    _record(reader)
    return reader, []  # rocAL returns (the reader's meta data, an empty labels list)


def readers_caffe(path, bbox=False, stick_to_shard=False, pad_last_batch=False):
    """``fn.readers.caffe``: records the LMDB folder of caffe.Datum records; a decoder with ``path=``
    reads them (``fastload.compat.rocal.caffe`` for rocAL's rules). As in rocAL, stick_to_shard and
    pad_last_batch here are not read (the decoder's are)."""
    return _readers_caffe(path, bbox, caffe2=False)


def readers_caffe2(path, bbox=False, stick_to_shard=False, pad_last_batch=False):
    """``fn.readers.caffe2``: records the LMDB folder of caffe2.TensorProtos records; a decoder with
    ``path=`` reads them (``fastload.compat.rocal.caffe``)."""
    return _readers_caffe(path, bbox, caffe2=True)


def readers_webdataset(path, index_paths="", ext=None,
                       missing_components_behavior=RocalMissingComponentsBehavior.MISSING_COMPONENT_ERROR):
    """``fn.readers.webdataset``: records the folder of tar files and ``ext[0]``, the members of a sample
    (``fastload.compat.rocal.webdataset``); the decoder after it reads them, and the iterators return the
    samples' non-JPEG members (raw bytes) in place of labels. ``index_paths`` (rocAL's tar2idx files) is
    not read: fastload indexes the tars itself."""
    reader = webdataset_reader(path, ext, missing_components_behavior)
    _record(reader)
    return reader


# ----------------------------------------------------------------------------------------------- decoders

def _reader_node(decoder: str, inputs, file_root, shard_id, num_shards, random_shuffle, last_batch_policy,
                 pad_last_batch, stick_to_shard, shard_size, path="", key_map=None) -> DataNode:
    """The reader a decoder makes (rocAL's decoders read: rocalJpegFileSourceSingleShard, or after
    fn.readers.tfrecord rocalJpegTFRecordSource, rocAL/source/api/rocal_api_data_loaders.cpp)."""
    pipe = _pipeline()
    recorded = getattr(pipe, "_rocal_reader", None)
    readers = (FileReader, TFRecordReader, WebDatasetReader, MXNetReader, coco.COCOReader, CaffeReader)
    if not inputs or not isinstance(inputs[0], readers) or recorded is None:
        raise NotImplementedError(f"{PREFIX}: {decoder} reads what fn.readers.file, fn.readers.tfrecord, "
                                  f"fn.readers.webdataset, fn.readers.mxnet, fn.readers.coco, fn.readers.caffe or "
                                  f"fn.readers.caffe2 recorded (other readers and external sources are not "
                                  f"supported yet)")
    stick_to_shard = _sharding(decoder, shard_id, num_shards, pad_last_batch, stick_to_shard, shard_size)
    read = None
    recorded = inputs[0]  # the reader this decoder was given (the last one recorded may be another's)
    if isinstance(recorded, TFRecordReader):
        # rocAL hands num_shards to the TFRecord source as internal loaders whose batches it takes in turn,
        # and never passes shard_id (rocalJpegTFRecordSource; image_loader_sharded.cpp)
        if int(num_shards) != 1:
            raise NotImplementedError(f"{PREFIX}: {decoder}(num_shards={num_shards}) after fn.readers.tfrecord: "
                                      f"rocAL then splits one pipeline's reading over num_shards internal "
                                      f"loaders, batch by batch; not supported")
        samples, read = tfrecord_samples(decoder, recorded, path, key_map)
        shard_id = 0
    elif isinstance(recorded, WebDatasetReader):
        # each sample's label is its own position: the iterators give its ASCII members in its place
        refuse(decoder, user_feature_key_map=key_map)
        webdataset = WebDatasetSamples(decoder, recorded, file_root or recorded.path)
        samples, read = webdataset.samples, webdataset.read
        pipe._rocal_webdataset = webdataset
    elif isinstance(recorded, coco.COCOReader):
        if decoder != "fn.decoders.image":
            raise NotImplementedError(f"{PREFIX}: {decoder} after fn.readers.coco is not supported (use "
                                      f"fn.decoders.image)")
        refuse(decoder, user_feature_key_map=key_map, path=path)
        pipe._rocal_coco = coco.COCOSamples(decoder, recorded, file_root)
        samples = pipe._rocal_coco.samples
    elif isinstance(recorded, MXNetReader):
        if decoder != "fn.decoders.image":  # rocAL's has no MXNet branch: it reads file_root as image files
            raise NotImplementedError(f"{PREFIX}: {decoder} after fn.readers.mxnet: rocAL's reads file_root as a "
                                      f"folder of images, not the records; use fn.decoders.image(path=...)")
        refuse(decoder, user_feature_key_map=key_map)
        _same_path(decoder, path, recorded.path, "fn.readers.mxnet")
        records = mxnet.MXNetRecords(path or recorded.path)
        samples, read = records.samples, records.read
    elif isinstance(recorded, CaffeReader):  # each of rocAL's three decoders has a Caffe and a Caffe2 branch
        refuse(decoder, user_feature_key_map=key_map)
        if not path:  # rocAL's decoders read their own path for these readers (decoders.py: source_path=path)
            raise ValueError(f"{PREFIX}: {decoder} after fn.{recorded.name} reads its own path=...: give it the "
                             f"LMDB folder (rocAL's opens path='' and fails)")
        _same_path(decoder, path, recorded.path, "fn." + recorded.name)
        records = caffe.CaffeRecords(replace(recorded, path=path))
        samples, read = records.samples, records.read
    else:
        refuse(decoder, user_feature_key_map=key_map, path=path)
        root = file_root or recorded.file_root
        samples = list_folder(root, recorded.file_list)
        if not samples:
            raise ValueError(f"{PREFIX}: {decoder}: no files found in {root!r}")
    return _reading(pipe, RocalReaderSpec(samples, int(shard_id), int(num_shards), bool(random_shuffle),
                                          bool(stick_to_shard), RocalLastBatchPolicy(last_batch_policy),
                                          pad=bool(pad_last_batch), read=read))


def _same_path(decoder: str, path: str, reader_path: str, reader: str) -> None:
    if path and os.path.abspath(path) != os.path.abspath(reader_path):
        raise ValueError(f"{PREFIX}: {decoder}(path={path!r}) after {reader}(path={reader_path!r}): rocAL's "
                         f"decoder reads its path's images and the reader its path's labels")


def _sharding(decoder: str, shard_id, num_shards, pad_last_batch, stick_to_shard, shard_size) -> bool:
    """A decoder's sharding arguments (rocAL's RocalShardingInfo) checked before anything is read; the
    stick_to_shard to read with: with one shard the "next" shard is the same one, so it does not matter."""
    stick_to_shard = bool(stick_to_shard) or int(num_shards) == 1
    _check_padding(decoder, pad_last_batch, stick_to_shard)
    refuse(decoder, shard_size=shard_size not in (-1, None))
    if not 0 <= int(shard_id) < int(num_shards):
        raise ValueError(f"{decoder}: shard_id {shard_id} is not in [0, num_shards={num_shards})")
    return stick_to_shard


def _check_padding(reader: str, pad_last_batch, stick_to_shard) -> None:
    if not pad_last_batch and not stick_to_shard:
        raise NotImplementedError(f"{PREFIX}: {reader}(pad_last_batch=False, stick_to_shard=False) is not "
                                  f"supported (rocAL then reads one cycle over the whole dataset)")


def _reading(pipe, spec: RocalReaderSpec) -> DataNode:
    """The pipeline's reader op for ``spec``: its first output is each sample's bytes; its labels become
    the pipeline's (rocAL's labelReader)."""
    op = Op("readers.file", _read_sample, [], {}, num_outputs=2)
    op.reader = spec
    pipe._rocal_labels = op.outputs[1]
    pipe._last_batch_policy = spec.last_batch_policy
    return op.outputs[0]


def _npy_sample(ctx, op, data, image, kind):
    array = npy.array(bytes(data.numpy()), ctx.index, ctx.name, kind)
    return array.permute(1, 2, 0).contiguous() if image == "NCHW" else array


def readers_numpy(*inputs, file_root="", files=(), num_shards=1, output_layout=RocalTensorLayout.NONE,
                  random_shuffle=False, shard_id=0, stick_to_shard=True, shard_size=-1,
                  last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL, pad_last_batch=True, seed=0):
    """``fn.readers.numpy``: the .npy files of ``file_root`` (or ``files``) as one tensor per batch,
    [batch] + the dataset's largest shape (``fastload.compat.rocal.npy`` for rocAL's rules). With
    ``output_layout`` NHWC or NCHW and uint8 arrays of three dimensions (1 or 3 channels) the output is an
    image the image operators take; rocAL's numpy reader gives no labels (use ``ROCALNumpyIterator``)."""
    layout = RocalTensorLayout(output_layout)
    stick_to_shard = _sharding("fn.readers.numpy", shard_id, num_shards, pad_last_batch, stick_to_shard, shard_size)
    pipe = _pipeline()
    arrays = npy.NpyFiles(file_root, list(files or ()), layout.name)
    _record(arrays)
    pipe._unlabelled = ("fn.readers.numpy gives no labels: ROCALNumpyIterator (plugin.generic or plugin.pytorch) "
                        "returns its arrays, as rocAL's")
    data = _reading(pipe, RocalReaderSpec(arrays.samples, int(shard_id), int(num_shards), bool(random_shuffle),
                                          bool(stick_to_shard), RocalLastBatchPolicy(last_batch_policy),
                                          pad=bool(pad_last_batch), seed=int(seed), name="NumpyReader",
                                          read=arrays.read))
    shape = arrays.layout.max_shape
    image = (arrays.layout.layout in ("NHWC", "NCHW") and arrays.layout.dtype == "uint8" and len(shape) == 3
             and shape[2 if layout == RocalTensorLayout.NHWC else 0] in (1, 3))
    node = Op("rocal.readers.numpy", _npy_sample, [data],
              {"image": arrays.layout.layout if image else "", "kind": arrays.layout},
              layouts=("HWC" if image else "",)).outputs[0]
    node.rocal_array = arrays.layout
    if image:
        node.rocal = Rocal(shape[:2] if layout == RocalTensorLayout.NHWC else shape[1:], layout,
                           RocalTensorOutputType.UINT8)
    return node


def log1p(*inputs, output_datatype=RocalTensorOutputType.FLOAT):
    """``fn.log1p``: log(1 + |x|) in float32 of an int16 array of fn.readers.numpy, the only input rocAL
    takes (rocalLog1p, rocal_api_augmentation.cpp; RPP's host kernel: std::log1p(std::abs(x))); as in
    rocAL, ``output_datatype`` is not read and the output is float32 of the input's shape."""
    array = inputs[0] if inputs else None
    kind = getattr(array, "rocal_array", None)
    if kind is None or kind.dtype != "int16" or hasattr(array, "rocal"):
        raise ValueError(f"{PREFIX}: fn.log1p takes an int16 array of fn.readers.numpy (rocAL: \"Log1p "
                         f"augmentation only supported for int16 inputs\")")
    node = Op("rocal.log1p", lambda ctx, op, x: x.float().abs().log1p(), [array], {}).outputs[0]
    node.rocal_array = npy.NpyLayout(kind.max_shape, "float32", kind.layout)
    return node


def _cifar10_image(ctx, op, data):
    return data.view(3, cifar10.SIDE, cifar10.SIDE).permute(1, 2, 0).contiguous()


def readers_cifar10(*inputs, file_root="", num_shards=1, image_type=RocalImageColor.RGB_PLANAR,
                    filename_prefix="data_batch_", random_shuffle=False, shard_id=0, stick_to_shard=True,
                    shard_size=-1, last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL, pad_last_batch=True):
    """``fn.readers.cifar10``: the 32x32 images of CIFAR-10's binary batches, NCHW uint8 (rocAL's
    RGB_PLANAR), with their labels (``fastload.compat.rocal.cifar10`` for rocAL's rules and what fastload
    refuses); with one shard, ``shard_id`` is 0."""
    if RocalImageColor(image_type) != RocalImageColor.RGB_PLANAR:
        raise NotImplementedError(f"{PREFIX}: readers.cifar10(image_type={RocalImageColor(image_type).name}): rocAL "
                                  f"copies the planar records unchanged into that layout, scrambling the images; "
                                  f"only RGB_PLANAR (the default) is supported")
    if int(num_shards) != 1:
        raise NotImplementedError(f"{PREFIX}: readers.cifar10(num_shards={num_shards}): rocAL's sharded CIFAR-10 "
                                  f"loader ignores shard_id and gives every process every shard's batches in turn; "
                                  f"not supported")
    stick_to_shard = True  # with its one shard, the "next" shard is the same one
    if int(shard_id) != 0:
        raise ValueError(f"{PREFIX}: readers.cifar10(shard_id={shard_id}) with num_shards=1: give shard_id 0")
    refuse("fn.readers.cifar10", shard_size=shard_size not in (-1, None))
    pipe = _pipeline()
    records = cifar10.Cifar10Records(file_root, filename_prefix)
    _record(records)
    data = _reading(pipe, RocalReaderSpec(records.samples, 0, 1, bool(random_shuffle), bool(stick_to_shard),
                                          RocalLastBatchPolicy(last_batch_policy), pad=bool(pad_last_batch),
                                          name="CIFAR10Reader", read=records.read))
    node = Op("rocal.readers.cifar10", _cifar10_image, [data], {}, layouts=("HWC",)).outputs[0]
    node.rocal = Rocal((cifar10.SIDE, cifar10.SIDE), RocalTensorLayout.NCHW, RocalTensorOutputType.UINT8)
    return node


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
    node.rocal = Rocal((int(max_decoded_height), int(max_decoded_width)))
    if isinstance(reader, coco.COCOReader):  # the boxes, at the decoded size, follow the image's operators
        pipe = _pipeline()
        node.rocal_boxes = pipe._rocal_boxes = pipe._rocal_decoded_boxes = Op(
            "rocal.boxes.decoded", coco.decoded_boxes(pipe._rocal_coco), [data, node], {}).outputs[0]
        pipe._unlabelled = ("fn.readers.coco gives boxes: get_bounding_box_labels() and get_bounding_box_cords() "
                            "(rocAL's plugins would give the first box labels of the batch as its labels)")
    return node


def _raw_image(ctx, op, data, width, height, planes):
    from ...errors import DecodeError
    if data.numel() != width * height * planes:
        raise DecodeError(ctx.index, ctx.name, f"{data.numel()} bytes, not the {width}x{height}x{planes} "
                          f"= {width * height * planes} of max_decoded_width x max_decoded_height pixels "
                          f"(rocAL copies the bytes as they are: fewer leave the buffer's old bytes, more "
                          f"overrun it)")
    return data.view(height, width, planes)


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
    node.rocal = Rocal((height, width))
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
    node.rocal = Rocal((int(max_decoded_height), int(max_decoded_width)))
    return node


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
    if isinstance(getattr(_pipeline(), "_rocal_reader", None), TFRecordReader):
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
    if isinstance(getattr(_pipeline(), "_rocal_reader", None), TFRecordReader):
        raise NotImplementedError(f"{PREFIX}: fn.decoders.image_slice after fn.readers.tfrecord: rocAL's has no "
                                  f"TFRecord branch (it reads file_root as a folder of images); use "
                                  f"fn.decoders.image")
    return _random_crop_decoder("fn.decoders.image_slice", inputs, file_root, path, shard_id, num_shards,
                                random_shuffle, output_type, random_area, random_aspect_ratio, num_attempts,
                                max_decoded_width, max_decoded_height, last_batch_policy, pad_last_batch,
                                stick_to_shard, shard_size)


# ---------------------------------------------------------------------------------------------- geometry

_INTERPOLATIONS = {RocalResizeInterpolationType.NEAREST_NEIGHBOR_INTERPOLATION: "nn",
                   RocalResizeInterpolationType.LINEAR_INTERPOLATION: "linear",
                   RocalResizeInterpolationType.CUBIC_INTERPOLATION: "cubic",
                   RocalResizeInterpolationType.LANCZOS_INTERPOLATION: "lanczos",
                   RocalResizeInterpolationType.GAUSSIAN_INTERPOLATION: "gaussian",
                   RocalResizeInterpolationType.TRIANGULAR_INTERPOLATION: "triangular"}


def _interpolation(value) -> str:
    """rocAL's interpolation_type as imageops.resample names it (RPP's RpptInterpolationType: the same
    numbers, which MIVisionX's Resize node casts)."""
    return _INTERPOLATIONS[RocalResizeInterpolationType(value)]


def _resize_args(operator, max_size, resize_longer, resize_shorter, resize_width, resize_height, scaling_mode):
    """rocalResize's argument rules (rocAL/source/api/rocal_api_augmentation.cpp): some size; width/height
    or shorter/longer, not both; shorter and longer not together."""
    if not (resize_width or resize_height or resize_shorter or resize_longer):
        raise ValueError(f"{operator}: give resize_width/resize_height, resize_shorter or resize_longer")
    if (resize_width or resize_height) and (resize_shorter or resize_longer):
        raise ValueError(f"{operator}: resize_width/resize_height cannot be combined with "
                         f"resize_shorter/resize_longer")
    if resize_shorter and resize_longer:
        raise ValueError(f"{operator}: resize_shorter and resize_longer cannot be combined (use "
                         f"SCALING_MODE_MIN_MAX with resize_mirror_normalize)")
    max_size = tuple(int(v) for v in (max_size if isinstance(max_size, (list, tuple)) else [max_size]))
    if len(max_size) > 2:
        raise ValueError(f"{operator}: max_size has one or two values")
    # (width, height), one value for both; a 0 leaves that side unbounded, and (0, 0) is none at all
    max_size = () if not any(max_size) else (max_size * 2)[:2]
    if int(scaling_mode) == 4:
        raise NotImplementedError(f"{PREFIX}: {operator}: SCALING_MODE_MIN_MAX is not supported")
    return {"resize_width": int(resize_width), "resize_height": int(resize_height),
            "resize_shorter": int(resize_shorter), "resize_longer": int(resize_longer),
            "scaling_mode": int(scaling_mode), "max_size": max_size}


def _resized(image: torch.Tensor, sizes: dict, interpolation: str, buffer: tuple[int, int]) -> torch.Tensor:
    """The image resized by rocAL's size rules, each side cut to the output buffer's ((height, width)), as
    ResizeNode::update_node and ResizeMirrorNormalizeNode's cut it: an image more than MAX_ASPECT_RATIO
    times longer than wide is squeezed into the buffer."""
    width, height = imageops.resize_size(image.shape[1], image.shape[0], **sizes)
    return imageops.resample(image, min(width, buffer[1]), min(height, buffer[0]), interpolation)


def resize(*inputs, max_size=(), resize_longer=0, resize_shorter=0, resize_width=0, resize_height=0,
           scaling_mode=0, interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION, antialias=True,
           device=None, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8,
           resize_x=None, resize_y=None):
    """``fn.resize`` with rocAL's size rules (imageops.resize_size). rocAL ignores ``antialias``; the
    ``resize_x``/``resize_y`` of rocAL's older API (and its documentation page) are read as
    resize_width/resize_height."""
    resize_width = resize_x if resize_x is not None else resize_width
    resize_height = resize_y if resize_y is not None else resize_height
    sizes = _resize_args("fn.resize", max_size, resize_longer, resize_shorter, resize_width, resize_height,
                         scaling_mode)
    layout, dtype = _kind(output_layout, output_dtype)
    width, height = imageops.resize_buffer(_source(inputs).buffer[::-1], **sizes)
    out = Rocal((height, width), layout, dtype)

    def run(ctx, op, image, sizes, interpolation):
        return imageops.as_output(_resized(image, sizes, interpolation, out.buffer), out.torch_dtype)
    return _image_op("resize", run, inputs[0], {"sizes": sizes, "interpolation": _interpolation(interpolation_type)},
                     out)


def _whole_window(operator: str, image: torch.Tensor, crop_w: int, crop_h: int, pos_x: float, pos_y: float):
    """fn.crop's window (imageops.fixed_crop), refused when it passes the image's edge: rocAL's crop nodes
    hand RPP the uncut window (RocalCropParam::fill_crop_dims cuts only x2/y2), which reads the batch
    buffer beyond the image, something fastload does not reproduce."""
    height, width = image.shape[:2]
    x, y, w, h = imageops.fixed_window(width, height, crop_w, crop_h, pos_x, pos_y)
    if x + w > width or y + h > height:
        raise ValueError(f"{operator}: the {w}x{h} window at ({x}, {y}) passes the {width}x{height} image's "
                         f"edge; rocAL reads the batch buffer beyond the image there, which fastload does not "
                         f"reproduce")
    return x, y, w, h


def _whole_pixels(operator: str, **values) -> None:
    """Offsets and sizes rocAL stores as unsigned pixels: a negative or non-finite one is refused (its
    conversion is undefined in C++)."""
    for name, value in values.items():
        if not math.isfinite(float(value)) or float(value) < 0:
            raise ValueError(f"{PREFIX}: {operator}: {name}={value} (rocAL stores it as an unsigned pixel count)")


def roi_resize(*inputs, resize_width=0, resize_height=0, roi_w=None, roi_h=None, roi_pos_x=None, roi_pos_y=None,
               device=None, interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION,
               output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.roi_resize``: fn.crop's window (roi_w x roi_h at whole-pixel offsets roi_pos_x/y, a size past
    the image being the image's: imageops.fixed_crop) resampled to resize_width x resize_height as fn.resize
    does. rocalROIResize makes a CropResizeNode whose fixed-crop init is CropNode's, then RPP's resize of
    that window (rocAL/source/api/rocal_api_augmentation.cpp; geometry_augmentations/node_crop_resize.cpp).
    A window that passes the image's edge is an error for that image: rocAL hands RPP the uncut window,
    which reads the batch buffer beyond the image."""
    if not resize_width or not resize_height:
        raise ValueError("fn.roi_resize: resize_width and resize_height must not be 0 (rocAL refuses it)")
    if any(value is None for value in (roi_w, roi_h, roi_pos_x, roi_pos_y)):
        raise TypeError("fn.roi_resize: give roi_w, roi_h, roi_pos_x and roi_pos_y (rocAL's binding takes numbers)")
    _whole_pixels("fn.roi_resize", roi_pos_x=roi_pos_x, roi_pos_y=roi_pos_y, roi_w=roi_w, roi_h=roi_h)
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal((int(resize_height), int(resize_width)), layout, dtype)

    def run(ctx, op, image, roi, interpolation):
        x, y, w, h = _whole_window("fn.roi_resize", image, *roi)
        return imageops.as_output(imageops.resample(image[y:y + h, x:x + w], int(resize_width), int(resize_height),
                                                    interpolation), out.torch_dtype)
    return _image_op("roi_resize", run, inputs[0],
                     {"roi": (int(roi_w), int(roi_h), float(roi_pos_x), float(roi_pos_y)),
                      "interpolation": _interpolation(interpolation_type)}, out)


def _crop_size(crop, crop_h, crop_w) -> tuple[int, int]:
    """(height, width) from rocAL's crop argument: two values are (h, w), three (d, h, w); otherwise
    crop_h/crop_w (rocAL_pybind/amd/rocal/fn.py)."""
    crop = list(crop) if isinstance(crop, (list, tuple)) else [crop]
    if len(crop) == 2:
        return int(crop[0]), int(crop[1])
    if len(crop) == 3:
        return int(crop[1]), int(crop[2])
    return int(crop_h), int(crop_w)


def crop_mirror_normalize(*inputs, crop=(0, 0), crop_pos_x=0.5, crop_pos_y=0.5, crop_w=0, crop_h=0, mean=(0.0,),
                          std=(1.0,), mirror=1, device=None, output_layout=RocalTensorLayout.NHWC,
                          output_dtype=RocalTensorOutputType.UINT8):
    """``fn.crop_mirror_normalize``: a fixed-anchor crop (imageops.anchored_crop), a horizontal flip where
    ``mirror`` (1 by default, unlike DALI: always flipped), ``(x - mean) / std`` with mean and std in pixel
    units, NHWC uint8 unless asked (rocAL_pybind/amd/rocal/fn.py)."""
    height, width = _crop_size(crop, crop_h, crop_w)
    if not height or not width:
        raise ValueError("fn.crop_mirror_normalize: give crop=(height, width) (rocAL refuses a zero size)")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal((height, width), layout, dtype)

    def run(ctx, op, image, mirror, pos, mean, std):
        x, y, w, h = imageops.anchored_crop(image.shape[1], image.shape[0], width, height, *pos)
        return imageops.normalize(image[y:y + h, x:x + w], mean, std, int(mirror), out.torch_dtype)
    return _image_op("crop_mirror_normalize", run, inputs[0],
                     {"mirror": _mirror(mirror),
                      "pos": (float(crop_pos_x), float(crop_pos_y)), "mean": tuple(float(v) for v in mean),
                      "std": tuple(float(v) for v in std)}, out)


def resize_mirror_normalize(*inputs, max_size=(), resize_longer=0, resize_shorter=0, resize_width=0,
                            resize_height=0, scaling_mode=0,
                            interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION, mean=(0.0,),
                            std=(1.0,), mirror=1, device=None, output_layout=RocalTensorLayout.NHWC,
                            output_dtype=RocalTensorOutputType.UINT8):
    """``fn.resize_mirror_normalize``: fn.resize's sizes, then a flip where ``mirror`` (1 by default) and
    ``(x - mean) / std`` (rocalResizeMirrorNormalize). Always bilinear, whatever ``interpolation_type``
    says: MIVisionX's ResizeMirrorNormalize node passes RPP BILINEAR (ResizeMirrorNormalize.cpp), the only
    one RPP's resize_mirror_normalize implements."""
    sizes = _resize_args("fn.resize_mirror_normalize", max_size, resize_longer, resize_shorter, resize_width,
                         resize_height, scaling_mode)
    _interpolation(interpolation_type)  # one of rocAL's, which the node then does not read
    layout, dtype = _kind(output_layout, output_dtype)
    width, height = imageops.resize_buffer(_source(inputs).buffer[::-1], **sizes)
    out = Rocal((height, width), layout, dtype)

    def run(ctx, op, image, sizes, interpolation, mirror, mean, std):
        return imageops.normalize(_resized(image, sizes, interpolation, out.buffer), mean, std, int(mirror),
                                  out.torch_dtype)
    return _image_op("resize_mirror_normalize", run, inputs[0],
                     {"sizes": sizes, "interpolation": "linear",
                      "mirror": _mirror(mirror),
                      "mean": tuple(float(v) for v in mean), "std": tuple(float(v) for v in std)}, out)


def crop(*inputs, crop=(0, 0), crop_pos_x=0.5, crop_pos_y=0.5, crop_pos_z=0.5, crop_w=0, crop_h=0, crop_d=1,
         device=None, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.crop``: with a size, at whole-pixel offsets crop_pos_x/y (so the default 0.5 is the top-left
    corner: imageops.fixed_crop); without one, a random crop of 0.55-0.95 of each side at a random place
    (rocalCrop's defaults, rocAL/include/parameters/parameter_crop.h)."""
    height, width = _crop_size(crop, crop_h, crop_w)
    _whole_pixels("fn.crop", crop_pos_x=crop_pos_x, crop_pos_y=crop_pos_y)
    layout, dtype = _kind(output_layout, output_dtype)
    source = _source(inputs).buffer
    out = Rocal((height, width) if height and width else source, layout, dtype)

    def run(ctx, op, image, pos, size):
        if height and width:
            x, y, w, h = _whole_window("fn.crop", image, width, height, *pos)
        else:
            rng = ctx.rng(op)
            w, h = int(rng.uniform(0.55, 0.95) * image.shape[1]), int(rng.uniform(0.55, 0.95) * image.shape[0])
            x = int(rng.uniform(0.01, 0.99) * (image.shape[1] - w))
            y = int(rng.uniform(0.01, 0.99) * (image.shape[0] - h))
        return imageops.as_output(image[y:y + h, x:x + w].contiguous(), out.torch_dtype)
    return _image_op("crop", run, inputs[0], {"pos": (float(crop_pos_x), float(crop_pos_y)), "size": (width, height)},
                     out)


def random_crop(*inputs, crop_area_factor=[0.08, 1], crop_aspect_ratio=[0.75, 1.333333], crop_pox_x=0,
                crop_pox_y=0, num_attempts=20, device=None, all_boxes_above_threshold=True, allow_no_crop=True,
                ltrb=True, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.random_crop``: rocAL's RandomCropNode, a window of the image at its own size (imageops.
    random_crop_window: 5 draws of rocAL's area, aspect-ratio and drift ranges, else the central crop).

    rocAL's wrapper hands the four parameters to rocalRandomCrop unconverted, where they are RocalFloatParam
    handles (void*, which pybind11 takes as None or a capsule): a list or a number -- the wrapper's own
    defaults included -- fails there with a TypeError, as it does here. None gives rocAL's built-in draws;
    a parameter handle (fn.uniform's, renewed at each attempt) is not supported yet (NotImplementedError).
    num_attempts and the box arguments are not read by rocAL either."""
    given = {"crop_area_factor": crop_area_factor, "crop_aspect_ratio": crop_aspect_ratio,
             "crop_pox_x": crop_pox_x, "crop_pox_y": crop_pox_y}
    handles = [name for name, value in given.items() if isinstance(value, (DataNode, RocalParam))]
    if handles:
        raise NotImplementedError(f"{PREFIX}: fn.random_crop: a parameter handle for {', '.join(handles)} (rocAL "
                                  f"renews it at each of its five attempts) is not supported yet; give None")
    passed = [name for name, value in given.items() if value is not None]
    if passed:
        raise TypeError(f"{PREFIX}: fn.random_crop: rocAL passes {', '.join(passed)} to rocalRandomCrop as "
                        f"RocalFloatParam handles, unconverted, so lists and numbers (its own defaults too) fail "
                        f"there; give None for each: rocAL then draws area factors in [0.08, 0.99], aspect "
                        f"ratios in [0.75, 1.333] and positions in [0.01, 0.99] of the free space")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)  # rocAL keeps the input's buffer; the ROI is the crop

    def run(ctx, op, image):
        rng = ctx.rng(op)
        x, y, w, h = imageops.random_crop_window(image.shape[1], image.shape[0],
                                                 lambda low, high: float(rng.uniform(low, high)))
        return imageops.as_output(image[y:y + h, x:x + w].contiguous(), out.torch_dtype)
    return _image_op("random_crop", run, inputs[0], {}, out)


def transpose(*inputs, perm=[], output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.transpose`` of an image: ``perm`` orders its three dimensions as its layout names them (HWC for
    NHWC, CHW for NCHW; rocalTranspose: the batch dimension stays first), so it can swap height and width,
    move the channels to the other end, or both. ``output_layout`` must name the layout that gives (rocAL
    takes it as written, and a wrong one describes the buffer wrongly); the type stays the input's (rocAL
    does not read output_dtype). Refused: the channels in the middle (no image layout names it), sequences.

    The region rocAL hands on: rocalTranspose sets the output's dims, which resets its regions to the
    whole buffer (TensorInfo::set_max_shape), and TransposeNode::update_node sets them to the image's again
    only for perms [2, 1, 0] and [1, 0, 2]. So with any other perm rocAL hands on the whole buffer -- memory
    its transpose did not write where an image is smaller -- and fastload refuses such an image when it
    meets one (images of the buffer's size, after a resize or crop, are what rocAL hands on too)."""
    source = _source(inputs)
    if getattr(inputs[0], "rocal_frames", None) is not None:
        raise NotImplementedError(f"{PREFIX}: fn.transpose of fn.readers.video's sequences is not supported")
    perm = [int(p) for p in perm]
    if sorted(perm) != [0, 1, 2]:
        raise ValueError(f"{PREFIX}: fn.transpose: perm {perm} must order an image's three dimensions (rocAL: "
                         f"\"Transpose permutation must match with the input dims\")")
    names = "CHW" if source.layout == RocalTensorLayout.NCHW else "HWC"
    order = "".join(names[p] for p in perm)
    if order[1] == "C":
        raise NotImplementedError(f"{PREFIX}: fn.transpose: perm {perm} puts a {source.layout.name} image's "
                                  f"channels between its rows and columns ({order}), which no layout names")
    swap = order.index("W") < order.index("H")
    layout = RocalTensorLayout.NHWC if order[2] == "C" else RocalTensorLayout.NCHW
    if RocalTensorLayout(output_layout) != layout:
        raise ValueError(f"{PREFIX}: fn.transpose: perm {perm} of a {source.layout.name} image gives {order}: "
                         f"give output_layout=types.{layout.name} (rocAL would label the buffer "
                         f"{RocalTensorLayout(output_layout).name})")
    height, width = source.buffer
    out = Rocal((width, height) if swap else (height, width), layout, source.dtype)
    whole_buffer = perm not in ([2, 1, 0], [1, 0, 2])

    def run(ctx, op, image):
        if whole_buffer and tuple(image.shape[:2]) != (height, width):
            raise NotImplementedError(
                f"{PREFIX}: fn.transpose: perm {perm} of a {image.shape[0]}x{image.shape[1]} image in a "
                f"{height}x{width} buffer: rocAL hands on the whole buffer as the image (only perms [2, 1, 0] "
                f"and [1, 0, 2] keep the image's region), memory its transpose did not write; resize or crop "
                f"to the buffer's size first")
        return image.transpose(0, 1).contiguous() if swap else image
    return _image_op("transpose", run, inputs[0], {}, out)


def center_crop(*inputs, crop=(0, 0), crop_h=0, crop_w=0, crop_d=1, device=None,
                output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.center_crop``: the centred window (anchors 0.5, imageops.anchored_crop)."""
    height, width = _crop_size(crop, crop_h, crop_w)
    if not height or not width:
        raise ValueError("fn.center_crop: give crop=(height, width) (rocAL refuses a zero size)")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal((height, width), layout, dtype)

    def run(ctx, op, image):
        x, y, w, h = imageops.anchored_crop(image.shape[1], image.shape[0], width, height, 0.5, 0.5)
        return imageops.as_output(image[y:y + h, x:x + w].contiguous(), out.torch_dtype)
    return _image_op("center_crop", run, inputs[0], {}, out)


def flip(*inputs, horizontal=0, vertical=0, device=None, output_layout=RocalTensorLayout.NHWC,
         output_dtype=RocalTensorOutputType.UINT8):
    """``fn.flip``: horizontal and/or vertical (0/1, or a per-sample coin flip)."""
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, image, horizontal, vertical):
        dims = [d for d, on in ((1, horizontal), (0, vertical)) if int(on)]
        return imageops.as_output(image.flip(dims) if dims else image, out.torch_dtype)
    return _image_op("flip", run, inputs[0], {"horizontal": _flag(horizontal), "vertical": _flag(vertical)}, out)


def _numbers(operator: str, value, count: int, what: str) -> list[float]:
    """``value`` as ``count`` floats: a list or tuple of that many numbers (not bools), else a ValueError
    saying ``what`` the operator's argument is."""
    if not isinstance(value, (list, tuple)) or len(value) != count or \
            not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise ValueError(f"fn.{operator}: {what}, not {value!r}")
    return [float(v) for v in value]


def _warp_op(name: str, warp, inputs, interpolation_type, dest_width, dest_height, output_layout, output_dtype,
             args: dict) -> DataNode:
    """An RPP warp of each image at its own size (``warp(image, kind, **values)``), at the top left of a
    dest_width x dest_height buffer (0: the input's), cut to it; LINEAR or NEAREST_NEIGHBOR, as RPP's."""
    kind = _interpolation(interpolation_type)
    if kind not in ("linear", "nn"):
        raise NotImplementedError(f"{PREFIX}: fn.{name}: interpolation_type "
                                  f"{RocalResizeInterpolationType(interpolation_type).name} is not supported "
                                  f"(LINEAR, NEAREST_NEIGHBOR, as RPP's {name})")
    layout, dtype = _kind(output_layout, output_dtype)
    buffer = (int(dest_height), int(dest_width)) if dest_width and dest_height else _source(inputs).buffer
    out = Rocal(buffer, layout, dtype)

    def run(ctx, op, image, **values):
        warped = warp(ctx, op, image, kind, **values)[:buffer[0], :buffer[1]]
        return imageops.as_output(warped.contiguous(), out.torch_dtype)
    return _image_op(name, run, inputs[0], args, out)


def rotate(*inputs, angle=None, dest_width=0, dest_height=0,
           interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION, device=None, fill_value=None,
           output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.rotate``: each image turned ``angle`` degrees (a number, a per-sample fn.uniform, or None for
    rocAL's default, uniform in [0, 180): node_rotate.h) about its centre at its own size, outside filled
    with 0 (RPP's warp: imageops.rotate), at the top left of a dest_width x dest_height buffer (0: the
    input's). rocAL ignores ``fill_value`` and so does fastload; where the buffer is smaller than the image
    rocAL writes past it, fastload cuts the image to it."""
    def turn(ctx, op, image, kind, angle):
        return imageops.rotate(image, float(ctx.rng(op).uniform(0.0, 180.0) if angle is None else angle), kind)
    return _warp_op("rotate", turn, inputs, interpolation_type, dest_width, dest_height, output_layout,
                    output_dtype, {"angle": _param(angle)})


def warp_affine(*inputs, dest_width=0, dest_height=0, matrix=(0, 0, 0, 0, 0, 0),
                interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION, device=None,
                output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.warp_affine``: each image warped about its centre at its own size (imageops.warp_affine), at the
    top left of a dest_width x dest_height buffer (0: the input's). ``matrix`` is rocAL's
    ``[x0, x1, y0, y1, o0, o1]``, which its WarpAffineNode hands RPP as the row-major 2x3 matrix
    ``[x0, y0, x1, y1, o0, o1]`` (rocAL/source/augmentations/geometry_augmentations/node_warp_affine.cpp)."""
    x0, x1, y0, y1, o0, o1 = _numbers("warp_affine", list(matrix), 6, "matrix is six numbers [x0, x1, y0, y1, o0, o1]")
    affine = (x0, y0, x1, y1, o0, o1)
    return _warp_op("warp_affine", lambda ctx, op, image, kind: imageops.warp_affine(image, affine, kind), inputs,
                    interpolation_type, dest_width, dest_height, output_layout, output_dtype, {})


def resize_crop_mirror(*inputs, resize_width=0, resize_height=0, crop_w=0, crop_h=0, mirror=1, device=None,
                       max_size=(), resize_longer=0, resize_shorter=0,
                       scaling_mode=RocalResizeScalingMode.SCALING_MODE_DEFAULT,
                       interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION,
                       output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.resize_crop_mirror``: the top-left crop of the image (cut to the image), resized to
    resize_width x resize_height with RPP's bilinear, mirrored (1 by default, or a coin flip). rocAL's Python
    passes crop_w where its C API takes the crop height and crop_h where it takes the width
    (rocAL_pybind/amd/rocal/fn.py into rocalResizeCropMirrorFixed), so the window is crop_w high and crop_h
    wide, and so it is here; ResizeCropMirrorNode::init puts it at (0, 0)."""
    if not resize_width or not resize_height:
        raise ValueError("fn.resize_crop_mirror: resize_width and resize_height must not be 0 (rocAL refuses it)")
    refuse("fn.resize_crop_mirror", max_size=bool(max_size), resize_longer=bool(resize_longer),
           resize_shorter=bool(resize_shorter),
           interpolation_type=_interpolation(interpolation_type) != "linear")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal((int(resize_height), int(resize_width)), layout, dtype)
    window_h, window_w = int(crop_w), int(crop_h)  # rocAL's swap, see above

    def run(ctx, op, image, mirror):
        resized = imageops.resize_crop_mirror(image, window_w, window_h, int(resize_width), int(resize_height),
                                              bool(int(mirror)))
        return imageops.as_output(resized, out.torch_dtype)
    return _image_op("resize_crop_mirror", run, inputs[0], {"mirror": _param(mirror)}, out)


def resize_crop(*inputs, resize_width=0, resize_height=0, crop_area_factor=None, crop_aspect_ratio=None,
                x_drift=None, y_drift=None, device=None, max_size=(), resize_longer=0, resize_shorter=0,
                scaling_mode=RocalResizeScalingMode.SCALING_MODE_DEFAULT,
                interpolation_type=RocalResizeInterpolationType.LINEAR_INTERPOLATION,
                output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.resize_crop``: rocAL's CropResizeNode: a window of crop_area_factor of the image's area at
    crop_aspect_ratio, placed by x_drift / y_drift (imageops.crop_resize_window, RocalRandomCropParam's
    rule), resized to resize_width x resize_height with RPP's bilinear. A value left None is drawn per
    sample from rocAL's range (parameter_random_crop.h: area [0.08, 0.99], aspect [0.75, 1.333];
    parameter_crop.h: drifts [0.01, 0.99])."""
    if not resize_width or not resize_height:
        raise ValueError("fn.resize_crop: resize_width and resize_height must not be 0 (rocAL refuses it)")
    refuse("fn.resize_crop", max_size=bool(max_size), resize_longer=bool(resize_longer),
           resize_shorter=bool(resize_shorter), interpolation_type=_interpolation(interpolation_type) != "linear")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal((int(resize_height), int(resize_width)), layout, dtype)
    ranges = {"area": (0.08, 0.99), "ratio": (0.75, 1.333), "x": (0.01, 0.99), "y": (0.01, 0.99)}

    def run(ctx, op, image, area, ratio, x, y):
        rng = ctx.rng(op)
        given = {"area": area, "ratio": ratio, "x": x, "y": y}
        values = {k: float(rng.uniform(*ranges[k])) if v is None else float(v) for k, v in given.items()}
        resized = imageops.crop_resize(image, values["area"], values["ratio"], values["x"], values["y"],
                                       int(resize_width), int(resize_height))
        return imageops.as_output(resized, out.torch_dtype)
    args = {"area": _param(crop_area_factor), "ratio": _param(crop_aspect_ratio), "x": _param(x_drift),
            "y": _param(y_drift)}
    return _image_op("resize_crop", run, inputs[0], args, out)


def _color_op(name: str, formula, defaults: dict):
    """An RPP point operation on uint8 pixels, rounded half to even and saturated; a parameter left None is
    drawn per sample from rocAL's default range (rocAL/include/augmentations/color_augmentations)."""
    def build(*inputs, device=None, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8,
              **params):
        unknown = set(params) - set(defaults)
        if unknown:
            raise TypeError(f"fn.{name}() got unexpected keyword argument(s) {', '.join(sorted(unknown))}")
        layout, dtype = _kind(output_layout, output_dtype)
        out = Rocal(_source(inputs).buffer, layout, dtype)

        def run(ctx, op, image, **values):
            rng = ctx.rng(op)
            drawn = {key: (rng.uniform(*defaults[key]) if value is None else float(value))
                     for key, value in values.items()}
            return imageops.as_output(formula(image.float(), **drawn), out.torch_dtype)
        values = {key: _param(params.get(key)) for key in defaults}
        return _image_op(name, run, inputs[0], values, out)
    build.__name__ = name
    return build


# rocAL/source/augmentations/color_augmentations: node_brightness.h (ALPHA_RANGE, BETA_RANGE) and
# node_contrast.h; RPP kernel/brightness.cpp (x * alpha + beta) and kernel/contrast.cpp
brightness = _color_op("brightness", lambda x, brightness, brightness_shift: x * brightness + brightness_shift,
                       {"brightness": (0.1, 1.95), "brightness_shift": (0.0, 25.0)})
contrast = _color_op("contrast", lambda x, contrast, contrast_center: (x - contrast_center) * contrast
                     + contrast_center, {"contrast": (0.1, 1.95), "contrast_center": (60.0, 90.0)})
brightness.__doc__ = ("``fn.brightness``: x * brightness + brightness_shift (each None: drawn per sample, "
                      "[0.1, 1.95] and [0, 25] -- so a brightness alone still adds a random shift, as in rocAL)")
contrast.__doc__ = ("``fn.contrast``: (x - contrast_center) * contrast + contrast_center (each None: drawn "
                    "per sample, [0.1, 1.95] and [60, 90])")
_brightness = brightness


def color_twist(*inputs, brightness=1.0, contrast=1.0, hue=0.0, saturation=1.0, device=None,
                output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.color_twist``: RPP's fused twist (imageops.color_twist): ``brightness`` multiplies, ``contrast``
    is added in pixel units, ``hue`` in degrees, ``saturation`` a factor; one left None is drawn per sample
    from rocAL's range (node_color_twist.h: [0.1, 1.95], [0.1, 25], [5, 170], [0.1, 0.4])."""
    return _color_twist(*inputs, brightness=brightness, contrast=contrast, hue=hue, saturation=saturation,
                        output_layout=output_layout, output_dtype=output_dtype)


_color_twist = _color_op("color_twist", lambda x, **p: imageops.color_twist(x.round().to(torch.uint8), **p).float(),
                         {"brightness": (0.1, 1.95), "contrast": (0.1, 25.0), "hue": (5.0, 170.0),
                          "saturation": (0.1, 0.4)})


def brightness_fixed(*inputs, brightness=1.0, brightness_shift=0.0, device=None,
                     output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.brightness_fixed``: fn.brightness with fixed values (defaults 1.0 and 0.0)."""
    return _brightness(*inputs, brightness=float(brightness), brightness_shift=float(brightness_shift),
                       output_layout=output_layout, output_dtype=output_dtype)


# rocAL/include/augmentations/color_augmentations: node_hue.h, node_saturation.h, node_gamma.h,
# node_exposure.h, node_color_temperature.h, node_blend.h (the ranges a parameter left None is drawn from)
_hue = _color_op("hue", lambda x, hue: imageops.hue_saturation(x.round().clamp(0, 255).to(torch.uint8),
                                                               hue=hue).float(), {"hue": (-359.0, 359.0)})
_saturation = _color_op("saturation", lambda x, saturation: imageops.hue_saturation(
    x.round().clamp(0, 255).to(torch.uint8), saturation=saturation).float(), {"saturation": (-0.5, 0.5)})
_gamma = _color_op("gamma_correction", lambda x, gamma: imageops.gamma_lut(gamma)[
    x.round().clamp(0, 255).long()].float(), {"gamma": (0.3, 7.0)})
_exposure = _color_op("exposure", imageops.exposure, {"exposure": (0.15, 0.95)})
_color_temp = _color_op("color_temp", lambda x, adjustment_value: imageops.color_temperature(
    x, int(round(adjustment_value))), {"adjustment_value": (-99.0, 99.0)})


def hue(*inputs, hue=None, device=None, seed=0, output_layout=RocalTensorLayout.NHWC,
        output_dtype=RocalTensorOutputType.UINT8):
    """``fn.hue``: the hue turned by ``hue`` degrees (imageops.hue_saturation); None: drawn per sample in
    [-359, 359]."""
    return _hue(*inputs, hue=hue, output_layout=output_layout, output_dtype=output_dtype)


def saturation(*inputs, saturation=1.0, device=None, output_layout=RocalTensorLayout.NHWC,
               output_dtype=RocalTensorOutputType.UINT8):
    """``fn.saturation``: the HSV saturation times ``saturation``, clamped to [0, 1] (0: grey, 1: as it
    is); None: drawn per sample in [-0.5, 0.5]."""
    return _saturation(*inputs, saturation=saturation, output_layout=output_layout, output_dtype=output_dtype)


def gamma_correction(*inputs, gamma=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
                     output_dtype=RocalTensorOutputType.UINT8):
    """``fn.gamma_correction``: RPP's table 255 * (x / 255) ** gamma, truncated (imageops.gamma_lut); None:
    drawn per sample in [0.3, 7]."""
    return _gamma(*inputs, gamma=gamma, output_layout=output_layout, output_dtype=output_dtype)


def exposure(*inputs, exposure=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.exposure``: x * 2 ** exposure, rounded half to even and saturated; None: drawn per sample in
    [0.15, 0.95]."""
    return _exposure(*inputs, exposure=exposure, output_layout=output_layout, output_dtype=output_dtype)


def color_temp(*inputs, adjustment_value=50, device=None, output_layout=RocalTensorLayout.NHWC,
               output_dtype=RocalTensorOutputType.UINT8):
    """``fn.color_temp``: red + adjustment_value, blue - adjustment_value (an integer); None: drawn per
    sample in [-99, 99]."""
    return _color_temp(*inputs, adjustment_value=adjustment_value, output_layout=output_layout,
                       output_dtype=output_dtype)


def blend(*inputs, ratio=None, device=None, output_layout=RocalTensorLayout.NHWC,
          output_dtype=RocalTensorOutputType.UINT8):
    """``fn.blend(a, b, ratio=)``: a * ratio + b * (1 - ratio) over a's region (imageops.blend), in a's
    buffer; None: drawn per sample in [0.1, 0.9]."""
    if len(inputs) != 2 or not all(isinstance(i, DataNode) and hasattr(i, "rocal") for i in inputs):
        raise TypeError(f"{PREFIX}: fn.blend takes two image outputs of decoders or image operators")
    if any(hasattr(i, "rocal_frames") for i in inputs):
        raise NotImplementedError(f"{PREFIX}: fn.blend of fn.readers.video's sequences is not supported")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, first, second, ratio):
        if ratio is None:
            ratio = ctx.rng(op).uniform(0.1, 0.9)
        return imageops.as_output(imageops.blend(first, second, float(ratio)), out.torch_dtype)
    node = Op("rocal.blend", run, list(inputs), {"ratio": _param(ratio)}, layouts=("HWC",)).outputs[0]
    node.rocal = out
    if getattr(inputs[0], "rocal_boxes", None) is not None:  # fn.readers.coco's boxes: a colour operator's
        node.rocal_boxes = inputs[0].rocal_boxes
    return node


def nop(*inputs, device=None):
    """``fn.nop``: the input, as it is (rocAL's signature: no layout or type arguments)."""
    return _image_op("nop", lambda ctx, op, image: image, inputs[0], {}, _source(inputs))


def copy(*inputs, device=None):
    """``fn.copy``: a copy of the input."""
    return _image_op("copy", lambda ctx, op, image: image.clone(), inputs[0], {}, _source(inputs))


# ------------------------------------------------------------------------------------------ random, labels

def coin_flip(*inputs, probability=0.5):
    """``fn.random.coin_flip``: a per-sample 0/1, 1 with ``probability`` (an operator's mirror, flips)."""
    return random_coin_flip(probability=float(probability))


def uniform(*inputs, range=(-1.0, 1.0), device=None):
    """``fn.uniform`` (and ``fn.random.uniform``): a per-sample float in [range[0], range[1]), for an
    operator's argument."""
    low, high = (float(v) for v in range)
    return random_uniform(range=(low, high))


def one_hot(*inputs, num_classes=0, device=None):
    """``fn.one_hot``: the iterators hand labels one-hot over ``num_classes`` (rocAL's rule: label L at
    L - 1, label 0 at the last place; rocalGetOneHotImageLabels, rocAL/source/api/rocal_api_meta_data.cpp)."""
    if int(num_classes) < 1:
        raise ValueError("fn.one_hot: num_classes must be positive")
    pipe = _pipeline()
    pipe._num_classes, pipe._one_hot_encoding = int(num_classes), True
    return []


def _coco_boxes(name: str):
    pipe = _pipeline()
    if pipe._rocal_boxes is None:
        raise ValueError(f"{PREFIX}: fn.{name} encodes fn.readers.coco's boxes: read them first (fn.readers.coco, "
                         f"then fn.decoders.image(..., annotations_file=...))")
    return pipe


def box_encoder(*inputs, anchors, criteria=0.5, means=None, offset=False, scale=1.0, stds=None, device=None):
    """``fn.box_encoder``: each run encodes the batch's boxes, as the operators left them, against
    ``anchors`` (``fastload.compat.rocal.anchors``); ``pipe.get_encoded_boxes_and_lables(batch, anchors)``
    gives them. Returns (None, []) as rocAL's does (its binding returns nothing)."""
    pipe = _coco_boxes("box_encoder")
    pipe._box_encoder = anchor_rules.box_encoder(anchors, criteria, means, offset, scale, stds)
    _one_anchor_list(pipe)
    return None, []


def _one_anchor_list(pipe) -> None:
    """rocAL keeps one anchor list for both (MasterGraph::box_iou_matcher overwrites the encoder's _anchors,
    which the matcher then points at): the last given would serve both, so two different lists are refused."""
    if pipe._box_encoder is not None and pipe._box_iou_matcher is not None and \
            not np.array_equal(pipe._box_encoder.anchors, pipe._box_iou_matcher.anchors):
        raise ValueError(f"{PREFIX}: fn.box_encoder and fn.box_iou_matcher with different anchors: rocAL keeps one "
                         f"anchor list, the last given, for both; give them the same anchors")


def box_iou_matcher(*inputs, anchors, high_threshold=0.5, low_threshold=0.4, allow_low_quality_matches=True,
                    device=None):
    """``fn.box_iou_matcher``: each run matches the batch's boxes to ``anchors``
    (``fastload.compat.rocal.anchors``); ``pipe.get_matched_indices()`` gives them. As in rocAL it needs
    ``readers.coco(is_box_iou_matcher=True)``. Returns (None, [])."""
    pipe = _coco_boxes("box_iou_matcher")
    if not pipe._rocal_reader.is_box_iou_matcher:
        raise ValueError(f"{PREFIX}: fn.box_iou_matcher needs fn.readers.coco(..., is_box_iou_matcher=True) (rocAL: "
                         f"\"Box IOU matcher variable not set cannot return matched idx\")")
    pipe._box_iou_matcher = anchor_rules.box_iou_matcher(anchors, high_threshold, low_threshold,
                                                         allow_low_quality_matches)
    _one_anchor_list(pipe)
    return None, []


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


def ssd_random_crop(*inputs, p_threshold=None, crop_area_factor=None, crop_aspect_ratio=None, crop_pos_x=None,
                    crop_pos_y=None, num_attempts=20, device=None, all_boxes_above_threshold=True, allow_no_crop=True,
                    ltrb=True, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.ssd_random_crop``: refused. rocAL's wrapper passes ``_num_attempts``, a name it never defines
    (rocAL_pybind/amd/rocal/fn.py at 0981d5bb), so the call raises NameError in rocAL."""
    raise NotImplementedError(f"{PREFIX}: fn.ssd_random_crop is not supported: rocAL's own wrapper fails with a "
                              f"NameError (_num_attempts), and its node seeds its draws from std::random_device, not "
                              f"the pipeline's seed")


def pixelate(*inputs, device=None, pixelate_percent=50.0, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.pixelate``: RPP's pixelate at a fixed ``pixelate_percent`` (rocAL draws nothing): the image down
    to (100 - percent) % of each side with RPP's bilinear resize and back with its nearest-neighbour
    resize (imageops.pixelate; rocAL/source/augmentations/effects_augmentations/node_pixelate.cpp ->
    rppt_pixelate_host)."""
    percent = float(pixelate_percent)
    if not 0 <= percent < 100:
        raise ValueError(f"fn.pixelate: pixelate_percent {pixelate_percent} is not in [0, 100)")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, image, percent):
        return imageops.as_output(imageops.pixelate(image, percent), out.torch_dtype)
    return _image_op("pixelate", run, inputs[0], {"percent": percent}, out)


def lens_correction(*inputs, camera_matrix=None, distortion_coeffs=None, device=None,
                    output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8, strength=None,
                    zoom=None):
    """``fn.lens_correction``: RPP's lens correction (imageops.lens_correction) of each image at its own
    size. ``camera_matrix`` is rocAL's [fx, cx, fy, cy] and ``distortion_coeffs`` its [k1, k2, p1, p2, k3];
    rocAL's LensCorrectionNode hands RPP [fx, 0, cx, 0, fy, cy, 0, 0, 1] and [k1, k2, p1, p2, k3, 0, 0, 0]
    (rocAL/source/augmentations/geometry_augmentations/node_lens_correction.cpp). rocAL's Python needs both
    lists, and so does fastload. Older rocAL releases took ``strength`` and ``zoom`` instead (another RPP
    kernel); they are refused by name."""
    if strength is not None or zoom is not None:
        raise NotImplementedError(f"{PREFIX}: fn.lens_correction(strength=, zoom=) is the older rocAL API; fastload "
                                  f"follows rocAL 0981d5bb: camera_matrix=[fx, cx, fy, cy], "
                                  f"distortion_coeffs=[k1, k2, p1, p2, k3]")
    fx, cx, fy, cy = _numbers("lens_correction", camera_matrix, 4,
                              "camera_matrix ([fx, cx, fy, cy]) is a list of 4 numbers")
    k1, k2, p1, p2, k3 = _numbers("lens_correction", distortion_coeffs, 5,
                                   "distortion_coeffs ([k1, k2, p1, p2, k3]) is a list of 5 numbers")
    camera, distortion = [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0], [k1, k2, p1, p2, k3, 0.0, 0.0, 0.0]
    if fx * fy == 0:
        raise ValueError("fn.lens_correction: fx and fy must not be 0 (the camera matrix has no inverse)")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, image):
        return imageops.as_output(imageops.lens_correction(image, camera, distortion), out.torch_dtype)
    return _image_op("lens_correction", run, inputs[0], {}, out)


_vignette = _color_op("vignette", lambda x, vignette: imageops.vignette(x, vignette), {"vignette": (40.0, 60.0)})


def vignette(*inputs, vignette=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.vignette``: RPP's vignette at intensity ``vignette`` (imageops.vignette; rocAL's default 0.5;
    None: drawn per sample from node_vignette.h's SDEV_RANGE, [40, 60])."""
    return _vignette(*inputs, vignette=vignette, output_layout=output_layout, output_dtype=output_dtype)


def _generator(rng, frame: int = 0) -> torch.Generator:
    """A torch generator for one sample's (or one frame's) per-pixel draws, seeded from its stream."""
    return torch.Generator().manual_seed(int(rng.random() * (1 << 62)) + frame)


_SEEDED = 1 << 40  # the streams of operators with a seed of their own: the sample's, forked by it


def _noise_op(name: str, defaults: dict, effect, inputs, values: dict, output_layout, output_dtype,
              seed: int | None = None) -> DataNode:
    """An RPP noise or weather effect (imageops) on a uint8 image. A value left None is drawn per sample
    from rocAL's range, one uniform draw shared by all of them: each of the node's default UniformRand
    parameters is an mt19937 seeded with the pipeline's seed, so rocAL draws them alike. An operator with
    a ``seed`` of its own (fn.snp_noise, fn.jitter: RPP's generator's in rocAL) draws its pixels from the
    sample's stream forked by it: another seed, other noise; the same seed, the same noise."""
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, image, **given):
        rng = ctx.rng(op)
        u = rng.random()
        drawn = {key: defaults[key][0] + u * (defaults[key][1] - defaults[key][0]) if value is None else value
                 for key, value in given.items()}
        pixels = rng if seed is None else ctx.stream().fork(_SEEDED + int(seed))
        return imageops.as_output(effect(image, generator=_generator(pixels, ctx.frame), **drawn), out.torch_dtype)
    return _image_op(name, run, inputs[0], {key: _param(value) for key, value in values.items()}, out)


def _unit(operator: str, **values) -> None:
    for name, value in values.items():
        if value is not None and not isinstance(value, (DataNode, RocalParam)) and not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"{PREFIX}: {operator}: {name}={value} is not in [0, 1] (RPP refuses it)")


def snp_noise(*inputs, p_noise=0.0, p_salt=0.0, noise_val=0.0, salt_val=0.0, seed=0, device=None,
              output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.snp_noise``: RPP's salt and pepper (imageops.snp_noise), a pixel noisy with probability p_noise
    and then salt with probability p_salt. rocAL's binding hands ``noise_val`` to RPP's salt value and
    ``salt_val`` to its pepper value (rocalSnPNoise(noise_prob, salt_prob, salt_value, pepper_value)), so
    here too noise_val is the salt (bright) value and salt_val the pepper one, both on 0-1. None: drawn
    per sample from [0.1, 1], [0.1, 1], [0.1, 1], [0, 0.5] (node_snp_noise.h). ``seed`` seeds RPP's own
    generator, whose draws fastload does not reproduce (and whose mask rocAL repeats every batch); the
    noise here comes from the pipeline's seed and this one, new for every sample and epoch."""
    _unit("fn.snp_noise", p_noise=p_noise, p_salt=p_salt, noise_val=noise_val, salt_val=salt_val)

    def effect(image, generator, p_noise, p_salt, salt, pepper):  # a parameter handle's value checked as read
        _unit("fn.snp_noise", p_noise=p_noise, p_salt=p_salt, noise_val=salt, salt_val=pepper)
        return imageops.snp_noise(image, p_noise, p_salt, salt, pepper, generator)
    return _noise_op("snp_noise", {"p_noise": (0.1, 1.0), "p_salt": (0.1, 1.0), "salt": (0.1, 1.0),
                                   "pepper": (0.0, 0.5)}, effect, inputs,
                     {"p_noise": p_noise, "p_salt": p_salt, "salt": noise_val, "pepper": salt_val},
                     output_layout, output_dtype, seed)


def jitter(*inputs, kernel_size=None, seed=0, fill_value=0.0, device=None, output_layout=RocalTensorLayout.NHWC,
           output_dtype=RocalTensorOutputType.UINT8):
    """``fn.jitter``: RPP's jitter (imageops.jitter), each pixel taken from a random one in its
    kernel_size window. None: drawn per sample as int(uniform(2, 5)), so 2, 3 or 4 (node_jitter.h);
    ``fill_value`` is not read, as in rocAL; ``seed`` as in fn.snp_noise."""
    if kernel_size is not None and not isinstance(kernel_size, (DataNode, RocalParam)) and int(kernel_size) < 1:
        raise ValueError(f"{PREFIX}: fn.jitter: kernel_size={kernel_size} is not a window")

    def effect(image, generator, kernel_size):  # a parameter handle's value checked as read
        if int(kernel_size) < 1:
            raise ValueError(f"{PREFIX}: fn.jitter: kernel_size={kernel_size} is not a window")
        return imageops.jitter(image, int(kernel_size), generator)
    return _noise_op("jitter", {"kernel_size": (2.0, 5.0)}, effect, inputs, {"kernel_size": kernel_size},
                     output_layout, output_dtype, seed)


def snow(*inputs, snow=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
         output_dtype=RocalTensorOutputType.UINT8):
    """``fn.snow``: the snow rocAL runs (MIVisionX's Snow node on RPP's batchPD host kernel:
    imageops.snow), snow / 100 * width * height * channels flakes. None: drawn per sample from [0.1, 0.8]
    (node_snow.h). RPP draws the flakes with an unseeded rand(); fastload from the pipeline's seed."""
    def effect(image, generator, snow):
        return imageops.snow(image, snow, generator)
    return _noise_op("snow", {"snow": (0.1, 0.8)}, effect, inputs, {"snow": snow}, output_layout, output_dtype)


def rain(*inputs, rain=None, rain_width=0, rain_height=0, rain_transparency=None, rain_slant_angle=0.0,
         device=None, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.rain``: RPP's rain (imageops.rain): ``rain`` (required: rocAL's binding takes a number) times
    0.004 * width * height drops, ``rain_width`` pixels wide and ``rain_height`` long (rocAL's defaults of 0
    draw none, leaving only the darkening), slanted by ``rain_slant_angle`` radians, blended with
    ``rain_transparency`` (None: per sample from [0.2, 0.3], node_rain.h). RPP draws one rain layer per
    batch from an unseeded generator; fastload draws one per image from the pipeline's seed."""
    if rain is None:
        raise TypeError(f"{PREFIX}: fn.rain: give rain= (rocAL's binding takes a number)")
    _unit("fn.rain", rain_transparency=rain_transparency)

    def effect(image, generator, rain, alpha):
        _unit("fn.rain", rain_transparency=alpha)
        return imageops.rain(image, rain, int(rain_width), int(rain_height), alpha, float(rain_slant_angle),
                             generator)
    return _noise_op("rain", {"rain": (0.0, 0.0), "alpha": (0.2, 0.3)}, effect, inputs,
                     {"rain": rain, "alpha": rain_transparency}, output_layout, output_dtype)


def fog(*inputs, intensity_factor=0.5, gray_factor=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
        output_dtype=RocalTensorOutputType.UINT8):
    """``fn.fog``: refused. RPP's fog blends each image with windows of a built-in 1920x1080 alpha and
    intensity mask (src/include/tensor/fog_mask.hpp), data fastload does not have."""
    raise NotImplementedError(f"{PREFIX}: fn.fog is not supported: RPP's fog blends a built-in 1920x1080 mask "
                              f"(fog_mask.hpp) that fastload does not have")


def fish_eye(*inputs, device=None, fill_value=0.0, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.fish_eye``: RPP's fisheye (imageops.fish_eye), which MIVisionX's FishEye node runs as
    rppi_fisheye_u8_pkd3_batchPD_host on 3-channel images (ROCm/MIVisionX amd_rpp/source/tensor/FishEye.cpp).
    ``fill_value`` is not read, as in rocAL. Refused: 1-channel images (RPP's planar path), an NCHW or a
    non-uint8 input (the node hands RPP the buffer as packed uint8), an output other than NHWC uint8 (the node
    writes packed uint8 whatever the output says), and at run an image smaller than its buffer (RPP's scalar
    path then strides rows by the image's width through a buffer of another width: other rows, and padding)."""
    source = _source(inputs)
    if source.layout in (RocalTensorLayout.NCHW, RocalTensorLayout.NFCHW) or \
            source.dtype != RocalTensorOutputType.UINT8:
        raise NotImplementedError(f"{PREFIX}: fn.fish_eye of an {source.layout.name} {source.dtype.name} input: "
                                  f"MIVisionX's FishEye node hands RPP the buffer as packed uint8 pixels; give it "
                                  f"NHWC uint8 images")
    layout, dtype = _kind(output_layout, output_dtype)
    if layout not in (RocalTensorLayout.NHWC, RocalTensorLayout.NFHWC) or dtype != RocalTensorOutputType.UINT8:
        raise NotImplementedError(f"{PREFIX}: fn.fish_eye(output_layout={layout.name}, output_dtype={dtype.name}): "
                                  f"MIVisionX's FishEye node writes packed uint8 whatever the output says; only "
                                  f"NHWC uint8 is supported")
    out = Rocal(source.buffer, layout, dtype)

    def run(ctx, op, image):
        if image.shape[2] != 3:
            raise NotImplementedError(f"{PREFIX}: fn.fish_eye of {image.shape[2]}-channel images is not supported "
                                      f"(RPP's planar fisheye path)")
        if tuple(image.shape[:2]) != tuple(source.buffer):
            raise ValueError(f"{PREFIX}: fn.fish_eye: a {image.shape[1]}x{image.shape[0]} image in a "
                             f"{source.buffer[1]}x{source.buffer[0]} buffer: RPP's fisheye then strides rows by the "
                             f"image's width through the buffer (other rows, and padding); resize to a fixed size "
                             f"first")
        return imageops.as_output(imageops.fish_eye(image), out.torch_dtype)
    return _image_op("fish_eye", run, inputs[0], {}, out)


def blur(*inputs, window_size=None, sigma=0.0, device=None, output_layout=RocalTensorLayout.NHWC,
         output_dtype=RocalTensorOutputType.UINT8):
    """``fn.blur``: refused. rocAL runs a 3x3 box filter (window_size and sigma are ignored) through
    MIVisionX's Blur node, which sets the source's offsetInBytes to 12 for RPP's padded layout; rocAL's
    tensors are not padded, so RPP reads each pixel 4 pixels to the right, and the last rows' pixels from
    past the image (the next one in the batch, or past the buffer) -- an output that depends on memory
    fastload cannot reproduce (MIVisionX amd_rpp/source/tensor/Blur.cpp, rocm-7.0.0)."""
    raise NotImplementedError(f"{PREFIX}: fn.blur is not supported: rocAL's 3x3 box filter reads its input 12 "
                              f"bytes off (MIVisionX's Blur node assumes a padded tensor rocAL does not have), so "
                              f"its result depends on memory past the image")


def unsupported(name: str, why: str = ""):
    """A stand-in for rocAL's ``fn.<name>`` that fastload does not run: it raises NotImplementedError naming
    itself, with ``why`` where there is a reason beyond "not yet"."""
    def refuse_operator(*inputs, **args):
        if why:
            raise NotImplementedError(f"{PREFIX}: fn.{name} is not supported: {why}")
        raise NotImplementedError(f"{PREFIX}: fn.{name} is not supported yet (supported: readers.file / tfrecord "
                                  f"/ webdataset / cifar10 / numpy / mxnet / coco / video / caffe / caffe2, "
                                  f"decoders.image / image_slice / image_random_crop / audio, the audio operators "
                                  f"(fastload.compat.rocal.audio), external_source, resize, crop_mirror_normalize, "
                                  f"resize_mirror_normalize, crop, center_crop, random_crop, flip, transpose, "
                                  f"rotate, warp_affine, resize_crop_mirror, resize_crop, roi_resize, brightness, "
                                  f"contrast, color_twist, hue, saturation, gamma_correction, exposure, color_temp, "
                                  f"blend, pixelate, vignette, lens_correction, snp_noise, jitter, snow, rain, log1p, "
                                  f"nop, copy, random.coin_flip, uniform, one_hot)")
    refuse_operator.__name__ = name
    refuse_operator.__doc__ = f"``fn.{name}``: not supported yet (raises NotImplementedError)."
    return refuse_operator


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
    pipe = _pipeline()
    items = ExternalSourceOp(None, None, True, False, None, [None], ("",), "cpu", None)
    pipe._external = (items, iter(source), int(mode))
    node = Op("rocal.external_source", _external_image, [items.outputs[0]],
              {"mode": int(mode), "color": _color(color_format), "max_width": int(max_width),
               "max_height": int(max_height)}, layouts=("HWC",)).outputs[0]
    node.rocal = Rocal((int(max_height), int(max_width)))
    return node, []
