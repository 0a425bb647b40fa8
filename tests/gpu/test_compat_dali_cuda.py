"""fastload.compat.dali's GPU operators on a real GPU: the ResNet-50 example's "mixed" branch takes the
device path on cuda:0 and gives the CPU branch's batches. Skipped without CUDA (tests/compat covers the same
machinery on the CPU through Triton's interpreter)."""

import pytest
import torch

import fastload.compat.dali as dali
from fastload.compat.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy
from fastload.sample_data import make_sample_folder

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA (or ROCm) GPU")

STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
# nvJPEG and libjpeg-turbo decode the same file to different pixels (IDCT and chroma upsampling differ: up to
# 8 levels at an edge in this test on the H200, 2026-11-26; 32 in test_device_cuda's). torchvision's
# test_decode_jpegs_cuda bounds an image's mean difference by 2 levels; 64 bounds any one value. The device
# path's operators after the decode are checked within one level with CPU decode in test_device_cuda.
NVJPEG_MEAN_LEVELS, NVJPEG_MAX_LEVELS = 2, 64


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    return make_sample_folder(tmp_path_factory.mktemp("photos"), num_images=24, num_classes=3)


def resnet50(root, is_training: bool, dali_cpu: bool):
    """The pipeline of DALI's docs/examples/use_cases/pytorch/resnet50/main.py, small sizes."""
    @dali.pipeline_def(batch_size=6, num_threads=4, device_id=0, seed=12)
    def create_dali_pipeline():
        images, labels = dali.fn.readers.file(file_root=str(root), random_shuffle=is_training,
                                              pad_last_batch=True, name="Reader")
        device, decoder = ("cpu", "cpu") if dali_cpu else ("gpu", "mixed")
        if is_training:
            images = dali.fn.decoders.image_random_crop(images, device=decoder, output_type=dali.types.RGB,
                                                        random_aspect_ratio=[0.8, 1.25], random_area=[0.1, 1.0],
                                                        num_attempts=100)
            images = dali.fn.resize(images, device=device, resize_x=64, resize_y=64,
                                    interp_type=dali.types.INTERP_TRIANGULAR)
            mirror = dali.fn.random.coin_flip(probability=0.5)
        else:
            images = dali.fn.decoders.image(images, device=decoder, output_type=dali.types.RGB)
            images = dali.fn.resize(images, device=device, size=72, mode="not_smaller",
                                    interp_type=dali.types.INTERP_TRIANGULAR)
            mirror = False
        images = dali.fn.crop_mirror_normalize(images.gpu() if not dali_cpu else images, dtype=dali.types.FLOAT,
                                               output_layout="CHW", crop=(64, 64),
                                               mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                               std=[0.229 * 255, 0.224 * 255, 0.225 * 255], mirror=mirror)
        return images, labels.gpu() if not dali_cpu else labels

    pipe = create_dali_pipeline()
    pipe.build()
    return pipe


@pytest.mark.parametrize("is_training", [True, False])
def test_the_mixed_branch_runs_on_the_gpu_and_equals_the_cpu_branch(photos, is_training):
    gpu, cpu = resnet50(photos, is_training, dali_cpu=False), resnet50(photos, is_training, dali_cpu=True)
    # training: the device path; validation (DALI's fractional resize scale): the CPU fast path, copied
    assert gpu.loader.device_path is is_training and gpu.unfused is None
    for _ in range(3):
        (g_images, g_labels), (c_images, c_labels) = gpu.run(), cpu.run()
        assert g_images.as_tensor().is_cuda and g_labels.as_tensor().is_cuda
        assert torch.equal(g_labels.as_tensor().cpu(), c_labels.as_tensor())
        levels = (g_images.as_tensor().cpu() - c_images.as_tensor()).abs() * STD
        if is_training:  # nvJPEG's pixels, as DALI's own mixed decoder gives them, against libjpeg-turbo's
            assert levels.mean(dim=(1, 2, 3)).max() < NVJPEG_MEAN_LEVELS, levels.mean(dim=(1, 2, 3))
            assert levels.max() <= NVJPEG_MAX_LEVELS, levels.max()
        else:
            assert levels.max() == 0, levels.max()


def test_the_classification_iterator_hands_cuda_tensors(photos):
    pipe = resnet50(photos, True, dali_cpu=False)
    iterator = DALIClassificationIterator(pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL)
    seen = 0
    for epoch in range(2):
        for batch in iterator:
            data, label = batch[0]["data"], batch[0]["label"]
            assert data.is_cuda and label.is_cuda and data.dtype == torch.float32 and label.dtype == torch.int32
            seen += data.shape[0]
        iterator.reset()
    assert seen == 2 * 24


def test_outputs_left_on_the_cpu_by_the_graph_are_on_the_cpu(photos):
    """main.py leaves the labels on the CPU (only the images come from GPU operators): so do we."""
    @dali.pipeline_def(batch_size=6, num_threads=4, device_id=0, seed=12)
    def pipe():
        jpegs, labels = dali.fn.readers.file(file_root=str(photos), name="Reader")
        images = dali.fn.decoders.image_random_crop(jpegs, device="mixed")
        images = dali.fn.resize(images, resize_x=64, resize_y=64)
        return dali.fn.crop_mirror_normalize(images, dtype=dali.types.FLOAT, mean=[128.0], std=[64.0]), labels

    p = pipe()
    images, labels = p.run()
    assert p.loader.device_path and images.as_tensor().is_cuda and not labels.as_tensor().is_cuda
