"""``amd.rocal.random``: per-sample random values for operators' arguments."""

from .ops_labels import coin_flip, uniform  # noqa: F401
from .ops_common import unsupported

normal = unsupported("random.normal")
