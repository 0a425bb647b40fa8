"""fastload.compat.rocal.spec: every operator declared once, and fn, its sub-modules, the refusals, the COCO box
rules, lowering and the JSON pipeline's operations read from those declarations."""

import pytest

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal import decoders, json_pipeline, random, readers, spec


def test_fn_and_its_modules_are_the_declared_operators_under_their_names_and_legacy_names():
    modules = {"": fn, "readers": readers, "decoders": decoders, "random": random}
    for operator in spec.OPERATORS.values():
        for name in (operator.name, *operator.legacy):
            module, _, short = name.rpartition(".")
            assert getattr(modules[module], short) is operator.impl, name
    assert fn.centre_crop is fn.center_crop and random.uniform is fn.uniform
    assert fn.readers is readers and fn.decoders is decoders and fn.random is random


def test_a_name_declared_twice_is_refused():
    with pytest.raises(RuntimeError, match="'resize' declared twice"):
        spec.declare(spec.OpSpec("resize", fn.resize))
    with pytest.raises(RuntimeError, match="'centre_crop' declared twice"):
        spec.declare(spec.OpSpec("centre_crop", fn.center_crop))


def test_a_declared_colour_operator_has_rocals_signature_and_refuses_an_unknown_argument():
    args = spec.OPERATORS["hue"].args
    assert list(args) == ["hue", "seed", "device", "output_layout", "output_dtype"]
    assert (args["hue"], args["seed"], args["device"]) == (None, 0, None)
    assert args["output_layout"] == types.RocalTensorLayout.NHWC
    assert args["output_dtype"] == types.RocalTensorOutputType.UINT8
    assert spec.OPERATORS["brightness"].ranges == {"brightness": (0.1, 1.95), "brightness_shift": (0.0, 25.0)}
    assert spec.OPERATORS["brightness_fixed"].args["brightness"] == 1.0
    assert fn.brightness_fixed.__doc__.startswith("``fn.brightness_fixed``")
    with pytest.raises(TypeError, match="unexpected keyword argument 'brightnes'"):
        fn.brightness(None, brightnes=1.0)


def test_the_refusal_of_an_unsupported_name_lists_the_declared_supported_ones():
    with pytest.raises(NotImplementedError) as refused:
        random.normal()
    listed = str(refused.value).split("(supported: ")[1]
    assert listed.rstrip(")").split(", ") == spec.supported_names()
    assert "resize" in listed and "random.normal" not in listed and "fog" not in listed


def test_each_operator_says_what_coco_boxes_do_through_it():
    assert spec.boxes_rule("brightness") == spec.KEEP and spec.boxes_rule("resize") == spec.MOVE
    assert spec.boxes_rule("warp_affine") == spec.UNMOVED and spec.boxes_rule("rotate") == spec.REFUSED
    assert spec.boxes_rule("no_such_operator") == spec.REFUSED
    for operator in spec.OPERATORS.values():
        assert operator.boxes in (spec.KEEP, spec.MOVE, spec.UNMOVED, spec.REFUSED), operator.name
        assert operator.output in (spec.SOURCE, spec.SIZE, spec.RESIZED, spec.TRANSPOSED, spec.READ,
                                   spec.NOT_IMAGE), operator.name


def test_each_json_operation_is_declared_once_and_names_a_declared_rocal_operator():
    names = [operation.name for operation in json_pipeline.JSON_OPERATIONS]
    assert len(names) == len(set(names)) and list(json_pipeline.OPERATIONS) == names
    for operation in json_pipeline.JSON_OPERATIONS:
        assert spec.OPERATORS[operation.rocal].supported, operation.name
        assert json_pipeline.OPERATIONS[operation.name] is operation


def test_a_nodes_rocal_description_is_one_typed_slot(small_folder):
    """Every node rocAL describes holds its description in ``DataNode.meta`` (a RocalMeta), no other attribute:
    the decoder's image buffer, an operator's, and nothing on a node no rocAL operator made."""
    from fastload.compat.rocal.meta import NONE, RocalMeta, meta
    from fastload.compat.rocal.pipeline import Pipeline
    with Pipeline(batch_size=1, rocal_cpu=True):
        jpegs, _ = fn.readers.file(file_root=str(small_folder))
        images = fn.decoders.image(jpegs, file_root=str(small_folder), max_decoded_width=64, max_decoded_height=48)
        resized = fn.resize(images, resize_width=20, resize_height=10)
        bright = fn.brightness(resized, brightness=1.0, brightness_shift=0.0)
        coin = fn.random.coin_flip(probability=0.5)
    assert isinstance(images.meta, RocalMeta) and images.meta.image.buffer == (48, 64)
    assert meta(resized).image.buffer == (10, 20) and meta(resized).frames is None and meta(resized).boxes is None
    assert meta(bright).image.buffer == (10, 20)
    assert meta(coin) is NONE and meta(jpegs) is NONE
    for node in (images, resized, bright):
        assert not [name for name in vars(node) if name.startswith("rocal")]


def test_readers_are_found_by_their_class_not_by_a_name(small_folder):
    """Each reader's op is a graph.ReaderOp named after what reads (rocAL: the decoder that reads what
    fn.readers.file recorded), and the build finds it by that class: no rocAL reader poses as "readers.file"."""
    from fastload.compat.dali import fn as dali_fn
    from fastload.compat.engine.graph import Graph, ReaderOp
    from fastload.compat.dali.pipeline import Pipeline as DaliPipeline
    from fastload.compat.rocal.pipeline import Pipeline
    pipe = Pipeline(batch_size=2, num_threads=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=str(small_folder))
        images = fn.decoders.image(jpegs, file_root=str(small_folder))
        pipe.set_outputs(fn.resize(images, resize_width=8, resize_height=8))
    pipe.build()
    try:
        (reader,) = pipe._dali_pipeline._readers
        assert isinstance(reader, ReaderOp) and reader.name == "rocal.decoders.image.read"
        assert not Graph(pipe._outputs).find("readers.file") and len(pipe.run()[0].batch) == 2
    finally:
        pipe.rocal_release()
    with DaliPipeline(batch_size=1, num_threads=1, device_id=None):
        encoded, labels = dali_fn.readers.file(file_root=str(small_folder))
    assert isinstance(encoded.source, ReaderOp) and encoded.source is labels.source
    assert encoded.source.name == "readers.file" and encoded.source.reader.samples


def test_every_recorded_reader_meets_the_one_reader_protocol():
    """A decoder asks what it was given how to read it (reading.RecordedReader), whatever reader recorded it;
    only the TFRecord reader, whose source rocAL never gives a shard_id, is not sharded."""
    from fastload.compat.rocal import caffe, coco, mxnet, ops_readers, webdataset
    from fastload.compat.rocal.reading import RecordedReader
    records = [ops_readers.FileReader("root", ""), ops_readers.TFRecordReader("root", {}), mxnet.MXNetReader("root"),
               caffe.CaffeReader("root", False), coco.COCOReader("annotations.json", True, False),
               webdataset.WebDatasetReader("root", (), types.RocalMissingComponentsBehavior(0))]
    assert all(isinstance(record, RecordedReader) for record in records)
    assert [record.sharded for record in records] == [True, False, True, True, True, True]
    assert not isinstance(object(), RecordedReader)


# each image operator fastload runs, called with the fewest arguments rocAL's binding takes; its size (where
# it asks one) is 10 x 12
IMAGE_CALLS = {
    "blend": lambda images: fn.blend(images, images, ratio=0.5),
    "random_crop": dict(crop_area_factor=None, crop_aspect_ratio=None, crop_pox_x=None, crop_pox_y=None),
    "lens_correction": dict(camera_matrix=[10.0, 32.0, 10.0, 24.0], distortion_coeffs=[0.0] * 5),
    "rain": dict(rain=0.5),
    "resize": dict(resize_width=12, resize_height=10),
    "resize_mirror_normalize": dict(resize_width=12, resize_height=10),
    "roi_resize": dict(resize_width=12, resize_height=10, roi_w=8, roi_h=8, roi_pos_x=0, roi_pos_y=0),
    "crop_mirror_normalize": dict(crop=(10, 12)), "crop": dict(crop=(10, 12)), "center_crop": dict(crop=(10, 12)),
    "rotate": dict(angle=10.0, dest_width=12, dest_height=10),
    "warp_affine": dict(dest_width=12, dest_height=10, matrix=[1, 0, 0, 1, 0, 0]),
    "resize_crop_mirror": dict(resize_width=12, resize_height=10, crop_w=8, crop_h=8),
    "resize_crop": dict(resize_width=12, resize_height=10),
    "transpose": dict(perm=[1, 0, 2]),
}


def test_each_image_operators_output_buffer_follows_its_declared_rule(small_folder):
    """The spec's output rule is what the operator does: SOURCE keeps the input's 48 x 64 buffer, SIZE and
    RESIZED give the size asked, TRANSPOSED swaps the sides; every image operator is checked (a new one
    fails here until it is)."""
    from fastload.compat.rocal.meta import meta
    from fastload.compat.rocal.pipeline import Pipeline
    image_rules = (spec.SOURCE, spec.SIZE, spec.RESIZED, spec.TRANSPOSED)
    operators = [op for op in spec.OPERATORS.values() if op.supported and op.output in image_rules]
    assert {op.name for op in operators} >= set(IMAGE_CALLS)
    expected = {spec.SOURCE: (48, 64), spec.SIZE: (10, 12), spec.RESIZED: (10, 12), spec.TRANSPOSED: (64, 48)}
    with Pipeline(batch_size=1, rocal_cpu=True):
        jpegs, _ = fn.readers.file(file_root=str(small_folder))
        images = fn.decoders.image(jpegs, file_root=str(small_folder), max_decoded_width=64, max_decoded_height=48)
        for op in operators:
            call = IMAGE_CALLS.get(op.name, {})
            out = call(images) if callable(call) else op.impl(images, **call)
            assert meta(out).image.buffer == expected[op.output], op.name
