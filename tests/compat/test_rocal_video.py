"""fastload.compat.rocal's video reader (``fn.readers.video``) against rocAL's rules (ROCm/rocAL 0981d5bb:
video_properties.cpp, video_file_source_reader.cpp, video_label_reader.cpp, ffmpeg_video_decoder.cpp), on
videos written here with PyAV whose frames say their own index, and rocAL's tests/python_api/video_pipeline.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal.pipeline import Pipeline
from fastload.compat.rocal.plugin.generic import ROCALGenericIterator
from fastload.compat.rocal.plugin.pytorch import ROCALClassificationIterator

from rocal_scripts import run_rocal_script

av = pytest.importorskip("av")
WIDTH, HEIGHT, FPS = 32, 24, 10


def write_video(path, count: int, tone: int, size=(WIDTH, HEIGHT), rate=FPS):
    """``count`` flat frames at ``rate`` fps (MPEG-4 part 2): red 16 * index, green ``tone``, blue 128."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=rate)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for index in range(count):
            pixels = np.empty((size[1], size[0], 3), np.uint8)
            pixels[...] = (16 * index, tone, 128)
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def frame_indices(sequence: np.ndarray) -> list[int]:
    """The frames' indices, read back from their red (MPEG-4 moves flat values by a few levels)."""
    return [int(round(float(frame[..., 0].mean()) / 16)) for frame in sequence]


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    for name, count, tone in (("a.mp4", 12, 40), ("b.mp4", 15, 120), ("c.mp4", 9, 200)):
        write_video(root / "flat" / name, count, tone)
    return root


def video_pipeline(file_root, batch_size=4, build=lambda frames: frames, **reader_args) -> Pipeline:
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=0, seed=3, rocal_cpu=True)
    with pipe:
        outputs = build(fn.readers.video(file_root=str(file_root), random_shuffle=False, **reader_args))
        pipe.set_outputs(*(outputs if isinstance(outputs, tuple) else (outputs,)))
    pipe.build()
    return pipe


def test_sequences_frames_and_labels_of_a_folder(videos):
    """Sequences of 3 frames 2 apart every 2 frames while the last frame is inside the video: 4 of a
    12-frame video, 6 of 15, 3 of 9; each video labelled by its place; NFHWC uint8 batches, the last
    filled with the last sequence."""
    loader = ROCALClassificationIterator(video_pipeline(videos / "flat", sequence_length=3, step=2, stride=2))
    assert len(loader) == 4
    sequences, labels = [], []
    for (frames,), batch_labels in loader:
        assert frames.shape == (4, 3, HEIGHT, WIDTH, 3) and str(frames.dtype) == "torch.uint8"
        sequences += [frame_indices(s.numpy()) for s in frames]
        labels += batch_labels.tolist()
    expected = ([[s, s + 2, s + 4] for s in (0, 2, 4, 6)] + [[s, s + 2, s + 4] for s in range(0, 11, 2)]
                + [[s, s + 2, s + 4] for s in (0, 2, 4)])
    assert sequences == expected + [expected[-1]] * 3
    assert labels == [0] * 4 + [1] * 6 + [2] * 3 + [2] * 3
    (outputs, none), = [next(iter(ROCALGenericIterator(video_pipeline(videos / "flat", sequence_length=2))))]
    assert none is None and outputs[0].shape == (4, 2, HEIGHT, WIDTH, 3)  # rocAL's numpy iterator gives no labels


def test_sub_folders_are_labels_read_as_integers_and_lists_give_ranges(videos, tmp_path):
    for folder, tone in (("3", 10), ("7", 90), ("x", 170)):
        write_video(tmp_path / "classes" / folder / "v.mp4", 6, tone)
    loader = ROCALClassificationIterator(video_pipeline(tmp_path / "classes", batch_size=3, sequence_length=6))
    assert [labels.tolist() for _, labels in loader] == [[3, 7, 0]]
    listing = tmp_path / "list.txt"
    listing.write_text(f"{videos}/flat/a.mp4 5 2 10\n")
    frames_given = ROCALClassificationIterator(video_pipeline(listing, batch_size=4, sequence_length=3, step=2,
                                                              stride=2, file_list_frame_num=True))
    (frames,), labels = next(iter(frames_given))
    # frames [2, 10) of a.mp4: sequences at 2 and 4, the batch filled with the last
    assert labels.tolist() == [5, 5, 5, 5]
    assert [frame_indices(s.numpy()) for s in frames] == [[2, 4, 6], [4, 6, 8], [4, 6, 8], [4, 6, 8]]
    listing.write_text(f"{videos}/flat/b.mp4 9 0.5 1.2\n")
    with pytest.raises(ValueError, match="line 1: frame numbers '0.5' '1.2' are not whole numbers"):
        video_pipeline(listing, sequence_length=3, file_list_frame_num=True)
    # seconds are float32, as rocAL reads them: 0.1 s at 10 fps is 1.0000000149 frames, so frame 2
    listing.write_text(f"{videos}/flat/b.mp4 9 0.1 0.9\n")
    (first,), = video_pipeline(listing, batch_size=1, sequence_length=2).run()[:1]
    assert frame_indices(first) == [2, 3]


def test_each_video_is_sought_by_its_own_frame_rate_and_coarse_time_bases_land_on_their_frames(tmp_path):
    """An AVI's time base is one tick per frame, where a truncated seek time lands a frame early; and a
    10.5 fps video beside a 10 fps one seeks by its own rate (rocAL: each stream's avg_frame_rate)."""
    write_video(tmp_path / "avi" / "a.avi", 16, 30)
    pipe = video_pipeline(tmp_path / "avi", batch_size=16, sequence_length=1)
    (frames,) = pipe.run()
    assert [frame_indices(frames.at(n))[0] for n in range(16)] == list(range(16))
    write_video(tmp_path / "rates" / "a.mp4", 8, 30)
    write_video(tmp_path / "rates" / "b.mp4", 12, 90, rate=__import__("fractions").Fraction(21, 2))
    pipe = video_pipeline(tmp_path / "rates", batch_size=19, sequence_length=2)
    (frames,) = pipe.run()
    starts = [frame_indices(frames.at(n)) for n in range(19)]
    assert starts == [[s, s + 1] for s in range(7)] + [[s, s + 1] for s in range(11)] + [[10, 11]]


def test_noise_on_a_sequence_shares_its_parameters_not_its_pixels(videos):
    """Salt and pepper on each frame: one p_noise per sequence, a new mask per frame (RPP's frames are
    separate images)."""
    pipe = video_pipeline(videos / "flat", batch_size=1, sequence_length=3, build=lambda frames: fn.snp_noise(
        frames, p_noise=0.5, p_salt=1.0, noise_val=1.0, salt_val=0.0, output_layout=types.NFHWC))
    (out,) = pipe.run()
    masks = [(out.at(0)[n] == 255).all(axis=2) for n in range(3)]
    assert all(0.4 < m.mean() < 0.6 for m in masks) and not np.array_equal(masks[0], masks[1])


def test_frame_ranges_in_seconds_and_operators_run_on_each_frame(videos, tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text("flat/b.mp4 9 0.5 1.2\n")
    (tmp_path / "flat").symlink_to(videos / "flat")
    pipe = video_pipeline(listing, batch_size=2, sequence_length=3, step=2, stride=2, build=lambda frames: (
        frames, fn.crop_mirror_normalize(frames, crop=(16, 20), mirror=1, mean=[0, 0, 0], std=[1, 1, 1],
                                         output_layout=types.NFCHW, output_dtype=types.FLOAT)))
    plain, cropped = pipe.run()
    # seconds [0.5, 1.2) at 10 fps: frames [5, 12); sequences start at 5 and 7
    assert [frame_indices(plain.at(n)) for n in range(2)] == [[5, 7, 9], [7, 9, 11]]
    assert cropped.dimensions() == [2, 3, 3, 16, 20] and cropped.layout() == "NFCHW"
    window = plain.at(0)[:, 4:20, 6:26][:, :, ::-1].transpose(0, 3, 1, 2).astype(np.float32)
    assert np.array_equal(cropped.at(0), window)


def test_what_rocal_reads_wrongly_is_refused(videos, tmp_path):
    write_video(tmp_path / "sizes" / "a.mp4", 4, 10)
    write_video(tmp_path / "sizes" / "b.mp4", 4, 10, size=(48, 24))
    with pytest.raises(ValueError, match="rocAL reads videos of one size and \\(whole\\) frame rate"):
        video_pipeline(tmp_path / "sizes", sequence_length=2)
    with pytest.raises(NotImplementedError, match="num_shards=2"):
        video_pipeline(videos / "flat", sequence_length=2, num_shards=2)
    with pytest.raises(NotImplementedError, match="RGB and BGR frames only"):
        video_pipeline(videos / "flat", sequence_length=2, image_type=types.GRAY)
    listing = tmp_path / "missing.txt"
    listing.write_text("gone.mp4 1\n")
    with pytest.raises(ValueError, match="gone.mp4 is no file"):
        video_pipeline(listing, sequence_length=2)
    with pytest.raises(ValueError, match="holds a sequence of 20 frames"):
        video_pipeline(videos / "flat", sequence_length=20)


def test_video_resize_is_the_video_reader_then_fn_resize(videos):
    """fn.readers.video_resize (rocalVideoFileResize): the video reader's sequences through rocAL's
    ResizeNode, so exactly fn.readers.video + fn.resize with the same arguments; its own defaults step 3 and
    stride 3; (videos, meta data) returned; resizing to the video's width or height is refused (rocAL then
    returns no tensor)."""
    def resized_by_reader(**resize):
        pipe = Pipeline(batch_size=2, num_threads=1, device_id=0, seed=3, rocal_cpu=True)
        with pipe:
            frames, meta = fn.readers.video_resize(sequence_length=2, file_root=str(videos / "flat"),
                                                   random_shuffle=False, **resize)
            assert meta == []
            pipe.set_outputs(frames)
        pipe.build()
        return pipe

    for resize in ({"resize_width": 20, "resize_height": 10},
                   {"resize_width": 0, "resize_height": 0, "resize_shorter": 12,
                    "interpolation_type": types.NEAREST_NEIGHBOR_INTERPOLATION}):
        by_reader = resized_by_reader(**resize)
        by_operator = video_pipeline(videos / "flat", batch_size=2, sequence_length=2, step=3, stride=3,
                                     build=lambda frames: fn.resize(frames, output_layout=types.NFHWC, **resize))
        assert by_reader.get_remaining_images() == by_operator.get_remaining_images() == 10  # 3 + 4 + 2, padded
        for _ in range(5):
            (ours,), (theirs,) = by_reader.run(), by_operator.run()
            assert ours.layout() == "NFHWC" and ours.dimensions() == theirs.dimensions()
            assert np.array_equal(ours.batch.numpy(), theirs.batch.numpy())
    assert ours.get_rois().tolist() == [[0, 0, 16, 12]] * 2  # shorter side 12 of 32x24, in rocAL's buffer
    for width, height in ((WIDTH, 10), (20, HEIGHT)):
        with pytest.raises(ValueError, match="rocAL resizes only when both sides differ"):
            resized_by_reader(resize_width=width, resize_height=height)
    with pytest.raises(ValueError, match="video_resize: resize_width/resize_height cannot be combined"):
        resized_by_reader(resize_width=20, resize_height=10, resize_longer=30)


VIDEO_PIPELINE_SCRIPT = Path(__file__).parent.parent / "data" / "rocal" / "video_pipeline.py"


def test_rocals_video_pipeline_script(videos, tmp_path):
    """tests/python_api/video_pipeline.py through ``python -m fastload.compat.run`` with rocAL's
    parse_config: its own ROCALVideoIterator (copy_data into an (N * F, H, W, C) array), a 512x960
    crop_mirror_normalize (larger than these videos: each frame whole, in the padded buffer), as written."""
    done = run_rocal_script(tmp_path, "video_pipeline.py", VIDEO_PIPELINE_SCRIPT.read_text(), "--video-path",
                            str(videos / "flat"), "--sequence-length", "3", "--batch-size", "2", "--NHWC",
                            "--print_tensor")
    assert "VIDEO READER  SUCCESS" in done.stdout
    assert "REMAINING IMAGES____________: 30" in done.stdout  # 10 + 13 + 7 sequences starting a frame apart
    assert done.stdout.count("IMAGES :") == 15  # in batches of 2
