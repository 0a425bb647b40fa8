"""fastload.compat.rocal's audio path (``fastload.compat.rocal.audio``): each operator against real DALI's
CPU operator of the same name (RPP's audio kernels port them; rocAL's own differences are stated where
they apply), on fresh WAV files of awkward lengths, and rocAL's tests/python_api/audio_unit_test.py run
unmodified (vendored in tests/data/rocal) on them."""

from __future__ import annotations

import math
import os
import shutil

import numpy as np
import pytest
import torch

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal.pipeline import pipeline_def
from fastload.compat.rocal.plugin.pytorch import ROCALAudioIterator

soundfile = pytest.importorskip("soundfile")
RATE = 16000
LENGTHS = (3001, 4999, 8000, 12345, 2100)


def signal(seed: int, length: int, channels: int = 1) -> np.ndarray:
    """Quiet noise, a noisy tone burst from a fifth to three quarters of the way, quiet noise again."""
    rng = np.random.default_rng(seed)
    t = np.arange(length) / RATE
    x = 1e-4 * rng.standard_normal((length, channels))
    start, stop = length // 5, length * 3 // 4
    for c in range(channels):
        tone = 0.5 * np.sin(2 * np.pi * (300 + 170 * c + 50 * seed) * t[start:stop])
        x[start:stop, c] += tone + 0.05 * rng.standard_normal(stop - start)
    return np.clip(x, -1, 1)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """ROCAL_DATA_PATH's layout for rocAL's audio test: rocal_data/audio/wav/*.wav (16 kHz mono PCM16)
    listed with labels in wav_file_list.txt (not in name order), rocal_data/multi_channel_wav/*.wav
    (stereo)."""
    root = tmp_path_factory.mktemp("rocal_data_path")
    audio = root / "rocal_data" / "audio"
    (audio / "wav").mkdir(parents=True)
    lines = []
    for n, length in enumerate(LENGTHS):
        name = f"wav/{'edcba'[n]}_{n}.wav"
        soundfile.write(audio / name, signal(n, length), RATE, subtype="PCM_16")
        lines.append(f"{name} {7 - n}")
    (audio / "wav_file_list.txt").write_text("\n".join(lines) + "\n")
    stereo = root / "rocal_data" / "multi_channel_wav"
    stereo.mkdir()
    for n, length in enumerate((2500, 3333)):
        soundfile.write(stereo / f"s{n}.wav", signal(10 + n, length, channels=2), RATE, subtype="PCM_16")
    return root


def listed(data) -> list[str]:
    audio = data / "rocal_data" / "audio"
    return [str(audio / line.split()[0]) for line in (audio / "wav_file_list.txt").read_text().split("\n") if line]


def run_ours(data, build, downmix=False, stereo=False, batch_size=1):
    """Each sample's outputs through ROCALAudioIterator (batches of one: each cut to its own region), with
    its label and region."""
    audio = data / "rocal_data" / "audio"
    path, file_list = (str(data / "rocal_data" / "multi_channel_wav"), "") if stereo else \
        (str(audio), str(audio / "wav_file_list.txt"))

    @pipeline_def(seed=5)
    def pipe():
        reader, _ = fn.readers.file(file_root=path, file_list=file_list)
        decoded = fn.decoders.audio(reader, file_root=path, file_list_path=file_list, downmix=downmix,
                                    stick_to_shard=False, last_batch_policy=types.LAST_BATCH_DROP)
        return build(decoded)

    pipeline = pipe(batch_size=batch_size, num_threads=1, device_id=0, rocal_cpu=True)
    pipeline.build()
    out = []
    for outputs, labels, roi in ROCALAudioIterator(pipeline):
        for b in range(len(labels)):
            out.append(([o[b] for o in outputs], int(labels[b]), roi[b].tolist()))
    return out


def run_dali(files, build):
    """DALI's CPU operators on the same files (decoded to 1-D float32 at their own rate), one by one."""
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def as dali_pipeline_def
    from nvidia.dali import types as dali_types

    @dali_pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        encoded, _ = dali_fn.readers.file(files=files)
        audio, _ = dali_fn.decoders.audio(encoded, dtype=dali_types.FLOAT, downmix=True)
        return tuple(build(audio, dali_fn))

    pipeline = pipe()
    pipeline.build()
    return [[np.array(o[0]) for o in pipeline.run()] for _ in files]


def test_decoder_gives_libsndfile_samples_labels_and_regions(data):
    """Mono files in the list's order, each [samples, 1] as libsndfile reads them (PCM16 / 32768), its label,
    the region [samples, 1]; batches of 2 over 5 files with LAST_BATCH_DROP: 1 batch (rocAL's reader counts
    max(n, batch) - batch where the last batch would be short, and stops with less than a batch left), its
    buffer cut to the longer file."""
    ours = run_ours(data, lambda audio: audio)
    assert [label for _, label, _ in ours] == [7, 6, 5, 4, 3]
    for (outputs, _, roi), path, length in zip(ours, listed(data), LENGTHS):
        expected, _ = soundfile.read(path, dtype="float32", always_2d=True)
        assert roi == [length, 1] and torch.equal(outputs[0], torch.from_numpy(expected))
    batches = run_ours(data, lambda audio: audio, batch_size=2)
    assert len(batches) == 2 and batches[0][0][0].shape == (max(LENGTHS[:2]), 1)
    dali = run_dali(listed(data), lambda audio, f: [audio])
    assert all(np.array_equal(o[0][0].numpy().reshape(-1), d[0]) for o, d in zip(ours, dali))


def test_downmix_averages_the_channels_as_dali(data):
    ours = run_ours(data, lambda audio: audio, downmix=True, stereo=True)
    files = sorted(str(p) for p in (data / "rocal_data" / "multi_channel_wav").iterdir())
    dali = run_dali(files, lambda audio, f: [audio])
    for (outputs, label, roi), reference in zip(ours, dali):
        assert label == 0 and roi == [reference[0].shape[0], 1]
        np.testing.assert_allclose(outputs[0].numpy().reshape(-1), reference[0], rtol=0, atol=1e-7)


def test_preemphasis_filter_matches_dali(data):
    for border, dali_border in ((types.CLAMP, "clamp"), (types.ZERO, "zero"), (types.REFLECT, "reflect")):
        ours = run_ours(data, lambda audio: fn.preemphasis_filter(audio, border=border, preemph_coeff=0.93))
        dali = run_dali(listed(data), lambda audio, f: [f.preemphasis_filter(audio, border=dali_border,
                                                                              preemph_coeff=0.93)])
        for (outputs, _, _), reference in zip(ours, dali):
            np.testing.assert_allclose(outputs[0].numpy().reshape(-1), reference[0], rtol=0, atol=1e-7)


SPECTROGRAM = dict(nfft=512, window_length=320, window_step=160)


@pytest.mark.parametrize("center, power, layout", [(True, 2, types.NFT), (False, 1, types.NTF)])
def test_spectrogram_matches_dali(data, center, power, layout):
    """Centred (reflect-101 padded) and not, power 2 and 1, NFT and NTF: within 1e-5 of the sample's largest
    value (both are float32 FFTs); the region is [bins, frames] (NTF: [frames, bins])."""
    ours = run_ours(data, lambda audio: fn.spectrogram(audio, center_windows=center, power=power, layout=layout,
                                                       **SPECTROGRAM))
    dali = run_dali(listed(data), lambda audio, f: [f.spectrogram(audio, center_windows=center, power=power,
                                                                  layout="ft" if layout == types.NFT else "tf",
                                                                  **SPECTROGRAM)])
    for (outputs, _, roi), reference, length in zip(ours, dali, LENGTHS):
        frames = (length if center else length - 320) // 160 + 1
        assert roi == ([257, frames] if layout == types.NFT else [frames, 257])
        assert outputs[0].shape == reference[0].shape
        scale = float(np.abs(reference[0]).max())
        np.testing.assert_allclose(outputs[0].numpy(), reference[0], rtol=0, atol=1e-5 * scale)


def test_to_decibels_matches_dali(data):
    """rocAL's script's arguments (multiplier ln 10, reference 1, cutoff ln 1e-20) on the audio, and the
    defaults (reference 0: the sample's largest) on a spectrogram."""
    ours = run_ours(data, lambda audio: fn.to_decibels(audio, multiplier=np.log(10), reference=1.0,
                                                       cutoff_db=np.log(1e-20)))
    dali = run_dali(listed(data), lambda audio, f: [f.to_decibels(audio, multiplier=float(np.log(10)),
                                                                  reference=1.0, cutoff_db=float(np.log(1e-20)))])
    for (outputs, _, _), reference in zip(ours, dali):
        np.testing.assert_allclose(outputs[0].numpy().reshape(-1), reference[0], rtol=1e-6, atol=1e-5)
    ours = run_ours(data, lambda audio: fn.to_decibels(fn.spectrogram(audio, **SPECTROGRAM)))
    dali = run_dali(listed(data), lambda audio, f: [f.to_decibels(f.spectrogram(audio, **SPECTROGRAM))])
    for (outputs, _, _), reference in zip(ours, dali):
        # decibels: the FFTs' rounding shows most in the faintest bins (-150 dB), hence the relative term
        np.testing.assert_allclose(outputs[0].numpy(), reference[0], rtol=2e-5, atol=1e-3)


@pytest.mark.parametrize("formula, normalize", [(types.MELSCALE_SLANEY, True), (types.MELSCALE_HTK, False)])
def test_mel_filter_bank_matches_dali(data, formula, normalize):
    """The script's filter bank (80 filters to 8 kHz at 16 kHz) and an HTK, unnormalized one of 40 from
    100 Hz: within 1e-4 of the largest value (RPP's mel scale is float32)."""
    args = dict(freq_high=8000, freq_low=0.0, nfilter=80, sample_rate=16000) if normalize else \
        dict(freq_high=0.0, freq_low=100.0, nfilter=40, sample_rate=16000)
    ours = run_ours(data, lambda audio: fn.mel_filter_bank(fn.spectrogram(audio, **SPECTROGRAM), mel_formula=formula,
                                                           normalize=normalize, **args))
    dali = run_dali(listed(data), lambda audio, f: [f.mel_filter_bank(
        f.spectrogram(audio, **SPECTROGRAM), mel_formula="slaney" if formula == types.MELSCALE_SLANEY else "htk",
        normalize=normalize, **args)])
    for (outputs, _, roi), reference in zip(ours, dali):
        assert roi == [args["nfilter"], reference[0].shape[1]]
        scale = float(np.abs(reference[0]).max())
        np.testing.assert_allclose(outputs[0].numpy(), reference[0], rtol=0, atol=1e-4 * scale)


@pytest.mark.parametrize("axes", [[1], [0]])
def test_normalize_matches_dali(data, axes):
    ours = run_ours(data, lambda audio: fn.normalize(fn.spectrogram(audio, **SPECTROGRAM), axes=axes))
    dali = run_dali(listed(data), lambda audio, f: [f.normalize(f.spectrogram(audio, **SPECTROGRAM), axes=axes)])
    for (outputs, _, _), reference in zip(ours, dali):
        np.testing.assert_allclose(outputs[0].numpy(), reference[0], rtol=0, atol=1e-4)


def test_nonsilent_region_and_slice_match_dali(data):
    """Begin and length (int32 [1] each, region [0, 1]) as DALI's where no leading partial window is loud
    (RPP's moving mean square also counts those), and the slice of the audio they give."""
    ours = run_ours(data, lambda audio: fn.nonsilent_region(audio, cutoff_db=-60))
    dali = run_dali(listed(data), lambda audio, f: list(f.nonsilent_region(audio, cutoff_db=-60)))
    for (outputs, _, roi), reference in zip(ours, dali):
        assert roi == [0, 1] and outputs[0].dtype == torch.int32
        assert (int(outputs[0][0]), int(outputs[1][0])) == (int(reference[0]), int(reference[1]))
        assert 0 < int(reference[1])

    def trimmed(audio):
        begin, length = fn.nonsilent_region(audio, cutoff_db=-60)
        return fn.slice(audio, anchor=[begin], shape=[length], rocal_tensor_output_type=types.FLOAT)

    sliced = run_ours(data, trimmed)
    for (outputs, _, roi), path, reference in zip(sliced, listed(data), dali):
        begin, length = int(reference[0]), int(reference[1])
        expected, _ = soundfile.read(path, dtype="float32")
        assert roi == [length, 1] and np.array_equal(outputs[0].numpy().reshape(-1), expected[begin:begin + length])


def test_arithmetic_and_resample_match_dali(data):
    """rocAL's script's `audio + uniform` and `audio * 1.15` in float32, and resampling by 1.15 (the rate
    from fn.random.uniform * 16000) against DALI's audio_resample: the same length within a sample and
    values within 1e-4 (RPP's port sums its taps in another order)."""
    added = run_ours(data, lambda audio: audio + fn.random.uniform(audio, range=[1.15, 1.15]))
    scaled = run_ours(data, lambda audio: audio * 1.15)
    for (plus, _, _), (times, _, _), path in zip(added, scaled, listed(data)):
        x, _ = soundfile.read(path, dtype="float32")
        assert np.array_equal(plus[0].numpy().reshape(-1), x + np.float32(1.15))
        assert np.array_equal(times[0].numpy().reshape(-1), x * np.float32(1.15))

    def resampled(audio):
        rate = fn.random.uniform(audio, range=[1.15, 1.15]) * 16000.00
        return fn.resample(audio, resample_rate=rate, resample_hint=1.15 * 12345, output_datatype=types.FLOAT)

    ours = run_ours(data, resampled)
    dali = run_dali(listed(data), lambda audio, f: [f.audio_resample(audio, in_rate=16000.0, out_rate=18400.0,
                                                                     quality=50.0)])
    for (outputs, _, roi), reference, length in zip(ours, dali, LENGTHS):
        assert roi == [math.ceil(np.float32(np.float32(1.15) * np.float32(length))), 1]
        assert abs(roi[0] - reference[0].shape[0]) <= 1
        common = min(roi[0], reference[0].shape[0]) - 1
        np.testing.assert_allclose(outputs[0].numpy().reshape(-1)[:common], reference[0][:common], rtol=0,
                                   atol=1e-4)


def test_what_rocal_would_get_wrong_is_refused(data):
    audio_root = str(data / "rocal_data" / "audio")
    listing = str(data / "rocal_data" / "audio" / "wav_file_list.txt")

    @pipeline_def(seed=1)
    def pipe(build):
        reader, _ = fn.readers.file(file_root=audio_root, file_list=listing)
        return build(fn.decoders.audio(reader, file_root=audio_root, file_list_path=listing))

    with pytest.raises(TypeError, match="nfft must be given"):
        pipe(batch_size=1, rocal_cpu=True, build=lambda a: fn.spectrogram(a))
    with pytest.raises(NotImplementedError, match="axes="):
        pipe(batch_size=1, rocal_cpu=True, build=lambda a: fn.normalize(a))
    with pytest.raises(NotImplementedError, match="only one of mean and stddev"):
        pipe(batch_size=1, rocal_cpu=True, build=lambda a: fn.normalize(a, axes=[0], mean=[1.0]))
    with pytest.raises(ValueError, match="NFT spectrogram"):
        pipe(batch_size=1, rocal_cpu=True,
             build=lambda a: fn.mel_filter_bank(fn.spectrogram(a, layout=types.NTF, **SPECTROGRAM)))
    with pytest.raises(TypeError, match="tensor \\+ tensor"):
        pipe(batch_size=1, rocal_cpu=True, build=lambda a: a - a)
    with pytest.raises(NotImplementedError, match="i-th float"):
        pipe(batch_size=1, rocal_cpu=True, build=lambda a: a + a)
    with pytest.raises(ValueError, match="nfft=0"):
        pipe(batch_size=1, rocal_cpu=True, build=lambda a: fn.spectrogram(a, nfft=0))
    with pytest.raises(ValueError, match="rocAL hangs"):
        pipe(batch_size=1, rocal_cpu=True, build=lambda a: fn.nonsilent_region(a, reset_interval=0))
    with pytest.raises(NotImplementedError, match="spectrogram"):
        pipe(batch_size=1, rocal_cpu=True, build=lambda a: fn.nonsilent_region(fn.spectrogram(a, **SPECTROGRAM)))
    stereo = str(data / "rocal_data" / "multi_channel_wav")

    @pipeline_def(seed=1)
    def stereo_pipe(build):
        reader, _ = fn.readers.file(file_root=stereo)
        return build(fn.decoders.audio(reader, file_root=stereo))

    with pytest.raises(NotImplementedError, match="2-channel audio"):
        stereo_pipe(batch_size=1, rocal_cpu=True, build=lambda a: fn.nonsilent_region(a))
    with pytest.raises(ValueError, match="without a file_list"):
        @pipeline_def(seed=1)
        def decoder_list_only():
            reader, _ = fn.readers.file(file_root=audio_root)
            return fn.decoders.audio(reader, file_root=audio_root, file_list_path=listing)
        decoder_list_only(batch_size=1, rocal_cpu=True)

    mixed = data / "mixed"
    mixed.mkdir()
    soundfile.write(mixed / "a.wav", signal(1, 3000), RATE, subtype="PCM_16")
    soundfile.write(mixed / "b.wav", signal(2, 3000, channels=2), RATE, subtype="PCM_16")

    @pipeline_def(seed=1)
    def mixed_pipe():
        reader, _ = fn.readers.file(file_root=str(mixed))
        return fn.decoders.audio(reader, file_root=str(mixed))

    with pytest.raises(NotImplementedError, match="channels"):
        mixed_pipe(batch_size=1, rocal_cpu=True)
    shutil.rmtree(mixed)


def test_an_uncentred_window_longer_than_the_audio_and_the_iterators_size_and_length(data):
    """RPP counts windows with C's truncating division: audio a little shorter than an uncentred window gets
    one window (reflect-padded), shorter still none. ROCALAudioIterator's ``size`` counts samples and
    ``len()`` is samples too (rocAL's plugin)."""
    from fastload.compat.rocal import audio
    x = torch.from_numpy(signal(1, 400)[:, :1].astype(np.float32))
    args = dict(nfft=512, length=512, step=256, center=False, reflect=True, power=2, ntf=True)
    assert audio._spectrogram(None, None, x, **args).shape == (1, 257)
    assert audio._spectrogram(None, None, x[:200], **args).shape == (0, 257)
    audio_root = str(data / "rocal_data" / "audio")
    listing = str(data / "rocal_data" / "audio" / "wav_file_list.txt")

    @pipeline_def(seed=1)
    def pipe():
        reader, _ = fn.readers.file(file_root=audio_root, file_list=listing)
        return fn.decoders.audio(reader, file_root=audio_root, file_list_path=listing)

    pipeline = pipe(batch_size=2, rocal_cpu=True)
    loader = ROCALAudioIterator(pipeline, size=2)
    assert len(loader) == 5  # rocAL's count of the epoch's samples (without padding, not whole batches)
    assert len(list(loader)) == 1  # 2 samples given: done


AUDIO_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "data", "rocal", "audio_unit_test.py")


def test_rocals_audio_unit_test_runs_unmodified(data, tmp_path, monkeypatch):
    """tests/python_api/audio_unit_test.py (vendored unchanged) through ``python -m fastload.compat.run``:
    every case in its QA mode (batch 1, the last file's output checked against its golden file with its
    own tolerance: 1e-20, 1e-5 for normalize), the golden files written here from real DALI's operators
    where DALI gives the same bits, and from this layer where they differ within the tolerances of the
    tests above (spectrogram, mel, normalize, resample). All 12 cases must pass."""
    from rocal_scripts import run_rocal_script
    goldens = data / "rocal_data" / "GoldenOutputsTensor" / "reference_outputs_audio"
    goldens.mkdir(parents=True, exist_ok=True)
    last = listed(data)[-1]
    x, _ = soundfile.read(last, dtype="float32")
    reference = run_dali([last], lambda audio, f: [
        audio, f.preemphasis_filter(audio), *f.nonsilent_region(audio, cutoff_db=-60),
        f.to_decibels(audio, multiplier=float(np.log(10)), reference=1.0, cutoff_db=float(np.log(1e-20)))])[0]
    decoded, emphasized, begin, length, decibels = reference
    stereo = sorted((data / "rocal_data" / "multi_channel_wav").iterdir())[-1]
    downmixed = soundfile.read(str(stereo), dtype="float32")[0].mean(axis=1, dtype=np.float32)
    ours = {name: run_ours(data, build)[-1][0][0].numpy() for name, build in {
        "spectrogram": lambda a: fn.spectrogram(a, **SPECTROGRAM),
        "mel_filter_bank": lambda a: fn.mel_filter_bank(fn.spectrogram(a, **SPECTROGRAM), freq_high=8000,
                                                        freq_low=0.0, nfilter=80, sample_rate=16000),
        "normalize": lambda a: fn.normalize(fn.spectrogram(a, **SPECTROGRAM), axes=[1]),
        "resample": lambda a: fn.resample(a, resample_rate=fn.random.uniform(a, range=[1.15, 1.15]) * 16000.00,
                                          resample_hint=1.15 * 255840)}.items()}
    files = {"audio_decoder": decoded, "preemphasis_filter": emphasized, "downmix": downmixed,
             "to_decibels": decibels, "tensor_add_tensor": x + np.float32(1.15),
             "tensor_mul_scalar": x * np.float32(1.15),
             "slice": x[int(begin):int(begin) + int(length)], **ours}
    for name, values in files.items():
        np.asarray(values, dtype=np.float32).tofile(goldens / f"{name}_output.bin")
    np.array([int(begin), int(length)], dtype=np.int32).tofile(goldens / "non_silent_region_output.bin")
    monkeypatch.setenv("ROCAL_DATA_PATH", str(data))
    done = run_rocal_script(tmp_path, "audio_unit_test.py", open(AUDIO_SCRIPT).read())
    assert "Number of PASSED tests: 12" in done.stdout, done.stdout[-3000:]
    assert "Number of FAILED tests: 0" in done.stdout
