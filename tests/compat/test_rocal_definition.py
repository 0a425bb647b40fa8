"""fastload.compat.rocal.definition: what the operators record lands on their own pipeline's Definition,
under rocAL's Pipeline attribute names, and nowhere else."""

from __future__ import annotations

import pytest

from fastload.compat.rocal import fn
from fastload.compat.rocal.definition import Definition, RocalGraph, defining
from fastload.compat.rocal.ops_readers import FileReader
from fastload.compat.rocal.pipeline import Pipeline


def test_defining_is_refused_outside_a_rocal_pipeline():
    with pytest.raises(RuntimeError, match="inside a rocAL pipeline's definition"):
        defining()


def test_operators_record_on_their_own_pipelines_definition(small_folder):
    """Two pipelines defined one inside the other: each operator records on the pipeline being defined;
    rocAL's attribute names (_num_classes, _one_hot_encoding, _last_batch_policy) read that record."""
    outer, inner = Pipeline(batch_size=2, num_threads=1, rocal_cpu=True), Pipeline(batch_size=3, rocal_cpu=True)
    with outer:
        jpegs, _ = fn.readers.file(file_root=str(small_folder))
        with inner:
            assert isinstance(defining(), Definition) and defining() is inner.definition
            fn.one_hot(num_classes=7)
        images = fn.decoders.image(jpegs, file_root=str(small_folder))
        outer.set_outputs(images)
    assert isinstance(outer._dali_pipeline, RocalGraph) and outer._dali_pipeline.definition is outer.definition
    assert isinstance(outer.definition.reader, FileReader) and inner.definition.reader is None
    assert outer.definition.label_reader and not inner.definition.label_reader  # rocAL's labelReader kind
    assert (inner._num_classes, inner._one_hot_encoding) == (7, True)
    assert (outer._num_classes, outer._one_hot_encoding) == (None, False)
    assert outer.definition.labels is not None and outer._last_batch_policy is outer.definition.last_batch_policy
    assert inner.definition.batch_size == 3 and not outer._is_external_source_operator


def test_the_loader_and_timing_info_build_the_pipeline_first(small_folder):
    """``pipe.loader`` and ``timing_info()`` before ``build()``: the pipeline is built (its graph gets the
    outputs set_outputs was given), not refused in DALI's words."""
    pipe = Pipeline(batch_size=2, num_threads=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=str(small_folder))
        pipe.set_outputs(fn.resize(fn.decoders.image(jpegs, file_root=str(small_folder)), resize_width=8,
                                   resize_height=8))
    try:
        assert pipe.timing_info().load_time == 0 and pipe.loader is not None
        assert pipe.run()[0].batch.shape[0] == 2
    finally:
        pipe.rocal_release()
