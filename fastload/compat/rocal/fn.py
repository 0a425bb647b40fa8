"""``amd.rocal.fn``: rocAL's operators, with ``fn.readers``, ``fn.decoders`` and ``fn.random`` as in rocAL.

Each operator is declared once (``spec.OpSpec``), in its family's module: ``ops_readers``, ``ops_decoders``,
``ops_geometry``, ``ops_colour``, ``ops_effects``, ``ops_labels``, ``audio``. This module is what those
declarations name for ``fn`` (``spec.namespace()``), legacy names (``centre_crop``) included; to find
``fn.<name>``, grep for ``def <name>(`` or ``<name> = colour_operator(``. rocAL's operators fastload does not
run raise NotImplementedError naming themselves.
"""

from . import audio as _audio  # noqa: F401 (each family's module declares its operators)
from . import ops_colour as _ops_colour  # noqa: F401
from . import ops_decoders as _ops_decoders  # noqa: F401
from . import ops_effects as _ops_effects  # noqa: F401
from . import ops_geometry as _ops_geometry  # noqa: F401
from . import ops_labels as _ops_labels  # noqa: F401
from . import ops_readers as _ops_readers  # noqa: F401
from . import decoders, random, readers  # noqa: F401
from .spec import namespace as _namespace

globals().update(_namespace())
