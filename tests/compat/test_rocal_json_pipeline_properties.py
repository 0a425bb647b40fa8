"""JSON pipeline specs under Hypothesis: any JSON value, and valid pipelines with any key removed or any value
replaced, either make a pipeline that runs, or are one PipelineSpecError naming the pipeline -- never another
exception, never a pipeline that fails on its first image."""

import io

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastload.compat.rocal.json_pipeline import OPERATIONS, JsonPipeline, PipelineSpecError
from fastload.sample_data import make_image

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True)
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                max_size=4), max_leaves=12)
VALID = [{"operation": "Resize", "dest_width": 24, "dest_height": 20, "is_output": False},
         {"operation": "CropMirrorNormalize", "crop_height": 16, "crop_width": 16, "start_x": 0.5, "start_y": 0.5,
          "mean": [0.0, 0.0, 0.0], "std_dev": [1.0, 1.0, 1.0], "is_output": True}]


def _jpeg() -> bytes:
    out = io.BytesIO()
    make_image(1, 40, 30).save(out, "JPEG")
    return out.getvalue()


JPEG = _jpeg()


def _made_or_refused(spec) -> None:
    try:
        pipeline = JsonPipeline(spec, batch=2)
    except PipelineSpecError as error:
        assert str(error).startswith("the pipeline"), error
        return
    (output,) = pipeline([JPEG])
    assert isinstance(output, torch.Tensor) and output.ndim == 3


@SETTINGS
@given(spec=JSON)
def test_any_json_value_is_a_pipeline_or_its_spec_error(spec):
    if not isinstance(spec, str):  # (a string is a file's path)
        _made_or_refused(spec)
    _made_or_refused({"pipeline": [spec]})


@SETTINGS
@given(place=st.integers(0, len(VALID) - 1), data=st.data())
def test_a_valid_pipeline_with_a_key_removed_or_changed_is_made_or_refused(place, data):
    operations = [dict(op) for op in VALID]
    key = data.draw(st.sampled_from(sorted(operations[place])))
    if data.draw(st.booleans()):
        del operations[place][key]
    else:
        operations[place][key] = data.draw(JSON)
    _made_or_refused({"pipeline": operations})


@SETTINGS
@given(name=st.sampled_from(sorted(OPERATIONS)), parameters=st.dictionaries(st.text(max_size=12), JSON,
                                                                              max_size=6))
def test_every_operation_with_random_parameters_is_made_or_refused(name, parameters):
    _made_or_refused({"pipeline": [{**parameters, "operation": name, "is_output": True}]})
