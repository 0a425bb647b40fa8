"""AMD rocAL's Python API (``amd.rocal``) on fastload: change the imports, keep the script.

``from fastload.compat.rocal.pipeline import Pipeline, pipeline_def``,
``import fastload.compat.rocal.fn as fn`` and
``from fastload.compat.rocal.plugin.pytorch import ROCALClassificationIterator``
run a rocAL pipeline on fastload's graph, executor, order and loader threads
(shared with ``fastload.compat.dali``); or run a script unchanged with
``python -m fastload.compat.run script.py``. rocAL's own rules (its folder
reading, shard padding, decoder cap, output buffers, defaults) are kept and
cite rocAL's sources; anything not supported raises NotImplementedError.
"""

from . import decoders, fn, pipeline, random, readers, types  # noqa: F401
from .pipeline import Pipeline, pipeline_def  # noqa: F401
from .json_pipeline import JsonPipeline  # noqa: F401
