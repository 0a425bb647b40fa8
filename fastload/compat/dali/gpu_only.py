"""DALI 2.4's operators that run on the GPU only (no CPU operator in DALI's registry to check fastload's
against), refused by name with that reason. The image filters of the kind are declared beside their family
(``remap.GPU_ONLY``)."""

from .spec import refused

REASON = "GPU-only in DALI 2.4; fastload runs the CPU operators"
GPU_ONLY = {  # fn name -> ops name, DALI's deprecated spellings included
    "optical_flow": "OpticalFlow", "experimental.resize": "experimental.Resize",
    "readers.video": "readers.Video", "video_reader": "VideoReader",
    "readers.video_resize": "readers.VideoResize", "video_reader_resize": "VideoReaderResize",
    "decoders.inflate": "decoders.Inflate", "experimental.inflate": "experimental.Inflate",
}
for _name, _ops in GPU_ONLY.items():
    refused(_name, _ops, REASON)
