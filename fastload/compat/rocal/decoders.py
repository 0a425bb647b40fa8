"""``amd.rocal.decoders``: image decoders that read the recorded folder, capped as rocAL caps them
(``ops_decoders``, each as ``decoders_<name>``), and the audio decoder (``audio.decoders_audio``); rocAL's
other decoders raise NotImplementedError naming themselves (``spec.namespace("decoders")``)."""

from . import audio as _audio, ops_decoders as _ops_decoders  # noqa: F401 (declare them)
from .spec import namespace as _namespace

globals().update(_namespace("decoders"))
