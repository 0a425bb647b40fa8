"""fastload.compat.dali.sequences against real DALI 2.4's CPU operators.

Fresh random inputs of awkward shapes (a new seed each run, named in failures; FASTLOAD_TEST_SEED replays
one). fn.sequence_rearrange (constant and per-sample orders, repeated and dropped frames) and fn.per_frame
(each layout rule): values, dtypes, shapes and layouts exact (tolerance 0). fn.readers.nemo_asr over two
manifests of small WAV files written here: the same entries, windows, decoded audio (float, int16, int32,
downmixed, resampled), rates, texts and indices, in the same order (shards, padding, a seeded shuffle), over
several batches: exact (tolerance 0). What DALI refuses is refused here too, by name.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali


def run(mod, inputs, graph, layouts):
    """Every output of ``graph(mod, *nodes)`` over ``inputs`` (per external source, a batch of samples), per
    sample, as arrays, and the outputs' layouts."""
    size = len(inputs[0])

    @mod.pipeline_def(batch_size=size, num_threads=1, device_id=None, seed=1)
    def pipe():
        nodes = [mod.fn.external_source(source=_feed(batch), batch=True, layout=layout)
                 for batch, layout in zip(inputs, layouts)]
        return graph(mod, *nodes)
    p = pipe()
    p.build()
    outs = p.run()
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return [[np.array(out.at(i)) for i in range(size)] for out in outs], [str(o.layout()) for o in outs]


def _feed(batch):
    return lambda: batch


def compare(graph, inputs, layouts, seed):
    dali = import_dali()
    (theirs, their_layouts), (mine, my_layouts) = run(dali, inputs, graph, layouts), run(ours, inputs, graph, layouts)
    assert their_layouts == my_layouts, (seed, their_layouts, my_layouts)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine, strict=True)):
        for i, (a, b) in enumerate(zip(a_out, b_out, strict=True)):
            where = f"seed {seed}, output {k}, sample {i}"
            assert a.dtype == b.dtype and a.shape == b.shape, (where, a.dtype, b.dtype, a.shape, b.shape)
            np.testing.assert_array_equal(b, a, err_msg=where)


def fails(mod, inputs, graph, layouts) -> str:
    """The error running ``graph`` raises (DALI's, or fastload's), as text."""
    with pytest.raises(Exception) as caught:
        run(mod, inputs, graph, layouts)
    return str(caught.value)


def sequences(seed: int, shapes=((5, 13, 7, 3), (4, 17, 5, 3), (7, 9, 11, 3)), dtype=np.uint8) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if dtype == np.uint8:
        return [rng.integers(0, 256, shape, dtype=np.uint8) for shape in shapes]
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


# ------------------------------------------------------------------------------------- sequence_rearrange

def test_sequence_rearrange_matches_dali(seed):
    """Constant orders (reversed, repeated, dropped, one int) and per-sample int32 orders of their own lengths,
    on FHWC uint8, F** float32 and layout-less 4-D inputs: exact, layout kept."""
    rng = np.random.default_rng(seed)
    frames = sequences(seed)
    orders = [rng.integers(0, len(f), rng.integers(1, 9)).astype(np.int32) for f in frames]

    def graph(mod, x, order):
        fn = mod.fn
        return (fn.sequence_rearrange(x, new_order=[3, 2, 1, 0]), fn.sequence_rearrange(x, new_order=[0, 0, 2, 0, 1]),
                fn.sequence_rearrange(x, new_order=2), fn.sequence_rearrange(x, new_order=order))
    compare(graph, [frames, orders], ["FHWC", None], seed)
    floats = sequences(seed + 1, ((6, 31), (5, 24)), np.float32)
    compare(lambda mod, x, order: mod.fn.sequence_rearrange(x, new_order=order),
            [floats, [np.array([5, 1, 1], np.int32), np.array([4], np.int32)]], ["F*", None], seed)
    blocks = sequences(seed + 2, ((3, 2, 5, 4), (4, 3, 1, 2)), np.float32)
    compare(lambda mod, x: mod.ops.SequenceRearrange(new_order=[2, 1])(x), [blocks], [None], seed)


@pytest.mark.parametrize("case", ["layout", "range", "negative", "empty", "flat", "int64", "2d"])
def test_sequence_rearrange_refuses_what_dali_refuses(case):
    """An input laid out otherwise than "F...", an index out of range, an empty order, a 1-D input, a per-sample
    order not int32 or not 1-D: errors in DALI and here (fastload's name the operator)."""
    dali = import_dali()
    frames, layout, order = [np.zeros((4, 3, 2), np.uint8)], "FHW", [1, 0]
    if case == "layout":
        layout = "HWC"
    elif case == "range":
        order = [4, 0]
    elif case == "negative":
        order = [-1]
    elif case == "empty":
        order = []
    elif case == "flat":
        frames, layout = [np.zeros(4, np.uint8)], "F"
    elif case in ("int64", "2d"):
        order = [np.array([1, 0], np.int64) if case == "int64" else np.array([[1, 0]], np.int32)]

    def graph(mod, x, *given):
        return mod.fn.sequence_rearrange(x, new_order=given[0] if given else order)
    inputs, layouts = ([frames, order], [layout, None]) if case in ("int64", "2d") else ([frames], [layout])
    fails(dali, inputs, graph, layouts)
    assert "fn.sequence_rearrange" in fails(ours, inputs, graph, layouts)


# ------------------------------------------------------------------------------------------------ per_frame

def test_per_frame_matches_dali(seed):
    """An "F..." layout kept, "DHWC" replaced (replace=True), a layout-less input given "F" and "*"s (1-D and
    3-D), on values left as they are: exact."""
    frames = sequences(seed)
    flat = [np.random.default_rng(seed).uniform(size=n).astype(np.float32) for n in (5, 4, 7)]

    def graph(mod, x, plain, v):
        return mod.fn.per_frame(x), mod.fn.per_frame(plain, replace=False), mod.fn.per_frame(v)
    compare(graph, [frames, frames, flat], ["FHWC", None, None], seed)
    compare(lambda mod, x: mod.ops.PerFrame(replace=True)(x), [frames], ["DHWC"], seed)


def test_per_frame_refusals():
    """A layout not starting with "F" without replace, and a 0-D sample, fail in DALI and here; an operator defined
    on the output of a layout-less input (whose layout fastload learns only when a sample runs) is refused by
    name, and external_source(ndim=...) lets it be defined."""
    dali = import_dali()
    frames = [np.zeros((4, 3, 2), np.uint8)]
    for mod in (dali, ours):
        fails(mod, [frames], lambda mod, x: mod.fn.per_frame(x), ["HWC"])
        fails(mod, [[np.array(3.0, np.float32)]], lambda mod, x: mod.fn.per_frame(x), [None])
    with pytest.raises(ValueError, match="fn.per_frame"):
        run(ours, [frames], lambda mod, x: mod.fn.per_frame(x), ["HWC"])
    with pytest.raises(NotImplementedError, match=r"fn.per_frame of an input without a layout"):
        run(ours, [frames], lambda mod, x: mod.fn.sequence_rearrange(mod.fn.per_frame(x), new_order=[1]), [None])

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        x = ours.fn.external_source(source=lambda: frames, batch=True, ndim=3)
        return ours.fn.sequence_rearrange(ours.fn.per_frame(x), new_order=[1])
    p = pipe()
    p.build()
    (out,) = p.run()
    assert out.layout() == "F**" and np.array(out.at(0)).shape == (1, 3, 2)


# ------------------------------------------------------------------------------------------ readers.nemo_asr

def run_reader(mod, reader, batch_size: int, iterations: int) -> list:
    """``iterations`` batches of the pipeline whose outputs ``reader(mod)`` gives: per output, per sample, arrays."""
    @mod.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=3)
    def pipe():
        out = reader(mod)
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)
    pipeline = pipe()
    pipeline.build()
    batches = []
    for _ in range(iterations):
        outputs = pipeline.run()
        batches.append([[np.array(out.at(i)) for i in range(len(out))] for out in outputs])
    return batches


def assert_same_stream(reader, batch_size: int = 3, iterations: int = 3) -> None:
    """The same samples in the same order, with the same dtypes, shapes and values (exact), as DALI's."""
    dali = import_dali()
    expected = run_reader(dali, reader, batch_size, iterations)
    got = run_reader(ours, reader, batch_size, iterations)
    assert len(got) == len(expected)
    for b, (want_batch, got_batch) in enumerate(zip(expected, got)):
        assert len(got_batch) == len(want_batch)
        for k, (want, have) in enumerate(zip(want_batch, got_batch)):
            assert len(have) == len(want), (b, k)
            for i, (x, y) in enumerate(zip(want, have)):
                assert y.dtype == x.dtype and y.shape == x.shape, (b, k, i, x.dtype, x.shape, y.dtype, y.shape)
                np.testing.assert_array_equal(y, x, err_msg=f"batch {b}, output {k}, sample {i}")


def write_manifest(path, lines: list) -> str:
    import json
    with open(path, "w", encoding="utf-8") as file:
        for line in lines:
            file.write((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """Two manifests over five WAV files (16-bit; 1, 2 and 3 channels; 8, 16 and 22.05 kHz; awkward lengths),
    with offsets, durations (one cutting past the end, one rounding down a frame), a missing text, non-ASCII
    text, a line that is no object and a line without a file (both skipped, as DALI skips them)."""
    import soundfile
    root = tmp_path_factory.mktemp("nemo")
    rng = np.random.default_rng(11)
    files = []
    for k, (frames, rate, channels) in enumerate([(1001, 16000, 1), (1777, 22050, 2), (2345, 8000, 1),
                                                  (999, 16000, 3), (1313, 11025, 2)]):
        signal = np.clip(0.3 * rng.standard_normal((frames, channels)), -1, 1)
        file = root / f"clip{k}.wav"
        soundfile.write(str(file), signal, rate, subtype="PCM_16")
        files.append((str(file), frames / rate))
    first = write_manifest(root / "train.json", [
        {"audio_filepath": files[0][0], "duration": files[0][1], "text": "the first clip"},
        {"audio_filepath": files[1][0], "duration": files[1][1], "text": "zweite Aufnahme, ünï"},
        "",
        {"audio_filepath": files[2][0], "text": "no duration: the whole file", "extra": [1, {"a": 2}]},
        {"audio_filepath": files[3][0], "duration": files[3][1], "offset": 0.01},
    ])
    second = write_manifest(root / "dev.json", [
        "[1, 2]",
        {"text": "no file", "duration": 1.0},
        {"audio_filepath": files[4][0], "duration": 0.05, "offset": 0.02, "text": "window"},
        {"audio_filepath": files[2][0], "duration": 0.2, "offset": 0.1, "text": "cut at the end"},
        {"audio_filepath": files[1][0], "offset": -0.5, "duration": 0.03, "text": "a\nb"},
    ])
    return first, second


@pytest.mark.parametrize("args", [
    {"read_idxs": True},
    {"downmix": False, "dtype": "INT16", "read_text": False, "read_idxs": True},
    {"sample_rate": 12000.0, "quality": 30.0, "dtype": "INT32"},
    {"sample_rate": 16000.0, "downmix": False, "read_sample_rate": False, "min_duration": 0.04, "max_duration": 0.1},
    {"random_shuffle": True, "initial_fill": 3, "seed": 7, "read_idxs": True},
    {"num_shards": 2, "shard_id": 1, "pad_last_batch": True, "stick_to_shard": True},
])
def test_nemo_asr_matches_dali(speech, args):
    """Both manifests through fn.readers.nemo_asr: the same entries (skipped lines, duration filters), windows,
    decoded values (float, int16, int32; downmixed or not; resampled), rates, texts and indices, in the same order
    (shards, padding, a seeded shuffle), over three batches past the epoch's end: exact."""
    def reader(mod):
        given = dict(args)
        if "dtype" in given:
            given["dtype"] = getattr(mod.types, given["dtype"])
        return mod.fn.readers.nemo_asr(manifest_filepaths=list(speech), **given)
    with pytest.warns(UserWarning, match="skipping"):
        assert_same_stream(reader)


def test_nemo_asr_names_and_single_output(speech, tmp_path, monkeypatch):
    """ops.NemoAsrReader and fn.nemo_asr_reader are DALI's deprecated names for it; with no optional output
    it gives one node, as DALI; a relative audio path is opened from the working directory, as DALI opens it."""
    monkeypatch.chdir(os.path.dirname(speech[0]))
    relative = write_manifest(tmp_path / "relative.json", [{"audio_filepath": "clip1.wav", "text": "t"}])
    assert_same_stream(lambda mod: mod.ops.NemoAsrReader(manifest_filepaths=[relative], read_text=False)(),
                       batch_size=2, iterations=1)
    assert_same_stream(lambda mod: mod.fn.nemo_asr_reader(manifest_filepaths=relative, read_sample_rate=False,
                                                          read_text=False), batch_size=1, iterations=1)


@pytest.mark.filterwarnings("ignore:fn.readers.nemo_asr. skipping")
def test_nemo_asr_refusals(speech, tmp_path):
    """What fastload refuses by name: shuffle_after_epoch (DALI's per-epoch permutation is not reproduced), a
    malformed object line or a field of the wrong type (DALI 2.4 reads them as 0 or crashes), an offset past the
    file's end (an error in DALI too), a dtype DALI does not decode to, the GPU."""
    first, _ = speech

    def build(**args):
        @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe():
            return tuple(ours.fn.readers.nemo_asr(**args))
        p = pipe()
        p.build()
        return p.run()
    with pytest.raises(NotImplementedError, match="shuffle_after_epoch"):
        build(manifest_filepaths=first, shuffle_after_epoch=True)
    clip = os.path.join(os.path.dirname(first), "clip0.wav")
    bad = write_manifest(tmp_path / "bad.json", ['{"audio_filepath": "%s", "duration": }' % clip])
    with pytest.raises(ValueError, match="bad.json line 1 is not a valid JSON object"):
        build(manifest_filepaths=bad)
    typed = write_manifest(tmp_path / "typed.json", [{"audio_filepath": clip, "duration": "0.01"}])
    with pytest.raises(ValueError, match="duration is '0.01', not a number"):
        build(manifest_filepaths=typed)
    past = write_manifest(tmp_path / "past.json", [{"audio_filepath": clip, "offset": 0.5}])
    with pytest.raises(Exception, match="past the file's end"):
        build(manifest_filepaths=past)
    with pytest.raises(ValueError, match="dtype"):
        build(manifest_filepaths=first, dtype=ours.types.UINT8)
    with pytest.raises(ValueError, match="CPU"):
        build(manifest_filepaths=first, device="gpu")


# ----------------------------------------------------------------------------------------------- dump_image

def test_dump_image_matches_dali(seed, tmp_path, monkeypatch):
    """RGB and gray uint8 images of awkward sizes, with and without a suffix: the same pass-through values and
    layout, and the same files with the same bytes in the working directory, as DALI writes them."""
    dali = import_dali()
    rng = np.random.default_rng(seed)
    rgb = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in ((13, 17, 3), (24, 9, 3), (5, 31, 3))]
    gray = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in ((13, 17, 1), (24, 9, 1), (5, 31, 1))]

    def graph(mod, x, g):
        return mod.fn.dump_image(x), mod.ops.DumpImage(suffix="gray")(g)
    written = {}
    for mod in (dali, ours):
        folder = tmp_path / mod.__name__
        folder.mkdir()
        monkeypatch.chdir(folder)
        outputs, layouts = run(mod, [rgb, gray], graph, ["HWC", "HWC"])
        assert layouts == ["HWC", "HWC"]
        for given, got in zip((rgb, gray), outputs):
            for a, b in zip(given, got, strict=True):
                np.testing.assert_array_equal(b, a)
        written[mod] = {path.name: path.read_bytes() for path in folder.iterdir()}
    assert sorted(written[ours]) == sorted(written[dali]) == ["0--0.ppm", "0-gray-0.ppm", "1--0.ppm", "1-gray-0.ppm",
                                                              "2--0.ppm", "2-gray-0.ppm"]
    for name, data in written[dali].items():
        assert written[ours][name] == data, (seed, name)


@pytest.mark.filterwarnings("ignore:fn.readers.nemo_asr. skipping", "ignore:fastload.compat.dali. dump_image run")
def test_dump_image_refusals(tmp_path, monkeypatch, speech):
    """What DALI refuses (4 channels, floats, 2-D samples, input_layout CHW) and what fastload refuses by name (the
    files' names it cannot know: a reader feeding the graph, conditionals; preserve=True)."""
    dali = import_dali()
    monkeypatch.chdir(tmp_path)
    for images, layout in (([np.zeros((3, 4, 4), np.uint8)], "HWC"), ([np.zeros((3, 4, 3), np.float32)], "HWC"),
                           ([np.zeros((3, 4), np.uint8)], "HW")):
        for mod in (dali, ours):
            assert "dump_image" in fails(mod, [images], lambda mod, x: mod.fn.dump_image(x), [layout])
    for mod in (dali, ours):
        fails(mod, [[np.zeros((3, 4, 3), np.uint8)]], lambda mod, x: mod.fn.dump_image(x, input_layout="CHW"), ["HWC"])
    with pytest.raises(NotImplementedError, match="preserve"):
        run(ours, [[np.zeros((3, 4, 3), np.uint8)]], lambda mod, x: mod.fn.dump_image(x, preserve=True), ["HWC"])

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None, enable_conditionals=True)
    def conditional():
        x = ours.fn.external_source(source=lambda: [np.zeros((3, 4, 3), np.uint8)], batch=True, layout="HWC")
        return ours.fn.dump_image(x)
    with pytest.raises(NotImplementedError, match="enable_conditionals"):
        conditional().build()

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def reading():
        return ours.fn.dump_image(ours.fn.readers.nemo_asr(manifest_filepaths=speech[1], read_sample_rate=False,
                                                           read_text=False))
    p = reading()
    p.build()
    with pytest.raises(Exception, match="whose reader feeds the graph"):
        p.run()
    assert not list(tmp_path.iterdir())
