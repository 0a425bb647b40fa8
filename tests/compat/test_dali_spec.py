"""fastload.compat.dali.spec: every DALI operator declared once, and fn, ops, DALI's deprecated and legacy names,
the refusals and the list of schemas read from those declarations, checked against real DALI 2.4's registry;
and DALI's input sets (a list of DataNodes as an input runs the operator once per element), for every operator."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import fastload.compat.dali as ours
from fastload.compat.dali import fn, ops, spec

from conftest import import_dali

pytestmark = pytest.mark.usefixtures("quiet_iterators")

# DALI schemas deprecated in favour of one fastload runs that are not the same operator under another name
NOT_ALIASES = {"SSDRandomCrop": "takes (images, boxes, labels) and other arguments than RandomBBoxCrop"}
SCHEMAS_RUN = 155  # of DALI 2.4's 173 (172 and the PyTorch plugin's TorchPythonFunction)


def _lookup(module, dotted: str):
    for part in dotted.split("."):
        module = getattr(module, part)
    return module


def _dali_registry() -> dict[str, tuple[str, str]]:
    """Each of real DALI's operator schemas (less the internal ones): its fn and ops names, as DALI names them."""
    import_dali()
    import nvidia.dali.fn  # noqa: F401  (registers the Python operators)
    import nvidia.dali.plugin.pytorch  # noqa: F401  (and the plugin's, as scripts/dali_unsupported.py does)
    from nvidia.dali.ops import _names, _registry
    return {name: (_names._op_name(name, "fn"), _names._op_name(name, "ops"))
            for name in _registry._all_registered_ops() if not name.startswith("_")}


def test_every_dali_schema_is_run_under_all_its_names_or_refused_by_name():
    """Walks real DALI 2.4's registry: a schema fastload runs has its fn function and its ops class (the one
    operator behind both), a schema fastload does not run raises NotImplementedError naming it (or the
    sub-module of it fastload lacks) in both namespaces."""
    from nvidia.dali import backend
    registry = _dali_registry()
    run = spec.schemas_run()
    assert run <= set(registry), run - set(registry)
    for schema, (fn_name, ops_name) in registry.items():
        if schema in run:
            function, cls = _lookup(fn, fn_name), _lookup(ops, ops_name)
            assert function.spec is cls.spec and schema in function.spec.schemas, schema
            continue
        favoured = backend.GetSchema(schema).DeprecatedInFavorOf()
        assert favoured not in run or schema in NOT_ALIASES, f"{schema}: DALI's alias of {favoured}, not declared"
        for api, module, dotted in (("fn", fn, fn_name), ("ops", ops, ops_name)):
            with pytest.raises(NotImplementedError) as refused:
                _lookup(module, dotted)
            named = re.match(r"fastload\.compat\.dali: (\S+) is not supported", str(refused.value)).group(1)
            assert f"{api}.{dotted}".startswith(named) and named != api, (schema, named)
    print(f"fastload runs {len(run)} of DALI {ours.__version__}'s {len(registry)} operator schemas")
    assert len(run) == SCHEMAS_RUN and len(registry) == 173


def test_each_fn_name_has_its_ops_twin_and_the_deprecated_names_are_dalis():
    assert fn.coin_flip is fn.random.coin_flip and ops.CoinFlip.spec is ops.random.CoinFlip.spec
    assert fn.uniform is fn.random.uniform and fn.file_reader is fn.readers.file
    assert fn.coco_reader is fn.readers.coco and fn.image_decoder is fn.decoders.image
    assert fn.experimental.decoders.image is fn.decoders.image and ops.nvJPEGDecoder.spec is ops.ImageDecoder.spec
    from fastload.compat.dali.fn import decoders
    from fastload.compat.dali.ops.readers import COCO
    import fastload.compat.dali.fn.io.file as io_file
    assert decoders.image_slice is fn.decoders.image_slice and COCO.spec.name == "readers.coco"
    assert io_file.read.spec.ops == "io.file.Read"
    for operator in spec.OPERATORS.values():
        assert len(operator.aliases) + 1 == len(operator.names("fn"))
        assert len(operator.names("ops")) == len(operator.names("fn")) + len(operator.legacy)
        for name in operator.names("fn"):
            assert _lookup(fn, name) is spec.FUNCTIONS[operator.name], name
        for name in operator.names("ops"):
            assert _lookup(ops, name).spec is operator, name


def test_a_name_declared_twice_is_refused():
    with pytest.raises(RuntimeError, match="fn.pad declared twice"):
        spec.declare(spec.OpSpec("pad", "Padding", lambda data: data))
    with pytest.raises(RuntimeError, match="ops.CoinFlip declared twice"):
        spec.declare(spec.OpSpec("coin_toss", "CoinToss", lambda: None, aliases={"coin_flip_2": "CoinFlip"}))
    assert "coin_toss" not in spec.OPERATORS and "pad" in spec.OPERATORS


def test_a_refusal_names_the_operator_and_what_is_close():
    with pytest.raises(NotImplementedError, match=r"fn\.coin_flp is not supported; .*closest: fn\.coin_flip, "
                                                  r"fn\.random\.coin_flip"):
        fn.coin_flp
    with pytest.raises(NotImplementedError, match=r"ops\.io\.file\.Write is not supported; ops\.io\.file has: "
                                                  r"Read \("):
        ops.io.file.Write
    with pytest.raises(NotImplementedError, match=r"fn\.experimental\.readers is not supported"):
        fn.experimental.readers


def test_lowering_reads_the_fused_operators_names():
    """The operators lowering folds into the fused plan are the ones declared ``fused`` (and each name it
    compares a node with is a declared operator, or a copy)."""
    source = Path(spec.__file__).with_name("lowering.py").read_text()
    compared = set(re.findall(r'\.name (?:==|!=|in) \(?"([a-z_.]+)"', source))
    compared |= {name for group in re.findall(r'\.name (?:not )?in \(([^)]*)\)', source)
                 for name in re.findall(r'"([a-z_.]+)"', group)}
    fused = {operator.name for operator in spec.OPERATORS.values() if operator.fused}
    assert compared == fused, (compared, fused)


# ------------------------------------------------------------------------------------------ input sets

BATCH = 2
rng = np.random.default_rng(11)
IMAGES_A = [rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8) for h, w in ((7, 9), (5, 6))]
IMAGES_B = [rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8) for h, w in ((4, 11), (8, 8))]
BOXES = [np.array([[0.1, 0.2, 0.5, 0.6], [0.3, 0.3, 0.9, 0.8]], dtype=np.float32)] * BATCH


def _run(mod, graph) -> list[list[np.ndarray]]:
    @mod.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=5)
    def pipe():
        return graph(mod)
    p = pipe()
    p.build()
    return [[np.array(out.at(i)) for i in range(BATCH)] for out in p.run()]


def _sources(mod):
    a = mod.fn.external_source(source=lambda: IMAGES_A, batch=True, layout="HWC")
    b = mod.fn.external_source(source=lambda: IMAGES_B, batch=True, layout="HWC")
    return a, b


def _input_sets(mod):
    a, b = _sources(mod)
    padded = mod.fn.pad([a, b], fill_value=3, shape=(12, 12), axes=(0, 1))
    cropped = mod.fn.crop([a, b], crop=(3, 4))
    flipped = mod.ops.Flip(vertical=1)([a, b])
    joined = mod.fn.cat([a, mod.fn.flip(a)], a, axis=1)  # the input that is no list repeats
    one = mod.fn.flip([a])  # one set: one node, not a list
    stacked = mod.fn.stack([a, b], [a, b])
    for made in (padded, cropped, flipped, joined, stacked):
        assert isinstance(made, list) and len(made) == 2
    return (*padded, *cropped, *flipped, *joined, *stacked, one)


def test_input_sets_give_what_dali_gives():
    dali = import_dali()
    theirs, mine = _run(dali, _input_sets), _run(ours, _input_sets)
    assert len(theirs) == len(mine) == 11
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.dtype == b.dtype and np.array_equal(a, b), (k, i)


def _bbox_sets(mod):
    boxes = [mod.fn.external_source(source=lambda: BOXES, batch=True) for _ in range(2)]
    (anchor_a, anchor_b), (shape_a, shape_b), (boxes_a, boxes_b) = mod.fn.random_bbox_crop(
        boxes, bbox_layout="xyXY", thresholds=[0.1, 0.3], scaling=[0.3, 1.0])
    return anchor_a, anchor_b, shape_a, shape_b, boxes_a, boxes_b


def test_an_operator_of_several_outputs_gives_a_list_per_output_and_its_sets_draw_alike():
    """DALI ties the instances of one call together (one seed): two sets of equal inputs get equal draws."""
    dali = import_dali()
    for mod in (dali, ours):
        anchor_a, anchor_b, shape_a, shape_b, boxes_a, boxes_b = _run(mod, _bbox_sets)
        for x, y in ((anchor_a, anchor_b), (shape_a, shape_b), (boxes_a, boxes_b)):
            assert all(np.array_equal(p, q) for p, q in zip(x, y)), mod.__name__


def test_input_sets_of_other_lengths_a_tuple_and_a_list_of_values_are_refused():
    def graph(mod):
        a, b = _sources(mod)
        mod.fn.cat([a, b], [a])
    with pytest.raises(ValueError, match="same length"):
        _run(ours, graph)

    def as_tuple(mod):
        a, b = _sources(mod)
        mod.fn.pad((a, b))
    with pytest.raises(TypeError, match="tuple"):
        _run(ours, as_tuple)

    def values(mod):
        a, _ = _sources(mod)
        mod.fn.cat(a, [a, 1])
    with pytest.raises(TypeError, match="input 1 is a list holding DataNodes"):
        _run(ours, values)


def _constants(mod):
    """A list given as an input that holds no DataNode is no input set: external_source's source, a list."""
    return mod.fn.external_source([[np.arange(3, dtype=np.int32)] * BATCH], batch=True, cycle=True)


def test_a_list_without_data_nodes_is_no_input_set():
    dali = import_dali()
    theirs, mine = _run(dali, _constants), _run(ours, _constants)
    for a_out, b_out in zip(theirs, mine):
        for a, b in zip(a_out, b_out):
            assert a.dtype == b.dtype and np.array_equal(a, b)


def test_the_python_operators_refuse_input_sets_as_dali_does():
    """DALI's Python operators take no input sets (a TypeError when the graph is defined); every other operator
    does."""
    with ours.Pipeline(batch_size=1, device_id=None):
        a = fn.external_source(source=lambda: [np.ones(2, np.float32)], batch=True)
        for python_operator in (fn.python_function, fn.torch_python_function, fn.dl_tensor_python_function):
            with pytest.raises(TypeError, match="Multiple Input Sets"):
                python_operator([a, a], function=lambda x: x, batch_processing=False)
        assert len(fn.cast([a, a], dtype=ours.types.INT32)) == 2


def test_a_per_frame_argument_is_refused_by_name():
    """DALI applies a per_frame argument frame by frame; fastload's operators take one value per sample, so
    such an argument is refused, naming the operator and the argument, not read as something else."""
    with ours.Pipeline(batch_size=1, device_id=None):
        video = fn.external_source(source=lambda: [np.zeros((2, 4, 4, 3), np.uint8)], batch=True, layout="FHWC")
        angles = fn.external_source(source=lambda: [np.array([1.0, 2.0], np.float32)], batch=True)
        with pytest.raises(NotImplementedError, match="fn.rotate: argument angle is per-frame"):
            fn.rotate(video, angle=fn.per_frame(angles))
