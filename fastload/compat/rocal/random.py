"""``amd.rocal.random``: per-sample random values for operators' arguments (``ops_labels``;
``spec.namespace("random")``)."""

from . import ops_labels as _ops_labels  # noqa: F401 (declares them)
from .spec import namespace as _namespace

globals().update(_namespace("random"))
