"""DALI's random distributions and noise: ``fn.random.normal`` (and its deprecated ``fn.normal_distribution``),
``fn.random.beta``, ``fn.random.choice``, ``fn.noise.gaussian``, ``fn.noise.salt_and_pepper``, ``fn.noise.shot``.

DALI's generator (C++'s ``std::mt19937`` streams per sample) cannot be reproduced, so values differ from
DALI's; everything else was matched against real DALI 2.4's CPU operators (tests/compat/test_dali_noise.py):
types, shapes, layouts, saturation, the values left unchanged, the errors. The draws come from the sample's
own stream for the operator (``SampleContext.rng``): the same seed gives the same values, whatever the threads.

- ``random.normal``: ``mean + stddev * z``, float32 by default; ``dtype`` any integer type, float32 or float64
  (float16 and bool refused, as DALI), an integer type rounding halves away from zero and saturating
  (ConvertSat). Shape: ``shape``, or the shape of an input given (not both); a scalar otherwise.
- ``random.beta``: Beta(``alpha``, ``beta``), both positive and finite; float32 or float64 only.
- ``random.choice``: ``a`` an int (values ``0 .. a-1``, in its type: a Python int is int32; a float or bool
  scalar is refused, as DALI's) or an array whose first axis is drawn from (output ``shape + a.shape[1:]``,
  ``a``'s type); ``p`` has one value in [0, 1] per element and sums to 1 within 1e-4; ``a`` may be a per-sample
  input.
- ``shape`` with a negative extent is an error naming the operator (DALI's too).
- ``noise.gaussian``: ``x + n`` with n ~ N(``mean``, ``stddev``) in float32 (float64 for 32- and 64-bit
  integers), rounded halves away from zero and saturated into the input's type: ``stddev=0`` and ``mean=0``
  leave the sample as it is, ``mean=0.5`` adds 1 to every integer value.
- ``noise.salt_and_pepper``: a uniform float32 ``u`` per value (``per_channel``) or per pixel (all its
  channels: the layout's "C", first or last, or the last axis of a sample without layout; another layout is
  an error, as DALI's): ``u < prob * salt_vs_pepper`` gives ``salt_val``, else ``u < prob`` ``pepper_val``,
  else the input (``prob=0`` is the identity). The values default to the type's max and min (1 and -1 for
  float32) and are converted as C++'s ``static_cast`` (300.7 -> 44 in uint8), as DALI's kernel assigns them.
- ``noise.shot``: ``n * factor`` with n ~ Poisson(max(0, x / factor)), saturated into the type (negative
  inputs give 0); ``factor=0`` gives zeros, as DALI's (it multiplies by the factor after skipping the draw).
- Inputs: the integer types and float32 (float16, float64, bool refused, as DALI).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..engine.conversions import convert_sat, static_cast
from ..engine.graph import DataNode, Op, constant
from .operators import _device, _one, _seeded, _shape, check_args
from .spec import operator
from .types import torch_dtype

_INTEGER = (torch.uint8, torch.int8, torch.uint16, torch.int16, torch.uint32, torch.int32, torch.uint64,
            torch.int64)
_NOISE_TYPES = (*_INTEGER, torch.float32)


def generator(ctx, op) -> np.random.Generator:
    """A numpy generator keyed by the sample's stream for ``op`` (for the many values of a noise or shaped
    draw): deterministic in (seed, epoch, sample, operator)."""
    rng = ctx.rng(op)
    return np.random.default_rng([int(rng.random() * (1 << 53)) for _ in range(2)])


def _like(operator_name: str, shape, like: list) -> None:
    """The output shape rule of DALI's random operators: ``shape`` (a constant or per sample) or a shape-like
    input, not both."""
    if like and shape is not None:
        raise ValueError(f"fastload.compat.dali: {operator_name}: argument shape is incompatible with a shape-like "
                         f"input")
    if len(like) > 1:
        raise TypeError(f"fastload.compat.dali: {operator_name} takes at most one input (its shape is the output's)")


def _dims(operator_name: str, shape, like) -> tuple:
    """One sample's output shape: the shape-like input's, or ``shape`` (resolved for the sample; a negative
    extent is an error, as DALI's)."""
    if like:
        return tuple(like[0].shape)
    dims = tuple(int(d) for d in _shape(shape))
    if any(d < 0 for d in dims):
        raise ValueError(f"fastload.compat.dali: {operator_name}: argument shape must not have negative extents, "
                         f"got {list(dims)}")
    return dims


# ---------------------------------------------------------------------------------------- random.normal

_NORMAL_TYPES = (*_INTEGER, torch.float32, torch.float64)


@operator("random.normal", "random.Normal", aliases={"normal_distribution": "NormalDistribution"})
def random_normal(*like, mean=0.0, stddev=1.0, shape=None, dtype=None, device=None, **args):
    """``fn.random.normal``: ``mean + stddev * z`` (per-sample arguments allowed), shaped as ``shape`` or as an
    input; float32 unless ``dtype`` (integer types round and saturate)."""
    name = "fn.random.normal"
    check_args(name, args, set())
    _like(name, shape, list(like))
    target = torch_dtype(dtype) if dtype is not None else torch.float32
    if target not in _NORMAL_TYPES:
        raise TypeError(f"fastload.compat.dali: {name}: dtype {target} is not supported (DALI's: the integer "
                        f"types, float32, float64)")

    def run(ctx, op, *shape_like, mean, stddev, shape):
        out = _dims(name, shape, shape_like)
        z = generator(ctx, op).standard_normal(out)
        values = torch.from_numpy(np.asarray(float(mean) + float(stddev) * z, dtype=np.float64))
        return convert_sat(values, target) if not target.is_floating_point else values.to(target)
    return _one(_seeded(Op("random.normal", run, list(like), {"mean": mean, "stddev": stddev, "shape": shape},
                           device=_device(like, device or "cpu"), fusable=False), args))


# ------------------------------------------------------------------------------------------ random.beta

def _positive(name: str, argument: str, value) -> float:
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"fastload.compat.dali: {name}: {argument} must be a positive finite float, got {value}")
    return value


@operator("random.beta", "random.Beta")
def random_beta(*like, alpha=1.0, beta=1.0, shape=None, dtype=None, device=None, **args):
    """``fn.random.beta``: Beta(``alpha``, ``beta``) values (per-sample arguments allowed), shaped as ``shape``
    or as an input; float32 or float64."""
    name = "fn.random.beta"
    check_args(name, args, set())
    _like(name, shape, list(like))
    target = torch_dtype(dtype) if dtype is not None else torch.float32
    if target not in (torch.float32, torch.float64):
        raise TypeError(f"fastload.compat.dali: {name}: dtype {target} is not supported (DALI's: float32, float64)")

    def run(ctx, op, *shape_like, alpha, beta, shape):
        a, b = _positive(name, "alpha", alpha), _positive(name, "beta", beta)
        values = generator(ctx, op).beta(a, b, _dims(name, shape, shape_like))
        return torch.from_numpy(np.asarray(values, dtype=np.float64)).to(target)
    return _one(_seeded(Op("random.beta", run, list(like), {"alpha": alpha, "beta": beta, "shape": shape},
                           device=_device(like, device or "cpu"), fusable=False), args))


# ---------------------------------------------------------------------------------------- random.choice

def choose(a: torch.Tensor, p, dims: tuple, rng: np.random.Generator) -> torch.Tensor:
    """``dims`` draws from ``a`` (a scalar n: 0..n-1; else ``a``'s first axis) with probabilities ``p``."""
    name = "fn.random.choice"
    if a.dim() == 0 and (a.dtype.is_floating_point or a.dtype == torch.bool):  # DALI: a RuntimeError
        raise RuntimeError(f"fastload.compat.dali: {name}: data type {a.dtype} is not supported for a 0-d input a "
                           f"(the number of values to choose from); supported: the integer types")
    count = int(a.item()) if a.dim() == 0 else a.shape[0]
    if count <= 0:
        raise ValueError(f"fastload.compat.dali: {name}: expected a positive number of elements to sample, "
                         f"got {count}")
    probs = None
    if p is not None:
        probs = np.asarray(p.flatten().tolist() if isinstance(p, torch.Tensor) else p, dtype=np.float64).ravel()
        if probs.size != count:
            raise ValueError(f"fastload.compat.dali: {name}: argument p has {probs.size} values for {count} "
                             f"elements")
        outside = np.flatnonzero(~((probs >= 0) & (probs <= 1)))
        if outside.size:
            raise ValueError(f"fastload.compat.dali: {name}: argument p: probabilities must be in range [0, 1], got "
                             f"{probs[outside[0]]} at index {outside[0]}")
        if abs(probs.sum() - 1.0) >= 1e-4:
            raise ValueError(f"fastload.compat.dali: {name}: the probabilities p must sum to 1, got {probs.sum()}")
        probs = probs / probs.sum()
    picks = torch.from_numpy(np.asarray(rng.choice(count, size=dims, p=probs), dtype=np.int64))
    if a.dim() == 0:
        return picks.to(a.dtype)
    return a[picks.reshape(-1)].reshape(tuple(dims) + tuple(a.shape[1:]))


@operator("random.choice", "random.Choice")
def random_choice(a, *like, p=None, shape=None, device=None, **args):
    """``fn.random.choice``: values drawn from ``a`` (an int n: 0..n-1; a list or array: its elements along
    the first axis; or a per-sample input) with probabilities ``p``, shaped as ``shape`` or as an input."""
    name = "fn.random.choice"
    check_args(name, args, set())
    _like(name, shape, list(like))
    if isinstance(p, (list, tuple)):
        p = tuple(float(v) for v in p)
    if not isinstance(a, DataNode):
        a = constant(a)  # typed as DALI types a constant: a Python int is int32, a float float32

    def run(ctx, op, values, *shape_like, p, shape):
        values = torch.as_tensor(values).cpu()
        return choose(values, p, _dims(name, shape, shape_like), generator(ctx, op))
    inputs = [a, *like]
    return _one(_seeded(Op("random.choice", run, inputs, {"p": p, "shape": shape},
                           device=_device(inputs, device or "cpu"), fusable=False), args))


# ---------------------------------------------------------------------------------------------- noise

def _check_noise_input(name: str, x: torch.Tensor) -> None:
    if x.dtype not in _NOISE_TYPES:
        raise TypeError(f"fastload.compat.dali: {name}: data type {x.dtype} is not supported (DALI's: the integer "
                        f"types and float32)")


def _noise(name: str, impl, arguments: dict):
    """The builder of ``fn.noise.<name>``: ``impl(x, rng, layout, **arguments)`` per sample."""
    full = f"fn.noise.{name}"

    def build(data, *, device=None, **args):
        given = {k: args.pop(k) for k in list(args) if k in arguments}
        check_args(full, args, set())
        layout = data.layout()

        def run(ctx, op, x, **a):
            _check_noise_input(full, x)
            return impl(x.cpu(), generator(ctx, op), layout, **a)
        return _one(_seeded(Op(f"noise.{name}", run, [data], {**arguments, **given},
                               device=_device([data], device), layouts=(layout,), fusable=False), args))
    build.__name__ = name
    return build


def gaussian_noise(x: torch.Tensor, rng: np.random.Generator, layout: str, *, mean, stddev) -> torch.Tensor:
    """``x + N(mean, stddev)``, rounded and saturated into ``x``'s type (module docstring)."""
    wide = not x.dtype.is_floating_point and x.element_size() >= 4
    ftype = np.float64 if wide else np.float32
    n = (np.float64(mean) + np.float64(stddev) * rng.standard_normal(tuple(x.shape))).astype(ftype)
    values = x.numpy().astype(ftype) + n
    return convert_sat(torch.from_numpy(np.asarray(values)), x.dtype)


def _channel_axis(x: torch.Tensor, layout: str) -> int:
    if not layout:
        return x.dim() - 1
    at = layout.find("C")
    if at not in (0, len(layout) - 1) or at < 0:
        raise ValueError(f"fastload.compat.dali: fn.noise.salt_and_pepper with per_channel=False: 'C' must be the "
                         f"first or the last axis of the layout (an empty layout means channels last), got "
                         f"{layout!r}")
    return at


def salt_and_pepper_noise(x: torch.Tensor, rng: np.random.Generator, layout: str, *, prob, salt_vs_pepper,
                          salt_val, pepper_val, per_channel) -> torch.Tensor:
    """Values (or whole pixels) replaced by ``salt_val``/``pepper_val`` (module docstring)."""
    name = "fn.noise.salt_and_pepper"
    prob, ratio = np.float32(prob), np.float32(salt_vs_pepper)
    if not 0 <= prob <= 1:
        raise ValueError(f"fastload.compat.dali: {name}: prob must be within [0, 1], got {prob}")
    if not 0 <= ratio <= 1:
        raise ValueError(f"fastload.compat.dali: {name}: salt_vs_pepper must be within [0, 1], got {ratio}")
    info = torch.finfo(x.dtype) if x.dtype.is_floating_point else torch.iinfo(x.dtype)
    salt = static_cast(salt_val, x.dtype) if salt_val is not None else (1.0 if x.dtype.is_floating_point
                                                                          else info.max)
    pepper = static_cast(pepper_val, x.dtype) if pepper_val is not None else (-1.0 if x.dtype.is_floating_point
                                                                                else info.min)
    shape = list(x.shape)
    if not per_channel and x.dim():
        shape[_channel_axis(x, layout)] = 1
    u = rng.random(tuple(shape), dtype=np.float32)
    salt_prob = np.float32(prob * ratio)
    out = x.numpy().copy()
    noisy = np.broadcast_to(u < prob, out.shape)
    salty = np.broadcast_to(u < salt_prob, out.shape)
    out[noisy & salty] = salt
    out[noisy & ~salty] = pepper
    return torch.from_numpy(out)


def shot_noise(x: torch.Tensor, rng: np.random.Generator, layout: str, *, factor) -> torch.Tensor:
    """``Poisson(max(0, x / factor)) * factor``, saturated into ``x``'s type (module docstring)."""
    factor = np.float32(factor)
    if factor == 0:
        return torch.zeros_like(x)
    lam = np.maximum(np.float32(0), x.numpy().astype(np.float32) * (np.float32(1) / factor))
    n = rng.poisson(lam.astype(np.float64)).astype(np.float32)
    return convert_sat(torch.from_numpy(np.asarray(n * factor, dtype=np.float32)), x.dtype)


gaussian = operator("noise.gaussian", "noise.Gaussian")(
    _noise("gaussian", gaussian_noise, {"mean": 0.0, "stddev": 1.0}))
gaussian.__doc__ = "``fn.noise.gaussian``: additive normal noise (``mean``, ``stddev``, per sample allowed)."
salt_and_pepper = operator("noise.salt_and_pepper", "noise.SaltAndPepper")(
    _noise("salt_and_pepper", salt_and_pepper_noise, {"prob": 0.05, "salt_vs_pepper": 0.5, "salt_val": None,
                                                      "pepper_val": None, "per_channel": False}))
salt_and_pepper.__doc__ = ("``fn.noise.salt_and_pepper``: values or pixels set to ``salt_val``/``pepper_val`` "
                           "with probability ``prob`` (``salt_vs_pepper`` of them salt).")
shot = operator("noise.shot", "noise.Shot")(_noise("shot", shot_noise, {"factor": 20.0}))
shot.__doc__ = "``fn.noise.shot``: Poisson (photon) noise with ``factor`` (per sample allowed)."
