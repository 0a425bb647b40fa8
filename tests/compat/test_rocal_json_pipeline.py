"""fastload.compat.rocal.JsonPipeline: the JSON pipelines of rocAL's inference-server backend
(Xilinx/inference-server: examples/resnet50/rocal_pipeline.json, src/amdinfer/workers/rocal.cpp), with the
rocAL C API's semantics, and clear errors for what the backend would refuse."""

from __future__ import annotations

import io
import json
import random

import pytest
import torch
from PIL import Image

from conftest import kernels_on_cpu
from fastload.compat.rocal import JsonPipeline
from fastload.compat.rocal import imageops
from fastload.compat.rocal.json_pipeline import PipelineSpecError, run_fused
from fastload.errors import DecodeError
from fastload.sample_data import make_image

# the backend's example, as its repository has it
RESNET50 = {"pipeline": [
    {"operation": "Resize", "dest_width": 224, "dest_height": 224, "is_output": False},
    {"operation": "CropMirrorNormalize", "crop_depth": 224, "crop_height": 224, "crop_width": 224, "start_x": 0,
     "start_y": 0, "start_z": 0, "mean": [0.485, 0.456, 0.406], "std_dev": [0.229, 0.224, 0.225],
     "is_output": True}]}


def jpeg(seed: int, width: int, height: int) -> bytes:
    out = io.BytesIO()
    make_image(seed, width, height).save(out, "JPEG", quality=90)
    return out.getvalue()


def decoded(data: bytes) -> torch.Tensor:
    """As the backend decodes a request: rocalJpegExternalFileSource with ROCAL_USE_USER_GIVEN_SIZE, 1000x1000."""
    return imageops.decode(data, "RGB", 1000, 1000, keep_original=False)


def test_the_backends_resnet50_example_from_its_file(tmp_path):
    """Resize to 224x224 (rocalResize's default STRETCH), then CropMirrorNormalize with mean/std applied to
    0-255 pixels as written and the C API's uint8 output: (x - 0.485) / 0.229 saturates, as the backend's."""
    path = tmp_path / "rocal_pipeline.json"
    path.write_text(json.dumps(RESNET50, indent=2))
    pipeline = JsonPipeline(str(path), batch=2, exact=True)
    images = [jpeg(1, 333, 500), jpeg(2, 500, 375), jpeg(3, 97, 61)]
    outputs = pipeline(images)
    assert len(outputs) == 3 and all(o.shape == (224, 224, 3) and o.dtype == torch.uint8 for o in outputs)
    resized = imageops.resample(decoded(images[1]), 224, 224, "linear")
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    expected = ((resized.float() - mean) / std).round().clamp(0, 255).to(torch.uint8)
    assert torch.equal(outputs[1], expected)


def test_each_documented_operation():
    """The six operations the backend parses, each against its rocAL rule."""
    data = jpeg(4, 120, 80)
    image = decoded(data)
    assert image.shape == (160, 240, 3)  # the backend's decode enlarges it: TurboJPEG's 2/1 fits 1000x1000
    run = lambda *ops: JsonPipeline({"pipeline": [*ops[:-1], {**ops[-1], "is_output": True}]},  # noqa
                                    exact=True)([data])[0]
    cropped = run({"operation": "CropFixed", "crop_width": 50, "crop_height": 30, "crop_depth": 1,
                   "crop_pos_x": 7.9, "crop_pos_y": 2, "crop_pos_z": 0})
    assert torch.equal(cropped, image[2:32, 7:57])  # whole-pixel offsets
    normalized = run({"operation": "CropMirrorNormalize", "crop_height": 40, "crop_width": 60, "start_x": 0.5,
                      "start_y": 0.5, "mean": [10.0], "std_dev": [0.5], "mirror": True})
    window = image[60:100, 90:150].float()  # 0.5 of the 240 - 60 and 160 - 40 free pixels
    assert torch.equal(normalized, ((window - 10) / 0.5).round().clamp(0, 255).to(torch.uint8).flip(1))
    rmn = run({"operation": "ResizeMirrorNormalize", "dest_width": 30, "dest_height": 20, "mean": [0, 0, 0],
               "std_dev": [2, 2, 2]})
    expected = (imageops.resample(image, 30, 20, "linear").float() / 2).round().to(torch.uint8)
    assert torch.equal(rmn, expected)
    rcm = run({"operation": "ResizeCropMirrorFixed", "dest_width": 16, "dest_height": 12, "crop_h": 50,
               "crop_w": 70, "mirror": True})
    assert torch.equal(rcm, imageops.resample(image[:50, :70], 16, 12, "linear").flip(1))
    crop_resize = run({"operation": "CropResizeFixed", "dest_width": 20, "dest_height": 20, "area": 0.25,
                       "aspect_ratio": 1.0, "x_center_drift": 0.5, "y_center_drift": 0.0})
    side = int((0.25 * 240 * 160) ** 0.5)  # 97: trunc(sqrt(A * r)), inside the image
    left = int(0.5 * (240 - side))
    assert torch.equal(crop_resize, imageops.resample(image[0:side, left:left + side], 20, 20, "linear"))
    whole = run({"operation": "CropResizeFixed", "dest_width": 20, "dest_height": 20, "area": 1.0,
                 "aspect_ratio": 1.5, "x_center_drift": 0.5, "y_center_drift": 0.5})
    # not strictly inside: the central crop, its aspect (1.5) clamped to 1.333: 213x160 at x = 13
    assert torch.equal(whole, imageops.resample(image[:, 13:226], 20, 20, "linear"))


NORMALIZE = {"mean": [123.675, 116.28, 103.53], "std_dev": [58.395, 57.12, 57.375], "output_dtype": "float32"}
# pipelines that lower to one fused step
FUSED = {
    "resize": [{"operation": "Resize", "dest_width": 61, "dest_height": 47}],
    "resize + cmn": [{"operation": "Resize", "dest_width": 72, "dest_height": 70},
                     {"operation": "CropMirrorNormalize", "crop_height": 64, "crop_width": 57, "start_x": 0.3,
                      "start_y": 0.8, "mirror": True, **NORMALIZE}],
    "resize + crop": [{"operation": "Resize", "dest_width": 50, "dest_height": 33},
                      {"operation": "CropFixed", "crop_width": 31, "crop_height": 20, "crop_depth": 1,
                       "crop_pos_x": 9.5, "crop_pos_y": 13, "crop_pos_z": 0}],
    "rmn": [{"operation": "ResizeMirrorNormalize", "dest_width": 29, "dest_height": 93, "mirror": True,
             **NORMALIZE}],
    "crop resize + cmn": [{"operation": "CropResizeFixed", "dest_width": 40, "dest_height": 40, "area": 0.3,
                           "aspect_ratio": 0.8, "x_center_drift": 0.2, "y_center_drift": 0.7},
                          {"operation": "CropMirrorNormalize", "crop_height": 40, "crop_width": 40, "start_x": 0,
                           "start_y": 0, **NORMALIZE}],
    "resize crop mirror": [{"operation": "ResizeCropMirrorFixed", "dest_width": 45, "dest_height": 21,
                            "crop_h": 50, "crop_w": 1000, "mirror": True}],
}


def truncated_columns(pipeline) -> torch.Tensor:
    """Which output columns RPP's scalar tail computes (the last ``width % 8`` of each resized row, which it
    truncates where its vector loop rounds), as a (width,) mask of the output."""
    top, left, height, width = pipeline.fused.window
    resized_w = pipeline.fused.resize[1]
    tail = torch.arange(resized_w) >= (resized_w & ~7)
    window = tail[left:left + width]
    return window.flip(0) if pipeline.fused.mirror else window


@pytest.mark.parametrize("name", FUSED)
def test_fused_pipelines_equal_rpps_arithmetic_within_a_level(name, seed):
    """Each lowered pipeline against the same pipeline run operator by operator on RPP's arithmetic, on
    images of awkward sizes: within one level of the resized image, two in the columns RPP truncates
    (``truncated_columns``: its truncation and torch's uint8 rounding add up); float outputs compared in
    those levels (times std_dev)."""
    operations = FUSED[name]
    spec = {"pipeline": [*operations[:-1], {**operations[-1], "is_output": True}]}
    fused, exact = JsonPipeline(spec), JsonPipeline(spec, exact=True)
    assert fused.fused is not None and exact.fused is None and exact.unfused_reason == "exact=True"
    generator = random.Random(seed)
    images = [jpeg(generator.randrange(1 << 30), generator.randint(2, 700), generator.randint(2, 500))
              for _ in range(5)] + [jpeg(seed, 2, 3), jpeg(seed, 3, 2)]
    std = torch.tensor(NORMALIZE["std_dev"]) if "std_dev" in operations[-1] else torch.ones(3)
    tail = truncated_columns(fused)
    for ours, theirs in zip(fused(images), exact(images)):
        assert ours.shape == theirs.shape == fused.output_shape and ours.dtype == theirs.dtype
        levels = ((ours.float() - theirs.float()) * std).abs()
        assert levels[:, ~tail].max() <= 1 + 1e-3, f"{name}, seed {seed}: {levels[:, ~tail].max()} levels off"
        assert levels.max() <= 2 + 1e-3, f"{name}, seed {seed}: {levels.max()} levels off in RPP's tail"


@kernels_on_cpu
@pytest.mark.parametrize("name", FUSED)
def test_fused_kernel_is_the_cpu_step(name, seed):
    """The GPU's fused step (the Triton kernel, here interpreted) against the CPU's, within one level:
    the same plain bilinear rule, rounded by torch's uint8 resampler on the CPU."""
    operations = FUSED[name]
    pipeline = JsonPipeline({"pipeline": [*operations[:-1], {**operations[-1], "is_output": True}]})
    generator = random.Random(seed)
    images = [decoded(jpeg(generator.randrange(1 << 30), generator.randint(2, 300), generator.randint(2, 200)))
              for _ in range(3)]
    cpu = torch.device("cpu")
    kernel, step = run_fused(images, pipeline.fused, cpu, kernel=True), run_fused(images, pipeline.fused, cpu)
    assert kernel.shape == step.shape and kernel.dtype == step.dtype
    std = torch.tensor(NORMALIZE["std_dev"]) if "std_dev" in operations[-1] else torch.ones(3)
    assert ((kernel.float() - step.float()) * std).abs().max() <= 1 + 1e-3


@pytest.mark.parametrize("name", FUSED)
def test_the_fused_step_on_owned_images_equals_it_on_copies(name, seed):
    """``owned`` writes the resize's capped edge into the images instead of a copy: the same outputs, and
    without it the caller's images are left as they were (awkward sizes, 2 pixels a side included)."""
    operations = FUSED[name]
    pipeline = JsonPipeline({"pipeline": [*operations[:-1], {**operations[-1], "is_output": True}]})
    generator = random.Random(seed)
    images = [decoded(jpeg(generator.randrange(1 << 30), generator.randint(2, 300), generator.randint(2, 200)))
              for _ in range(3)]
    before = [image.clone() for image in images]
    cpu = torch.device("cpu")
    copied = run_fused(images, pipeline.fused, cpu)
    assert all(torch.equal(image, kept) for image, kept in zip(images, before))
    assert torch.equal(run_fused(images, pipeline.fused, cpu, owned=True), copied)


@pytest.mark.parametrize("exact", [False, True])
def test_an_image_with_an_empty_crop_window_is_its_own_error(exact):
    """CropResizeFixed's window of a 1x1 image is empty: that request's DecodeError, the others' outputs
    unchanged (a server's batch goes on)."""
    pipeline = JsonPipeline({"pipeline": [*FUSED["crop resize + cmn"][:-1],
                                          {**FUSED["crop resize + cmn"][-1], "is_output": True}]}, exact=exact)
    good = jpeg(8, 90, 70)
    outputs = pipeline([good, jpeg(9, 1, 1), good], on_error="return", names=["a", "b", "c"])
    assert isinstance(outputs[1], DecodeError) and "cannot preprocess" in str(outputs[1])
    assert outputs[1].index == 1 and outputs[1].path == "b"
    assert torch.equal(outputs[0], outputs[2]) and torch.equal(outputs[0], pipeline.one(good))
    with pytest.raises(DecodeError, match=r"sample 1 \(request 1\): cannot preprocess"):
        pipeline([good, jpeg(9, 1, 1)])
    with pytest.raises(DecodeError, match=r"sample 7 \(request 7\): cannot preprocess") as raised:
        pipeline.one(jpeg(9, 1, 1), 7)
    assert raised.value.index == 7
    with pytest.raises(ValueError, match="2 names for 3 images"):
        pipeline([good, good, good], names=["a", "b"])


@pytest.mark.parametrize("operations, color, reason", [
    (FUSED["resize"], "U8", "color format is GRAY"),
    ([FUSED["resize"][0], {**FUSED["resize + cmn"][1], "crop_width": 62}], "RGB24",
     "window is not inside the resized image"),
    ([FUSED["resize"][0], FUSED["resize"][0], FUSED["resize"][0]], "RGB24", "more than two operations"),
    (FUSED["resize + crop"][1:], "RGB24", "it starts with CropFixed"),
])
def test_other_pipelines_run_operator_by_operator_saying_why(operations, color, reason):
    pipeline = JsonPipeline({"pipeline": [*operations[:-1], {**operations[-1], "is_output": True}]},
                            color_format=color)
    assert pipeline.fused is None and reason in pipeline.unfused_reason
    assert pipeline([jpeg(3, 80, 60)])[0].shape == pipeline.output_shape


def test_output_dtype_is_fastloads_key_for_a_normalized_model_input():
    data = jpeg(7, 64, 48)
    spec = {"pipeline": [{**RESNET50["pipeline"][1], "mean": [123.675, 116.28, 103.53],
                          "std_dev": [58.395, 57.12, 57.375], "crop_height": 40, "crop_width": 60,
                          "output_dtype": "float32"}]}
    (out,) = JsonPipeline(spec)([data])
    mean, std = torch.tensor([123.675, 116.28, 103.53]), torch.tensor([58.395, 57.12, 57.375])
    expected = (decoded(data)[0:40, 0:60].float() - mean) / std  # the window at anchor (0, 0)
    assert out.dtype == torch.float32 and out.shape == (40, 60, 3) and torch.allclose(out, expected)
    with pytest.raises(ValueError, match="'output_dtype' must be"):
        JsonPipeline({"pipeline": [{**spec["pipeline"][0], "output_dtype": "int8"}]})


def test_outputs_are_fixed_buffers_and_go_to_the_device():
    pipeline = JsonPipeline({"pipeline": [{"operation": "CropFixed", "crop_width": 200, "crop_height": 100,
                                           "crop_depth": 1, "crop_pos_x": 0, "crop_pos_y": 0, "crop_pos_z": 0,
                                           "is_output": True}]}, device="cpu", color_format="U8")
    (out,) = pipeline([jpeg(5, 45, 35)])  # decoded at 2/1: 90x70
    assert out.shape == (100, 200, 1) and out[70:].max() == 0 and out[:, 90:].max() == 0
    assert pipeline.output_shape == (100, 200, 1)


def test_bad_images_are_named_errors_or_returned():
    pipeline = JsonPipeline(RESNET50)
    good, broken = jpeg(6, 64, 48), b"\xff\xd8\xff not really a jpeg"
    with pytest.raises(DecodeError, match=r"sample 1 \(request 1\): cannot decode"):
        pipeline([good, broken])
    outputs = pipeline([good, broken, good], on_error="return")
    assert isinstance(outputs[1], DecodeError) and outputs[0].shape == outputs[2].shape == (224, 224, 3)
    huge = io.BytesIO()
    Image.new("RGB", (9000, 20)).save(huge, "PNG")
    with pytest.raises(DecodeError, match="only scales the JPEGs it reads"):
        pipeline([huge.getvalue()])


@pytest.mark.parametrize("spec, message", [
    ({}, 'non-empty "pipeline" list'),
    ({"pipeline": [{"operation": "Blur", "is_output": True}]}, "operation 0: unknown operation 'Blur'"),
    ({"pipeline": [{"operation": "Resize", "dest_width": 3, "is_output": True}]},
     r"operation 0 \(Resize\): missing parameter 'dest_height'"),
    ({"pipeline": [{"operation": "Resize", "dest_width": 3, "dest_height": "4", "is_output": True}]},
     r"parameter 'dest_height' must be a whole number from 1 to 4096, not '4'"),
    ({"pipeline": [{"operation": "Resize", "dest_width": 3, "dest_height": 4, "dest_widht": 5, "is_output": True}]},
     r"unknown parameter 'dest_widht'"),
    ({"pipeline": [{"operation": "Resize", "dest_width": 3, "dest_height": 4}]},
     r'the last operation \(Resize\) must have "is_output": true'),
    ({"pipeline": [{"operation": "Resize", "dest_width": 0, "dest_height": 4, "is_output": True}]},
     r"operation 0 \(Resize\): parameter 'dest_width' must be a whole number from 1 to 4096, not 0"),
    ({"pipeline": [{**RESNET50["pipeline"][1], "mean": [1, 2]}]}, "'mean' has one value or three"),
    ({"pipeline": [{**RESNET50["pipeline"][1], "std_dev": [1, 0, 1]}]}, "'std_dev' has 0: each value must be at"),
])
def test_malformed_pipelines_are_refused_saying_where(spec, message):
    with pytest.raises(ValueError, match=message):
        JsonPipeline(spec)


def test_malformed_files_name_the_file(tmp_path):
    broken = tmp_path / "p.json"
    broken.write_text('{"pipeline": [')
    with pytest.raises(ValueError, match=r"p\.json: not valid JSON"):
        JsonPipeline(str(broken))
    with pytest.raises(ValueError, match=r"\.json"):
        JsonPipeline(str(tmp_path / "p.txt"))
    with pytest.raises(FileNotFoundError):
        JsonPipeline(str(tmp_path / "missing.json"))


CMN = RESNET50["pipeline"][1]


@pytest.mark.parametrize("node, key, message", [
    ({"operation": "Resize", "dest_width": 10 ** 9, "dest_height": 4}, "dest_width",
     "must be a whole number from 1 to 4096, not 1000000000"),
    ({**CMN, "crop_height": 4097}, "crop_height", "from 1 to 4096"),
    ({"operation": "ResizeCropMirrorFixed", "dest_width": 8, "dest_height": 8, "crop_h": 8, "crop_w": 10 ** 5},
     "crop_w", "from 1 to 4096"),
    ({**CMN, "start_x": -0.5}, "start_x", "must be a number from 0 to 1, not -0.5"),
    ({**CMN, "start_y": 1.5}, "start_y", "from 0 to 1"),
    ({**CMN, "start_x": 1e308}, "start_x", "from 0 to 1"),  # crashed a request with an OverflowError
    ({**CMN, "mean": [float("nan"), 0, 0]}, "mean", "must be a list of finite numbers"),
    ({**CMN, "mean": [10 ** 400]}, "mean", "finite numbers of magnitude at most 1e\\+06, not \\[1000"),
    ({**CMN, "std_dev": [float("inf")]}, "std_dev", "finite numbers"),
    ({**CMN, "std_dev": [1, -2, 1]}, "std_dev", "'std_dev' has -2: each value must be at least 1e-06"),
    ({"operation": "CropFixed", "crop_width": 8, "crop_height": 8, "crop_depth": 1, "crop_pos_x": -3,
      "crop_pos_y": 0, "crop_pos_z": 0}, "crop_pos_x", "at least 0, not -3"),
    ({"operation": "CropFixed", "crop_width": 8, "crop_height": 8, "crop_depth": 1, "crop_pos_x": 0,
      "crop_pos_y": 0, "crop_pos_z": float("-inf")}, "crop_pos_z", "a finite number"),
    ({"operation": "CropResizeFixed", "dest_width": 8, "dest_height": 8, "area": float("nan"), "aspect_ratio": 1,
      "x_center_drift": 0, "y_center_drift": 0}, "area", "above 0 and at most 1"),
    ({"operation": "CropResizeFixed", "dest_width": 8, "dest_height": 8, "area": 0.5, "aspect_ratio": 5e-324,
      "x_center_drift": 0, "y_center_drift": 0}, "aspect_ratio", "from 0.001 to 1000"),
    ({"operation": "CropResizeFixed", "dest_width": 8, "dest_height": 8, "area": 0.5, "aspect_ratio": 1,
      "x_center_drift": -1, "y_center_drift": 0}, "x_center_drift", "from 0 to 1"),
])
def test_values_outside_the_bounds_are_refused_naming_file_operation_and_key(tmp_path, node, key, message):
    """Sizes from 1 to MAX_SIDE, anchors and drifts from 0 to 1 (only those keep rocAL's window inside the
    image), finite numbers, std_dev above 0: refused when the pipeline is made, so no request meets them."""
    spec = {"pipeline": [{"operation": "Resize", "dest_width": 64, "dest_height": 64, "is_output": False},
                         {**node, "is_output": True}]}
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(spec))  # (Python writes NaN and Infinity, which its reader accepts)
    with pytest.raises(PipelineSpecError, match=message) as raised:
        JsonPipeline(str(path))
    error = raised.value
    assert isinstance(error, ValueError)
    assert (error.file, error.place, error.operation, error.key) == (str(path), 1, node["operation"], key)
    assert str(error).startswith(f"{path}: operation 1 ({node['operation']}): ")
    with pytest.raises(PipelineSpecError, match=f"the pipeline: operation 1 \\({node['operation']}\\)"):
        JsonPipeline(spec)


def test_the_bounds_themselves_are_accepted():
    spec = {"pipeline": [{**CMN, "crop_width": 4096, "crop_height": 1, "start_x": 1, "start_y": 0,
                          "std_dev": [1e-6, 1e6, 1], "mean": [-1e6, 0, 1e6], "is_output": True}]}
    (out,) = JsonPipeline(spec)([jpeg(1, 40, 30)])
    assert out.shape == (1, 4096, 3)


@pytest.mark.parametrize("content, message", [
    (b'{"pipeline": [{"operation": "Resize\xff"}]}', r"not UTF-8 text \(byte 35 is b'\\xff'\)"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"pipeline": [{"operation": "Resize", "dest_width": 1' + b"0" * 5000 + b"}]}", "not valid JSON"),
    (b'{"pipeline": [', "not valid JSON"),
])
def test_unreadable_files_are_one_clear_error_naming_the_file(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_bytes(content)
    with pytest.raises(PipelineSpecError, match=message) as raised:
        JsonPipeline(str(path))
    assert str(raised.value).startswith(f"{path}: ") and raised.value.file == str(path)
