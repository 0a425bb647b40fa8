"""``amd.rocal.random``: per-sample random values for operators' arguments."""

from .operators import coin_flip, uniform  # noqa: F401
from .operators import unsupported

normal = unsupported("random.normal")
