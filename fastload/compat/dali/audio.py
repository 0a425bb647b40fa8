"""DALI's audio operators: ``fn.decoders.audio``, ``fn.preemphasis_filter``, ``fn.spectrogram``,
``fn.power_spectrum``, ``fn.mel_filter_bank``, ``fn.mfcc``, ``fn.to_decibels``, ``fn.nonsilent_region`` and
``fn.audio_resample``, on the CPU.

Each was matched against real DALI 2.4's CPU operator (tests/compat/test_dali_audio.py); the rules below
are the ones measured there. The numerics rocAL's layer computes too (RPP ports DALI's audio kernels) are
``engine.audio``'s.

- ``decoders.audio``: libsndfile's samples (``soundfile`` is the same library): [frames, channels] of
  FLOAT (PCM / 32768 for 16 bits), INT16 or INT32 as libsndfile reads them, and the file's rate as a float
  scalar. ``downmix`` sums x[:, c] * float32(1 / C) in channel order to [frames]; ``sample_rate`` resamples
  as ``audio_resample`` does; where either happens to an INT16/INT32 output, it happens to the floats, which
  are then converted as below. Bit-exact.
- ``preemphasis_filter``: y[t] = x[t] - c * x[t-1] over the sample's values in memory order (a 2-D sample
  is one signal, channels interleaved), the value before the first by ``border``; computed in float (double
  for a double input) and converted to ``dtype`` rounding halves away from zero, saturated. Bit-exact.
- ``spectrogram``: of a 1-D float signal, Hann window 0.5 (1 - cos(2 pi (t + 0.5) / N)) or ``window_fn``,
  ``nfft`` (default ``window_length``), (L / step) + 1 windows centred, else (L - length) / step + 1
  (C's division), reflect-101 (``reflect_padding``) or zero padding where a centred window crosses an
  edge, zeros past the end of an uncentred one whatever ``reflect_padding`` says; |X|^2 or |X|.
  ``power_spectrum``: |rfft|^power along ``axis`` of the input cut or zero-padded to ``nfft`` (default: its
  length). Float32 FFTs (torch's, DALI's
  ffts): within 1e-6 of the sample's largest value (measured 5e-7).
- ``mel_filter_bank``: DALI's triangular filters (``mel_weights``: mel scales in float32 with logf/expf,
  bins from ceil(freq_low / step) to floor(freq_high / step)), summed bin by bin in float32, along the 'f'
  axis of the layout (no layout: the second last). Bit-exact unnormalized; normalized, a few weights differ
  from DALI's in the last bit (within 1e-6 of the largest value). rocAL's filters (``engine.audio``, RPP's
  port) round differently, so the two layers keep their own.
- ``mfcc``: DCT types 1-4 (DALI's cosine tables, double rounded to float, ``normalize`` ortho), summed in
  order along ``axis`` in float32; ``lifter`` scales coefficient i by 1 + (L / 2) sinf(pi (i + 1) / L).
- ``to_decibels``: (multiplier * 0.30103f) * log2f(max(10^(cutoff / multiplier), x / reference)),
  reference 0 being the sample's largest value; ``multiplier=0`` gives zeros (NaN where cutoff / 0 is NaN or
  +inf), as DALI's. Bit-exact.
- ``nonsilent_region``: DALI's moving mean square (float32, recomputed every ``reset_interval``) and the
  first and last positions >= reference * 10^(cutoff / 10), the begin moved back by window - 1: two int32
  scalars (begin, length), (0, 0) when silent; ``reset_interval`` a multiple of ``window_length`` (or -1), and
  ``nfft`` of the spectrogram at least ``window_length``, as DALI requires. Bit-exact.
- ``audio_resample``: DALI's windowed-sinc resampler (``engine.audio.resample``; several channels summed
  tap by tap), out length ceil(n * out_rate / in_rate) (``scale``: out_rate = scale, in_rate = 1;
  ``out_length``: the lengths as the rates); signed integer inputs enter as x * float32(1 / max) and leave
  as round(f * max), saturated. Bit-exact.

Refused by name: GPU inputs or ``device="gpu"`` (DALI's GPU kernels round their FFTs and sums otherwise),
unsigned integer types in ``audio_resample`` (DALI's conversion there was not matched), non-float inputs
where DALI refuses them too.
"""

from __future__ import annotations

import functools
import io
import math

import numpy as np
import torch

from ..engine import audio as numerics
from ..engine.conversions import convert_sat
from ..engine.graph import Op
from ..float32 import expf, libm_float
from .operators import _one, check_args
from .spec import operator
from .types import torch_dtype

PREFIX = "fastload.compat.dali"
_F = np.float32


def _cpu(operator: str, inputs, device) -> str:
    if device not in (None, "cpu") or any(getattr(x, "device", "cpu") != "cpu" for x in inputs):
        raise NotImplementedError(f"{PREFIX}: fn.{operator} runs on the CPU here (device='cpu', CPU inputs): "
                                  f"DALI's GPU kernel rounds its FFTs and sums otherwise")
    return "cpu"


def _float_input(operator: str, x: torch.Tensor, dims: tuple[int, ...] | None = None) -> torch.Tensor:
    if x.dtype != torch.float32:
        raise TypeError(f"{PREFIX}: fn.{operator} takes float32 input (as DALI), not {x.dtype}")
    if dims is not None and x.dim() not in dims:
        raise ValueError(f"{PREFIX}: fn.{operator} takes {' or '.join(map(str, dims))}-D samples, not "
                         f"{x.dim()}-D")
    return x


def _new(name: str, impl, inputs, settings: dict, layouts: tuple[str, ...], device=None, num_outputs: int = 1):
    return _one(Op(name, impl, inputs, settings, device=_cpu(name, inputs, device), num_outputs=num_outputs,
                   layouts=layouts, fusable=False))


# ------------------------------------------------------------------------------------------- preemphasis

@operator("preemphasis_filter", "PreemphasisFilter")
def preemphasis_filter(data, *, preemph_coeff=0.97, border="clamp", dtype=None, device=None, **args):
    """``fn.preemphasis_filter``: y[t] = x[t] - preemph_coeff * x[t-1] (per sample allowed), the value before
    the first by ``border`` ("zero", "clamp": x[0], "reflect": x[1]), as ``dtype`` (default FLOAT)."""
    check_args("fn.preemphasis_filter", args, set())
    if border not in ("zero", "clamp", "reflect"):
        raise ValueError(f"{PREFIX}: fn.preemphasis_filter: border {border!r} (zero, clamp or reflect)")
    target = torch_dtype(dtype) if dtype is not None else torch.float32

    def run(ctx, op, x, preemph_coeff):
        flat = x.reshape(-1)
        flat = flat.double() if flat.dtype == torch.float64 else flat.float()
        try:
            out = numerics.preemphasis(flat, border, float(_F(preemph_coeff)))
        except ValueError:
            raise ValueError(f"{PREFIX}: fn.preemphasis_filter(border='reflect') of a one-value sample") from None
        return convert_sat(out, target).reshape(x.shape)
    return _new("preemphasis_filter", run, [data], {"preemph_coeff": preemph_coeff}, (data.layout(),), device)


# ----------------------------------------------------------------------------------------------- spectra

@operator("spectrogram", "Spectrogram")
def spectrogram(data, *, nfft=None, window_length=512, window_step=256, window_fn=None, power=2,
                center_windows=True, reflect_padding=True, layout="ft", device=None, **args):
    """``fn.spectrogram`` of 1-D float signals: [nfft // 2 + 1, windows] ("ft") or its transpose ("tf")."""
    check_args("fn.spectrogram", args, set())
    length, step = int(window_length), int(window_step)
    nfft = length if nfft is None else int(nfft)  # an nfft given, 0 or negative too, is checked as DALI does
    if length < 1 or step < 1:
        raise ValueError(f"{PREFIX}: fn.spectrogram: window_length {length} and window_step {step} must be > 0")
    if nfft < length:
        raise ValueError(f"{PREFIX}: fn.spectrogram: window_length {length} is more than nfft {nfft}")
    if int(power) not in (1, 2):
        raise ValueError(f"{PREFIX}: fn.spectrogram: power {power} (1: magnitude, 2: power)")
    layout = str(layout)
    if layout not in ("ft", "tf"):
        raise ValueError(f"{PREFIX}: fn.spectrogram: layout {layout!r} ('ft' or 'tf')")
    window = None
    if window_fn is not None and len(window_fn):
        window = torch.tensor([float(_F(v)) for v in window_fn], dtype=torch.float32)
        if window.numel() != length:
            raise ValueError(f"{PREFIX}: fn.spectrogram: window_fn has {window.numel()} values, window_length "
                             f"is {length}")
    settings = {"nfft": nfft, "length": length, "step": step, "center": bool(center_windows),
                "reflect": bool(reflect_padding) and bool(center_windows), "power": int(power), "window": window}

    def run(ctx, op, x, nfft, length, step, center, reflect, power, window):
        signal = _float_input("spectrogram", x, (1,)).numpy()
        if numerics.window_count(signal.shape[0] if center else signal.shape[0] - length, step) < 1:
            raise ValueError(f"{PREFIX}: fn.spectrogram: a signal of {signal.shape[0]} values holds no "
                             f"uncentred window of {length}")
        out = numerics.stft(signal, nfft, length, step, center, reflect, power, window)
        return out.t().contiguous() if layout == "ft" else out
    return _new("spectrogram", run, [data], settings, (layout,), device)


@operator("power_spectrum", "PowerSpectrum")
def power_spectrum(data, *, nfft=None, axis=-1, power=2, device=None, **args):
    """``fn.power_spectrum``: |rfft|^power along ``axis`` of the input cut or zero-padded to ``nfft``
    (default: its length there); nfft // 2 + 1 bins."""
    check_args("fn.power_spectrum", args, set())
    if int(power) not in (1, 2):
        raise ValueError(f"{PREFIX}: fn.power_spectrum: power {power} (1: magnitude, 2: power)")

    def run(ctx, op, x, nfft, axis, power):
        x = _float_input("power_spectrum", x)
        dim = axis + x.dim() if axis < 0 else axis
        if not 0 <= dim < x.dim():
            raise ValueError(f"{PREFIX}: fn.power_spectrum: axis {axis} of a {x.dim()}-D sample")
        size = x.shape[dim] if nfft is None or nfft <= 0 else nfft
        shape = list(x.shape)
        shape[dim] = size
        buffer = torch.zeros(shape, dtype=torch.float32)
        keep = min(size, x.shape[dim])
        buffer.narrow(dim, 0, keep).copy_(x.narrow(dim, 0, keep))
        return numerics.spectrum(buffer, power, dim=dim).contiguous()
    return _new("power_spectrum", run, [data],
                {"nfft": None if nfft is None else int(nfft), "axis": int(axis), "power": int(power)},
                (data.layout(),), device)


# ------------------------------------------------------------------------------------------------- mel

def _log(x) -> np.float32:
    """logf: glibc's is correctly rounded, so the double log rounded to float."""
    return _F(math.log(float(_F(x))))


class _Slaney:
    fsp = _F(200.0 / 3.0)
    min_log_hz = _F(1000.0)
    min_log_mel = _F(min_log_hz / fsp)
    step_log = _F(0.068751777)

    def hz_to_mel(self, hz) -> np.float32:
        hz = _F(hz)
        if hz >= self.min_log_hz:
            return _F(self.min_log_mel + _F(_log(_F(hz / self.min_log_hz)) / self.step_log))
        return _F(hz / self.fsp)

    def mel_to_hz(self, mel) -> np.float32:
        mel = _F(mel)
        if mel >= self.min_log_mel:
            return _F(self.min_log_hz * expf(_F(self.step_log * _F(mel - self.min_log_mel))))
        return _F(mel * self.fsp)


class _Htk:
    def hz_to_mel(self, hz) -> np.float32:
        return _F(_F(1127) * _log(_F(_F(1) + _F(_F(hz) / _F(700)))))

    def mel_to_hz(self, mel) -> np.float32:
        return _F(_F(700) * _F(expf(_F(_F(mel) / _F(1127))) - _F(1)))


@functools.lru_cache(maxsize=16)
def mel_weights(bins: int, nfilter: int, sample_rate: float, freq_low: float, freq_high: float, htk: bool,
                normalize: bool) -> torch.Tensor:
    """DALI's mel filters as a [nfilter, bins] matrix, with the rounding measured against its CPU kernel:
    the band edges are mel_low + k * delta (delta in double) rounded to float and taken to Hz in float32;
    a bin at f (float(sample_rate / nfft) * bin) in band k weighs (f1 - f) / (f1 - f0), in double rounded
    to float, for filter k - 1 and 1 minus that for filter k; normalized, each times float(2 / (the filter's
    width in Hz)). Equal to DALI's unnormalized; normalized, a few weights differ in the last bit."""
    scale = _Htk() if htk else _Slaney()
    sample_rate, freq_low = _F(sample_rate), _F(freq_low)
    freq_high = _F(freq_high) if freq_high > 0 else _F(sample_rate / _F(2))
    hz_step = float(_F(sample_rate / _F(2 * (bins - 1))))
    mel_low, mel_high = scale.hz_to_mel(freq_low), scale.hz_to_mel(freq_high)
    delta = (float(mel_high) - float(mel_low)) / (nfilter + 1)
    edges = [scale.mel_to_hz(_F(float(mel_low) + k * delta)) for k in range(nfilter + 1)]
    edges.append(scale.mel_to_hz(mel_high))
    norm = [_F(_F(2) / _F(edges[k + 2] - edges[k])) for k in range(nfilter)]
    weights = np.zeros((nfilter, bins), dtype=np.float32)
    fft_bin = max(int(math.ceil(float(freq_low) / hz_step)), 0)
    end = min(int(math.floor(float(freq_high) / hz_step)), bins - 1)
    for band in range(nfilter + 1):
        f0, f1 = edges[band], edges[band + 1]
        while fft_bin <= end and _F(fft_bin * hz_step) < f1:
            down = _F((float(f1) - float(_F(fft_bin * hz_step))) / (float(f1) - float(f0)))
            up = _F(_F(1) - down)
            if band >= 1:
                weights[band - 1, fft_bin] = _F(down * norm[band - 1]) if normalize else down
            if band < nfilter:
                weights[band, fft_bin] = _F(up * norm[band]) if normalize else up
            fft_bin += 1
    return torch.from_numpy(weights)


def _along(x: torch.Tensor, dim: int, transform) -> torch.Tensor:
    """``transform`` of [size along dim, everything else], put back in place."""
    moved = x.movedim(dim, 0)
    out = transform(moved.reshape(moved.shape[0], -1))
    return out.reshape(out.shape[0], *moved.shape[1:]).movedim(0, dim).contiguous()


@operator("mel_filter_bank", "MelFilterBank")
def mel_filter_bank(data, *, nfilter=128, sample_rate=44100.0, freq_low=0.0, freq_high=0.0, normalize=True,
                    mel_formula="slaney", device=None, **args):
    """``fn.mel_filter_bank`` of a spectrogram: its 'f' axis (by layout; none: the second last) becomes
    ``nfilter`` mel bands."""
    check_args("fn.mel_filter_bank", args, set())
    if mel_formula not in ("slaney", "htk"):
        raise ValueError(f"{PREFIX}: fn.mel_filter_bank: mel_formula {mel_formula!r} (slaney or htk)")
    nyquist = float(_F(sample_rate)) / 2
    if int(nfilter) < 1 or float(sample_rate) <= 0 or not 0 <= float(freq_low) <= nyquist \
            or not 0 <= float(freq_high) <= nyquist:
        raise ValueError(f"{PREFIX}: fn.mel_filter_bank: nfilter {nfilter} must be > 0 and freq_low {freq_low}, "
                         f"freq_high {freq_high} within [0, sample_rate / 2]")
    layout = data.layout()
    if layout and "f" not in layout:
        raise ValueError(f"{PREFIX}: fn.mel_filter_bank: layout {layout!r} has no 'f' axis")
    settings = {"nfilter": int(nfilter), "sample_rate": float(sample_rate), "freq_low": float(freq_low),
                "freq_high": float(freq_high), "htk": mel_formula == "htk", "normalize": bool(normalize)}

    def run(ctx, op, x, nfilter, sample_rate, freq_low, freq_high, htk, normalize):
        x = _float_input("mel_filter_bank", x)
        dim = layout.index("f") if layout else max(0, x.dim() - 2)
        weights = mel_weights(x.shape[dim], nfilter, sample_rate, freq_low, freq_high, htk, normalize)
        return _along(x, dim, lambda rows: numerics.apply_mel(rows, weights))
    return _new("mel_filter_bank", run, [data], settings, (layout,), device)


# -------------------------------------------------------------------------------------------------- mfcc

@functools.lru_cache(maxsize=16)
def dct_table(n: int, ndct: int, dct_type: int, normalize: bool) -> torch.Tensor:
    """DALI's cosine table [ndct, n] (dct_cpu.cc): double formulas stored as float."""
    k = np.arange(ndct, dtype=np.float64)[:, None]
    i = np.arange(n, dtype=np.float64)[None, :]
    if dct_type == 1:
        table = np.cos(math.pi / (n - 1) * k * i)
        table[:, 0] = 0.5
        table[:, -1] = np.where(np.arange(ndct) % 2 == 0, 0.5, -0.5)
    elif dct_type == 2:
        table = np.cos(math.pi / n * (i + 0.5) * k)
        if normalize:
            table = table * np.where(k == 0, 1.0 / math.sqrt(n), math.sqrt(2.0 / n))
    elif dct_type == 3:
        table = np.cos(math.pi / n * i * (k + 0.5))
        if normalize:
            table = table * math.sqrt(2.0 / n)
        table[:, 0] = 1.0 / math.sqrt(n) if normalize else 0.5
    else:
        table = np.cos(math.pi / n * (i + 0.5) * (k + 0.5))
        if normalize:
            table = table * math.sqrt(2.0 / n)
    return torch.from_numpy(table.astype(np.float32))


def _dct(rows: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """out[k] = sum over n of rows[n] * table[k, n], added in order of n in float32."""
    out = torch.zeros(table.shape[0], rows.shape[1], dtype=torch.float32)
    for n in range(rows.shape[0]):
        out = out + table[:, n:n + 1] * rows[n:n + 1]
    return out


def lifter_coefficients(count: int, lifter: float) -> torch.Tensor:
    """1 + (L / 2) * sinf(float(pi) / L * (i + 1)), all in float32 with libm's sinf (DALI's LifterCoeffs)."""
    amplitude, phase = _F(_F(lifter) / _F(2)), _F(_F(math.pi) / _F(lifter))
    sines = libm_float("sin", (phase * np.arange(1, count + 1, dtype=np.float32)).astype(np.float32))
    return torch.from_numpy((_F(1) + amplitude * sines).astype(np.float32))


@operator("mfcc", "MFCC")
def mfcc(data, *, n_mfcc=20, dct_type=2, normalize=False, axis=0, lifter=0.0, device=None, **args):
    """``fn.mfcc``: the DCT of a mel spectrogram along ``axis``, the first ``n_mfcc`` coefficients, liftered
    when ``lifter`` is not 0."""
    check_args("fn.mfcc", args, set())
    dct_type, n_mfcc, axis = int(dct_type), int(n_mfcc), int(axis)
    if dct_type not in (1, 2, 3, 4):
        raise ValueError(f"{PREFIX}: fn.mfcc: dct_type {dct_type} (1, 2, 3 or 4)")
    if n_mfcc < 1 or axis < 0:
        raise ValueError(f"{PREFIX}: fn.mfcc: n_mfcc {n_mfcc} must be > 0 and axis {axis} >= 0")
    if normalize and dct_type == 1:
        raise ValueError(f"{PREFIX}: fn.mfcc: normalize is not supported for dct_type 1 (as in DALI)")
    settings = {"n_mfcc": n_mfcc, "dct_type": dct_type, "normalize": bool(normalize), "axis": axis,
                "lifter": float(_F(lifter))}

    def run(ctx, op, x, n_mfcc, dct_type, normalize, axis, lifter):
        x = _float_input("mfcc", x, (2, 3, 4))
        if axis >= x.dim():
            raise ValueError(f"{PREFIX}: fn.mfcc: axis {axis} of a {x.dim()}-D sample")
        n = x.shape[axis]
        if dct_type == 1 and n < 2:
            raise ValueError(f"{PREFIX}: fn.mfcc: DCT type 1 needs an input length > 1")
        table = dct_table(n, n_mfcc if n_mfcc <= n else n, dct_type, normalize)
        out = _along(x, axis, lambda rows: _dct(rows, table))
        if lifter != 0:
            view = [1] * out.dim()
            view[axis] = out.shape[axis]
            out = out * lifter_coefficients(out.shape[axis], lifter).reshape(view)
        return out
    return _new("mfcc", run, [data], settings, (data.layout(),), device)


# ---------------------------------------------------------------------------------------------- decibels

@operator("to_decibels", "ToDecibels")
def to_decibels(data, *, multiplier=10.0, reference=0.0, cutoff_db=-200.0, device=None, **args):
    """``fn.to_decibels``: multiplier * log10(max(10^(cutoff_db / multiplier), x / reference)); reference 0
    is the sample's largest value."""
    check_args("fn.to_decibels", args, set())
    with np.errstate(divide="ignore", invalid="ignore"):  # multiplier 0: DALI's cutoff / 0, and so zeros
        scale, min_ratio = numerics.decibel_scale(multiplier, cutoff_db)

    def run(ctx, op, x, scale, min_ratio, reference):
        return numerics.to_decibels(_float_input("to_decibels", x), scale, min_ratio, reference)
    return _new("to_decibels", run, [data], {"scale": scale, "min_ratio": min_ratio,
                                             "reference": float(_F(reference))}, (data.layout(),), device)


# -------------------------------------------------------------------------------------------- nonsilence

@operator("nonsilent_region", "NonsilentRegion")
def nonsilent_region(data, *, cutoff_db=-60.0, reference_power=0.0, window_length=2048, reset_interval=8192,
                     device=None, **args):
    """``fn.nonsilent_region`` of 1-D signals: (begin, length), int32 scalars."""
    check_args("fn.nonsilent_region", args, set())
    window, reset = int(window_length), int(reset_interval)
    if window < 1:
        raise ValueError(f"{PREFIX}: fn.nonsilent_region: window_length {window} must be > 0")
    if reset == 0 or reset < -1:
        raise ValueError(f"{PREFIX}: fn.nonsilent_region: reset_interval {reset} (a positive count, or -1: never)")
    if reset != -1 and reset % window:  # DALI: a RuntimeError, "shall be a multiple"
        raise ValueError(f"{PREFIX}: fn.nonsilent_region: reset_interval shall be a multiple of window_length; got "
                         f"reset_interval {reset}, window_length {window}")
    settings = {"window": window, "cutoff": numerics.nonsilent_threshold(cutoff_db),
                "reference": float(_F(reference_power)), "reset": reset}

    def run(ctx, op, x, window, cutoff, reference, reset):
        if x.dim() != 1:
            raise ValueError(f"{PREFIX}: fn.nonsilent_region takes 1-D signals, not {x.dim()}-D")
        begin, length = numerics.nonsilent_region(x.float().numpy(), window, cutoff, reference, reset)
        return torch.tensor(begin, dtype=torch.int32), torch.tensor(length, dtype=torch.int32)
    return _new("nonsilent_region", run, [data], settings, ("", ""), device, num_outputs=2)


# ------------------------------------------------------------------------------------------- resampling

_SIGNED = (torch.int8, torch.int16, torch.int32)


def _to_float(operator: str, x: torch.Tensor) -> np.ndarray:
    """A signal as the resampler reads it: floats as they are, signed integers times float32(1 / max)."""
    if x.dtype == torch.float32:
        return x.numpy()
    if x.dtype in _SIGNED:
        top = torch.iinfo(x.dtype).max
        return x.numpy().astype(np.float32) * _F(1.0 / top)
    raise NotImplementedError(f"{PREFIX}: fn.{operator} of {x.dtype} samples: float32, int8, int16 and int32 "
                              f"are supported (DALI's unsigned conversion is not reproduced)")


def _from_float(operator: str, values: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """DALI's ConvertSatNorm: floats as they are, signed integers round(f * max), halves away from zero,
    saturated."""
    out = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
    if dtype == torch.float32:
        return out
    if dtype in _SIGNED:
        return convert_sat(out * torch.tensor(float(_F(torch.iinfo(dtype).max)), dtype=torch.float32), dtype)
    raise NotImplementedError(f"{PREFIX}: fn.{operator} to {dtype}: float32, int8, int16 and int32 are "
                              f"supported (DALI's unsigned conversion is not reproduced)")


def resample_channels(x: np.ndarray, window: numerics.ResamplingWindow, scale: float, count: int) -> np.ndarray:
    """[frames, channels] resampled as DALI's multi-channel CPU kernel does: the positions of the mono one,
    each channel's taps summed in order (no lanes), the window read at i0 - p, then one more per tap."""
    if x.shape[1] == 1:
        return numerics.resample(x[:, 0], window, scale, count)[:, None]
    total, lobes = x.shape[0], window.lobes
    out = np.zeros((max(count, 0), x.shape[1]), dtype=np.float32)
    padded = np.concatenate([x, np.zeros((2 * lobes + 8, x.shape[1]), dtype=np.float32)])
    for block in range(0, count, numerics.RESAMPLE_BLOCK):
        rounded, position = numerics._block_positions(block, min(block + numerics.RESAMPLE_BLOCK, count) - block,
                                                      scale)
        centre = np.ceil(position).astype(np.int64)
        first = np.maximum(centre - lobes, -rounded)
        last = np.minimum(centre + lobes, total - rounded)
        sums = np.zeros((position.shape[0], x.shape[1]), dtype=np.float32)
        at = (first.astype(np.float32) - position).astype(np.float32)
        for step in range(int(np.maximum(last - first, 0).max(initial=0))):
            live = (first + step < last)[:, None]
            values = padded[np.clip(rounded + first + step, 0, None)]
            sums = np.where(live, (sums + (values * window(at)[:, None]).astype(np.float32)).astype(np.float32), sums)
            at = (at + _F(1)).astype(np.float32)
        out[block:block + position.shape[0]] = sums
    return out


def resample_signal(x: np.ndarray, in_rate: float, out_rate: float, count: int,
                    window: numerics.ResamplingWindow) -> np.ndarray:
    """A 1-D or [frames, channels] float signal resampled to ``count`` frames."""
    scale = in_rate / out_rate
    if x.ndim == 1:
        return numerics.resample(x, window, scale, count)
    return resample_channels(x, window, scale, count)


@functools.lru_cache(maxsize=8)
def _window(quality: float) -> numerics.ResamplingWindow:
    return numerics.ResamplingWindow(quality)


def _quality(operator: str, quality) -> float:
    quality = float(_F(quality))
    if not 0 <= quality <= 100:
        raise ValueError(f"{PREFIX}: fn.{operator}: quality {quality} out of [0, 100]")
    return quality


@operator("audio_resample", "AudioResample", aliases={"experimental.audio_resample": "experimental.AudioResample"})
def audio_resample(data, *, in_rate=None, out_rate=None, scale=None, out_length=None, quality=50.0, dtype=None,
                   device=None, **args):
    """``fn.audio_resample`` of 1-D or [frames, channels] signals, by ``in_rate`` and ``out_rate``, ``scale``
    or ``out_length`` (each per sample allowed), as ``dtype`` (default: the input's)."""
    check_args("fn.audio_resample", args, set())
    if (in_rate is None) != (out_rate is None):
        raise ValueError(f"{PREFIX}: fn.audio_resample: in_rate and out_rate must be given together")
    if (in_rate is not None) + (scale is not None) + (out_length is not None) != 1:
        raise ValueError(f"{PREFIX}: fn.audio_resample takes one of in_rate/out_rate, scale and out_length")
    target = torch_dtype(dtype) if dtype is not None else None
    settings = {"in_rate": in_rate, "out_rate": out_rate, "scale": scale, "out_length": out_length,
                "window": _window(_quality("audio_resample", quality))}

    def run(ctx, op, x, in_rate, out_rate, scale, out_length, window):
        if x.dim() not in (1, 2):
            raise ValueError(f"{PREFIX}: fn.audio_resample takes 1-D or [frames, channels] samples, not "
                             f"{x.dim()}-D")
        frames = x.shape[0]
        if in_rate is not None:
            source, rate = float(_F(in_rate)), float(_F(out_rate))
            if not source > 0 or not rate >= 0:
                raise ValueError(f"{PREFIX}: fn.audio_resample: in_rate {in_rate} must be > 0, out_rate {out_rate} "
                                 f">= 0")
            count = math.ceil(frames * rate / source)
        elif scale is not None:
            source, rate = 1.0, float(_F(scale))
            if not rate >= 0:
                raise ValueError(f"{PREFIX}: fn.audio_resample: scale {scale} must be >= 0")
            count = math.ceil(frames * rate)
        else:
            count = int(out_length)
            if count < 0 or (frames == 0 and count != 0):
                raise ValueError(f"{PREFIX}: fn.audio_resample: out_length {count} from {frames} frames")
            source, rate = float(frames or 1), float(count or 1)
        signal = _to_float("audio_resample", x)
        values = resample_signal(signal, source, rate, count, window) if count else \
            np.zeros((0, *signal.shape[1:]), dtype=np.float32)
        return _from_float("audio_resample", values, target or x.dtype)
    return _new("audio_resample", run, [data], settings, (data.layout(),), device)


# ----------------------------------------------------------------------------------------------- decoder

_DECODED = {torch.float32: "float32", torch.int16: "int16", torch.int32: "int32"}


def _read_audio(data: bytes, dtype: str) -> tuple[np.ndarray, int]:
    """[frames, channels] and the rate, as libsndfile reads them (``soundfile``)."""
    try:
        import soundfile
    except ImportError as error:
        raise ImportError(f"{PREFIX}: fn.decoders.audio reads audio with soundfile (libsndfile, as DALI): pip "
                          f"install 'torch-fastload[audio]'") from error
    samples, rate = soundfile.read(io.BytesIO(data), dtype=dtype, always_2d=True)
    return np.ascontiguousarray(samples), int(rate)


def downmix_channels(samples: np.ndarray) -> np.ndarray:
    """[frames, channels] float to [frames]: x[:, c] * float32(1 / C) summed in channel order."""
    weight = _F(1.0 / samples.shape[1])
    total = np.zeros(samples.shape[0], dtype=np.float32)
    for channel in range(samples.shape[1]):
        total = (total + (samples[:, channel] * weight).astype(np.float32)).astype(np.float32)
    return total


@operator("decoders.audio", "decoders.Audio", aliases={"audio_decoder": "AudioDecoder"})
def decoders_audio(data, *, sample_rate=0.0, downmix=False, dtype=None, quality=50.0, device=None, **args):
    """``fn.decoders.audio``: (samples [frames, channels], or [frames] downmixed, as ``dtype`` (FLOAT, INT16
    or INT32); the rate, a float scalar), resampled to ``sample_rate`` (per sample allowed) when it is > 0."""
    check_args("fn.decoders.audio", args, set())
    target = torch_dtype(dtype) if dtype is not None else torch.float32
    if target not in _DECODED:
        raise ValueError(f"{PREFIX}: fn.decoders.audio: dtype {dtype} (FLOAT, INT16 or INT32, as DALI)")
    settings = {"sample_rate": sample_rate, "downmix": bool(downmix),
                "window": _window(_quality("decoders.audio", quality))}

    def run(ctx, op, encoded, sample_rate, downmix, window):
        from ...errors import DecodeError
        rate = float(_F(sample_rate))
        try:
            samples, file_rate = _read_audio(bytes(encoded.numpy()), "float32")
            mixed, resampled = downmix and samples.shape[1] > 1, rate > 0 and rate != file_rate
            if not (mixed or resampled) and target != torch.float32:
                samples, _ = _read_audio(bytes(encoded.numpy()), _DECODED[target])
        except Exception as error:
            raise DecodeError(ctx.index, ctx.name, f"cannot decode the audio: {error}") from error
        if not (mixed or resampled):
            samples = samples[:, 0] if downmix else samples
            return torch.from_numpy(np.ascontiguousarray(samples)), torch.tensor(float(file_rate), dtype=torch.float32)
        values = downmix_channels(samples) if downmix else samples
        if resampled:
            values = resample_signal(values, float(file_rate), rate, math.ceil(values.shape[0] * rate / file_rate),
                                     window)
        out_rate = rate if rate > 0 else float(file_rate)
        return _from_float("decoders.audio", values, target), torch.tensor(out_rate, dtype=torch.float32)
    return _new("decoders.audio", run, [data], settings, ("", ""), device, num_outputs=2)
