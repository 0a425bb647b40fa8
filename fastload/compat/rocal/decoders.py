"""``amd.rocal.decoders``: image decoders that read the recorded folder, capped as rocAL caps them, and the
audio decoder (``fastload.compat.rocal.audio``); rocAL's other decoders raise NotImplementedError naming
themselves."""

from .audio import decoders_audio as audio  # noqa: F401
from .ops_decoders import decoders_image as image  # noqa: F401
from .ops_decoders import decoders_image_random_crop as image_random_crop  # noqa: F401
from .ops_decoders import decoders_image_raw as image_raw  # noqa: F401
from .ops_decoders import decoders_image_slice as image_slice  # noqa: F401
from .ops_common import unsupported

video = unsupported("decoders.video", "rocAL has none (DALI has); rocAL reads and decodes videos with "
                                     "fn.readers.video, which fastload runs")
