"""rocAL's audio path: ``fn.decoders.audio`` after ``fn.readers.file``, its operators (preemphasis_filter,
spectrogram, to_decibels, mel_filter_bank, normalize, nonsilent_region, slice, resample, the tensors' ``+``
and ``*``) and the tensors ``ROCALAudioIterator`` returns.

rocAL's rules, from ROCm/rocAL at 0981d5bb (rocAL/source/api/rocal_api_augmentation.cpp and
rocal_api_data_loaders.cpp, rocAL/source/augmentations/audio_augmentations/), the arithmetic of RPP at
f1d37473 (src/modules/tensor/cpu/kernel/) and MIVisionX's glue between them (amd_openvx_extensions/
amd_rpp/source/tensor/):

* The decoder reads ``file_root``'s files: with a ``file_list_path``, the paths of fn.readers.file's
  list in their order (``listed_files``: rocAL's audio loader is given the list and reads its label
  reader's paths); without one, the folder as the image decoders walk it (``list_folder``). Samples are
  libsndfile's floats (``soundfile``, the same library):
  per file [samples, channels] float32, PCM scaled by 1/32768 for 16 bits. The batch buffer holds the
  dataset's longest file (its header's frames), or ``max_decoded_samples`` with USER_GIVEN_SIZE; every
  file has the same channel count (rocAL writes each file at its own stride). ``downmix`` with more than
  one channel averages them as RPP's down_mixing (weights 1/C, summed in channel order).
* Every tensor is [batch, X, Y] float32 with each sample's region (ROI) at its origin; fastload zeroes
  the rest of the buffer (rocAL leaves stale data there). nonsilent_region's outputs and
  ``fn.random.uniform`` are [batch, 1].
* The operators follow RPP's formulas as written (float32, the source's order where it is a loop, no
  FMA), with torch's FFT and reductions for spectrogram and normalize; RPP is built with -Ofast, so a
  real rocAL's last bits may differ where it reassociates sums -- real DALI's CPU operators, which RPP's
  audio kernels port, are the reference in tests, within stated tolerances.

Refused by name, where rocAL fails, reads memory it did not write or gives another result silently: mixed
channel counts, spectrogram of more than one channel or with ``nfft`` missing (rocAL's binding takes an
int) or a ``window_fn`` (rocAL's node then has no window), normalize without ``axes``, over both axes
or with only one of mean and stddev (rocAL drops the given one), mel_filter_bank of a tensor that is not
an NFT spectrogram, a slice past the end of the audio (rocAL's padding policy is inverted and leaves the
rest stale), slice, resample or nonsilent_region of more than one channel, resample after a downmix
(rocAL loses the sample rates there) or past ``resample_hint``, preemphasis of a spectrogram, ``nfft``
<= 0, ``reset_interval`` 0 (rocAL hangs), ``+`` of anything but a [batch, 1] float, normalize's means
in counts rocAL tiles, a decoder's ``file_list_path`` without the reader's list.
"""

from __future__ import annotations

import functools
import io
import math

import numpy as np
import torch

from ..engine.graph import DataNode, Op
from ..float32 import libm_float
from .meta import AudioShape, describe, meta
from .spec import NOT_IMAGE, operator

PREFIX = "fastload.compat.rocal"


class AudioNode(DataNode):
    """A node holding rocAL audio tensors: its ``+`` is fn.tensor_add_tensor_float and ``*`` (by a number)
    fn.tensor_mul_scalar_float, rocAL's only operators on its tensors (rocal_pybind.cpp)."""

    def _binary(self, other, fn, name, reflected=False):
        if name == "add" and not reflected and isinstance(other, DataNode):
            return tensor_add_tensor_float(self, other)
        if name == "mul" and not reflected and isinstance(other, (int, float)):
            return tensor_mul_scalar_float(self, scalar=other)
        raise TypeError(f"{PREFIX}: rocAL's audio tensors take `tensor + tensor` and `tensor * number` only")


def audio_node(node: DataNode, shape: AudioShape) -> AudioNode:
    node.__class__ = AudioNode
    describe(node, audio=shape)
    return node


def _audio_input(operator: str, inputs) -> AudioNode:
    node = inputs[0] if inputs else None
    if not isinstance(node, AudioNode):
        raise NotImplementedError(f"{PREFIX}: fn.{operator} runs on audio tensors only here (fn.decoders.audio's "
                                  f"or an audio operator's output)")
    return node


def _fp32_only(operator: str, dtype) -> None:
    if int(dtype) != 0:
        raise NotImplementedError(f"{PREFIX}: fn.{operator}: rocAL's audio operators give FLOAT only")


def _new(name: str, impl, inputs, args: dict, shape: AudioShape, num_outputs: int = 1, same_info=False):
    """The op's outputs as audio nodes; ``same_info``: rocAL copies the input's TensorInfo, whose sample
    rates (a shared pointer) fn.resample reads, so they go along."""
    op = Op(f"rocal.{name}", impl, inputs, args, num_outputs=num_outputs, fusable=False)
    nodes = [audio_node(node, shape) for node in op.outputs]
    if same_info:
        for node in nodes:
            describe(node, rates=meta(inputs[0]).rates, downmixed=meta(inputs[0]).downmixed)
    return nodes


# ------------------------------------------------------------------------------------------------- decode

def _soundfile():
    try:
        import soundfile
    except ImportError as error:
        raise ImportError(f"{PREFIX}: fn.decoders.audio reads audio with soundfile (libsndfile, as rocAL): pip "
                          f"install 'torch-fastload[audio]'") from error
    return soundfile


class AudioFiles:
    """The decoder's files, read from their headers: ``samples`` [(path, label)], ``rate`` per path, the
    channel count and the longest file's frames."""

    def __init__(self, samples: list[tuple[str, int]]):
        soundfile = _soundfile()
        self.samples, self.rate = samples, {}
        frames, channels = 0, set()
        for path, _ in samples:
            try:
                info = soundfile.info(path)
            except Exception as error:
                raise ValueError(f"{PREFIX}: fn.decoders.audio: {path}: cannot read it as audio: {error}") from None
            if info.frames <= 0 or info.channels <= 0:
                raise ValueError(f"{PREFIX}: fn.decoders.audio: {path} holds no samples")
            self.rate[path] = float(np.float32(info.samplerate))
            frames = max(frames, info.frames)
            channels.add(info.channels)
        if len(channels) != 1:
            raise NotImplementedError(f"{PREFIX}: fn.decoders.audio: the files have {sorted(channels)} channels; "
                                      f"rocAL writes each file at its own channel stride into one buffer, so "
                                      f"give one channel count per dataset")
        self.frames, self.channels = frames, channels.pop()


def decode(ctx, op, data, downmix: bool, max_samples: int):
    """One file as libsndfile's float samples [frames, channels] (rocAL's generic_audio_decoder.cpp reads
    them with sf_readf_float), downmixed as RPP's down_mixing.cpp when asked."""
    from ...errors import DecodeError
    soundfile = _soundfile()
    try:
        samples, _ = soundfile.read(io.BytesIO(bytes(data.numpy())), dtype="float32", always_2d=True)
    except Exception as error:
        raise DecodeError(ctx.index, ctx.name, f"cannot decode the audio: {error}") from error
    if samples.shape[0] > max_samples:
        raise DecodeError(ctx.index, ctx.name, f"{samples.shape[0]} samples, past the decoder's "
                                               f"max_decoded_samples={max_samples} (rocAL would overflow)")
    audio = torch.from_numpy(np.ascontiguousarray(samples))
    return downmix_channels(audio) if downmix and audio.shape[1] > 1 else audio


def downmix_channels(audio: torch.Tensor) -> torch.Tensor:
    """RPP's down_mixing (weights 1/C, not normalized): fewer than 4 channels summed in order from 0;
    4 to 7 as its SSE lanes, ((c0 + c1) + (c2 + c3)) then the rest in order."""
    count = audio.shape[1]
    weight = torch.tensor(1.0 / count, dtype=torch.float32)
    weighted = audio * weight
    if count < 4:
        total = torch.zeros(audio.shape[0], dtype=torch.float32)
        for channel in range(count):
            total = total + weighted[:, channel]
    elif count < 8:
        total = (weighted[:, 0] + weighted[:, 1]) + (weighted[:, 2] + weighted[:, 3])
        for channel in range(4, count):
            total = total + weighted[:, channel]
    else:
        raise NotImplementedError(f"{PREFIX}: fn.decoders.audio(downmix=True) of {count} channels (RPP's 8-lane "
                                  f"sum order is not reproduced)")
    return total.reshape(-1, 1)


# ----------------------------------------------------------------------------------------------- operators

@operator(output=NOT_IMAGE)
def preemphasis_filter(*inputs, border=1, preemph_coeff=0.97, output_dtype=0):
    """``fn.preemphasis_filter``: y[0] = x[0] - c * border value (CLAMP: x[0], REFLECT: x[1], ZERO: 0),
    y[t] = x[t] - c * x[t-1], over the interleaved samples (RPP's pre_emphasis_filter.cpp)."""
    node = _audio_input("preemphasis_filter", inputs)
    _fp32_only("preemphasis_filter", output_dtype)
    if meta(node).audio.layout != "NHW":
        raise NotImplementedError(f"{PREFIX}: fn.preemphasis_filter of a {meta(node).audio.layout} spectrogram: "
                                  f"MIVisionX runs it over the padded buffer's first values, not the sample's")
    border = int(border)
    if border not in (0, 1, 2):
        raise ValueError(f"{PREFIX}: fn.preemphasis_filter: border {border} (ZERO 0, CLAMP 1, REFLECT 2)")
    coefficient = float(np.float32(preemph_coeff))
    return _new("preemphasis_filter", _preemphasis, [node], {"border": border, "coefficient": coefficient},
                meta(node).audio, same_info=True)[0]


def _preemphasis(ctx, op, audio, border, coefficient):
    flat = audio.reshape(-1)
    c = torch.tensor(coefficient, dtype=torch.float32)
    out = torch.empty_like(flat)
    if flat.numel() == 0:
        return audio.clone()
    if border == 2 and flat.numel() < 2:
        from ...errors import DecodeError
        raise DecodeError(ctx.index, ctx.name, "fn.preemphasis_filter(border=REFLECT) of one sample: RPP reads "
                                               "the value after it, which is not the audio's")
    edge = {0: torch.zeros((), dtype=torch.float32), 1: flat[0], 2: flat[1] if flat.numel() > 1 else flat[0]}[border]
    out[0] = flat[0] - c * edge
    out[1:] = flat[1:] - c * flat[:-1]
    return out.reshape(audio.shape)


@functools.lru_cache(maxsize=8)
def _hann(length: int) -> torch.Tensor:
    """RPP's spectrogram window: 0.5 * (1 - cos(2 pi / N * (t + 0.5))) in double, stored as float."""
    t = np.arange(length, dtype=np.float64)
    return torch.from_numpy((0.5 * (1 - np.cos(2 * np.pi / length * (t + 0.5)))).astype(np.float32))


def _reflect101(index: np.ndarray, length: int) -> np.ndarray:
    if length < 2:
        return np.full_like(index, length - 1)
    period = 2 * length - 2
    index = np.abs(index) % period
    return np.where(index >= length, period - index, index)


@operator(output=NOT_IMAGE)
def spectrogram(*inputs, bytes_per_sample_hint=(0,), center_windows=True, layout=5, nfft=None, power=2,
                reflect_padding=True, seed=-1, window_fn=(), window_length=512, window_step=256, output_dtype=0):
    """``fn.spectrogram`` of mono audio (RPP's spectrogram.cpp): Hann windows of ``window_length`` every
    ``window_step`` samples (centred: (L / step) + 1 windows, from -length/2; reflect-101 padding where a
    window crosses an edge, else zeros), centred in an ``nfft`` buffer, |rfft|^power; NFT [bins, frames]
    or NTF [frames, bins] in a buffer of the longest file's frames."""
    import warnings
    node = _audio_input("spectrogram", inputs)
    if nfft is None:
        raise TypeError(f"{PREFIX}: fn.spectrogram: nfft must be given (rocAL's binding converts it to an int; "
                        f"None fails there)")
    if list(window_fn):
        raise NotImplementedError(f"{PREFIX}: fn.spectrogram(window_fn=...): rocAL's node then has no window "
                                  f"(only the default Hann window works)")
    if meta(node).audio.dims[1] != 1:
        raise ValueError(f"{PREFIX}: fn.spectrogram takes mono audio (rocAL: max_shape[1] must be 1); downmix it")
    if int(output_dtype) != 0:
        warnings.warn(f"{PREFIX}: fn.spectrogram gives FLOAT (rocAL forces it)", stacklevel=2)
    if int(power) not in (1, 2):
        warnings.warn(f"{PREFIX}: fn.spectrogram(power={power}): rocAL takes 1 or 2 and uses 2", stacklevel=2)
        power = 2
    layout, nfft, length, step = int(layout), int(nfft), int(window_length), int(window_step)
    if nfft <= 0:
        raise ValueError(f"{PREFIX}: fn.spectrogram(nfft={nfft}): rocAL sizes the output for nfft / 2 + 1 bins "
                         f"while RPP writes window_length / 2 + 1; give nfft >= window_length")
    if layout not in (5, 6):
        raise ValueError(f"{PREFIX}: fn.spectrogram: layout must be NFT or NTF")
    if nfft < length or length < 1 or step < 1:
        raise ValueError(f"{PREFIX}: fn.spectrogram: nfft {nfft} < window_length {length}, or a zero length/step")
    offset = 0 if center_windows else length
    frames, bins = max(0, _windows(meta(node).audio.dims[0] - offset, step)), nfft // 2 + 1
    dims = (bins, frames) if layout == 5 else (frames, bins)
    return _new("spectrogram", _spectrogram, [node],
                {"nfft": nfft, "length": length, "step": step, "center": bool(center_windows),
                 "reflect": bool(reflect_padding), "power": int(power), "ntf": layout == 6},
                AudioShape(dims, "NFT" if layout == 5 else "NTF"))[0]


def _windows(span: int, step: int) -> int:
    """RPP's window count: C's int division, which truncates toward zero (spectrogram.cpp get_num_windows;
    MIVisionX's Spectrogram.cpp ROI), so audio a little shorter than an uncentred window still gets one."""
    return int(span / step) + 1


def _spectrogram(ctx, op, audio, nfft, length, step, center, reflect, power, ntf):
    x = audio.reshape(-1).numpy()
    total = x.shape[0]
    windows = max(0, _windows(total if center else total - length, step))
    if windows == 0:
        empty = torch.zeros(0, nfft // 2 + 1, dtype=torch.float32)
        return empty if ntf else empty.t().contiguous()
    starts = np.arange(windows) * step - (length // 2 if center else 0)
    index = starts[:, None] + np.arange(length)[None, :]
    if reflect:
        values = x[_reflect101(index, total)]
    else:
        inside = (index >= 0) & (index < total)
        values = np.where(inside, x[np.clip(index, 0, max(total - 1, 0))], np.float32(0))
    frames = torch.from_numpy(values.astype(np.float32)) * _hann(length)
    buffer = torch.zeros(windows, nfft, dtype=torch.float32)
    start = (nfft - length) // 2
    buffer[:, start:start + length] = frames
    spectrum = torch.fft.rfft(buffer, dim=1)
    out = spectrum.real * spectrum.real + spectrum.imag * spectrum.imag if power == 2 else spectrum.abs()
    return out.contiguous() if ntf else out.t().contiguous()


@operator(output=NOT_IMAGE)
def to_decibels(*inputs, bytes_per_sample_hint=(0,), cutoff_db=-200.0, multiplier=10.0, reference=0.0, seed=-1,
                output_dtype=0):
    """``fn.to_decibels`` (RPP's to_decibels.cpp): multiplier * log10(max(min_ratio, x / reference)), as
    (multiplier * 0.30103f) * log2f(...) with min_ratio = 10^(cutoff / multiplier); reference 0 means the
    sample's largest value. A spectrogram's layout becomes NHW (rocAL)."""
    node = _audio_input("to_decibels", inputs)
    _fp32_only("to_decibels", output_dtype)
    multiplier, cutoff = np.float32(multiplier), np.float32(cutoff_db)
    if multiplier == 0:
        raise ValueError(f"{PREFIX}: fn.to_decibels: multiplier 0 (RPP refuses it)")
    ratio = np.float32(math.pow(10.0, float(np.float32(cutoff / multiplier))))
    if ratio == 0:
        ratio = np.nextafter(np.float32(0), np.float32(1))
    shape = meta(node).audio
    return _new("to_decibels", _to_decibels, [node],
                {"scale": float(np.float32(multiplier * np.float32(0.30103))), "min_ratio": float(ratio),
                 "reference": float(np.float32(reference))},
                AudioShape(shape.dims, "NHW" if shape.layout in ("NFT", "NTF") else shape.layout), same_info=True)[0]


def _to_decibels(ctx, op, x, scale, min_ratio, reference):
    if reference == 0:
        reference = float(x.max()) if x.numel() else 0.0
    inverse = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(reference, dtype=torch.float32) \
        if reference != 0 else torch.tensor(1.0, dtype=torch.float32)
    ratio = torch.maximum(x * inverse, torch.tensor(min_ratio, dtype=torch.float32))
    # libm's log2f, as RPP calls it: torch's vectorized log2 differs from it in the last place on some values
    # since torch 2.15 (394 of 200,000 against real DALI's to_decibels), and numpy's float32 log2 on a CPU with
    # AVX-512 (Intel's SVML: rocAL's audio unit test failed on an Intel Xeon)
    logs = torch.from_numpy(libm_float("log2", ratio.detach().cpu().numpy())).to(ratio.device)
    return torch.tensor(scale, dtype=torch.float32) * logs


# mel scales as RPP writes them (api/rppdefs.h), in float32
_F = np.float32
_SLANEY_FSP, _MIN_LOG_HZ = _F(66.666667), _F(1000.0)
_MIN_LOG_MEL, _STEP_LOG = _F(1000.0) / _F(66.666667), _F(0.068751777)


def _hz_to_mel(hz: float, htk: bool) -> np.float32:
    hz = _F(hz)
    if htk:
        return _F(_F(1127.0) * _F(np.log(_F(_F(1.0) + hz / _F(700.0)))))
    if hz >= _MIN_LOG_HZ:
        return _F(_MIN_LOG_MEL + _F(np.log(_F(hz * _F(0.001)))) * (_F(1.0) / _STEP_LOG))
    return _F(hz * (_F(1.0) / _SLANEY_FSP))


def _mel_to_hz(mel: float, htk: bool) -> np.float32:
    mel = _F(mel)
    if htk:
        return _F(_F(700.0) * (_F(np.exp(_F(mel / _F(1127.0)))) - _F(1.0)))
    if mel >= _MIN_LOG_MEL:
        return _F(_F(1000.0) * _F(np.exp(_F(_STEP_LOG * _F(mel - _MIN_LOG_MEL)))))
    return _F(mel * _SLANEY_FSP)


def mel_weights(bins: int, nfilter: int, sample_rate: float, freq_low: float, freq_high: float, htk: bool,
                normalize: bool) -> torch.Tensor:
    """RPP's mel_filter_bank.cpp filters as a [nfilter, bins] matrix: nfilter + 1 mel intervals from
    freq_low to freq_high (0: sample_rate / 2), each FFT bin's weight down its interval's line and 1 - that
    up the next one's, normalized by 2 / (the filter's width in Hz) when asked."""
    sample_rate = _F(sample_rate)
    max_freq = _F(sample_rate / _F(2)) if freq_high == 0 else _F(freq_high)
    min_freq = _F(freq_low)
    mel_low, mel_high = float(_hz_to_mel(min_freq, htk)), float(_hz_to_mel(max_freq, htk))
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
        f0 = float(_mel_to_hz(mel0, htk))
        f1 = float(_mel_to_hz(mel_high if interval == nfilter else mel1, htk))
        slope = 1 / (f1 - f0)
        if normalize and interval < nfilter:
            norm[interval] = _F(2.0 / (float(_mel_to_hz(mel1 + mel_step, htk)) - f0))
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


@operator(output=NOT_IMAGE)
def mel_filter_bank(*inputs, bytes_per_sample_hint=(0,), freq_high=0.0, freq_low=0.0, mel_formula=0, nfilter=128,
                    normalize=True, sample_rate=44100.0, seed=-1, output_datatype=0):
    """``fn.mel_filter_bank`` of an NFT spectrogram (``mel_weights``): [nfilter, frames]."""
    node = _audio_input("mel_filter_bank", inputs)
    _fp32_only("mel_filter_bank", output_datatype)
    if meta(node).audio.layout != "NFT":
        raise ValueError(f"{PREFIX}: fn.mel_filter_bank takes an NFT spectrogram (RPP fails silently on "
                         f"{meta(node).audio.layout})")
    bins, frames = meta(node).audio.dims
    weights = mel_weights(bins, int(nfilter), float(sample_rate), float(freq_low), float(freq_high),
                          int(mel_formula) == 1, bool(normalize))
    return _new("mel_filter_bank", _mel, [node], {"weights": weights}, AudioShape((int(nfilter), frames), "NFT"))[0]


def _mel(ctx, op, spectrum, weights):
    """RPP's accumulation: bin by bin in ascending order, each filter's row += weight * the bin's row, in
    float32 (mel_filter_bank.cpp: a product, then the sum)."""
    out = torch.zeros(weights.shape[0], spectrum.shape[1], dtype=torch.float32)
    for fft_bin in torch.nonzero(weights.any(dim=0)).flatten().tolist():
        for row in torch.nonzero(weights[:, fft_bin]).flatten().tolist():
            out[row] += weights[row, fft_bin] * spectrum[fft_bin]
    return out


@operator(output=NOT_IMAGE)
def normalize(*inputs, axes=(), mean=(), stddev=(), scale=1.0, shift=0.0, output_datatype=0):
    """``fn.normalize`` over one axis of a 2-D sample (RPP's normalize.cpp): (x - mean) * scale / std +
    shift with the population std of each row (axes=[1]) or column (axes=[0]), or the given mean and
    stddev (a std of 0 counts as 1; a computed std of 0 gives ``shift``)."""
    node = _audio_input("normalize", inputs)
    _fp32_only("normalize", output_datatype)
    axes = sorted(int(a) for a in axes)
    if axes not in ([0], [1]):
        raise NotImplementedError(f"{PREFIX}: fn.normalize(axes={axes}): rocAL runs one axis, [0] or [1] (with "
                                  f"none its RPP call has no branch; over both it reads padding as data)")
    if bool(list(mean)) != bool(list(stddev)):
        raise NotImplementedError(f"{PREFIX}: fn.normalize with only one of mean and stddev: rocAL then leaves the "
                                  f"given one at 0")
    given = (tuple(float(v) for v in mean), tuple(float(v) for v in stddev)) if list(mean) else None
    if given is not None:
        count = meta(node).audio.dims[1 - axes[0]]
        if len(given[0]) != len(given[1]) or len(given[0]) not in (1, count):
            raise NotImplementedError(f"{PREFIX}: fn.normalize with {len(given[0])} means and {len(given[1])} "
                                      f"stddevs: give one of each, or one per {'bin' if axes[0] == 1 else 'frame'} "
                                      f"({count})")
    return _new("normalize", _normalize, [node],
                {"axis": axes[0], "given": given, "scale": float(np.float32(scale)),
                 "shift": float(np.float32(shift))}, meta(node).audio, same_info=True)[0]


def _normalize(ctx, op, x, axis, given, scale, shift):
    """axis: the dimension reduced (rocAL's axes=[1] reduces each row's frames, per bin)."""
    if given is not None:
        count = x.shape[1 - axis]
        mean = torch.tensor(given[0] * count if len(given[0]) == 1 else given[0], dtype=torch.float32)[:count]
        std = torch.tensor(given[1] * count if len(given[1]) == 1 else given[1], dtype=torch.float32)[:count]
        inverse = torch.where(std == 0, torch.ones_like(std), torch.tensor(scale, dtype=torch.float32) / std)
    else:
        mean = x.mean(dim=axis)
        variance = ((x - mean.unsqueeze(axis)) ** 2).mean(dim=axis)
        root = torch.from_numpy((1 / np.sqrt(variance.double().numpy())).astype(np.float32))
        inverse = torch.where(variance == 0, torch.zeros_like(variance), root * torch.tensor(scale))
    return (x - mean.unsqueeze(axis)) * inverse.unsqueeze(axis) + torch.tensor(shift, dtype=torch.float32)


@operator(output=NOT_IMAGE)
def nonsilent_region(*inputs, cutoff_db=-60, reference_power=0.0, reset_interval=8192, window_length=2048):
    """``fn.nonsilent_region`` (RPP's non_silent_region_detection.cpp): the moving mean square over
    ``window_length`` samples (the first ones over the partial windows), the first and last positions at
    or above reference * 10^(cutoff / 10) (reference 0: the largest), the begin moved back by
    window_length - 1; two [batch, 1] int32 outputs (begin, length), (0, 0) when all is silent."""
    node = _audio_input("nonsilent_region", inputs)
    window = int(window_length)
    if window < 1:
        raise ValueError(f"{PREFIX}: fn.nonsilent_region: window_length {window_length}")
    if meta(node).audio.layout != "NHW" or meta(node).audio.dims[1] != 1:
        raise NotImplementedError(f"{PREFIX}: fn.nonsilent_region of {meta(node).audio.dims[1]}-channel audio or a "
                                  f"spectrogram: rocAL scans the buffer's first frame-count values (interleaved), "
                                  f"not the signal; downmix first")
    if int(reset_interval) == 0 or int(reset_interval) < -1:
        raise ValueError(f"{PREFIX}: fn.nonsilent_region(reset_interval={reset_interval}): RPP never advances "
                         f"with it (rocAL hangs); give a positive interval or -1")
    cutoff = float(np.float32(math.pow(10.0, float(np.float32(np.float32(cutoff_db) * np.float32(0.1))))))
    begin, length = _new("nonsilent_region", _nonsilent, [node],
                         {"window": window, "cutoff": cutoff, "reference": float(np.float32(reference_power)),
                          "reset": int(reset_interval)},
                         AudioShape((1,), "NONE", "int32"), num_outputs=2)
    return begin, length


def moving_mean_square(x: np.ndarray, window: int, reset: int) -> np.ndarray:
    """RPP's moving mean square, with its float32 rounding: a running sum of squares (add the new sample's,
    record sum / window, subtract the one leaving), recomputed from the window's samples every ``reset``
    outputs; the first window - 1 outputs are over the samples so far. The additions run in order as one
    float32 cumulative sum of the interleaved terms (numpy accumulates in order)."""
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


def _nonsilent(ctx, op, audio, window, cutoff, reference, reset):
    mms = moving_mean_square(audio.reshape(-1).numpy(), window, reset)
    base = np.float32(mms.max()) if reference == 0 and mms.size else np.float32(reference)
    above = np.flatnonzero(mms >= np.float32(base * np.float32(cutoff)))
    if above.size == 0:
        begin = length = 0
    else:
        begin, length = int(above[0]), int(above[-1] - above[0] + 1)
        if begin != 0:
            moved = max(begin - (window - 1), 0)
            length, begin = length + begin - moved, moved
    return torch.tensor([begin], dtype=torch.int32), torch.tensor([length], dtype=torch.int32)


@operator(output=NOT_IMAGE)
def slice(*inputs, anchor=(), shape=(), fill_values=(0.0,), out_of_bounds_policy=2, rocal_tensor_output_type=0):
    """``fn.slice`` of mono audio by per-sample ``anchor[0]`` and ``shape[0]`` tensors (nonsilent_region's
    outputs): samples [anchor, anchor + shape). A window past the audio's end is refused (rocAL's padding
    policy is inverted there: PAD copies part and leaves the rest stale, TRIMTOSHAPE and ERROR pad)."""
    node = _audio_input("slice", inputs)
    _fp32_only("slice", rocal_tensor_output_type)
    if meta(node).audio.dims[1] != 1:
        raise NotImplementedError(f"{PREFIX}: fn.slice of {meta(node).audio.dims[1]}-channel audio: rocAL's RPP "
                                  f"call copies nothing for it")
    if not (list(anchor) and list(shape) and isinstance(anchor[0], DataNode) and isinstance(shape[0], DataNode)):
        raise ValueError(f"{PREFIX}: fn.slice takes anchor=[tensor] and shape=[tensor] (per-sample begin and "
                         f"length, as fn.nonsilent_region gives them)")
    return _new("slice", _slice, [node, anchor[0], shape[0]], {}, meta(node).audio)[0]


def _slice(ctx, op, audio, anchor, shape):
    from ...errors import DecodeError
    begin, length = int(anchor.reshape(-1)[0]), int(shape.reshape(-1)[0])
    if begin < 0 or length < 0 or begin + length > audio.shape[0]:
        raise DecodeError(ctx.index, ctx.name, f"fn.slice [{begin}, {begin + length}) passes the audio's "
                                               f"{audio.shape[0]} samples (rocAL's out-of-bounds policy is "
                                               f"inverted there; not reproduced)")
    return audio[begin:begin + length].clone()


@operator(output=NOT_IMAGE)
def tensor_add_tensor_float(*inputs, output_datatype=0):
    """``fn.tensor_add_tensor_float`` (``a + b``): each sample of mono audio plus the second tensor's
    per-sample value (MIVisionX's TensorAddTensor.cpp; it reads more than one channel as planar, so that
    is refused)."""
    node = _audio_input("tensor_add_tensor_float", inputs)
    _fp32_only("tensor_add_tensor_float", output_datatype)
    if len(inputs) != 2:
        raise ValueError(f"{PREFIX}: fn.tensor_add_tensor_float takes two tensors")
    if meta(node).audio.dims[1:] != (1,):
        raise NotImplementedError(f"{PREFIX}: tensor + tensor of {meta(node).audio.dims[1]}-channel audio: "
                                  f"MIVisionX reads it as planar")
    other = meta(inputs[1]).audio
    if other is not None and (other.dims != (1,) or other.dtype != "float32"):
        raise NotImplementedError(f"{PREFIX}: tensor + tensor adds the second tensor's i-th float to sample i "
                                  f"(MIVisionX's TensorAddTensor.cpp): give a [batch, 1] float value such as "
                                  f"fn.random.uniform(...)")
    return _new("tensor_add_tensor_float", lambda ctx, op, x, y: x + y.reshape(-1)[0].float(), list(inputs), {},
                meta(node).audio, same_info=True)[0]


@operator(output=NOT_IMAGE)
def tensor_mul_scalar_float(*inputs, scalar=1.0, output_datatype=0):
    """``fn.tensor_mul_scalar_float`` (``a * number``): every value times float32(scalar)."""
    node = _audio_input("tensor_mul_scalar_float", inputs)
    _fp32_only("tensor_mul_scalar_float", output_datatype)
    factor = torch.tensor(float(np.float32(scalar)), dtype=torch.float32)
    return _new("tensor_mul_scalar_float", lambda ctx, op, x: x * factor, [node], {}, meta(node).audio,
                same_info=True)[0]


# ------------------------------------------------------------------------------------------------ resample

BLOCK = 256  # RPP's resample.cpp works in blocks of this many outputs


class ResamplingWindow:
    """MIVisionX's windowed_sinc (Resample.cpp) for ``quality``: lobes = round(0.007 q^2 - 0.09 q + 3),
    a lookup table of lobes * 64 + 1 sinc * Hann values, read with linear interpolation (RPP's
    RpptResamplingWindow)."""

    def __init__(self, quality: float):
        q = float(np.float32(quality))
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
            sinc = _F(_F(1) - xf * xf * _F(1.0 / 6)) if abs(xf) < _F(1e-5) else _F(_F(np.sin(xf)) / xf)
            hann = 0.5 * (1 + math.cos(float(y) * math.pi))
            self.lookup[i + 1] = _F(float(sinc) * hann)
        # MIVisionX sizes the table coeffs + 5 (lookupSize), and RPP's scalar lookup clamps at its end
        self.center, self.scale, self.size = _F(center + 1), _F(_F(1.0) / scale), coeffs + 5

    def __call__(self, x: np.ndarray) -> np.ndarray:
        r = (x * self.scale + self.center).astype(np.float32)
        floor = np.floor(r)
        weight = (r - floor).astype(np.float32)
        index = np.clip(floor.astype(np.int64), 0, self.size - 2)
        low = self.lookup[index]
        return (low + weight * (self.lookup[index + 1] - low)).astype(np.float32)


@operator(output=NOT_IMAGE)
def resample(*inputs, resample_rate=None, output_datatype=0, resample_hint=-1, quality=50.0):
    """``fn.resample`` of mono audio to each sample's ``resample_rate`` (a per-sample tensor) from its file's
    rate (RPP's resample.cpp, MIVisionX's window): ceil(L * out / in) samples, each the sum of the input
    over 2 * lobes taps weighted by the window. The buffer holds ceil(resample_hint) samples."""
    node = _audio_input("resample", inputs)
    _fp32_only("resample", output_datatype)
    if not isinstance(resample_rate, DataNode):
        raise ValueError(f"{PREFIX}: fn.resample: resample_rate is a per-sample tensor (fn.random.uniform(...) * "
                         f"rate, as rocAL's scripts make it)")
    if float(resample_hint) <= 0:
        raise ValueError(f"{PREFIX}: fn.resample: resample_hint must be > 0 (rocAL's buffer size)")
    if meta(node).audio.dims[1] != 1 or meta(node).downmixed:
        raise NotImplementedError(f"{PREFIX}: fn.resample of more than one channel, or after a downmix (rocAL "
                                  f"has no sample rates there), is not supported")
    rates = meta(node).rates
    if rates is None:
        raise ValueError(f"{PREFIX}: fn.resample takes fn.decoders.audio's output (the files' rates)")
    hint = int(math.ceil(float(np.float32(resample_hint))))
    out = _new("resample", _resample, [node], {"window": ResamplingWindow(float(quality)), "rates": rates,
                                               "hint": hint, "out_rate": resample_rate},
               AudioShape((hint, 1), meta(node).audio.layout))[0]
    return out


def _resample(ctx, op, audio, window, rates, hint, out_rate):
    from ...errors import DecodeError
    x = audio.reshape(-1).numpy()
    total = x.shape[0]
    in_rate, out_rate = _F(rates[ctx.name]), _F(out_rate)
    ratio = _F(out_rate / in_rate) if in_rate != 0 else _F(0)
    roi = int(math.ceil(_F(ratio * _F(total))))
    if roi > hint:
        raise DecodeError(ctx.index, ctx.name, f"resampled to {roi} samples, past resample_hint's {hint} (rocAL "
                                               f"would write past its buffer)")
    if out_rate == in_rate:
        return audio.clone()
    out_end = int(math.ceil(_F(_F(_F(total) * out_rate) / in_rate)))
    out = np.zeros(max(roi, 0), dtype=np.float32)
    scale = float(in_rate) / float(out_rate)
    fscale, lobes = _F(scale), window.lobes
    padded = np.concatenate([x, np.zeros(2 * lobes + 8, dtype=np.float32)])
    for block in range(0, min(out_end, roi), BLOCK):
        count = min(block + BLOCK, out_end) - block
        raw = block * scale
        rounded = int(raw)
        steps = np.full(count, fscale, dtype=np.float32)
        steps[0] = _F(raw - rounded)
        position = np.cumsum(steps, dtype=np.float32)  # inPos += fscale, in float32, in order
        centre = np.ceil(position).astype(np.int64)
        first = np.maximum(centre - lobes, -rounded)
        last = np.minimum(centre + lobes, total - rounded)
        taps = np.maximum(last - first, 0)
        groups = taps // 4
        lanes = np.zeros((count, 4), dtype=np.float32)
        x_lane = ((first.astype(np.float32) - position)[:, None] + np.arange(4, dtype=np.float32)).astype(np.float32)
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
        for step in range(int((taps - 4 * groups).max(initial=0))):
            live = location < last
            value = padded[np.clip(rounded + location, 0, None)]
            total_sum = np.where(live, (total_sum + (value * window(x_tail)).astype(np.float32)).astype(np.float32),
                                 total_sum)
            location = location + 1
            x_tail = (x_tail + _F(1)).astype(np.float32)
        end = min(count, roi - block)
        out[block:block + end] = total_sum[:end]
    return torch.from_numpy(out).reshape(-1, 1)


@operator(output=NOT_IMAGE)
def decoders_audio(*inputs, file_root="", file_list_path="", bytes_per_sample_hint=(0,), shard_id=0, num_shards=1,
                   random_shuffle=False, downmix=False, dtype=0, quality=50.0, sample_rate=0.0, seed=1,
                   stick_to_shard=True, shard_size=-1, last_batch_policy=0, pad_last_batch_repeated=False,
                   decode_size_policy=0, max_decoded_samples=522320, max_decoded_channels=1):
    """``fn.decoders.audio`` after ``fn.readers.file``: ``file_root``'s files (fn.readers.file's list in its
    order with a ``file_list_path``, else the folder as the image decoders walk it), each decoded to
    [samples, channels] float32 (``decode``), downmixed to one channel when asked; labels from the list.
    As in rocAL, ``dtype``, ``quality``, ``sample_rate``, ``seed`` and ``bytes_per_sample_hint`` are not
    read (rocal_api_data_loaders.cpp: no resampling at decode)."""
    from . import ops_readers
    from .definition import defining
    from .types import RocalLastBatchPolicy
    definition = defining()
    reader = inputs[0] if inputs else None
    if not isinstance(reader, ops_readers.FileReader):
        raise NotImplementedError(f"{PREFIX}: fn.decoders.audio reads what fn.readers.file recorded")
    stick_to_shard = ops_readers._sharding("fn.decoders.audio", shard_id, num_shards, pad_last_batch_repeated,
                                           stick_to_shard, shard_size)
    # rocAL's audio loader is given the decoder's list, and then reads the paths of the reader's label
    # reader in their order (file_source_reader.cpp); without a decoder's list it walks the folder
    root = file_root or reader.file_root
    if file_list_path and not reader.file_list:
        raise ValueError(f"{PREFIX}: fn.decoders.audio(file_list_path={file_list_path!r}) after fn.readers.file "
                         f"without a file_list: rocAL then finds no files to size (\"Cannot find size of the "
                         f"audio files\"); give fn.readers.file the list")
    samples = ops_readers.listed_files(root, reader.file_list) if file_list_path else \
        ops_readers.list_folder(root, reader.file_list)
    if not samples:
        raise ValueError(f"{PREFIX}: fn.decoders.audio: no files found in {root!r}")
    files = AudioFiles(samples)
    policy = int(decode_size_policy)
    if policy in (1, 3):  # USER_GIVEN_SIZE(_ORIG): the buffer rocAL is told
        if files.channels != int(max_decoded_channels) and not downmix:
            raise NotImplementedError(f"{PREFIX}: fn.decoders.audio: max_decoded_channels={max_decoded_channels} for "
                                      f"{files.channels}-channel files: rocAL decodes at the file's stride and "
                                      f"copies out at the buffer's, interleaving other samples")
        if files.frames > int(max_decoded_samples) or files.channels > int(max_decoded_channels):
            raise ValueError(f"{PREFIX}: fn.decoders.audio: a file holds {files.frames} samples of "
                             f"{files.channels} channels, past max_decoded_samples/channels (rocAL overflows)")
        dims = (int(max_decoded_samples), int(max_decoded_channels))
    else:
        dims = (files.frames, files.channels)
    data = ops_readers._reading(definition, ops_readers.RocalReaderSpec(
        samples, int(shard_id), int(num_shards), bool(random_shuffle), bool(stick_to_shard),
        RocalLastBatchPolicy(last_batch_policy), pad=bool(pad_last_batch_repeated), name="AudioReader"),
        "decoders.audio")
    mixed = bool(downmix) and dims[1] > 1
    node = _new("decoders.audio", decode, [data], {"downmix": mixed, "max_samples": dims[0]},
                AudioShape((dims[0], 1) if mixed else dims))[0]
    describe(node, rates=files.rate, downmixed=mixed)
    return node
