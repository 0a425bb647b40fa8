"""NVIDIA DALI's Python API (``nvidia.dali``) on fastload: change the imports, keep the script.

``from fastload.compat.dali import pipeline_def, fn, types`` and
``from fastload.compat.dali.plugin.pytorch import DALIGenericIterator`` run a
DALI pipeline on fastload's loader threads, sources and order; or run a
script unchanged with ``python -m fastload.compat.run script.py``. What is
supported is listed in docs/dali.md, what DALI has beyond it in
docs/dali-unsupported.md; anything else raises NotImplementedError naming it
(on use, and on lookup: ``fn.python_function``, ``types.X``, ...).
"""

from . import fn, ops, pipeline, plugin, tensors, types  # noqa: F401
from . import auto_aug  # noqa: F401,E402  (after fn: its augmentations are built of fn's operators)
from .pipeline import Pipeline, pipeline_def  # noqa: F401
from .unsupported import refuse

__version__ = "2.4.0"  # the DALI release whose behaviour this layer follows
__all__ = ["Pipeline", "pipeline_def", "auto_aug", "fn", "ops", "pipeline", "plugin", "tensors", "types"]

__getattr__ = refuse(__name__, "nvidia.dali")  # any other name: NotImplementedError naming it
