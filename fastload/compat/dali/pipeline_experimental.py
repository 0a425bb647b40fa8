"""DALI's ``nvidia.dali.pipeline.experimental`` (importable as ``fastload.compat.dali.pipeline.experimental``):
``pipeline_def`` with DALI's experimental switches. fastload runs it as ``pipeline_def`` and refuses debug
mode, which it does not have."""

from __future__ import annotations

from .unsupported import refuse

__all__ = ["pipeline_def"]


def pipeline_def(fn=None, *, enable_conditionals=False, debug=False, **pipeline_kwargs):
    if debug:
        raise NotImplementedError("fastload.compat.dali: pipeline debug mode (debug=True) is not supported; "
                                  "run the pipeline and inspect pipe.run()'s outputs instead")
    from .pipeline import pipeline_def as defined
    return defined(fn, enable_conditionals=enable_conditionals, **pipeline_kwargs)


__getattr__ = refuse(__name__, "nvidia.dali.pipeline.experimental")  # any other name: NotImplementedError
