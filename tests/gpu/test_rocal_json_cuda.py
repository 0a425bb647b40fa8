"""rocAL JSON pipelines with device="cuda": the fused step runs as the compiled kernel on the GPU (decoding
stays on the CPU, by rocAL's rule), and equals the CPU's fused step within one level. Skipped without CUDA."""

import io
import random

import pytest
import torch

from fastload.compat.rocal import JsonPipeline
from fastload.sample_data import make_image

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA (or ROCm) GPU")

SERVING = {"pipeline": [
    {"operation": "Resize", "dest_width": 256, "dest_height": 256},
    {"operation": "CropMirrorNormalize", "crop_height": 224, "crop_width": 224, "start_x": 0.5, "start_y": 0.5,
     "mean": [123.675, 116.28, 103.53], "std_dev": [58.395, 57.12, 57.375], "output_dtype": "float16",
     "mirror": True, "is_output": True}]}


def test_json_pipeline_on_the_gpu_is_the_cpus_within_a_level():
    generator = random.Random(0)
    images = []
    for seed in range(9):
        out = io.BytesIO()
        make_image(seed, generator.randint(20, 1400), generator.randint(20, 900)).save(out, "JPEG", quality=90)
        images.append(out.getvalue())
    gpu, cpu = JsonPipeline(SERVING, batch=4, device="cuda"), JsonPipeline(SERVING, batch=4)
    assert gpu.fused is not None
    ours, theirs = gpu(images), cpu(images)
    std = torch.tensor(SERVING["pipeline"][1]["std_dev"])
    for a, b in zip(ours, theirs):
        assert a.device.type == "cuda" and a.shape == b.shape == (224, 224, 3) and a.dtype == torch.float16
        # float16 rounding of values up to ~2.6 adds about 0.002 each
        assert ((a.float().cpu() - b.float()) * std).abs().max() <= 1 + 0.15
