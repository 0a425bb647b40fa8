"""DALI's sequence operators, ``fn.sequence_rearrange`` and ``fn.per_frame``, its reader of NeMo's speech
manifests, ``fn.readers.nemo_asr``, and its debugging ``fn.dump_image``.

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_sequences.py); the rules measured
there:

- ``sequence_rearrange``: ``out[i] = in[new_order[i]]`` along the outermost (frame) axis, exactly, layout kept.
  The input has at least 2 dimensions and a layout that is empty or starts with "F"; ``new_order`` is a list of
  ints (an int is a list of one), or per sample a 1-D int32 tensor (DALI refuses any other type or dimension);
  it is not empty and each index is in [0, frames).
- ``per_frame``: the input as it is, its layout marked as a sequence: kept where it starts with "F", its first
  letter replaced by "F" with ``replace=True`` (else an error, as in DALI); an input without a layout gets "F"
  and a "*" per further dimension (a 0-D sample is an error). Where the input's layout is empty, the number of
  dimensions is known only when a sample runs: the output's layout is set then (the pipeline's outputs have
  DALI's), and an operator defined on such a node, which would need it earlier, is refused by name (give the
  input a layout, or ``fn.external_source(ndim=...)``). fastload's operators take no per-frame argument
  inputs: those that check refuse several values per sample, naming the argument.
- ``readers.nemo_asr``: manifests read line by line (``\\n``), each line one JSON object (what follows it is
  ignored); a line that is no object, or has no ``audio_filepath``, is skipped with a warning, as DALI does; a
  malformed object, or a field of the wrong type (which DALI 2.4 reads as 0 or crashes on), is an error naming
  the line. ``duration`` (default -1: the whole file) and ``offset`` (0) in seconds, doubles: the window starts
  at ``int(offset * rate)`` frames (a negative offset: 0) and is ``int(duration * rate)`` frames long (a negative
  duration: all), cut at the file's end (a window past it is an error, as in DALI). ``min_duration`` /
  ``max_duration`` (float32, > 0 to apply) leave out entries whose manifest ``duration`` is shorter / longer.
  The audio path is used as written (relative to the working directory, as DALI opens it). Outputs: the window
  decoded as ``fn.decoders.audio`` decodes (libsndfile's samples, ``downmix`` (default True) of float32 channel
  weights, DALI's resampler to ``sample_rate``, ``dtype`` FLOAT, INT16 or INT32), then with
  ``read_sample_rate`` the file's own rate (float32 scalar, also when resampled), with ``read_text`` the
  text's UTF-8 bytes (uint8 [n], no terminating 0), with ``read_idxs`` the entry's index among the entries
  kept from its manifest (int64 [1], counting from 0 in each manifest). Order, shards and a seeded
  ``random_shuffle`` are fn.readers.file's (the list shuffled first); ``shuffle_after_epoch`` is refused.
  Bit-exact against DALI on WAV files.
- ``dump_image``: the input passed through, and each sample written to the working directory as
  ``<its place in the batch>-<suffix>-0.ppm``: ASCII PPM ("P3", or "P2" for one channel), a header line each for
  the magic, "width height" and 255, then a line per image row of the values each followed by a space -- DALI's
  bytes. HWC uint8 samples of 1 or 3 channels only, ``input_layout`` "HWC" only, as in DALI. Refused by name
  where fastload does not know a sample's place in DALI's batch (a pipeline whose reader feeds the graph, where
  a sample runs by its dataset index; a pipeline with conditionals, whose branches DALI numbers on their own),
  ``preserve=True`` (DALI then writes the files of an output no one uses; fastload prunes the operator) and the
  GPU (DALI's GPU operator was not checked).
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import torch

from ..engine.graph import DataNode, Op, ReaderOp, current_pipeline
from . import audio
from .operators import _device, _one, check_args
from .record_specs import cpu_only, order_args, reader_paths, record_spec
from .spec import operator
from .types import torch_dtype

PREFIX = "fastload.compat.dali"


# ------------------------------------------------------------------------------------- sequence_rearrange

def _order_list(value) -> tuple[int, ...]:
    """A constant ``new_order`` as DALI's INT_VEC argument reads it (an int is a list of one)."""
    values = list(value) if hasattr(value, "__len__") else [value]
    for v in values:
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"{PREFIX}: fn.sequence_rearrange: new_order holds {v!r}; it is a list of ints")
    return tuple(int(v) for v in values)


def rearrange(frames: torch.Tensor, order) -> torch.Tensor:
    """``frames[order]`` along the outermost axis, with DALI's checks of the sample and of ``order``."""
    if frames.dim() < 2:
        raise ValueError(f"{PREFIX}: fn.sequence_rearrange: a {frames.dim()}-D sample; sequence elements must have "
                         f"at least 1 dim (as in DALI)")
    if isinstance(order, torch.Tensor):
        if order.dtype != torch.int32:
            raise TypeError(f"{PREFIX}: fn.sequence_rearrange: new_order per sample is {order.dtype}; DALI reads "
                            f"int32 only")
        if order.dim() != 1:
            raise ValueError(f"{PREFIX}: fn.sequence_rearrange: new_order per sample is {order.dim()}-D; DALI "
                             f"reads 1-D tensors")
        order = tuple(order.tolist())
    if not order:
        raise ValueError(f"{PREFIX}: fn.sequence_rearrange: new_order is empty (empty result sequences are not "
                         f"allowed, as in DALI)")
    count = frames.shape[0]
    for at, index in enumerate(order):
        if not 0 <= index < count:
            raise ValueError(f"{PREFIX}: fn.sequence_rearrange: new_order[{at}] is {index}, not in [0, {count}) "
                             f"(the input's frames)")
    return frames[torch.tensor(order, dtype=torch.int64, device=frames.device)].contiguous()


@operator("sequence_rearrange", "SequenceRearrange")
def sequence_rearrange(data, *, new_order=None, device=None, **args):
    """``fn.sequence_rearrange``: ``out[i] = in[new_order[i]]`` along the frames ("F", outermost) axis;
    ``new_order`` a list of ints, or per sample a 1-D int32 tensor (a DataNode)."""
    operator_name = "fn.sequence_rearrange"
    check_args(operator_name, args, set())
    if new_order is None:
        raise ValueError(f"{PREFIX}: {operator_name} needs new_order")
    layout = data.layout()
    if layout and not layout.startswith("F"):
        raise ValueError(f"{PREFIX}: {operator_name}: expected sequences, whose outermost dimension is the frames "
                         f"'F', got data laid out {layout!r} (as DALI)")
    if isinstance(new_order, DataNode):
        if new_order.device != "cpu":
            raise ValueError(f"{PREFIX}: {operator_name}: new_order given per sample must be a CPU node (DALI's "
                             f"argument inputs are)")
        # a regular input here, not an argument input: the check of its type and dimensions needs the tensor
        return _one(Op("sequence_rearrange", lambda ctx, op, x, order: rearrange(x, order), [data, new_order], {},
                       device=_device([data], device), layouts=(layout,), fusable=False))
    order = _order_list(new_order)
    if not order:
        raise ValueError(f"{PREFIX}: {operator_name}: new_order is empty (empty result sequences are not allowed, "
                         f"as in DALI)")
    return _one(Op("sequence_rearrange", lambda ctx, op, x, order: rearrange(x, order), [data], {"order": order},
                   device=_device([data], device), layouts=(layout,), fusable=False))


# ------------------------------------------------------------------------------------------------ per_frame

class _LaidOutWhenRun(DataNode):
    """An output whose layout DALI decides from a sample's number of dimensions: empty until a sample has
    run, and read before then (an operator defined on it) refused by name."""

    def __init__(self, source: Op, index: int, device: str, layout: str = ""):
        self._known = ""
        super().__init__(source, index, device, layout)

    @property
    def _layout(self) -> str:
        if not self._known:
            raise NotImplementedError(
                f"{PREFIX}: fn.per_frame of an input without a layout: its layout ('F' and a '*' per further "
                f"dimension) depends on the samples' dimensions, known here only when the pipeline runs, so no "
                f"operator can be defined on it; give the input a layout (or fn.external_source(ndim=...))")
        return self._known

    @_layout.setter
    def _layout(self, value: str) -> None:
        self._known = value

    def mark(self, ndim: int) -> None:
        layout = "F" + "*" * (ndim - 1)
        if self._known and self._known != layout:
            raise ValueError(f"{PREFIX}: fn.per_frame: a {ndim}-D sample after samples laid out {self._known!r}: "
                             f"fastload keeps one layout per node")
        self._known = layout


def _static_ndim(node: DataNode) -> int | None:
    """The node's samples' number of dimensions where the definition says it (an external source's ``ndim``)."""
    return getattr(node.source, "ndim", None) if node.source is not None and node.source.name == "external_source" \
        else None


@operator("per_frame", "PerFrame")
def per_frame(data, *, replace=False, device=None, **args):
    """``fn.per_frame``: the input unchanged, its layout marked as a sequence (starting with "F")."""
    operator_name = "fn.per_frame"
    check_args(operator_name, args, set())
    layout = data.layout()
    ndim = _static_ndim(data)
    if layout:
        if layout[0] != "F" and not replace:
            raise ValueError(f"{PREFIX}: {operator_name}: a per-frame argument input must be a sequence: the input "
                             f"layout should start with 'F', got {layout!r} (replace=True replaces its first letter)")
        layout = "F" + layout[1:]
    elif ndim is not None:
        if ndim < 1:
            raise ValueError(f"{PREFIX}: {operator_name}: cannot mark zero-dimensional input as a sequence")
        layout = "F" + "*" * (ndim - 1)

    def run(ctx, op, x):
        if x.dim() < 1:
            raise ValueError(f"{PREFIX}: {operator_name}: cannot mark zero-dimensional input as a sequence")
        if isinstance(op.outputs[0], _LaidOutWhenRun):
            op.outputs[0].mark(x.dim())
        return x
    op = Op("per_frame", run, [data], {}, device=_device([data], device), layouts=(layout,), fusable=False)
    if not layout:
        op.outputs = [_LaidOutWhenRun(op, 0, op.outputs[0].device)]
    return _one(op)


# ------------------------------------------------------------------------------------------ readers.nemo_asr

NEMO = "fn.readers.nemo_asr"
_BLANK = " \t\r\n"


def _number(value, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{PREFIX}: {NEMO}: {where}: {key} is {value!r}, not a number (DALI 2.4 reads it as 0)")
    return float(value)


def manifest_entries(path: str, min_duration: float, max_duration: float, read_text: bool) -> list[dict]:
    """The entries of one manifest that DALI keeps, in order: {file, offset, duration, text, index}."""
    try:
        with open(path, "rb") as file:
            lines = file.read().split(b"\n")
    except OSError as error:
        raise ValueError(f"{PREFIX}: {NEMO}: could not open NEMO ASR manifest file {path!r}: {error}") from None
    entries = []
    for number, raw in enumerate(lines, 1):
        where = f"{path} line {number}"
        line = raw.decode("utf-8", errors="surrogateescape").lstrip(_BLANK)
        if not line.startswith("{"):
            if raw.strip(_BLANK.encode()) or number < len(lines):  # the empty piece after a last newline: no line
                warnings.warn(f"{NEMO}: skipping invalid manifest line ({where}): {raw[:80]!r}", stacklevel=3)
            continue
        try:
            found, _ = json.JSONDecoder().raw_decode(line)
        except ValueError as error:
            raise ValueError(f"{PREFIX}: {NEMO}: {where} is not a valid JSON object ({error}); DALI 2.4 reads such a "
                             f"line partially") from None
        file = found.get("audio_filepath", "")
        if not isinstance(file, str):
            raise ValueError(f"{PREFIX}: {NEMO}: {where}: audio_filepath is {file!r}, not a string")
        text = found.get("text", "") if read_text else ""
        if not isinstance(text, str):
            raise ValueError(f"{PREFIX}: {NEMO}: {where}: text is {text!r}, not a string (DALI 2.4 crashes on it)")
        duration = _number(found["duration"], "duration", where) if "duration" in found else -1.0
        offset = _number(found["offset"], "offset", where) if "offset" in found else 0.0
        if not file:
            warnings.warn(f"{NEMO}: skipping manifest line without an audio filepath ({where})", stacklevel=3)
            continue
        if (max_duration > 0 and duration > max_duration) or (min_duration > 0 and duration < min_duration):
            continue
        entries.append({"file": file, "offset": offset, "duration": duration, "text": text, "index": len(entries),
                        "where": where})
    return entries


def audio_window(frames: int, rate: int, offset: float, duration: float) -> tuple[int, int]:
    """DALI's ProcessOffsetAndLength: (first frame, frame count) of ``offset`` and ``duration`` seconds."""
    start = int(offset * rate) if offset >= 0 else 0
    length = int(duration * rate) if duration >= 0 else frames
    if start + length > frames:
        length = frames - start
    return start, length


def decode_window(data: bytes, offset: float, duration: float, sample_rate: float, downmix: bool,
                  target: torch.dtype, window) -> tuple[torch.Tensor, int]:
    """The entry's window decoded as DALI's DecodeAudio decodes it (``fn.decoders.audio``'s rules), and the
    file's rate."""
    samples, rate = audio._read_audio(data, "float32")
    start, length = audio_window(samples.shape[0], rate, offset, duration)
    if length < 0:
        raise ValueError(f"offset {offset} s is past the file's end ({samples.shape[0]} frames at {rate} Hz)")
    mixed = downmix and samples.shape[1] > 1
    resampled = sample_rate > 0 and sample_rate != rate
    if not (mixed or resampled):
        if target != torch.float32:
            samples, _ = audio._read_audio(data, audio._DECODED[target])
        cut = samples[start:start + length]
        return torch.from_numpy(np.ascontiguousarray(cut[:, 0] if downmix else cut)), rate
    values = samples[start:start + length]
    values = audio.downmix_channels(values) if downmix else values
    if resampled:
        count = math.ceil(values.shape[0] * sample_rate / rate)
        values = audio.resample_signal(values, float(rate), sample_rate, count, window) if count else \
            np.zeros((0, *values.shape[1:]), dtype=np.float32)
    return audio._from_float("readers.nemo_asr", values, target), rate


@operator("readers.nemo_asr", "readers.NemoAsr", aliases={"nemo_asr_reader": "NemoAsrReader"})
def readers_nemo_asr(*, manifest_filepaths=None, read_sample_rate=True, read_text=True, read_idxs=False,
                     sample_rate=-1.0, downmix=True, dtype=None, quality=50.0, min_duration=0.0, max_duration=0.0,
                     normalize_text=None, shard_id=0, num_shards=1, random_shuffle=False, initial_fill=1024,
                     shuffle_after_epoch=False, shuffle_after_epoch_seed=None, stick_to_shard=False,
                     pad_last_batch=False, seed=-1, name=None, device="cpu", **hints):
    """``fn.readers.nemo_asr``: per manifest entry, its audio (decoded as ``fn.decoders.audio`` decodes), and as
    asked its file's rate, its text's bytes and its index (see the module's docstring)."""
    check_args(NEMO, hints, set())
    cpu_only(NEMO, device)
    target = torch_dtype(dtype) if dtype is not None else torch.float32
    if target not in audio._DECODED:
        raise ValueError(f"{PREFIX}: {NEMO}: dtype {dtype} (FLOAT, INT16 or INT32, as DALI)")
    rate = float(np.float32(sample_rate))
    window = audio._window(audio._quality("readers.nemo_asr", quality))
    entries = []
    for manifest in reader_paths(manifest_filepaths, "manifest_filepaths", NEMO):
        entries += manifest_entries(manifest, float(np.float32(min_duration)), float(np.float32(max_duration)),
                                    bool(read_text))
    if not entries:
        raise ValueError(f"{PREFIX}: {NEMO}: no files found (no manifest entry kept)")
    samples = [(entry["file"], k) for k, entry in enumerate(entries)]

    def read(index: int) -> bytes:
        from ...errors import DecodeError
        file = entries[index]["file"]
        try:
            with open(file, "rb") as handle:
                return handle.read()
        except OSError as error:
            raise DecodeError(index, file, f"{NEMO}: cannot open the audio ({entries[index]['where']}): {error}") \
                from error

    spec = record_spec(NEMO, samples, read, listed_shuffle=True, **order_args(locals()))
    asked = (bool(read_sample_rate), bool(read_text), bool(read_idxs))

    def outputs(ctx, op):
        from ...errors import DecodeError
        data, index = ctx.readers[op.id]
        entry = entries[index]
        try:
            values, file_rate = decode_window(bytes(data), entry["offset"], entry["duration"], rate, bool(downmix),
                                              target, window)
        except Exception as error:
            raise DecodeError(index, entry["file"], f"{NEMO}: cannot decode the audio ({entry['where']}): "
                                                    f"{error}") from error
        text = entry["text"].encode("utf-8", errors="surrogateescape")
        extra = (torch.tensor(float(file_rate), dtype=torch.float32),
                 torch.frombuffer(bytearray(text), dtype=torch.uint8) if text else torch.zeros(0, dtype=torch.uint8),
                 torch.tensor([entry["index"]], dtype=torch.int64))
        return (values, *(value for value, wanted in zip(extra, asked) if wanted))

    nodes = ReaderOp("readers.nemo_asr", outputs, spec, num_outputs=1 + sum(asked)).outputs
    return nodes[0] if len(nodes) == 1 else nodes


# ----------------------------------------------------------------------------------------------- dump_image

def ppm_bytes(image: torch.Tensor) -> bytes:
    """DALI's PPM of an HWC uint8 image of 1 or 3 channels: ASCII ("P2" / "P3"), each value followed by a space,
    a line per row."""
    height, width, channels = image.shape
    rows = image.reshape(height, width * channels).tolist()
    head = f"{'P3' if channels == 3 else 'P2'}\n{width} {height}\n255\n"
    return (head + "".join("".join(f"{v} " for v in row) + "\n" for row in rows)).encode("ascii")


@operator("dump_image", "DumpImage")
def dump_image(data, *, suffix="", input_layout="HWC", device=None, **args):
    """``fn.dump_image``: the input unchanged; each sample written as ``<place in batch>-<suffix>-0.ppm`` in the
    working directory."""
    operator_name = "fn.dump_image"
    check_args(operator_name, args, set())
    if str(input_layout) != "HWC":
        raise ValueError(f"{PREFIX}: {operator_name}: input_layout {input_layout!r}: only HWC is supported (CHW not "
                         f"supported yet, as DALI says)")
    if _device([data], device) != "cpu":
        raise NotImplementedError(f"{PREFIX}: {operator_name} on the GPU is not supported (DALI's GPU operator, "
                                  f"which writes its files otherwise, was not checked); dump a CPU node")
    if args.get("preserve"):
        raise NotImplementedError(f"{PREFIX}: {operator_name}(preserve=True) is not supported: DALI then writes the "
                                  f"files of an output nothing uses, which fastload prunes; return its output instead")
    if getattr(current_pipeline(), "_conditionals", False):
        raise NotImplementedError(f"{PREFIX}: {operator_name} in a pipeline with enable_conditionals=True is not "
                                  f"supported: DALI numbers the files by a sample's place in its branch's batch, "
                                  f"which fastload does not know")
    name = f"-{suffix}-0.ppm"

    def run(ctx, op, image):
        if ctx.readers:  # the loader's per-sample run: ctx.index is the sample's index in the dataset
            raise NotImplementedError(f"{PREFIX}: {operator_name} in a pipeline whose reader feeds the graph is not "
                                      f"supported: DALI names the files by a sample's place in its batch, which "
                                      f"fastload's per-sample run does not know")
        if image.dim() != 3:
            raise ValueError(f"{PREFIX}: {operator_name}: input images must have three dimensions, got input with "
                             f"{image.dim()} (as DALI)")
        if image.dtype != torch.uint8:
            raise TypeError(f"{PREFIX}: {operator_name}: input of {image.dtype}; DALI writes uint8 images only")
        if image.shape[2] not in (1, 3):
            raise ValueError(f"{PREFIX}: {operator_name}: only 3-channel and gray images are supported, got input "
                             f"with {image.shape[2]} channels (as DALI)")
        with open(f"{ctx.index}{name}", "wb") as file:
            file.write(ppm_bytes(image.cpu()))
        return image
    return _one(Op("dump_image", run, [data], {}, layouts=(data.layout(),), fusable=False))
