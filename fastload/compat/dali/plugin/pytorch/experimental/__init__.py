"""DALI's ``nvidia.dali.plugin.pytorch.experimental``: its ``proxy`` (a DALI server feeding torch's
DataLoader workers) imports, and refuses to run (see ``proxy``)."""

from . import proxy  # noqa: F401
from ....unsupported import refuse

__all__ = ["proxy"]

__getattr__ = refuse(__name__, "nvidia.dali.plugin.pytorch.experimental")  # any other name: NotImplementedError
