"""NVIDIA DALI's Python API (``nvidia.dali``) on fastload: change the imports, keep the script.

``from fastload.compat.dali import pipeline_def, fn, types`` and
``from fastload.compat.dali.plugin.pytorch import DALIGenericIterator`` run a
DALI pipeline on fastload's loader threads, sources and order; or run a
script unchanged with ``python -m fastload.compat.run script.py``. What is
supported is listed in docs/dali.md; anything else raises
NotImplementedError naming it.
"""

from . import fn, ops, pipeline, types  # noqa: F401
from .pipeline import Pipeline, pipeline_def  # noqa: F401

__version__ = "2.4.0"  # the DALI release whose behaviour this layer follows
