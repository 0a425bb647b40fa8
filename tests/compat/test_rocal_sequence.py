"""fastload.compat.rocal's sequence reader (``fn.readers.sequence_reader``) against rocAL's rules (ROCm/rocAL
0981d5bb: sequence_file_source_reader.cpp, rocalSequenceReader), on folders of JPEG frames written here whose
red channel says their own index."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal.pipeline import Pipeline
from fastload.compat.rocal.plugin.generic import ROCALGenericIterator
from fastload.compat.rocal.plugin.pytorch import ROCALClassificationIterator


def write_frames(folder, count: int, tone: int, size=(20, 12), start: int = 0, prefix: str = "f"):
    """``count`` flat JPEG frames: red 16 * (start + index), green ``tone``, blue 128."""
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        pixels = np.empty((size[1], size[0], 3), np.uint8)
        pixels[...] = (16 * (start + index), tone, 128)
        Image.fromarray(pixels).save(folder / f"{prefix}{index:03d}.jpg", quality=95)


def indices(sequence: np.ndarray) -> list[int]:
    return [int(round(float(frame[..., 0].mean()) / 16)) for frame in sequence]


def tones(sequence: np.ndarray) -> list[int]:
    """The frames' green, to the nearest 10 (JPEG moves flat values by a level or two)."""
    return [int(round(float(frame[..., 1].mean()) / 10)) * 10 for frame in sequence]


def sequence_pipeline(root, batch_size=3, build=lambda frames: frames, **reader_args) -> Pipeline:
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=0, seed=3, rocal_cpu=True)
    with pipe:
        outputs = build(fn.readers.sequence_reader(file_root=str(root), **reader_args))
        pipe.set_outputs(*(outputs if isinstance(outputs, tuple) else (outputs,)))
    pipe.build()
    return pipe


def run_all(pipe) -> list[np.ndarray]:
    sequences = []
    while pipe.get_remaining_images() > 0:
        (out,) = pipe.run()
        sequences += [out.at(n) for n in range(pipe._batch_size)]
    return sequences


def test_sequences_of_each_folder_in_order_and_every_batch_full(tmp_path):
    """Folders sorted by name, frames by path; a sequence every ``step`` frames, ``stride`` apart, while its
    last frame is in the folder: 7 frames with length 3, step 2, stride 2 -> starts 0 and 2; 9 frames -> 0,
    2, 4. NFHWC uint8; the last batch filled with the last sequence; no labels."""
    write_frames(tmp_path / "b", 9, 120)
    write_frames(tmp_path / "a", 7, 40)
    pipe = sequence_pipeline(tmp_path, sequence_length=3, step=2, stride=2)
    sequences = run_all(pipe)
    expected = [[0, 2, 4], [2, 4, 6]] + [[0, 2, 4], [2, 4, 6], [4, 6, 8]]
    assert [indices(s) for s in sequences] == expected + [expected[-1]]
    assert [tones(s)[0] for s in sequences] == [40, 40, 120, 120, 120, 120]
    assert sequences[0].shape == (3, 12, 20, 3) and sequences[0].dtype == np.uint8
    (out,), none = next(iter(ROCALGenericIterator(sequence_pipeline(tmp_path, sequence_length=2))))
    assert none is None and out.shape == (3, 2, 12, 20, 3)  # rocAL's numpy iterator: no labels
    with pytest.raises(RuntimeError, match="sequence_reader gives no labels"):
        next(iter(ROCALClassificationIterator(sequence_pipeline(tmp_path, sequence_length=2))))


def test_defaults_root_files_and_zero_step(tmp_path):
    """rocAL's defaults step 3, stride 1; 0 reads as 1; files in file_root join the next folder, sorted by
    path with its files (archives and videos skipped), or make a last stream when no folder follows."""
    write_frames(tmp_path / "m", 5, 40)
    write_frames(tmp_path, 2, 200, start=8, prefix="a")  # a000.jpg, a001.jpg sort before m/
    write_frames(tmp_path, 3, 80, start=10, prefix="z")  # z*.jpg after m/: their own stream
    (tmp_path / "clip.mp4").write_bytes(b"not frames")
    pipe = sequence_pipeline(tmp_path, batch_size=1, sequence_length=2)
    # stream 1: a000, a001, m/f000..f004 (7 frames) -> starts 0, 3; stream 2: z000..z002 -> start 0
    assert [indices(s) for s in run_all(pipe)] == [[8, 9], [1, 2], [10, 11]]
    pipe = sequence_pipeline(tmp_path, batch_size=1, sequence_length=3, step=0, stride=0)
    assert [indices(s) for s in run_all(pipe)] == [[8, 9, 0], [9, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4],
                                                   [10, 11, 12]]


def test_operators_run_on_each_frame_and_sizes_are_the_largest(tmp_path):
    """Image operators run on each frame (fn.resize to 10x6, as on fn.readers.video's sequences); folders
    of different frame sizes share a buffer of the largest, each sequence at its top left."""
    write_frames(tmp_path / "a", 3, 40, size=(20, 12))
    write_frames(tmp_path / "b", 3, 90, size=(16, 16))
    pipe = sequence_pipeline(tmp_path, batch_size=2, sequence_length=3, build=lambda frames: (
        frames, fn.resize(frames, resize_width=10, resize_height=6, output_layout=types.NFHWC)))
    plain, resized = pipe.run()
    assert plain.dimensions() == [2, 3, 16, 20, 3]
    assert resized.dimensions() == [2, 3, 6, 10, 3]
    assert indices(resized.at(0)) == [0, 1, 2] and tones(resized.at(1)) == [90, 90, 90]
    assert (plain.at(1)[:, :, 16:] == 0).all() and tones(plain.at(1)[:, :, :16]) == [90, 90, 90]
    assert plain.get_rois().tolist() == [[0, 0, 20, 12], [0, 0, 16, 16]]  # each sequence's frames' region


def test_what_rocal_reads_otherwise_is_refused(tmp_path):
    write_frames(tmp_path / "short", 2, 40)
    with pytest.raises(ValueError, match="fewer than sequence_length=3"):
        sequence_pipeline(tmp_path, sequence_length=3)
    with pytest.raises(ValueError, match="sequence_length=0"):
        sequence_pipeline(tmp_path, sequence_length=0)
    with pytest.raises(NotImplementedError, match="num_shards=2"):
        sequence_pipeline(tmp_path, sequence_length=2, num_shards=2)
    with pytest.raises(NotImplementedError, match="RGB and BGR frames only"):
        sequence_pipeline(tmp_path, sequence_length=2, image_type=types.GRAY)
    with pytest.raises(ValueError, match="is no folder"):
        sequence_pipeline(tmp_path / "gone", sequence_length=2)
    with pytest.raises(ValueError, match="step=-1, stride=1: rocAL's are unsigned"):
        sequence_pipeline(tmp_path, sequence_length=2, step=-1)
    mixed = tmp_path / "mixed"
    write_frames(mixed / "s", 2, 40)
    write_frames(mixed / "s", 1, 40, size=(8, 8), prefix="g")  # after f000, f001 (20x12)
    with pytest.raises(ValueError, match=r"g000.jpg is 8x8, in a sequence of 20x12 frames from .*f001.jpg"):
        sequence_pipeline(mixed, sequence_length=2, step=1)
    (mixed / "s" / "g000.jpg").unlink()
    Image.new("RGB", (20, 12)).save(mixed / "s" / "h.png")
    with pytest.raises(ValueError, match="h.png is a PNG, not a JPEG: rocAL decodes frames with TurboJPEG"):
        sequence_pipeline(mixed, sequence_length=2, step=1)
    (mixed / "s" / "h.png").write_bytes(b"no image")
    with pytest.raises(ValueError, match="h.png: cannot read it as an image"):
        sequence_pipeline(mixed, sequence_length=2, step=1)
    # with step 3 no sequence reaches h.png (f000, f001, h.png: one sequence), which rocAL never decodes
    assert sequence_pipeline(mixed, sequence_length=2).get_remaining_images() == 3


def test_shuffled_once_with_the_padding_and_every_frame_sizes_the_buffer(tmp_path):
    """random_shuffle: rocAL pads the sequences to whole batches, shuffles them once and reads that order
    every epoch; the buffer is the largest frame of the streams, used in a sequence or not."""
    write_frames(tmp_path / "a", 6, 40)  # sequences start at 0, 2, 4 (length 2, step 2): 3 + 1 padding
    write_frames(tmp_path / "a", 1, 40, size=(30, 16), start=9, prefix="z")  # z000.jpg, in no sequence
    pipe = sequence_pipeline(tmp_path, batch_size=2, sequence_length=2, step=2, stride=1, random_shuffle=True)
    epochs = []
    for _ in range(3):
        epochs.append([indices(s[:, :12, :20]) for s in run_all(pipe)])
        pipe.rocal_reset_loaders()
    assert epochs[0] == epochs[1] == epochs[2]  # one order for every epoch
    assert sorted(epochs[0]) == [[0, 1], [2, 3], [4, 5], [4, 5]]  # the padding copy shuffled in with the rest
    assert epochs[0] != [[0, 1], [2, 3], [4, 5], [4, 5]], epochs[0]
    (out,) = pipe.run()
    assert out.dimensions() == [2, 2, 16, 30, 3]  # z000.jpg's 30x16 sizes the buffer
