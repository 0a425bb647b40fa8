"""rocAL's sequence reader (``fn.readers.sequence_reader``): sequences of image frames from folders, one
folder a stream.

rocAL's rules, from ROCm/rocAL at 0981d5bb (rocAL/source/readers/video/sequence_file_source_reader.cpp, the
node rocalSequenceReader in rocAL/source/api/rocal_api_data_loaders.cpp):

* ``file_root``'s entries are sorted by name. Each folder is a stream: its regular files (not links, not
  folders), sorted by path. Files in ``file_root`` itself (but .tar, .zip, .7z, .rar and .mp4) join the
  next folder in that order, sorted with its files, or make a last stream of their own when no folder
  follows them (subfolder_reading's one list of names, emptied at each folder).
* A stream's sequences start every ``step`` files (0 reads as 1) and take ``sequence_length`` files
  ``stride`` apart (0 reads as 1), while the last one lies inside the stream. A stream shorter than
  ``sequence_length`` stops rocAL ("Sequence length is not valid"); an empty one is skipped with a warning.
* Frames are decoded with TurboJPEG at their own size (decoder_keep_original) into a buffer of the
  largest frame found (MAXIMUM_FOUND_SIZE); the output is NFHWC uint8, RGB or BGR. rocAL measures the
  frames with its file reader's listing (each folder's files of image extensions; with image files in
  ``file_root``, only the folders sorted before the first of them and the root): fastload measures every
  frame of every stream, which gives a larger buffer than rocAL's only in that last case.
* Every batch is full: the last is filled with the last sequence (replicate_last_sequence_to_fill_last_shard)
  before anything is shuffled; the sharding and last-batch arguments are not read. ``random_shuffle``
  permutes the padded sequences once, at the start, and every epoch reads that order (rocAL's reset
  shuffles a list its reads no longer use); fastload permutes from the pipeline's seed, rocAL with
  std::random_shuffle, unseeded.
* The reader has no labels: rocAL makes no meta data reader for it, and its label getters then fail.

Refused by name: ``num_shards`` > 1 (rocAL splits one process's reading over internal loaders, batch by
batch), GRAY and RGB_PLANAR frames, a negative step or stride (rocAL's are unsigned), a frame that is not
a JPEG or not an image at all (rocAL puts another frame of the batch in its place), and a sequence whose
frames differ in size (rocAL gives each frame its own region in the sequence; fastload's sequences are
one array), all when the pipeline is defined.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
from PIL import Image

from ...errors import DecodeError
from . import imageops

PREFIX = "fastload.compat.rocal"
SKIPPED = ("tar", "zip", "7z", "rar", "mp4")  # subfolder_reading: archives and videos in file_root are not frames


def streams(root: str) -> list[list[str]]:
    """The frame files of each stream of ``root``, as rocAL's subfolder_reading and open_folder list them."""
    if not os.path.isdir(root):
        raise ValueError(f"{PREFIX}: readers.sequence_reader: file_root {root!r} is no folder")
    found, pending = [], []
    for name in sorted(entry.name for entry in os.scandir(root)):
        path = root + "/" + name
        if os.path.isfile(path):
            if "." not in name or name.rsplit(".", 1)[1] not in SKIPPED:
                pending.append(path)
        elif os.path.isdir(path):
            pending += [entry.path for entry in os.scandir(path) if entry.is_file(follow_symlinks=False)]
            found.append(sorted(pending))
            pending = []
    if pending:
        found.append(pending)
    return found


class FrameSequences:
    """A sequence reader's sequences, padded as rocAL pads them: ``samples`` [("first frame's path", 0)] and
    ``read(index)``, the sequence's frames as bytes of a (sequence_length, height, width, 3) uint8 array;
    ``width`` and ``height`` are the largest frame's (rocAL's buffer)."""

    def __init__(self, root: str, sequence_length: int, step: int, stride: int, color: str, batch_size: int):
        self.root, self.length, self.color = root, sequence_length, color
        step, stride = step or 1, stride or 1  # rocalSequenceReader: "default step and stride values if 0"
        self.sequences: list[list[str]] = []
        frames_of_streams = streams(root)
        for frames in frames_of_streams:
            if not frames:
                warnings.warn(f"{PREFIX}: readers.sequence_reader: a folder of {root!r} has no files (skipped, "
                              f"as rocAL does)", stacklevel=4)
                continue
            if sequence_length > len(frames):
                raise ValueError(f"{PREFIX}: readers.sequence_reader: {os.path.dirname(frames[0])} has "
                                 f"{len(frames)} frames, fewer than sequence_length={sequence_length} (rocAL: "
                                 f"\"Sequence length is not valid\")")
            last = stride * (sequence_length - 1)
            self.sequences += [frames[first:first + last + 1:stride]
                               for first in range(0, len(frames) - last, step)]
        if not self.sequences:
            raise ValueError(f"{PREFIX}: readers.sequence_reader: no frames in {root!r}")
        # get_sequences: the last batch filled with the last sequence, before any shuffle
        self.sequences += [self.sequences[-1]] * (-len(self.sequences) % batch_size)
        self.samples = [(frames[0], 0) for frames in self.sequences]
        used = {path for frames in self.sequences for path in frames}
        sizes = _sizes([path for frames in frames_of_streams for path in frames], used)
        for frames in self.sequences:
            odd = next((path for path in frames if sizes[path] != sizes[frames[0]]), None)
            if odd is not None:
                raise ValueError(f"{PREFIX}: readers.sequence_reader: {odd} is {sizes[odd][1]}x{sizes[odd][0]}, in "
                                 f"a sequence of {sizes[frames[0]][1]}x{sizes[frames[0]][0]} frames from {frames[0]}: "
                                 f"fastload reads sequences of one frame size (rocAL gives each frame its own "
                                 f"region)")
        self.heights_widths = [sizes[frames[0]] for frames in self.sequences]
        self.height = max(h for h, w in sizes.values())
        self.width = max(w for h, w in sizes.values())

    def read(self, index: int) -> bytes:
        frames = []
        for path in self.sequences[index]:
            try:
                with open(path, "rb") as file:
                    frames.append(imageops.decode(file.read(), self.color, 1 << 30, 1 << 30).numpy())
            except Exception as error:
                raise DecodeError(index, path, f"cannot decode: {error}") from error
            height, width = self.heights_widths[index]
            if frames[-1].shape[:2] != (height, width):  # changed since the build
                raise DecodeError(index, path, f"now {frames[-1].shape[1]}x{frames[-1].shape[0]}, not the "
                                  f"{width}x{height} it was at the build")
        return np.stack(frames).tobytes()

    def frames(self, ctx, op, data):
        """The reader op's bytes of sample ``ctx.index`` as its (frames, height, width, 3) array."""
        return data.view(self.length, *self.heights_widths[ctx.index], 3)


def _sizes(paths: list[str], used: set[str]) -> dict[str, tuple[int, int]]:
    """Each image's (height, width), from its header. A frame of a sequence (``used``) that is no JPEG is
    refused, naming it (rocAL's TurboJPEG decoder cannot read it and puts another frame of the batch in its
    place); a file no sequence reaches counts only if it is an image (rocAL never decodes it)."""
    sizes = {}
    for path in paths:
        try:
            with Image.open(path) as image:
                kind, size = image.format, (image.size[1], image.size[0])
        except (OSError, ValueError) as error:
            if path not in used:
                continue
            raise ValueError(f"{PREFIX}: readers.sequence_reader: {path}: cannot read it as an image ({error})") \
                from None
        sizes[path] = size
        if path in used and kind != "JPEG":
            raise ValueError(f"{PREFIX}: readers.sequence_reader: {path} is a {kind}, not a JPEG: rocAL decodes frames "
                             f"with TurboJPEG, which cannot read it (it puts another frame in its place)")
    return sizes
