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

import io
import math

import numpy as np
import torch

from ..engine import audio as numerics
from ..engine.graph import DataNode, Op
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
    try:
        out = numerics.preemphasis(audio.reshape(-1), ("zero", "clamp", "reflect")[border], coefficient)
    except ValueError:
        from ...errors import DecodeError
        raise DecodeError(ctx.index, ctx.name, "fn.preemphasis_filter(border=REFLECT) of one sample: RPP reads "
                                               "the value after it, which is not the audio's") from None
    return out.reshape(audio.shape)


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
    frames, bins = max(0, numerics.window_count(meta(node).audio.dims[0] - offset, step)), nfft // 2 + 1
    dims = (bins, frames) if layout == 5 else (frames, bins)
    return _new("spectrogram", _spectrogram, [node],
                {"nfft": nfft, "length": length, "step": step, "center": bool(center_windows),
                 "reflect": bool(reflect_padding), "power": int(power), "ntf": layout == 6},
                AudioShape(dims, "NFT" if layout == 5 else "NTF"))[0]


def _spectrogram(ctx, op, audio, nfft, length, step, center, reflect, power, ntf):
    """RPP's window count is C's int division (spectrogram.cpp get_num_windows; MIVisionX's Spectrogram.cpp
    ROI), so audio a little shorter than an uncentred window still gets one."""
    out = numerics.stft(audio.reshape(-1).numpy(), nfft, length, step, center, reflect, power)
    return out.contiguous() if ntf else out.t().contiguous()


@operator(output=NOT_IMAGE)
def to_decibels(*inputs, bytes_per_sample_hint=(0,), cutoff_db=-200.0, multiplier=10.0, reference=0.0, seed=-1,
                output_dtype=0):
    """``fn.to_decibels`` (RPP's to_decibels.cpp): multiplier * log10(max(min_ratio, x / reference)), as
    (multiplier * 0.30103f) * log2f(...) with min_ratio = 10^(cutoff / multiplier); reference 0 means the
    sample's largest value. A spectrogram's layout becomes NHW (rocAL)."""
    node = _audio_input("to_decibels", inputs)
    _fp32_only("to_decibels", output_dtype)
    if np.float32(multiplier) == 0:
        raise ValueError(f"{PREFIX}: fn.to_decibels: multiplier 0 (RPP refuses it)")
    scale, ratio = numerics.decibel_scale(multiplier, cutoff_db)
    shape = meta(node).audio
    return _new("to_decibels", _to_decibels, [node],
                {"scale": scale, "min_ratio": ratio, "reference": float(np.float32(reference))},
                AudioShape(shape.dims, "NHW" if shape.layout in ("NFT", "NTF") else shape.layout), same_info=True)[0]


def _to_decibels(ctx, op, x, scale, min_ratio, reference):
    return numerics.to_decibels(x, scale, min_ratio, reference)


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
    weights = numerics.mel_weights(bins, int(nfilter), float(sample_rate), float(freq_low), float(freq_high),
                          int(mel_formula) == 1, bool(normalize))
    return _new("mel_filter_bank", _mel, [node], {"weights": weights}, AudioShape((int(nfilter), frames), "NFT"))[0]


def _mel(ctx, op, spectrum, weights):
    return numerics.apply_mel(spectrum, weights)


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
    cutoff = numerics.nonsilent_threshold(cutoff_db)
    begin, length = _new("nonsilent_region", _nonsilent, [node],
                         {"window": window, "cutoff": cutoff, "reference": float(np.float32(reference_power)),
                          "reset": int(reset_interval)},
                         AudioShape((1,), "NONE", "int32"), num_outputs=2)
    return begin, length


def _nonsilent(ctx, op, audio, window, cutoff, reference, reset):
    begin, length = numerics.nonsilent_region(audio.reshape(-1).numpy(), window, cutoff, reference, reset)
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

_F = np.float32


class ResamplingWindow(numerics.ResamplingWindow):
    """MIVisionX's windowed_sinc (Resample.cpp) for ``quality``, RPP's RpptResamplingWindow: the engine's
    window with its sinc's float32 sine taken from numpy, as this layer has always computed it (RPP calls
    sinf, the engine's default, which differs from numpy's in the last bit of some table entries)."""

    def __init__(self, quality: float):
        super().__init__(quality, sine=np.sin)


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
    count = max(min(out_end, roi), 0)
    out[:count] = numerics.resample(x, window, float(in_rate) / float(out_rate), count)
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
