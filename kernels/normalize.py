"""Batch value conversion: (N, H, W, 3) uint8 -> (N, 3, H, W) in any dtype, as torchvision computes it.

torchvision turns a uint8 pixel x into an output value op by op, each
rounded to the tensor's dtype of the moment: v1's ``ToTensor`` and
``ConvertImageDtype`` divide, ``x.to(float32).div(255)``; v2's
``ToDtype(scale=True)`` multiplies, ``x.to(dtype).mul_(1.0 / 255)`` (the
scalar rounded to float32, the product computed in float32 and rounded to
the dtype); ``Normalize`` is ``(x - mean) / std`` with mean and std as
tensors of the image's dtype. Folding that into one affine map
``x * (1 / (255 std)) - mean / std`` is 1 ulp off in about 40% of values,
enough for a deterministic run's losses to part from torch's within two
steps. So a ``Normalization`` records the ops themselves, and every path
computes exactly them: in torch by the same calls (``Normalization.__call__``,
``normalize_torch``), in C and in the fused kernel by a lookup in
``Normalization.table()``, the 256 levels of each channel computed by those
same calls (a uint8 level has only 256 values, so the table is exact by
construction and cheaper per pixel than two divisions).

``Affine`` is the other kind of map: ``x * scale[c] + shift[c]`` in float32,
rounded once to the dtype, the arithmetic of DALI's and rocAL's normalizing
operators (fastload.compat), which fold their statistics that way
themselves.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

UNITS = ("divide", "multiply", "none")
TABLE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # whose values float32 holds exactly


def _channels(values, dtype: torch.dtype, device=None) -> torch.Tensor:
    return torch.as_tensor(values, dtype=dtype, device=device).view(1, -1, 1, 1)


@dataclass(frozen=True)
class Normalization:
    """torchvision's uint8 level -> output value, op by op.

    ``unit``: how a level x becomes a float of ``unit_dtype``: "divide"
    (``x.to(unit_dtype).div(255)``: v1's ToTensor and ConvertImageDtype),
    "multiply" (``x.to(unit_dtype).mul_(1.0 / 255)``: v2's
    ToDtype(scale=True)) or "none" (``x.to(unit_dtype)``: ToDtype(scale=False)).
    ``steps`` follow in order: ("to", dtype), a float-to-float conversion, or
    ("normalize", mean, std), ``sub(mean).div_(std)`` in the dtype of the
    moment, mean and std being that dtype's values (``torch.as_tensor(mean,
    dtype=dtype)``, as Normalize converts them; exact as Python floats).
    """

    unit: str
    unit_dtype: torch.dtype
    steps: tuple = ()

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {self.unit!r}")

    @property
    def dtype(self) -> torch.dtype:
        """The output dtype: the last conversion's."""
        dtype = self.unit_dtype
        for step in self.steps:
            dtype = step[1] if step[0] == "to" else dtype
        return dtype

    @property
    def normalizes(self) -> tuple:
        """The ("normalize", mean, std) steps."""
        return tuple(step for step in self.steps if step[0] == "normalize")

    @property
    def fits_float_chain(self) -> bool:
        """Whether color operations on floats can come between the unit and the steps, as the fused kernel
        computes them: the unit makes float32 values in [0, 1], then at most one Normalize (in float32)
        and one conversion follow."""
        kinds = [step[0] for step in self.steps]
        return (self.unit != "none" and self.unit_dtype == torch.float32
                and kinds in ([], ["normalize"], ["to"], ["normalize", "to"]))

    def to_unit(self, levels: torch.Tensor) -> torch.Tensor:
        """The levels (uint8, or float holding whole levels) as torchvision's first float: a new tensor."""
        x = levels.to(self.unit_dtype, copy=True)
        return self._unit_in_place(x)

    def _unit_in_place(self, x: torch.Tensor) -> torch.Tensor:
        if self.unit == "divide":
            return x.div_(255)
        if self.unit == "multiply":
            return x.mul_(1.0 / 255)
        return x

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """``steps`` on the unit's floats ``x`` (N, C, H, W), in place where the dtype stays."""
        for step in self.steps:
            if step[0] == "to":
                x = x.to(step[1])
            else:
                x = x.sub_(_channels(step[1], x.dtype, x.device)).div_(_channels(step[2], x.dtype, x.device))
        return x

    def __call__(self, levels: torch.Tensor) -> torch.Tensor:
        """The output values of uint8 levels (N, C, H, W), as torchvision computes them."""
        return self.finish(self.to_unit(levels))

    def table(self, device=None) -> torch.Tensor:
        """(3, 256) float32: channel c's output value of each level, computed by ``__call__`` (float16 and
        bfloat16 values are float32 values, so the table holds them exactly; a float64 output's it cannot)."""
        if self.dtype not in TABLE_DTYPES:
            raise ValueError(f"a table holds float32, float16 or bfloat16 values, not {self.dtype}")
        return level_table(self, device)


@dataclass(frozen=True)
class Affine:
    """``x * scale[c] + shift[c]`` of a uint8 level x in float32, rounded once to ``dtype``."""

    scale: tuple
    shift: tuple
    dtype: torch.dtype = torch.float32

    def __call__(self, levels: torch.Tensor) -> torch.Tensor:
        x = levels.to(torch.float32, copy=True)
        x = x.mul_(_channels(self.scale, torch.float32, x.device)).add_(_channels(self.shift, torch.float32,
                                                                                   x.device))
        return x.to(self.dtype)

    def table(self, device=None) -> torch.Tensor:
        return level_table(self, device)


ValueMap = Normalization | Affine


def level_table(values: ValueMap, device=None) -> torch.Tensor:
    """(3, 256) float32: channel c's output value of each uint8 level, computed by ``values`` itself."""
    levels = torch.arange(256, dtype=torch.uint8).expand(1, 3, 1, 256)
    return values(levels).float().reshape(3, 256).contiguous().to(device)


def normalize_torch(images: torch.Tensor, values: ValueMap | None, out: torch.Tensor | None = None) -> torch.Tensor:
    """Convert a batch of channels-last uint8 images to NCHW output values.

    Args:
        images: (N, H, W, C) uint8.
        values: the map of levels to output values, or None for a plain uint8 layout change.
        out: optional (N, C, H, W) output tensor (of the map's dtype) to write into.
    """
    nchw = images.permute(0, 3, 1, 2)
    if out is None:
        out = torch.empty(nchw.shape, dtype=values.dtype if values is not None else torch.uint8,
                          device=images.device)
    if values is None:
        return out.copy_(nchw)
    if isinstance(values, Normalization) and values.unit_dtype == out.dtype and values.dtype == out.dtype:
        # Converting copy first (one strided read of the uint8 bytes), then torchvision's ops in place:
        # several times faster on CPU than type-promoting ops on the permuted uint8 view.
        x = values._unit_in_place(out.copy_(nchw))
        result = values.finish(x)
        return result if result is out else out.copy_(result)
    return out.copy_(values(nchw))


@functools.lru_cache(maxsize=64)
def table_bytes(values: ValueMap) -> bytes:
    """``values.table()`` as the C extensions take it (float32 [3][256]), computed once per map."""
    return values.table().numpy().tobytes()
