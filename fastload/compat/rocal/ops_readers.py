"""rocAL's readers (``fn.readers.*``) and the reading a decoder does for them.

Why a module of its own: in rocAL the reader lives in the decoder -- ``fn.readers.file`` and most other
readers only record what to read (one reader per pipeline), and the decoder that takes the record makes
the reading op (``_reader_node``) with the decoder's sharding arguments. The readers that decode their own
records (numpy, CIFAR-10, video, sequences) make their nodes here too.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass

from ..engine.graph import DataNode, Op, ReaderOp
from ..engine.readers import read_sample
from . import caffe, cifar10, coco, imageops, mxnet, npy, sequence, video
from .caffe import CaffeReader
from .definition import defining
from .meta import describe, meta
from .mxnet import MXNetReader
from .ops_common import PREFIX, Rocal, refuse
from .ops_geometry import _resize_args, resize
from .order import RocalOrder
from .reading import RecordedReader
from .spec import NOT_IMAGE, READ, operator
from .types import (RocalImageColor, RocalLastBatchPolicy, RocalMissingComponentsBehavior, RocalResizeInterpolationType,
                    RocalResizeScalingMode, RocalTensorLayout, RocalTensorOutputType)
from .webdataset import webdataset_reader

# ------------------------------------------------------------------------------------------------ readers

class FileReader:
    """What ``fn.readers.file`` records: the folder (or list) the decoder will read, as in rocAL, where
    the reader only makes the label reader and the decoder does the reading."""

    def __init__(self, file_root: str, file_list: str):
        self.file_root, self.file_list = file_root, file_list

    sharded = True

    def decoder_samples(self, decoder: str, definition, file_root: str, path: str, key_map, num_shards: int):
        """``reading.RecordedReader``: the decoder's file_root (else the recorded one) read as rocAL reads a
        folder (``list_folder``)."""
        refuse(decoder, user_feature_key_map=key_map, path=path)
        root = file_root or self.file_root
        samples = list_folder(root, self.file_list)
        if not samples:
            raise ValueError(f"{PREFIX}: {decoder}: no files found in {root!r}")
        return samples, None


def _record(reader, label_reader: bool = False) -> None:
    """Make ``reader`` the pipeline's: one per pipeline, as rocAL's ("A metadata reader has already been
    created", rocAL/source/pipeline/master_graph.cpp); ``label_reader``: it is rocAL's label reader kind."""
    definition = defining()
    if definition.reader is not None:
        raise RuntimeError(f"{PREFIX}: the pipeline already has a reader ({type(definition.reader).__name__}); "
                           f"rocAL takes one per pipeline (\"A metadata reader has already been created\")")
    definition.reader, definition.label_reader = reader, label_reader


@operator(output=READ)
def readers_file(file_root, file_filters=None, file_list="", stick_to_shard=False, pad_last_batch=False,
                 shard_id=None, num_shards=None, random_shuffle=None):
    """``fn.readers.file``: records ``file_root`` (and ``file_list``); rocAL ignores its file_filters,
    stick_to_shard and pad_last_batch (they are the decoder's), and so does fastload
    (rocAL_pybind/amd/rocal/readers.py). shard_id, num_shards and random_shuffle, which rocAL's older API
    (and its Python API page) pass here, are accepted and ignored too: the decoder's decide."""
    reader = FileReader(str(file_root), file_list or "")
    _record(reader, label_reader=True)
    return reader, []


class TFRecordReader:
    """What ``fn.readers.tfrecord`` records (reader_type 0, classification): the folder and the user's
    feature key map; as with the file reader, the decoder does the reading (rocAL_pybind/amd/rocal/readers.py,
    tfrecord; decoders.py, image: b.tfImageDecoder)."""

    def __init__(self, path: str, key_map: dict):
        self.path, self.key_map = path, key_map

    sharded = False  # rocAL never passes shard_id to the TFRecord source

    def decoder_samples(self, decoder: str, definition, file_root: str, path: str, key_map, num_shards: int):
        """``reading.RecordedReader``: the records of the decoder's ``path`` (``tfrecord_samples``)."""
        # rocAL hands num_shards to the TFRecord source as internal loaders whose batches it takes in turn,
        # and never passes shard_id (rocalJpegTFRecordSource; image_loader_sharded.cpp)
        if int(num_shards) != 1:
            raise NotImplementedError(f"{PREFIX}: {decoder}(num_shards={num_shards}) after fn.readers.tfrecord: "
                                      f"rocAL then splits one pipeline's reading over num_shards internal "
                                      f"loaders, batch by batch; not supported")
        return tfrecord_samples(decoder, self, path, key_map)


@operator(output=READ)
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


@operator(output=READ)
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


@operator(output=READ)
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
    definition = defining()
    _record(sequences)
    data = _reading(definition, RocalReaderSpec(sequences.samples, 0, 1, random_shuffle, True,
                                                RocalLastBatchPolicy.LAST_BATCH_FILL, name=name, read=read,
                                                reshuffle=reshuffle), name)
    node = Op("rocal." + name, frames, [data], {}, layouts=("FHWC",)).outputs[0]
    describe(node, image=Rocal((sequences.height, sequences.width), RocalTensorLayout.NFHWC,
                               RocalTensorOutputType.UINT8), frames=length)
    return node


@operator(output=READ)
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
    height, width = meta(node).image.buffer
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


@operator(output=READ)
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
                                        defining().batch_size)
    # rocAL shuffles its padded sequences once, at the start, and reads that order every epoch
    node = _sequence_node("readers.sequence_reader", sequences, sequences.read, bool(random_shuffle),
                          sequences.frames, length, reshuffle=False)
    defining().unlabelled = ("fn.readers.sequence_reader gives no labels (rocAL makes no meta data reader for "
                             "it): use run()'s outputs, or plugin.generic's iterator, whose labels are None")
    return node


@operator(output=READ)
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


@operator(output=READ)
def readers_caffe(path, bbox=False, stick_to_shard=False, pad_last_batch=False):
    """``fn.readers.caffe``: records the LMDB folder of caffe.Datum records; a decoder with ``path=``
    reads them (``fastload.compat.rocal.caffe`` for rocAL's rules). As in rocAL, stick_to_shard and
    pad_last_batch here are not read (the decoder's are)."""
    return _readers_caffe(path, bbox, caffe2=False)


@operator(output=READ)
def readers_caffe2(path, bbox=False, stick_to_shard=False, pad_last_batch=False):
    """``fn.readers.caffe2``: records the LMDB folder of caffe2.TensorProtos records; a decoder with
    ``path=`` reads them (``fastload.compat.rocal.caffe``)."""
    return _readers_caffe(path, bbox, caffe2=True)


@operator(output=READ)
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
    fn.readers.tfrecord rocalJpegTFRecordSource, rocAL/source/api/rocal_api_data_loaders.cpp): the samples
    the recorded reader says the decoder reads (``reading.RecordedReader``), in rocAL's order."""
    definition = defining()
    recorded = definition.reader
    if not inputs or not isinstance(inputs[0], RecordedReader) or recorded is None:
        raise NotImplementedError(f"{PREFIX}: {decoder} reads what fn.readers.file, fn.readers.tfrecord, "
                                  f"fn.readers.webdataset, fn.readers.mxnet, fn.readers.coco, fn.readers.caffe or "
                                  f"fn.readers.caffe2 recorded (other readers and external sources are not "
                                  f"supported yet)")
    stick_to_shard = _sharding(decoder, shard_id, num_shards, pad_last_batch, stick_to_shard, shard_size)
    recorded = inputs[0]  # the reader this decoder was given (the last one recorded may be another's)
    samples, read = recorded.decoder_samples(decoder, definition, file_root, path, key_map, num_shards)
    shard_id = shard_id if recorded.sharded else 0
    return _reading(definition, RocalReaderSpec(samples, int(shard_id), int(num_shards), bool(random_shuffle),
                                                bool(stick_to_shard), RocalLastBatchPolicy(last_batch_policy),
                                                pad=bool(pad_last_batch), read=read), decoder.removeprefix("fn."))


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


def _reading(definition, spec: RocalReaderSpec, reader: str) -> DataNode:
    """The pipeline's reader op for ``spec``: a ``ReaderOp`` (which the build finds by its class, not by a
    name) named after the operator whose reading it is (``"rocal.decoders.image.read"``: in rocAL the
    decoder reads what fn.readers.file recorded; ``"rocal.readers.numpy.read"``). Its first output is each
    sample's bytes; its labels become the pipeline's (rocAL's labelReader)."""
    op = ReaderOp(f"rocal.{reader}.read", read_sample, spec)
    definition.labels = op.outputs[1]
    definition.last_batch_policy = spec.last_batch_policy
    return op.outputs[0]


def _npy_sample(ctx, op, data, image, kind):
    array = npy.array(bytes(data.numpy()), ctx.index, ctx.name, kind)
    return array.permute(1, 2, 0).contiguous() if image == "NCHW" else array


@operator(output=READ)
def readers_numpy(*inputs, file_root="", files=(), num_shards=1, output_layout=RocalTensorLayout.NONE,
                  random_shuffle=False, shard_id=0, stick_to_shard=True, shard_size=-1,
                  last_batch_policy=RocalLastBatchPolicy.LAST_BATCH_FILL, pad_last_batch=True, seed=0):
    """``fn.readers.numpy``: the .npy files of ``file_root`` (or ``files``) as one tensor per batch,
    [batch] + the dataset's largest shape (``fastload.compat.rocal.npy`` for rocAL's rules). With
    ``output_layout`` NHWC or NCHW and uint8 arrays of three dimensions (1 or 3 channels) the output is an
    image the image operators take; rocAL's numpy reader gives no labels (use ``ROCALNumpyIterator``)."""
    layout = RocalTensorLayout(output_layout)
    stick_to_shard = _sharding("fn.readers.numpy", shard_id, num_shards, pad_last_batch, stick_to_shard, shard_size)
    definition = defining()
    arrays = npy.NpyFiles(file_root, list(files or ()), layout.name)
    _record(arrays)
    definition.unlabelled = ("fn.readers.numpy gives no labels: ROCALNumpyIterator (plugin.generic or "
                             "plugin.pytorch) returns its arrays, as rocAL's")
    data = _reading(definition, RocalReaderSpec(arrays.samples, int(shard_id), int(num_shards),
                                                bool(random_shuffle), bool(stick_to_shard),
                                                RocalLastBatchPolicy(last_batch_policy), pad=bool(pad_last_batch),
                                                seed=int(seed), name="NumpyReader", read=arrays.read),
                    "readers.numpy")
    shape = arrays.layout.max_shape
    image = (arrays.layout.layout in ("NHWC", "NCHW") and arrays.layout.dtype == "uint8" and len(shape) == 3
             and shape[2 if layout == RocalTensorLayout.NHWC else 0] in (1, 3))
    node = Op("rocal.readers.numpy", _npy_sample, [data],
              {"image": arrays.layout.layout if image else "", "kind": arrays.layout},
              layouts=("HWC" if image else "",)).outputs[0]
    describe(node, array=arrays.layout, image=Rocal(shape[:2] if layout == RocalTensorLayout.NHWC else shape[1:],
                                                    layout, RocalTensorOutputType.UINT8) if image else None)
    return node


@operator(output=NOT_IMAGE)
def log1p(*inputs, output_datatype=RocalTensorOutputType.FLOAT):
    """``fn.log1p``: log(1 + |x|) in float32 of an int16 array of fn.readers.numpy, the only input rocAL
    takes (rocalLog1p, rocal_api_augmentation.cpp; RPP's host kernel: std::log1p(std::abs(x))); as in
    rocAL, ``output_datatype`` is not read and the output is float32 of the input's shape."""
    array = inputs[0] if inputs else None
    kind = meta(array).array
    if kind is None or kind.dtype != "int16" or meta(array).image is not None:
        raise ValueError(f"{PREFIX}: fn.log1p takes an int16 array of fn.readers.numpy (rocAL: \"Log1p "
                         f"augmentation only supported for int16 inputs\")")
    node = Op("rocal.log1p", lambda ctx, op, x: x.float().abs().log1p(), [array], {}).outputs[0]
    describe(node, array=npy.NpyLayout(kind.max_shape, "float32", kind.layout))
    return node


def _cifar10_image(ctx, op, data):
    return data.view(3, cifar10.SIDE, cifar10.SIDE).permute(1, 2, 0).contiguous()


@operator(output=READ)
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
    definition = defining()
    records = cifar10.Cifar10Records(file_root, filename_prefix)
    _record(records, label_reader=True)
    data = _reading(definition, RocalReaderSpec(records.samples, 0, 1, bool(random_shuffle), bool(stick_to_shard),
                                                RocalLastBatchPolicy(last_batch_policy), pad=bool(pad_last_batch),
                                                name="CIFAR10Reader", read=records.read), "readers.cifar10")
    node = Op("rocal.readers.cifar10", _cifar10_image, [data], {}, layouts=("HWC",)).outputs[0]
    describe(node, image=Rocal((cifar10.SIDE, cifar10.SIDE), RocalTensorLayout.NCHW, RocalTensorOutputType.UINT8))
    return node
