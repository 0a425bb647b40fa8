"""rocAL's video reader (``fn.readers.video``) on FFmpeg through PyAV (``pip install 'torch-fastload[video]'``).

rocAL's rules, from ROCm/rocAL at 0981d5bb (rocAL/source/readers/video/video_properties.cpp and
video_file_source_reader.cpp, the labels rocAL/source/meta_data/video_label_reader.cpp, the decoding
rocAL/source/decoders/video/ffmpeg_video_decoder.cpp):

* ``file_root`` is a folder, one video, or a ``.txt`` list. A folder's entries are sorted; its files are
  videos labelled by their place (0, 1, ...); its folders' files (one level) are videos labelled by the
  folder's name read as an integer (``atoi``: 0 for a name that is none). A list's lines are ``path label
  [start end]``: start and end are float32 seconds, made frames as ceil(start * rate) and floor(end *
  rate), or frame numbers with ``file_list_frame_num``; an end of 0 is the video's end; end is exclusive.
  A path relative to the list is read from the list's folder (rocAL's frame reader does so; its label
  reader does not, and exits).
* Each video is sought by its own stream's average frame rate; rocAL requires the rates' whole parts
  to agree and the streams to start at time 0.
* A video's frame count is its container's (``nb_frames``). It is cut into sequences of
  ``sequence_length`` frames ``stride`` apart, starting every ``step`` frames, while the sequence's last
  frame lies inside the video; a step or stride of 0 is the sequence length or 1.
* A sequence decodes as rocAL's FFmpeg decoder does: seek to its first frame's time (start / average
  frame rate), drop the frames before it, keep every ``stride``-th frame. Frames are RGB (or BGR) at the
  video's size; all videos have one size and one (whole) frame rate, as rocAL requires.
* The output is one NFHWC uint8 tensor per batch; the labels are the sequences' videos'. Every batch is
  full, the last filled with the last sequence (rocAL pads whatever ``last_batch_policy`` says).
  ``random_shuffle`` permutes the sequences each epoch (from the pipeline's seed; rocAL's is unseeded).

Refused by name: ``num_shards`` > 1 (rocAL splits one process's reading over internal loaders, batch by
batch), GRAY and RGB_PLANAR frames, a list's missing file or line rocAL would skip silently (or, for
frame numbers that are not whole, read otherwise), a video whose container gives no frame count (rocAL
makes no sequence of it), no frame rate or a stream not starting at 0, videos of different sizes or
frame rates, and a sequence that ends before its last frame (rocAL leaves stale frames).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ...errors import DecodeError

PREFIX = "fastload.compat.rocal"


@dataclass(frozen=True)
class Video:
    path: str
    label: int
    start: int  # its first frame and the frame after its last (from a list's range, else the whole video)
    end: int
    rate: Fraction  # its stream's average frame rate, by which rocAL's decoder seeks


@dataclass(frozen=True)
class VideoReader:
    """What ``fn.readers.video`` was told."""

    file_root: str
    sequence_length: int
    step: int
    stride: int
    frame_numbers: bool
    color: str


def _av():
    try:
        import av
    except ImportError as error:
        raise ImportError(f"{PREFIX}: fn.readers.video decodes with PyAV: pip install "
                          f"'torch-fastload[video]'") from error
    return av


def properties(path: str) -> tuple[int, int, int, Fraction]:
    """(width, height, frame count, average frame rate) of a video, from its container; a stream that
    does not start at time 0 or has no frame rate is refused (rocAL's seeks assume both)."""
    av = _av()
    try:
        with av.open(path) as container:
            stream = container.streams.video[0]
            start, rate = stream.start_time, stream.average_rate
            shape = stream.width, stream.height, int(stream.frames)
    except (av.FFmpegError, IndexError, OSError) as error:
        raise ValueError(f"{PREFIX}: readers.video: {path}: cannot read it as a video ({error})") from None
    if not rate:
        raise ValueError(f"{PREFIX}: readers.video: {path}: its stream gives no frame rate")
    if start:
        raise ValueError(f"{PREFIX}: readers.video: {path}: its stream starts at "
                         f"{float(start * stream.time_base):g} s, not 0; rocAL's seeks (frame / frame rate) would "
                         f"land on other frames")
    return (*shape, Fraction(rate))


def _atoi(name: str) -> int:
    """C's atoi: leading blanks, a sign, ASCII digits; 0 when there are none."""
    text = name.lstrip(" \t\n\r\f\v")
    sign = text[:1] if text[:1] in "+-" else ""
    digits = ""
    for char in text[len(sign):]:
        if char not in "0123456789":
            break
        digits += char
    return int(sign + digits) if digits else 0


def _list_line(root: str, number: int, fields: list[str], frame_numbers: bool) -> tuple[int, float, float]:
    """(label, start, end) of a list line, as rocAL's stream reads them: the label an int; start and end
    float32 seconds, or unsigned frame numbers with file_list_frame_num; anything else refused."""
    where = f"{PREFIX}: readers.video: {root} line {number}"
    if not fields[1].lstrip("-").isdecimal():
        raise ValueError(f"{where}: the label {fields[1]!r} is no integer (rocAL skips the line)")
    if len(fields) == 2:
        return int(fields[1]), 0, 0
    if frame_numbers:
        if not all(f.isdecimal() for f in fields[2:]):
            raise ValueError(f"{where}: frame numbers {fields[2]!r} {fields[3]!r} are not whole numbers "
                             f"(file_list_frame_num=True)")
        return int(fields[1]), int(fields[2]), int(fields[3])
    try:  # rocAL reads the times into floats, then multiplies by the frame rate as a double
        return int(fields[1]), float(np.float32(fields[2])), float(np.float32(fields[3]))
    except ValueError:
        raise ValueError(f"{where}: times {fields[2]!r} {fields[3]!r} are not numbers of seconds") from None


def videos(reader: VideoReader) -> tuple[list[Video], tuple[int, int, float]]:
    """The videos rocAL reads from ``file_root`` (the module's rules) and their common (width, height, fps)."""
    root = reader.file_root
    listed: list[tuple[str, int, float, float]] = []  # path, label, list start, list end
    if os.path.isdir(root):
        entries = sorted(os.scandir(root), key=lambda entry: entry.path)
        files = [entry.path for entry in entries if entry.is_file()]
        folders = [entry for entry in entries if entry.is_dir()]
        if files and folders:
            raise ValueError(f"{PREFIX}: readers.video: {root!r} holds videos and folders; rocAL labels a folder's "
                             f"videos by their place and a sub-folder's by its name, not both")
        listed = [(path, label, 0, 0) for label, path in enumerate(files)]
        for folder in folders:
            listed += [(path, _atoi(folder.name), 0, 0) for path in
                       sorted(entry.path for entry in os.scandir(folder.path) if entry.is_file())]
    elif root.endswith(".txt") and os.path.isfile(root):
        base = os.path.dirname(root)
        with open(root) as lines:
            for number, line in enumerate(lines, 1):
                fields = line.split()
                if not fields:
                    continue
                if len(fields) not in (2, 4):
                    raise ValueError(f"{PREFIX}: readers.video: {root} line {number}: 'path label [start end]', not "
                                     f"{line.strip()!r} (rocAL skips it)")
                path = fields[0] if os.path.isabs(fields[0]) else os.path.join(base, fields[0])
                if not os.path.isfile(path):
                    raise ValueError(f"{PREFIX}: readers.video: {root} line {number}: {path} is no file (rocAL "
                                     f"skips it)")
                listed.append((path, *_list_line(root, number, fields, reader.frame_numbers)))
    elif os.path.isfile(root):
        listed = [(root, 0, 0, 0)]
    else:
        raise ValueError(f"{PREFIX}: readers.video: file_root {root!r} is no folder, video or .txt list")
    if not listed:
        raise ValueError(f"{PREFIX}: readers.video: no video in {root!r}")
    found, shape = [], None
    for path, label, first, last in listed:
        width, height, count, fps = properties(path)
        if count <= 0:
            raise ValueError(f"{PREFIX}: readers.video: {path}: its container gives no frame count; rocAL makes "
                             f"no sequence of it")
        if shape is None:
            shape = (width, height, fps)
        elif (width, height) != shape[:2] or math.floor(fps) != math.floor(shape[2]):
            raise ValueError(f"{PREFIX}: readers.video: {path} is {width}x{height} at {float(fps):g} fps, "
                             f"{listed[0][0]} {shape[0]}x{shape[1]} at {float(shape[2]):g}; rocAL reads videos of one "
                             f"size and (whole) frame rate")
        if reader.frame_numbers:
            start, end = int(first), int(last)
        else:
            start, end = math.ceil(first * float(fps)), math.floor(last * float(fps))
        end = end or count
        if end > count or start >= end:
            raise ValueError(f"{PREFIX}: readers.video: {path}: frames [{start}, {end}) are not inside its {count} "
                             f"(rocAL skips the line)")
        found.append(Video(path, label, start, end, fps))
    return found, shape


class VideoSequences:
    """A video reader's sequences: ``samples`` [("path@frame", label)] and ``read(index)``, the sequence's
    frames as bytes of a (sequence_length, height, width, 3) uint8 array."""

    def __init__(self, reader: VideoReader):
        self.reader = reader
        self.videos, (self.width, self.height, self.fps) = videos(reader)
        span = (reader.sequence_length - 1) * reader.stride
        self.starts = [(n, start) for n, video in enumerate(self.videos)
                       for start in range(video.start, video.end - span, reader.step)]
        if not self.starts:
            raise ValueError(f"{PREFIX}: readers.video: no video of {reader.file_root!r} holds a sequence of "
                             f"{reader.sequence_length} frames {reader.stride} apart")
        self.samples = [(f"{self.videos[n].path}@{start}", self.videos[n].label) for n, start in self.starts]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return self.reader.sequence_length, self.height, self.width, 3

    def read(self, index: int) -> bytes:
        n, start = self.starts[index]
        try:
            return self._decode(self.videos[n], start).tobytes()
        except Exception as error:
            raise DecodeError(index, self.samples[index][0], f"cannot decode: {error}") from error

    def _decode(self, video: Video, start: int) -> np.ndarray:
        """rocAL's FFmpeg loop (ffmpeg_video_decoder.cpp): seek back to the start's time, drop earlier frames,
        keep every stride-th of the rest. The time is av_rescale_q(start, 1 / rate, time_base): exact,
        rounded to the nearest tick, halves away from zero."""
        av = _av()
        length, stride = self.reader.sequence_length, self.reader.stride
        kept = []
        with av.open(video.path) as container:
            stream = container.streams.video[0]
            ticks = Fraction(start) / video.rate / Fraction(stream.time_base)
            target = math.floor(ticks + Fraction(1, 2))
            container.seek(target, backward=True, any_frame=False, stream=stream)
            seen = 0
            for frame in container.decode(stream):
                if frame.pts is None or frame.pts < target:
                    continue
                if seen % stride == 0:
                    kept.append(frame.to_ndarray(format="rgb24" if self.reader.color == "RGB" else "bgr24"))
                seen += 1
                if len(kept) == length:
                    break
        if len(kept) < length:
            raise ValueError(f"the video ends after {len(kept)} of the sequence's {length} frames")
        return np.stack(kept)
