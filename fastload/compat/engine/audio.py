"""Audio numerics both front ends compute: RPP's audio kernels port DALI's CPU operators, and where the two
define the same thing it is computed here once (float32 throughout, in the kernels' order where that
decides the last bit).

* ``preemphasis``: y[0] = x[0] - c * border value, y[t] = x[t] - c * x[t-1] (exact against both).
* ``stft``: windows every ``step`` samples (centred: from -length/2, reflect-101 padding or zeros at the
  edges), times the window, centred in an ``nfft`` buffer, |rfft|^power; DALI's and RPP's Hann window
  0.5 * (1 - cos(2 pi / N * (t + 0.5))) in double, stored as float.
* ``to_decibels``: (multiplier * 0.30103f) * log2f(max(min_ratio, x / reference)), libm's log2f.
* ``mel_weights`` / ``apply_mel``: the triangular filters of RPP's and DALI's mel_filter_bank (float32 mel
  scales), summed bin by bin.
* ``moving_mean_square`` / ``nonsilent_region``: the running sum of squares, recomputed every
  ``reset_interval`` outputs, and the first and last positions at or above the threshold.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ..float32 import libm_float

_F = np.float32


# ------------------------------------------------------------------------------------------ preemphasis

def preemphasis(x: torch.Tensor, border: str, coefficient: float) -> torch.Tensor:
    """One signal (1-D, float32) filtered: ``border`` "zero", "clamp" (x[0]) or "reflect" (x[1]) is the
    value before the first. A reflect border of a one-sample signal raises ValueError (there is no x[1])."""
    out = torch.empty_like(x)
    if x.numel() == 0:
        return out
    if border == "reflect" and x.numel() < 2:
        raise ValueError("a reflect border needs two samples")
    c = torch.tensor(coefficient, dtype=torch.float32)
    edge = {"zero": torch.zeros((), dtype=torch.float32), "clamp": x[0], "reflect": x[1] if x.numel() > 1 else x[0]}
    out[0] = x[0] - c * edge[border]
    out[1:] = x[1:] - c * x[:-1]
    return out


# ------------------------------------------------------------------------------------------------ stft

@functools.lru_cache(maxsize=8)
def hann(length: int) -> torch.Tensor:
    """0.5 * (1 - cos(2 pi / N * (t + 0.5))) in double, stored as float (DALI's CreateWindowHann)."""
    t = np.arange(length, dtype=np.float64)
    return torch.from_numpy((0.5 * (1 - np.cos(2 * np.pi / length * (t + 0.5)))).astype(np.float32))


def reflect101(index: np.ndarray, length: int) -> np.ndarray:
    """Indices mirrored about the first and last sample, which are not repeated."""
    if length < 2:
        return np.full_like(index, length - 1)
    period = 2 * length - 2
    index = np.abs(index) % period
    return np.where(index >= length, period - index, index)


def window_count(span: int, step: int) -> int:
    """C's int division plus one (it truncates toward zero, so a span a little under 0 still gives one)."""
    return int(span / step) + 1


def stft(x: np.ndarray, nfft: int, length: int, step: int, center: bool, reflect: bool, power: int,
         window: torch.Tensor | None = None) -> torch.Tensor:
    """The spectrogram of one float32 signal as [windows, nfft // 2 + 1]: power 2 is |X|^2 (re^2 + im^2),
    1 is |X|."""
    total = x.shape[0]
    windows = max(0, window_count(total if center else total - length, step))
    if windows == 0:
        return torch.zeros(0, nfft // 2 + 1, dtype=torch.float32)
    starts = np.arange(windows) * step - (length // 2 if center else 0)
    index = starts[:, None] + np.arange(length)[None, :]
    if reflect:
        values = x[reflect101(index, total)]
    else:
        inside = (index >= 0) & (index < total)
        values = np.where(inside, x[np.clip(index, 0, max(total - 1, 0))], np.float32(0))
    frames = torch.from_numpy(values.astype(np.float32)) * (hann(length) if window is None else window)
    buffer = torch.zeros(windows, nfft, dtype=torch.float32)
    start = (nfft - length) // 2
    buffer[:, start:start + length] = frames
    return spectrum(buffer, power)


def spectrum(buffer: torch.Tensor, power: int, dim: int = -1) -> torch.Tensor:
    """|rfft(buffer)|^power along ``dim`` in float32."""
    transformed = torch.fft.rfft(buffer, dim=dim)
    if power == 2:
        return transformed.real * transformed.real + transformed.imag * transformed.imag
    return transformed.abs()


# ---------------------------------------------------------------------------------------------- decibels

def decibel_scale(multiplier: float, cutoff_db: float) -> tuple[float, float]:
    """(multiplier * 0.30103f, min_ratio = 10^(cutoff / multiplier), at least the smallest float)."""
    multiplier, cutoff = _F(multiplier), _F(cutoff_db)
    ratio = _F(math.pow(10.0, float(_F(cutoff / multiplier))))
    if ratio == 0:
        ratio = np.nextafter(_F(0), _F(1))
    return float(_F(multiplier * _F(0.30103))), float(ratio)


def to_decibels(x: torch.Tensor, scale: float, min_ratio: float, reference: float) -> torch.Tensor:
    """scale * log2f(max(min_ratio, x / reference)); reference 0 means the sample's largest value."""
    if reference == 0:
        reference = float(x.max()) if x.numel() else 0.0
    inverse = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(reference, dtype=torch.float32) \
        if reference != 0 else torch.tensor(1.0, dtype=torch.float32)
    ratio = torch.maximum(x * inverse, torch.tensor(min_ratio, dtype=torch.float32))
    # libm's log2f, as the kernels call it: torch's vectorized log2 differs from it in the last place on some
    # values (394 of 200,000 against real DALI's to_decibels), and numpy's float32 log2 on a CPU with AVX-512
    # (Intel's SVML)
    logs = torch.from_numpy(libm_float("log2", ratio.detach().cpu().numpy())).to(ratio.device)
    return torch.tensor(scale, dtype=torch.float32) * logs


# --------------------------------------------------------------------------------------------------- mel

_SLANEY_FSP, _MIN_LOG_HZ = _F(66.666667), _F(1000.0)
_MIN_LOG_MEL, _STEP_LOG = _F(1000.0) / _F(66.666667), _F(0.068751777)


def hz_to_mel(hz: float, htk: bool) -> np.float32:
    hz = _F(hz)
    if htk:
        return _F(_F(1127.0) * _F(np.log(_F(_F(1.0) + hz / _F(700.0)))))
    if hz >= _MIN_LOG_HZ:
        return _F(_MIN_LOG_MEL + _F(np.log(_F(hz * _F(0.001)))) * (_F(1.0) / _STEP_LOG))
    return _F(hz * (_F(1.0) / _SLANEY_FSP))


def mel_to_hz(mel: float, htk: bool) -> np.float32:
    mel = _F(mel)
    if htk:
        return _F(_F(700.0) * (_F(np.exp(_F(mel / _F(1127.0)))) - _F(1.0)))
    if mel >= _MIN_LOG_MEL:
        return _F(_F(1000.0) * _F(np.exp(_F(_STEP_LOG * _F(mel - _MIN_LOG_MEL)))))
    return _F(mel * _SLANEY_FSP)


def mel_weights(bins: int, nfilter: int, sample_rate: float, freq_low: float, freq_high: float, htk: bool,
                normalize: bool) -> torch.Tensor:
    """The filters as a [nfilter, bins] matrix: nfilter + 1 mel intervals from freq_low to freq_high (0:
    sample_rate / 2), each FFT bin's weight down its interval's line and 1 - that up the next one's,
    normalized by 2 / (the filter's width in Hz) when asked."""
    sample_rate = _F(sample_rate)
    max_freq = _F(sample_rate / _F(2)) if freq_high == 0 else _F(freq_high)
    min_freq = _F(freq_low)
    mel_low, mel_high = float(hz_to_mel(min_freq, htk)), float(hz_to_mel(max_freq, htk))
    mel_step = (mel_high - mel_low) / (nfilter + 1)
    nfft = (bins - 1) * 2
    hz_step = float(sample_rate) / nfft
    inverse = 1 / hz_step
    bin_start = int(math.ceil(float(min_freq) * inverse))
    bin_end = min(int(math.ceil(float(max_freq) * inverse)), bins)
    norm = np.ones(nfilter, dtype=np.float32)
    down = np.zeros(bins, dtype=np.float32)
    interval_of = np.full(bins, -1)
    fft_bin, mel0, mel1 = bin_start, mel_low, mel_low + mel_step
    frequency = fft_bin * hz_step
    for interval in range(nfilter + 1):
        f0 = float(mel_to_hz(mel0, htk))
        f1 = float(mel_to_hz(mel_high if interval == nfilter else mel1, htk))
        slope = 1 / (f1 - f0)
        if normalize and interval < nfilter:
            norm[interval] = _F(2.0 / (float(mel_to_hz(mel1 + mel_step, htk)) - f0))
        while fft_bin < bin_end and frequency < f1:
            down[fft_bin] = _F((f1 - frequency) * slope)
            interval_of[fft_bin] = interval
            fft_bin += 1
            frequency = fft_bin * hz_step
        mel0, mel1 = mel1, mel1 + mel_step
    weights = np.zeros((nfilter, bins), dtype=np.float32)
    for fft_bin in range(bin_start, bin_end):
        up = interval_of[fft_bin]
        if up < 0:
            continue
        weight_down = down[fft_bin]
        weight_up = _F(_F(1.0) - weight_down)
        if up - 1 >= 0:
            weights[up - 1, fft_bin] = _F(weight_down * norm[up - 1]) if normalize else weight_down
        if up < nfilter:
            weights[up, fft_bin] = _F(weight_up * norm[up]) if normalize else weight_up
    return torch.from_numpy(weights)


def apply_mel(spectrogram: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """[bins, frames] to [nfilter, frames]: bin by bin in ascending order, each filter's row += weight *
    the bin's row, in float32 (a product, then the sum)."""
    out = torch.zeros(weights.shape[0], spectrogram.shape[1], dtype=torch.float32)
    for fft_bin in torch.nonzero(weights.any(dim=0)).flatten().tolist():
        for row in torch.nonzero(weights[:, fft_bin]).flatten().tolist():
            out[row] += weights[row, fft_bin] * spectrogram[fft_bin]
    return out


# ------------------------------------------------------------------------------------------- nonsilence

def moving_mean_square(x: np.ndarray, window: int, reset: int) -> np.ndarray:
    """The moving mean square with its float32 rounding: a running sum of squares (add the new sample's,
    record sum / window, subtract the one leaving), recomputed from the window's samples every ``reset``
    outputs (-1: never); the first window - 1 outputs are over the samples so far. The additions run in
    order as one float32 cumulative sum of the interleaved terms (numpy accumulates in order)."""
    squares = (x * x).astype(np.float32)
    total = squares.shape[0]
    out = np.empty(total, dtype=np.float32)
    factor = np.float32(1.0) / np.float32(window)
    for start in range(0, total, reset if reset > 0 else max(total, 1)):
        end = min(total, start + (reset if reset > 0 else total))
        first = max(start - window + 1, 0)
        initial = np.cumsum(squares[first:start], dtype=np.float32)[-1] if start > first else np.float32(0)
        positions = np.arange(start, end)
        leaving = positions - window + 1
        removed = np.where(leaving >= 0, -squares[np.maximum(leaving, 0)], np.float32(0)).astype(np.float32)
        terms = np.empty(2 * (end - start) + 1, dtype=np.float32)
        terms[0], terms[1::2], terms[2::2] = initial, squares[start:end], removed
        sums = np.cumsum(terms, dtype=np.float32)
        out[start:end] = sums[1::2] * factor
    return out


def nonsilent_threshold(cutoff_db: float) -> float:
    """10^(cutoff_db * 0.1f), the ratio to the reference power a nonsilent sample reaches."""
    return float(_F(math.pow(10.0, float(_F(_F(cutoff_db) * _F(0.1))))))


def nonsilent_region(x: np.ndarray, window: int, cutoff: float, reference: float, reset: int) -> tuple[int, int]:
    """(begin, length) of the region whose moving mean square is at least reference * cutoff (reference 0:
    the largest), the begin moved back by window - 1; (0, 0) when all is silent."""
    mms = moving_mean_square(x, window, reset)
    base = np.float32(mms.max()) if reference == 0 and mms.size else np.float32(reference)
    above = np.flatnonzero(mms >= np.float32(base * np.float32(cutoff)))
    if above.size == 0:
        return 0, 0
    begin, length = int(above[0]), int(above[-1] - above[0] + 1)
    if begin != 0:
        moved = max(begin - (window - 1), 0)
        length, begin = length + begin - moved, moved
    return begin, length


# -------------------------------------------------------------------------------------------- resampling

RESAMPLE_BLOCK = 256  # outputs per block: each block restarts its input position from a double


class ResamplingWindow:
    """The windowed sinc of DALI's resampling.h and RPP's RpptResamplingWindow for ``quality``: lobes =
    round(0.007 q^2 - 0.09 q + 3), a table of lobes * 64 + 1 float sinc(x) * Hann(y) values (one zero before
    them, zeros after: coeffs + 5 entries), read with linear interpolation. ``sine``: the float32 sine of the
    sinc (default libm's sinf, which both call)."""

    def __init__(self, quality: float, sine=None):
        q = float(_F(quality))
        self.lobes = int(math.floor(0.007 * q * q - 0.09 * q + 3 + 0.5))
        coeffs = self.lobes * 64 + 1
        scale = _F(_F(2 * self.lobes) / _F(coeffs - 1))
        scale_env = _F(_F(2.0) / _F(coeffs))
        center = int(_F(coeffs - 1) * _F(0.5))
        self.lookup = np.zeros(coeffs + 5, dtype=np.float32)
        for i in range(coeffs):
            x = _F(_F(i - center) * scale)
            y = _F(_F(i - center) * scale_env)
            xf = _F(float(x) * math.pi)
            if abs(xf) < _F(1e-5):
                sinc = _F(_F(1) - xf * xf * _F(1.0 / 6))
            else:
                sin = _F(sine(xf)) if sine is not None else _F(libm_float("sin", xf))
                sinc = _F(sin / xf)
            hann = 0.5 * (1 + math.cos(float(y) * math.pi))
            self.lookup[i + 1] = _F(float(sinc) * hann)
        self.center, self.scale, self.size = _F(center + 1), _F(_F(1.0) / scale), coeffs + 5

    def __call__(self, x: np.ndarray) -> np.ndarray:
        r = (x * self.scale + self.center).astype(np.float32)
        floor = np.floor(r)
        weight = (r - floor).astype(np.float32)
        index = np.clip(floor.astype(np.int64), 0, self.size - 2)
        low = self.lookup[index]
        return (low + weight * (self.lookup[index + 1] - low)).astype(np.float32)


def _block_positions(block: int, count: int, scale: float) -> tuple[int, np.ndarray]:
    """The block's first input sample (floor of block * scale, in double) and each output's position
    from it: the fraction, then += float32(scale) in order, in float32."""
    raw = block * scale
    rounded = int(math.floor(raw))
    steps = np.full(count, _F(scale), dtype=np.float32)
    steps[0] = _F(raw - rounded)
    return rounded, np.cumsum(steps, dtype=np.float32)


def resample(x: np.ndarray, window: ResamplingWindow, scale: float, count: int) -> np.ndarray:
    """The first ``count`` outputs of mono float32 ``x`` resampled by in_rate / out_rate = ``scale``
    (double): output j at input position p (``_block_positions``) is the sum of x[i] * window(i - p) over
    i in [ceil(p) - lobes, ceil(p) + lobes) within the signal, summed as the SSE kernels do: four lanes over
    the taps in fours, then (l0 + l2) + (l1 + l3), then the rest one by one (bit-exact against DALI's CPU
    operator)."""
    total, lobes = x.shape[0], window.lobes
    out = np.zeros(max(count, 0), dtype=np.float32)
    padded = np.concatenate([x, np.zeros(2 * lobes + 8, dtype=np.float32)])
    for block in range(0, count, RESAMPLE_BLOCK):
        rounded, position = _block_positions(block, min(block + RESAMPLE_BLOCK, count) - block, scale)
        centre = np.ceil(position).astype(np.int64)
        first = np.maximum(centre - lobes, -rounded)
        last = np.minimum(centre + lobes, total - rounded)
        taps = np.maximum(last - first, 0)
        groups = taps // 4
        lanes = np.zeros((position.shape[0], 4), dtype=np.float32)
        x_lane = ((first[:, None] + np.arange(4)).astype(np.float32) - position[:, None]).astype(np.float32)
        for group in range(int(groups.max(initial=0))):
            live = groups > group
            where = rounded + first + 4 * group
            values = padded[np.clip(where[:, None] + np.arange(4), 0, None)]
            product = (values * window(x_lane)).astype(np.float32)
            lanes = np.where(live[:, None], (lanes + product).astype(np.float32), lanes)
            x_lane = (x_lane + _F(4)).astype(np.float32)
        total_sum = ((lanes[:, 0] + lanes[:, 2]).astype(np.float32) + (lanes[:, 1] + lanes[:, 3])).astype(np.float32)
        location = first + 4 * groups
        x_tail = (location.astype(np.float32) - position).astype(np.float32)
        for _ in range(int((taps - 4 * groups).max(initial=0))):
            live = location < last
            value = padded[np.clip(rounded + location, 0, None)]
            total_sum = np.where(live, (total_sum + (value * window(x_tail)).astype(np.float32)).astype(np.float32),
                                 total_sum)
            location = location + 1
            x_tail = (x_tail + _F(1)).astype(np.float32)
        out[block:block + position.shape[0]] = total_sum
    return out
