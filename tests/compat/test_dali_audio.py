"""fastload.compat.dali.audio against real DALI 2.4's CPU audio operators.

Fresh random signals of awkward lengths (a new seed each run, named in failures; FASTLOAD_TEST_SEED replays
one), several argument combinations each. Tolerances: 0 (bit-exact) for preemphasis_filter, to_decibels,
nonsilent_region, audio_resample and decoders.audio; spectrogram and power_spectrum within 1e-6 of the
sample's largest value (two float32 FFTs: torch's pocketfft and DALI's ffts; measured up to 5e-7);
mfcc bit-exact on DALI's mel spectrograms (the DCT and lifter are DALI's float32 arithmetic);
mel_filter_bank bit-exact unnormalized, within 1e-6 of the largest value normalized (a few filter weights
differ from DALI's in the last bit).
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali

LENGTHS = (1001, 1777, 2345)


def run(mod, samples, graph, layout=None):
    """Every output of ``graph(mod, x)`` over ``samples`` fed as one batch, per sample, as arrays, and the
    outputs' layouts."""
    @mod.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, seed=1)
    def pipe():
        x = mod.fn.external_source(source=lambda: samples, batch=True, layout=layout)
        return graph(mod, x)
    p = pipe()
    p.build()
    outs = p.run()
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return [[np.array(out.at(i)) for i in range(len(samples))] for out in outs], [str(o.layout()) for o in outs]


def compare(graph, samples, layout=None, relative=0.0, seed=None):
    """DALI's and fastload's outputs: same dtype, shape and layout; values equal (``relative`` 0; NaN where DALI's
    is NaN) or within ``relative`` times the sample's largest magnitude."""
    dali = import_dali()
    (theirs, their_layouts), (mine, my_layouts) = run(dali, samples, graph, layout), run(ours, samples, graph, layout)
    assert their_layouts == my_layouts and len(theirs) == len(mine)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            where = f"seed {seed}, output {k}, sample {i}"
            assert a.dtype == b.dtype and a.shape == b.shape, (where, a.dtype, b.dtype, a.shape, b.shape)
            if relative == 0:
                differ = int(((a != b) & ~(np.isnan(a) & np.isnan(b) if a.dtype.kind == "f" else False)).sum())
                assert differ == 0, f"{where}: {differ} values differ"
            else:
                scale = float(np.abs(a).max(initial=0)) or 1.0
                error = float(np.abs(a.astype(np.float64) - b).max(initial=0)) / scale
                assert error <= relative, f"{where}: {error:.3g} of the largest value"


def signals(seed: int, lengths=LENGTHS, scale=0.3) -> list[np.ndarray]:
    """Quiet noise with a loud noisy tone from a fifth to three quarters of the way (nonsilent_region's
    region), float32."""
    rng = np.random.default_rng(seed)
    out = []
    for n in lengths:
        x = 1e-4 * rng.standard_normal(n)
        start, stop = n // 5, n * 3 // 4
        x[start:stop] += scale * np.sin(np.arange(stop - start) * rng.uniform(0.05, 0.5)) \
            + 0.05 * rng.standard_normal(stop - start)
        out.append(x.astype(np.float32))
    return out


def test_preemphasis_filter_matches_dali(seed):
    """Each border, a per-sample coefficient, int16 and uint8 and float64 inputs, int16 and float64 outputs,
    and a [channels, frames] sample (one signal in memory order): bit-exact."""
    x = signals(seed)
    coefficients = [np.array(c, dtype=np.float32) for c in (0.5, 0.93, 0.999)]

    def graph(mod, x):
        fn, types = mod.fn, mod.types
        coefficient = fn.external_source(source=lambda: coefficients, batch=True)
        return (fn.preemphasis_filter(x), fn.preemphasis_filter(x, border="zero", preemph_coeff=0.9),
                fn.preemphasis_filter(x, border="reflect", preemph_coeff=coefficient),
                fn.preemphasis_filter(x, dtype=types.FLOAT64))
    compare(graph, x, seed=seed)
    integers = [(s * 30000).astype(np.int16) for s in x]
    compare(lambda mod, x: (mod.fn.preemphasis_filter(x, preemph_coeff=0.9),
                            mod.fn.preemphasis_filter(x, dtype=mod.types.INT16),
                            mod.fn.preemphasis_filter(x, dtype=mod.types.UINT8)), integers, seed=seed)
    compare(lambda mod, x: mod.fn.preemphasis_filter(x, border="reflect"),
            [np.abs(s * 900).astype(np.uint8) for s in x], seed=seed)
    compare(lambda mod, x: (mod.fn.preemphasis_filter(x), mod.fn.preemphasis_filter(x, dtype=mod.types.FLOAT64)),
            [s.astype(np.float64) for s in x], seed=seed)
    compare(lambda mod, x: mod.fn.preemphasis_filter(x, preemph_coeff=0.8),
            [np.stack([s, s[::-1]]) for s in x], layout="ct", seed=seed)


@pytest.mark.parametrize("args", [
    dict(nfft=512, window_length=320, window_step=160),
    dict(nfft=100, window_length=77, window_step=33, center_windows=False, power=1, layout="tf"),
    dict(nfft=64, window_length=64, window_step=17, reflect_padding=False),
    dict(window_length=90, window_step=41),  # nfft: window_length
])
def test_spectrogram_matches_dali(seed, args):
    """Centred (reflect-101 or zero padded) and not, power 2 and 1, both layouts: within 1e-6 of the largest
    value (two float32 FFTs)."""
    compare(lambda mod, x: mod.fn.spectrogram(x, **args), signals(seed), relative=1e-6, seed=seed)


def test_spectrogram_window_fn_and_short_signals_match_dali(seed):
    """A given window, and signals shorter than a window (one frame; uncentred, one a little short of it
    still gets one, as C's division truncates toward zero)."""
    window = list(np.random.default_rng(seed).uniform(0, 1, 60).astype(np.float32))
    compare(lambda mod, x: mod.fn.spectrogram(x, nfft=64, window_length=60, window_step=30, window_fn=window),
            signals(seed), relative=1e-6, seed=seed)
    short = [s[:n] for s, n in zip(signals(seed), (1, 50, 60))]
    compare(lambda mod, x: (mod.fn.spectrogram(x, nfft=64, window_length=60, window_step=30),),
            short[:1], relative=1e-6, seed=seed)
    compare(lambda mod, x: mod.fn.spectrogram(x, nfft=64, window_length=60, window_step=30, center_windows=False),
            short[1:], relative=1e-6, seed=seed)


def test_power_spectrum_matches_dali(seed):
    """nfft longer and shorter than the signal and left out (the signal's length), power 1, along axis 0 of
    a [channels, frames] sample, through ops.PowerSpectrum too: within 1e-6 of the largest value."""
    x = signals(seed)
    compare(lambda mod, x: (mod.fn.power_spectrum(x, nfft=64), mod.fn.power_spectrum(x, nfft=3001),
                            mod.fn.power_spectrum(x), mod.fn.power_spectrum(x, nfft=100, power=1)),
            x, relative=1e-6, seed=seed)
    compare(lambda mod, x: (mod.fn.power_spectrum(x, nfft=4, axis=0), mod.ops.PowerSpectrum(nfft=40)(x)),
            [np.stack([s, s[::-1] * 0.5]) for s in x], relative=1e-6, seed=seed)


MEL = [dict(nfilter=20, sample_rate=16000.0),
       dict(nfilter=13, sample_rate=16000.0, freq_low=100.0, freq_high=6000.0, mel_formula="htk", normalize=False),
       dict(nfilter=31, sample_rate=22050.0, freq_high=8000.0),
       dict(nfilter=17, sample_rate=44100.0, freq_low=160.0, normalize=False)]


def _dali_spectrograms(seed, layout="ft"):
    dali = import_dali()
    return run(dali, signals(seed), lambda mod, x: mod.fn.spectrogram(x, nfft=100, window_length=90,
                                                                       window_step=40, layout=layout))[0][0]


@pytest.mark.parametrize("args", MEL)
def test_mel_filter_bank_matches_dali(seed, args):
    """Slaney and HTK, normalized or not, bands inside the spectrum, on DALI's spectrograms ("ft", "tf"):
    unnormalized bit-exact, normalized within 1e-6 of the largest value (a few weights differ from DALI's
    in the last bit); after each side's own spectrogram within 1e-6."""
    tolerance = 1e-6 if args.get("normalize", True) else 0.0
    compare(lambda mod, x: mod.fn.mel_filter_bank(x, **args), _dali_spectrograms(seed), layout="ft",
            relative=tolerance, seed=seed)
    compare(lambda mod, x: mod.fn.mel_filter_bank(x, **args), _dali_spectrograms(seed, "tf"), layout="tf",
            relative=tolerance, seed=seed)
    compare(lambda mod, x: mod.fn.mel_filter_bank(mod.fn.spectrogram(x, nfft=100, window_length=90, window_step=40),
                                                  **args), signals(seed), relative=1e-6, seed=seed)


@pytest.mark.parametrize("args", [dict(), dict(n_mfcc=13, normalize=True, lifter=22.0), dict(dct_type=1, n_mfcc=40),
                                  dict(dct_type=3, normalize=True), dict(dct_type=4, lifter=3.3, n_mfcc=7),
                                  dict(axis=1, n_mfcc=5, dct_type=2)])
def test_mfcc_matches_dali(seed, args):
    """Every DCT type, ortho-normalized or not, liftered or not, along either axis, on DALI's mel
    spectrograms: bit-exact."""
    dali = import_dali()
    mels = run(dali, _dali_spectrograms(seed), lambda mod, x: mod.fn.mel_filter_bank(x, nfilter=24, sample_rate=16000),
               layout="ft")[0][0]
    compare(lambda mod, x: mod.fn.mfcc(x, **args), mels, layout="ft", seed=seed)


def test_to_decibels_matches_dali(seed):
    """The defaults (reference: the largest), a reference, multiplier and cutoff, multiplier 0, on power
    spectrograms and on [2, frames] magnitudes: bit-exact."""
    spectra = _dali_spectrograms(seed)
    compare(lambda mod, x: (mod.fn.to_decibels(x), mod.fn.to_decibels(x, multiplier=20.0, reference=2.0,
                                                                      cutoff_db=-80.0)), spectra, seed=seed)
    compare(lambda mod, x: mod.fn.to_decibels(x, multiplier=float(np.log(10)), reference=1.0,
                                              cutoff_db=float(np.log(1e-20))),
            [np.abs(np.stack([s, s * 1e-3])) for s in signals(seed)], seed=seed)
    compare(lambda mod, x: (mod.fn.to_decibels(x, multiplier=0), mod.fn.to_decibels(x, multiplier=0, cutoff_db=0),
                            mod.fn.to_decibels(x, multiplier=0.0, cutoff_db=20.0, reference=0.5)), spectra, seed=seed)


def test_nonsilent_region_matches_dali(seed):
    """Begin and length (int32 scalars) for the defaults, short windows reset often, a fixed reference
    with no reset, int16 samples, and an all-silent signal: bit-exact."""
    x = signals(seed, (3001, 4777, 6345))

    def graph(mod, x):
        fn = mod.fn
        return (*fn.nonsilent_region(x), *fn.nonsilent_region(x, cutoff_db=-30, window_length=100, reset_interval=500),
                *fn.nonsilent_region(x, cutoff_db=-50, reference_power=0.01, window_length=333, reset_interval=-1))
    compare(graph, x, seed=seed)
    compare(lambda mod, x: tuple(mod.fn.nonsilent_region(x, cutoff_db=-20, window_length=64)),
            [(s * 20000).astype(np.int16) for s in x[:2]] + [np.zeros(999, dtype=np.int16)], seed=seed)


@pytest.mark.parametrize("quality", [50.0, 3.0, 80.0])
def test_audio_resample_matches_dali(seed, quality):
    """Rates up and down (per sample too), equal rates, a scale, an out_length, two channels ([frames, 2]):
    bit-exact, as is the deprecated fn.experimental.audio_resample."""
    x = signals(seed)
    rates = [np.array(r, dtype=np.float32) for r in (11025.0, 22050.0, 16000.0)]

    def graph(mod, x):
        fn = mod.fn
        out_rate = fn.external_source(source=lambda: rates, batch=True)
        return (fn.audio_resample(x, in_rate=16000.0, out_rate=18400.0, quality=quality),
                fn.audio_resample(x, in_rate=44100.0, out_rate=out_rate, quality=quality),
                fn.audio_resample(x, scale=0.5, quality=quality),
                fn.audio_resample(x, out_length=1234, quality=quality),
                fn.audio_resample(x, in_rate=8000.0, out_rate=8000.0, quality=quality))
    compare(graph, x, seed=seed)
    compare(lambda mod, x: (mod.fn.audio_resample(x, scale=1.3, quality=quality),
                            mod.fn.experimental.audio_resample(x, scale=0.7)),
            [np.stack([s, s[::-1] * 0.5], axis=1) for s in x], layout="tc", seed=seed)


def test_audio_resample_converts_signed_integers_as_dali(seed):
    """int8, int16 and int32 in and out (x / max in, round(f * max) out, saturated), float to int16 and int16
    to float: bit-exact; unsigned types are refused."""
    rng = np.random.default_rng(seed)
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        x = [rng.integers(info.min, info.max, n, endpoint=True).astype(dtype) for n in (301, 477)]
        compare(lambda mod, x: (mod.fn.audio_resample(x, scale=1.5),
                                mod.fn.audio_resample(x, scale=0.75, dtype=mod.types.FLOAT)), x, seed=seed)
    compare(lambda mod, x: mod.fn.audio_resample(x, scale=1.5, dtype=mod.types.INT16),
            signals(seed, scale=0.9), seed=seed)
    with pytest.raises(NotImplementedError, match="audio_resample.*unsigned"):
        run(ours, [np.arange(100, dtype=np.uint8)], lambda mod, x: mod.fn.audio_resample(x, scale=2.0))


def _wav(rng, frames: int, channels: int, rate: int, subtype="PCM_16") -> np.ndarray:
    soundfile = pytest.importorskip("soundfile")
    buffer = io.BytesIO()
    soundfile.write(buffer, np.clip(rng.standard_normal((frames, channels)) * 0.3, -1, 1), rate, subtype=subtype,
                    format="WAV")
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def test_decoders_audio_matches_dali(seed):
    """Mono, stereo, 3- and 6-channel WAV (PCM16, and PCM32): FLOAT, INT16, INT32; downmixed (channels
    summed in order: not RPP's lanes); resampled to a rate (a per-sample one too), with and without downmix,
    as INT16 too; and the rates: bit-exact, as are the deprecated fn.audio_decoder and ops.AudioDecoder."""
    rng = np.random.default_rng(seed)
    files = [_wav(rng, 1001, 1, 16000), _wav(rng, 777, 2, 22050), _wav(rng, 1234, 3, 8000, "PCM_32"),
             _wav(rng, 555, 6, 16000)]
    rates = [np.array(r, dtype=np.float32) for r in (12000.0, 22050.0, 9000.0, 44100.0)]

    def graph(mod, x):
        fn, types = mod.fn, mod.types
        rate = fn.external_source(source=lambda: rates, batch=True)
        return (*fn.decoders.audio(x), *fn.decoders.audio(x, dtype=types.INT16),
                *fn.decoders.audio(x, dtype=types.INT32), *fn.decoders.audio(x, downmix=True),
                *fn.decoders.audio(x, downmix=True, dtype=types.INT16),
                *fn.decoders.audio(x, sample_rate=12000.0), *fn.decoders.audio(x, sample_rate=rate, downmix=True,
                                                                              quality=20.0),
                *fn.audio_decoder(x, sample_rate=rate, dtype=types.INT16),
                *mod.ops.AudioDecoder(downmix=True, dtype=types.INT32)(x))
    compare(graph, files, seed=seed)


def test_audio_arguments_refused_by_name():
    """What DALI refuses, or fastload does not run as DALI does, fails naming the operator."""
    x = signals(1)[:1]
    cases = [(lambda mod, x: mod.fn.spectrogram(x, nfft=32, window_length=60), ValueError, "spectrogram"),
             (lambda mod, x: mod.fn.spectrogram(x, power=3), ValueError, "power"),
             (lambda mod, x: mod.fn.power_spectrum(x, power=3), ValueError, "power_spectrum"),
             (lambda mod, x: mod.fn.mfcc(x, dct_type=1, normalize=True), ValueError, "mfcc"),
             (lambda mod, x: mod.fn.audio_resample(x, scale=2.0, out_length=4), ValueError, "audio_resample"),
             (lambda mod, x: mod.fn.audio_resample(x), ValueError, "audio_resample"),
             (lambda mod, x: mod.fn.preemphasis_filter(x, border="wrap"), ValueError, "border"),
             (lambda mod, x: mod.fn.spectrogram(x.gpu()), NotImplementedError, "CPU"),
             (lambda mod, x: mod.fn.to_decibels(x, foo=1), NotImplementedError, "foo"),
             (lambda mod, x: mod.fn.spectrogram(mod.fn.cast(x, dtype=mod.types.INT16)), TypeError, "float32")]
    for graph, error, match in cases:
        with pytest.raises(error, match=match):
            run(ours, x, graph)


def test_audio_arguments_dali_refuses_are_refused_by_name():
    """nfft 0 or negative (less than window_length), a reset_interval that is not a multiple of window_length:
    DALI fails on them (a RuntimeError); fastload names the operator and argument."""
    x = signals(1)[:1]
    cases = [(lambda mod, x: mod.fn.spectrogram(x, nfft=0, window_length=64, window_step=32),
              "fn.spectrogram: window_length 64 is more than nfft 0"),
             (lambda mod, x: mod.fn.spectrogram(x, nfft=-1, window_length=64, window_step=32), "nfft -1"),
             (lambda mod, x: tuple(mod.fn.nonsilent_region(x, window_length=64, reset_interval=100)),
              "fn.nonsilent_region: reset_interval shall be a multiple of window_length; got reset_interval 100")]
    for graph, match in cases:
        with pytest.raises(RuntimeError):
            run(import_dali(), x, graph)
        with pytest.raises(ValueError, match=match):
            run(ours, x, graph)
