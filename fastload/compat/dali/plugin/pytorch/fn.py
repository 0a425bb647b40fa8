"""DALI's ``nvidia.dali.plugin.pytorch.fn``: the PyTorch plugin's own operator, ``torch_python_function``
(the same function as ``fastload.compat.dali.fn.torch_python_function``)."""

from ...unsupported import refuse
from ... import fn as _fn

torch_python_function = _fn.torch_python_function

__getattr__ = refuse(__name__, "nvidia.dali.plugin.pytorch.fn")  # any other name: NotImplementedError naming it
