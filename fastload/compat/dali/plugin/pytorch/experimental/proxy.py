"""DALI's ``nvidia.dali.plugin.pytorch.experimental.proxy``: ``DALIServer`` runs a DALI pipeline in the
main process and ``DataLoader`` lets torch's worker processes ask it for samples. fastload has no such
server: its DataLoader runs the pipeline in threads of the training process already, so the classes
import (a script's imports keep working) and refuse when made, saying what to use instead."""

from __future__ import annotations

from ....unsupported import refuse

__all__ = ["DALIServer", "DataLoader"]

_INSTEAD = ("fastload runs DALI pipelines in its own loader threads; iterate the pipeline with "
            "fastload.compat.dali.plugin.pytorch.DALIGenericIterator (or use fastload.DataLoader) instead")


class DALIServer:
    """Refused: see the module."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"fastload.compat.dali: plugin.pytorch.experimental.proxy.DALIServer is not "
                                  f"supported: {_INSTEAD}")


class DataLoader:
    """Refused: see the module."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"fastload.compat.dali: plugin.pytorch.experimental.proxy.DataLoader is not "
                                  f"supported: {_INSTEAD}")


__getattr__ = refuse(__name__, "nvidia.dali.plugin.pytorch.experimental.proxy")  # any other name
