"""DALI's ``nvidia.dali.auto_aug.core``: the ``@augmentation`` decorator, ``Augmentation``, ``signed_bin``,
``select`` and ``Policy``, with DALI's behaviour (same parameter tables, same random draws, same errors).

An augmentation is ``op(data, parameter, **extra)``; called with a magnitude bin instead of the parameter,
it looks the parameter up in a table made once: ``mag_to_param(m)`` for each magnitude ``m`` of
``linspace(mag_range[0], mag_range[1], num_magnitude_bins)`` (float32), each followed by its negation when
``randomly_negate`` (the row ``2 * bin + sign``). A per-sample bin or sign (a DataNode) looks its row up per
sample (``_lookup``).

``select`` runs, per sample, the augmentation its index names. DALI splits the batch with nested ``if``
statements on ``index <= mid``; here the same tree is built of the conditionals' ``Select`` nodes, which
evaluate only the chosen branch for a sample (``graph.Graph.run_sample`` works by demand), so an
augmentation a sample does not get costs it nothing -- without converting this module's source.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import torch

from ..conditionals import Select
from ...engine.graph import DataNode, Op, constant
from ..operators import random_uniform
from ..types import DALIDataType
from ..unsupported import refuse

__all__ = ("signed_bin", "augmentation", "select", "Policy", "_Augmentation")

_POSITIONAL = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.POSITIONAL_ONLY)
_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class MissingArgException(Exception):
    def __init__(self, message, augmentation, missing_args):
        super().__init__(message)
        self.augmentation, self.missing_args = augmentation, missing_args


class UnusedArgException(Exception):
    def __init__(self, message, unused_args):
        super().__init__(message)
        self.unused_args = unused_args


def _extra_params(fun, skip_positional: int):
    """``fun``'s parameters past its first ``skip_positional`` positional ones (data and parameter)."""
    params = inspect.signature(fun).parameters.items()
    return [(name, p) for i, (name, p) in enumerate(params) if i >= skip_positional or p.kind not in _POSITIONAL]


def filter_extra_accepted_kwargs(fun, kwargs, skip_positional=0):
    """The ``kwargs`` whose names ``fun`` accepts (DALI passes each augmentation only those)."""
    names = {name for name, p in _extra_params(fun, skip_positional) if p.kind in _NAMED}
    return {name: value for name, value in kwargs.items() if name in names}


def get_missing_kwargs(fun, kwargs, skip_positional=0):
    return [name for name, p in _extra_params(fun, skip_positional)
            if p.default is inspect.Parameter.empty and p.kind in _NAMED and name not in kwargs]


def get_num_positional_args(fun) -> int:
    return sum(1 for p in inspect.signature(fun).parameters.values() if p.kind in _POSITIONAL)


def forbid_unused_kwargs(augmentations, kwargs, call_name):
    used = {name for aug in augmentations for name in filter_extra_accepted_kwargs(aug.op, kwargs, 2)}
    unused = [name for name in kwargs if name not in used]
    if unused:
        subject, verb = ("kwarg", "is") if len(unused) == 1 else ("kwargs", "are")
        raise UnusedArgException(f"The {call_name} got unexpected {subject}. The {subject} `{', '.join(unused)}` "
                                 f"{verb} not used by any of the augmentations.", unused_args=unused)


def _lookup(table, index, device: str = "cpu") -> DataNode:
    """``table[index]`` per sample: a constant row for a plain int, else a node reading the sample's index."""
    if not isinstance(index, DataNode):
        return constant(np.asarray(table)[int(index)], device=device)
    rows = torch.as_tensor(np.asarray(table))
    if rows.dtype == torch.float64:
        rows = rows.float()  # DALI's constants are float32 unless asked

    def run(ctx, op, i):
        return rows[int(torch.as_tensor(i).reshape(-1)[0])]
    return Op("auto_aug.lookup", run, [index], {}, device=device, fusable=False).outputs[0]


class _UndefinedParam:
    """Tells "not given" from None in ``Augmentation.augmentation``."""


class _SignedMagnitudeBin:
    """A magnitude bin (int or per-sample DataNode) with a random sign (0 keeps, 1 negates) per sample, and
    ``2 * bin + sign``, the row of a negated table. Indexing picks one stage of a sequence of them."""

    def __init__(self, magnitude_bin, random_sign, signed_magnitude_idx):
        self._magnitude_bin, self._random_sign = magnitude_bin, random_sign
        self._signed_magnitude_idx = signed_magnitude_idx

    def __getitem__(self, idx: int):
        magnitude_bin = self._magnitude_bin if isinstance(self._magnitude_bin, int) else self._magnitude_bin[idx]
        return type(self)(magnitude_bin, self._random_sign[idx], self._signed_magnitude_idx[idx])

    @classmethod
    def create_from_bin(cls, magnitude_bin, random_sign=None, seed=None, shape=None):
        if not isinstance(magnitude_bin, (int, DataNode)):
            raise Exception(f"The `magnitude_bin` must be an int or _DataNode (output of DALI op or "
                            f"`types.Constant`) representing batch of ints from `[0..num_magnitude_bins-1]` "
                            f"range. Got {magnitude_bin} instead.")
        if random_sign is not None and any(arg is not None for arg in (seed, shape)):
            raise Exception("The `random_sign` cannot be specified together with neither `seed` nor `shape`.")
        if random_sign is None:
            random_sign = random_uniform(values=[0, 1], dtype=DALIDataType.INT32, seed=seed, shape=shape)
        return cls(magnitude_bin, random_sign, 2 * magnitude_bin + random_sign)

    @staticmethod
    def _remap_to_signed_magnitudes(magnitudes):
        """[m0, -m0, m1, -m1, ...]: row ``2 * bin + sign`` of the signed table."""
        return np.array([-magnitudes[i // 2] if i % 2 else magnitudes[i // 2] for i in range(2 * len(magnitudes))])

    @property
    def bin(self):
        return self._magnitude_bin

    @property
    def random_sign(self):
        return self._random_sign

    @property
    def signed_magnitude_idx(self):
        return self._signed_magnitude_idx


def signed_bin(magnitude_bin, random_sign=None, seed=None, shape=None) -> _SignedMagnitudeBin:
    """A magnitude bin with a random sign drawn (``fn.random.uniform(values=[0, 1])``) once, before a
    ``select`` splits the samples among augmentations, or with the ``random_sign`` given."""
    return _SignedMagnitudeBin.create_from_bin(magnitude_bin, random_sign, seed, shape)


class Augmentation:
    """An operation ``op(data, parameter, **extra)`` with its magnitude range and its mapping of a magnitude
    to the parameter (made with ``@augmentation``). See the module docstring."""

    def __init__(self, op, mag_range=None, randomly_negate=None, mag_to_param=None, param_device=None, name=None):
        self._op, self._mag_range, self._randomly_negate = op, mag_range, randomly_negate
        self._mag_to_param, self._param_device, self._name = mag_to_param, param_device, name
        if get_num_positional_args(op) <= 1:
            raise Exception(f"The {op} accepts {get_num_positional_args(op)} positional argument(s), but the "
                            f"functions decorated with `@augmentation` must accept at least two positional "
                            f"arguments: the samples and parameters.\nError in: {self}.")

    def __repr__(self):
        params = [f"{name}={val!r}" for name, val in self._get_config().items() if val is not None]
        return f"Augmentation({', '.join([repr(self.op)] + params)})"

    def __call__(self, data, *, magnitude_bin=None, num_magnitude_bins=None, **kwargs):
        """``op(data, mag_to_param(magnitudes[magnitude_bin] * (-1) ** sign), **accepted kwargs)``."""
        params = self._get_param(magnitude_bin, num_magnitude_bins, self._infer_param_device(data))
        op_kwargs = filter_extra_accepted_kwargs(self.op, kwargs, 2)
        missing = get_missing_kwargs(self.op, kwargs, 2)
        if missing:
            raise MissingArgException(f"The augmentation `{self.name}` requires following named argument(s) which "
                                      f"were not provided to the call: {', '.join(missing)}. Please make sure to "
                                      f"pass the required arguments when calling the augmentation.",
                                      augmentation=self, missing_args=missing)
        return self.op(data, params, **op_kwargs)

    @property
    def op(self):
        return self._op

    @property
    def mag_range(self):
        return self._mag_range

    @property
    def mag_to_param(self):
        return self._mag_to_param or np.array

    @property
    def randomly_negate(self):
        return self._randomly_negate or False

    @property
    def param_device(self):
        return self._param_device or "cpu"

    @property
    def name(self):
        return self._name or self.op.__name__

    def augmentation(self, mag_range=_UndefinedParam, randomly_negate=_UndefinedParam, mag_to_param=_UndefinedParam,
                     param_device=_UndefinedParam, name=_UndefinedParam, augmentation_cls=None):
        """A copy of this augmentation with the settings given changed (the rest kept)."""
        config = self._get_config()
        for key, value in dict(mag_range=mag_range, randomly_negate=randomly_negate, mag_to_param=mag_to_param,
                               param_device=param_device, name=name).items():
            if value is not _UndefinedParam:
                config[key] = value
        return (augmentation_cls or type(self))(self.op, **config)

    def _get_config(self):
        return {"mag_range": self._mag_range, "mag_to_param": self._mag_to_param,
                "randomly_negate": self._randomly_negate, "param_device": self._param_device, "name": self._name}

    def _infer_param_device(self, data):
        if self.param_device != "auto":
            return self.param_device
        return getattr(data, "device", None) or "cpu"

    def _map_mag_to_param(self, magnitude):
        param = self.mag_to_param(magnitude)
        if isinstance(param, DataNode) or (isinstance(param, (list, tuple)) and
                                           any(isinstance(p, DataNode) for p in param)):
            raise Exception(f"The `mag_to_param` callback of `{self.name}` augmentation returned `DataNode`, "
                            f"which is not supported there: it must return a numpy array (or what converts "
                            f"to one), so that all parameters can be computed once.\n\nError in augmentation: "
                            f"{self}.")
        return np.array(param)

    def _map_mags_to_params(self, magnitudes):
        params = [self._map_mag_to_param(m) for m in magnitudes]
        for param, m in zip(params, magnitudes):
            if param.shape != params[0].shape or param.dtype != params[0].dtype:
                raise Exception(f"The `mag_to_param` callback of `{self.name}` augmentation must return the arrays "
                                f"of the same type and shape for different magnitudes. Got param of shape "
                                f"{params[0].shape} and {params[0].dtype} type for magnitude {magnitudes[0]}, but "
                                f"for magnitude {m} the returned array has shape {param.shape} and type "
                                f"{param.dtype}.\n\nError in augmentation: {self}.")
        return np.array(params)

    def _get_magnitudes(self, num_magnitude_bins):
        mag_range = self.mag_range
        if mag_range is None:
            return None
        if isinstance(mag_range, np.ndarray):
            if num_magnitude_bins is not None and len(mag_range) != num_magnitude_bins:
                raise Exception(f"The augmentation `{self.name}` has nd.array of length {len(mag_range)} specified "
                                f"as the `mag_range`. However, the `num_magnitude_bins` passed to the call is "
                                f"{num_magnitude_bins}.")
            return mag_range
        if num_magnitude_bins is None:
            raise Exception(f"The `num_magnitude_bins` argument is missing in the call of the `{self.name}` "
                            f"augmentation. Please specify the `num_magnitude_bins` along with the samples and "
                            f"magnitude_bin.\nError in augmentation: {self}.")
        if not hasattr(mag_range, "__len__") or len(mag_range) != 2:
            raise Exception(f"The `mag_range` must be a tuple of (low, high) ends of magnitude range or nd.array "
                            f"of explicitly defined magnitudes. Got `{self.mag_range}` for augmentation "
                            f"`{self.name}`.")
        lo, hi = mag_range
        return np.linspace(lo, hi, num_magnitude_bins, dtype=np.float32)

    def _get_param(self, magnitude_bin, num_magnitude_bins, param_device):
        magnitudes = self._get_magnitudes(num_magnitude_bins)
        if magnitudes is None:
            return None
        if magnitude_bin is None:
            raise Exception(f"The augmentation `{self.name}` has `mag_range` specified, so when called, it "
                            f"requires `magnitude_bin` parameter to select the magnitude from the `mag_range`."
                            f"\nError in augmentation: {self}.")
        if self.randomly_negate and not isinstance(magnitude_bin, _SignedMagnitudeBin):
            magnitude_bin = signed_bin(magnitude_bin)
            warnings.warn(f"The augmentation `{self.name}` was declared with `random_negate=True`, but unsigned "
                          f"`magnitude_bin` was passed to the augmentation call. The augmentation will randomly "
                          f"negate the magnitudes manually. However, for better performance, if you conditionally "
                          f"split batch between multiple augmentations, it is better to call "
                          f"`signed_magnitude_bin = signed_bin(magnitude_bin)` before the split and pass the signed "
                          f"bins instead.", Warning)
        if self.randomly_negate:
            if isinstance(magnitude_bin.bin, int):
                magnitudes, index = [magnitudes[magnitude_bin.bin]], magnitude_bin.random_sign
            else:
                index = magnitude_bin.signed_magnitude_idx
            table = self._map_mags_to_params(_SignedMagnitudeBin._remap_to_signed_magnitudes(magnitudes))
            return _lookup(table, index, param_device)
        index = magnitude_bin.bin if isinstance(magnitude_bin, _SignedMagnitudeBin) else magnitude_bin
        if isinstance(index, int):
            return constant(self._map_mag_to_param(magnitudes[index]), device=param_device)
        return _lookup(self._map_mags_to_params(magnitudes), index, param_device)


_Augmentation = Augmentation


def augmentation(function=None, *, mag_range=None, randomly_negate=None, mag_to_param=None, param_device=None,
                 name=None, augmentation_cls=None):
    """``@augmentation``: a function ``f(data, parameter, ...)`` of DALI (here fastload) operators as an
    ``Augmentation`` that takes a magnitude bin instead of the parameter (see the module docstring)."""
    def decorator(function):
        return (augmentation_cls or Augmentation)(function, mag_range=mag_range, mag_to_param=mag_to_param,
                                                  randomly_negate=randomly_negate, param_device=param_device,
                                                  name=name)
    if function is None:
        return decorator
    if not callable(function):
        raise Exception(f"The `@augmentation` decorator was used to decorate the object that is not callable: "
                        f"{function}.")
    if isinstance(function, Augmentation):
        raise Exception(f"The `@augmentation` was applied to already decorated Augmentation. Please call "
                        f"`{function.name}.augmentation` method to modify the augmentation setup or apply the "
                        f"decorator to the underlying `{function.name}.op` directly.\nError in augmentation: "
                        f"{function}.")
    return decorator(function)


def select(ops, selected_op_idx, *op_args, **op_kwargs):
    """``ops[selected_op_idx](*op_args, **op_kwargs)`` per sample: DALI's binary split on ``idx <= mid``,
    as ``Select`` nodes (only the chosen augmentation runs for a sample)."""
    def split(lo: int, hi: int):
        if lo == hi:
            return ops[lo](*op_args, **op_kwargs)
        mid = (lo + hi) // 2
        if not isinstance(selected_op_idx, DataNode):
            return split(lo, mid) if selected_op_idx <= mid else split(mid + 1, hi)
        return Select(selected_op_idx <= mid, split(lo, mid), split(mid + 1, hi)).outputs[0]
    return split(0, len(ops) - 1)


class Policy:
    """An AutoAugment policy: sub-policies of (augmentation, probability, magnitude bin) stages; each sample
    gets one sub-policy, chosen uniformly, whose stages each run with their probability."""

    def __init__(self, name, num_magnitude_bins, sub_policies):
        self.name, self.num_magnitude_bins = name, num_magnitude_bins
        if not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
            raise Exception(f"The `num_magnitude_bins` must be a positive integer, got {num_magnitude_bins}.")
        if not isinstance(sub_policies, (list, tuple)):
            raise Exception(f"The `sub_policies` must be a list or tuple of sub policies, got {type(sub_policies)}.")
        for sub_policy in sub_policies:
            if not isinstance(sub_policy, (list, tuple)):
                raise Exception(f"Each sub policy must be a list or tuple, got {sub_policy}.")
            for op_desc in sub_policy:
                self._check_stage(name, op_desc)
        self.sub_policies = _unique_names(sub_policies)

    def _check_stage(self, name, op_desc):
        if not isinstance(op_desc, (list, tuple)) or len(op_desc) != 3:
            raise Exception(f"Each operation in sub policy must be specified as a triple: (augmentation, "
                            f"probability, magnitude). Got {op_desc}.")
        aug, p, mag = op_desc
        if not isinstance(aug, Augmentation):
            raise Exception(f"Each augmentation in sub policies must be an instance of Augmentation. Got `{aug}`. "
                            f"Did you forget to use `@augmentation` decorator?")
        if not isinstance(p, (float, int)) or not 0 <= p <= 1:
            raise Exception(f"Probability of applying the augmentation must be a number from `[0, 1]` range. Got "
                            f"`{p}` for augmentation `{aug.name}`.")
        if p == 0:
            warnings.warn(f"The augmentation `{aug.name}` in policy `{name}` is used with probability 0 in one of "
                          f"the sub-policies.")
        if mag is None:
            if aug.mag_range is not None:
                raise Exception(f"The augmentation `{aug.name}` has `mag_range` specified, so the magnitude bin is "
                                f"required. However, got `None` in the policy `{name}`.")
            return
        if aug.mag_range is None:
            warnings.warn(f"The magnitude bin `{mag}` for augmentation `{aug.name}` in policy `{name}` will be "
                          f"ignored. The augmentation does not accept magnitudes (as it has no `mag_range` "
                          f"specified). You can specify `None` instead of `{mag}` to silence this warning.")
        if not isinstance(mag, int) or not 0 <= mag < self.num_magnitude_bins:
            raise Exception(f"Magnitude of the augmentation must be an integer from `[0, "
                            f"{self.num_magnitude_bins - 1}]` range. Got `{mag}` for augmentation `{aug.name}`.")

    @property
    def augmentations(self):
        augments = sorted({aug for sub in self.sub_policies for aug, _, _ in sub}, key=lambda aug: aug.name)
        return {aug.name: aug for aug in augments}

    def __repr__(self):
        subs = ",\n\t".join(repr([(aug.name, p, mag) for aug, p, mag in sub]) for sub in self.sub_policies)
        augs = ",\n\t".join(f"'{name}': {aug!r}" for name, aug in self.augmentations.items())
        return (f"Policy(name={self.name!r}, num_magnitude_bins={self.num_magnitude_bins!r}, "
                f"sub_policies=[{chr(10) + chr(9) if subs else ''}{subs}], "
                f"augmentations={{{chr(10) + chr(9) if augs else ''}{augs}}})")


def _unique_names(sub_policies):
    """The sub-policies as tuples, distinct augmentations of one name renamed "<i>__<name>" (as DALI does)."""
    every = [aug for sub in sub_policies for aug, _, _ in sub]
    if len({aug.name for aug in every}) == len(set(every)):
        return tuple(tuple(sub) for sub in sub_policies)
    digits = len(str(len(set(every)) - 1))
    renamed = {}
    for aug in every:
        if aug not in renamed:
            renamed[aug] = aug.augmentation(name=f"{str(len(renamed)).zfill(digits)}__{aug.name}")
    return tuple(tuple((renamed[aug], p, mag) for aug, p, mag in sub) for sub in sub_policies)


__getattr__ = refuse(__name__, "nvidia.dali.auto_aug.core")  # any other name: NotImplementedError naming it
