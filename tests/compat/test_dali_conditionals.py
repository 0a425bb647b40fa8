"""DALI's conditionals (``@pipeline_def(enable_conditionals=True)``) on fastload.compat.dali, against real
DALI 2.4 (CPU operators, device_id=None): ``if``/``elif``/``else`` and ``and``/``or``/``not`` on per-sample
DataNodes, each definition written once for both libraries; where the predicates come from the reader's
labels the outputs must be equal, value for value."""

from __future__ import annotations

import io

import numpy as np
import pytest

import fastload.compat.dali as ours
from fastload.compat.dali import fn
from fastload.sample_data import make_image

from conftest import import_dali, write_folder


SIZES = [[(61, 47), (97, 71)], [(50, 93), (40, 40)], [(120, 90), (33, 17), (75, 75), (64, 48)]]  # 3 classes


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(write_folder(tmp_path_factory.mktemp("dali_conditionals"), SIZES))


@pytest.fixture(scope="module")
def small_root(tmp_path_factory):  # fn.rotate is slow per pixel: small images for the many-sample test
    sizes = [[(w // 4, h // 4) for w, h in group] for group in SIZES]
    return str(write_folder(tmp_path_factory.mktemp("dali_conditionals_small"), sizes))


def assert_same(define, runs=1):
    """``define(lib)`` built with DALI and with fastload gives the same outputs (values, dtypes, shapes)."""
    dali = import_dali()
    theirs, mine = define(dali), define(ours)
    theirs.build()
    for _ in range(runs):
        for k, (t, m) in enumerate(zip(theirs.run(), mine.run(), strict=True)):
            assert len(t) == len(m) and m.dtype.name == t.dtype.name, (k, m.dtype, t.dtype)
            for i in range(len(t)):
                np.testing.assert_array_equal(m.at(i), t.at(i), err_msg=f"output {k}, sample {i}")


def test_if_else_on_a_label_matches_dali(root):
    def define(lib):
        @lib.pipeline_def(enable_conditionals=True, batch_size=8, num_threads=2, device_id=None, seed=3)
        def pipe():
            jpegs, labels = lib.fn.readers.file(file_root=root)
            images = lib.fn.decoders.image(jpegs)
            if labels[0] == 1:
                rotated = lib.fn.rotate(images, angle=30, fill_value=0)
            else:
                rotated = lib.fn.flip(images)
            flipped = images
            if labels[0] >= 1:  # no else: the other samples keep the value from before
                flipped = lib.fn.flip(images, horizontal=0, vertical=1)
            return rotated, flipped, labels
        return pipe()
    assert_same(define, runs=2)


def test_nested_if_elif_chain_and_merged_constants_match_dali(root):
    def define(lib):
        @lib.pipeline_def(enable_conditionals=True, batch_size=8, num_threads=1, device_id=None)
        def pipe():
            jpegs, labels = lib.fn.readers.file(file_root=root)
            images = lib.fn.decoders.image(jpegs)
            label = labels[0]
            offset = 0  # a Python number before, a DataNode after (DALI makes branch constants nodes)
            if label == 0:
                out = lib.fn.flip(images)
            elif label == 1:
                out = lib.fn.flip(images, horizontal=0, vertical=1)
                offset = 7
            else:
                if lib.fn.random.uniform(range=[0, 1]) < 2.0:  # always true: nested, on a random value
                    out = lib.fn.crop(images, crop=(12, 10))
                    offset = 100
                else:
                    out = images
            return out, labels + offset, offset
        return pipe()
    assert_same(define, runs=2)


def test_and_or_not_on_datanodes_match_dali(root):
    def define(lib):
        @lib.pipeline_def(enable_conditionals=True, batch_size=8, num_threads=1, device_id=None)
        def pipe():
            jpegs, labels = lib.fn.readers.file(file_root=root)
            label = labels[0]
            either = (label == 0) or (label == 2)
            both = (label >= 1) and (label <= 1)
            neither = not either
            chained = (label > 0) and (label < 3) and not (label == 1)
            value = labels
            if not (label == 1) and label >= 1:
                value = labels * 10
            elif label == 0 or both:
                value = labels - 1
            return either, both, neither, chained, value
        return pipe()
    assert_same(define, runs=2)


def flip_where(lib, images, label, wanted):
    """A helper the pipeline calls: DALI converts the functions a pipeline calls, and so does fastload."""
    if label == wanted or not wanted:
        images = lib.fn.flip(images)
    return images


def test_functions_the_pipeline_calls_are_converted_too(root):
    def define(lib):
        @lib.pipeline_def(enable_conditionals=True, batch_size=8, num_threads=1, device_id=None)
        def pipe():
            jpegs, labels = lib.fn.readers.file(file_root=root)
            images = lib.fn.decoders.image(jpegs)

            def nested(x):
                if labels[0] == 2:
                    x = x + 1
                return x
            return flip_where(lib, images, labels[0], 1), nested(labels), flip_where(lib, images, labels[0], 0)
        return pipe()
    assert_same(define)


def test_python_conditions_trace_one_branch(root):
    def define(lib, mirror, depth):
        @lib.pipeline_def(enable_conditionals=True, batch_size=4, num_threads=1, device_id=None)
        def pipe():
            jpegs, labels = lib.fn.readers.file(file_root=root)
            images = lib.fn.decoders.image(jpegs)
            for _ in range(depth):
                if mirror and depth > 0:  # plain Python values: Python's `if` and `and`
                    images = lib.fn.flip(images)
                else:
                    images = lib.fn.crop(images, crop=(10, 12))
            if not mirror:
                return images, labels  # a `return` in a plain `if` is fine
            return images, labels + 1
        return pipe()

    for mirror, depth in ((True, 1), (False, 2)):
        assert_same(lambda lib: define(lib, mirror, depth))
    pipe = define(ours, True, 3)
    names = [op.name for op in pipe._ops]
    assert names.count("flip") == 3 and "crop" not in names and not any("_conditional" in n for n in names)


def test_variable_changed_in_one_branch_keeps_its_value_in_the_other(root):
    def define(lib):
        @lib.pipeline_def(enable_conditionals=True, batch_size=8, num_threads=1, device_id=None)
        def pipe():
            jpegs, labels = lib.fn.readers.file(file_root=root)
            images = lib.fn.decoders.image(jpegs)
            before, count = images, labels * 0
            if labels[0] == 2:
                images = lib.fn.flip(images)
                unused = images  # noqa: F841  (assigned in one branch only, never used after: fine, as in DALI)
                pair = (images, labels)
            else:
                labels = labels + 5
                pair = (before, labels * 2)  # tuples merge element by element
            for i in range(3):
                if labels[0] > i:
                    count = count + 1
            return images, before, labels, count, pair[0], pair[1]
        return pipe()
    assert_same(define)


def test_the_branch_not_taken_does_not_run_for_the_sample():
    """DALI splits the batch: the decoder in the `if` branch never sees the samples that are not images."""
    good = io.BytesIO()
    make_image(3, 20, 12).save(good, format="JPEG", quality=90)
    data = [np.frombuffer(good.getvalue(), np.uint8), np.frombuffer(b"not an image at all", np.uint8)] * 2
    is_image = [np.array(True), np.array(False)] * 2
    blank = [np.zeros((2, 2, 3), np.uint8)] * 4

    def define(lib):
        @lib.pipeline_def(enable_conditionals=True, batch_size=4, num_threads=1, device_id=None)
        def pipe():
            encoded = lib.fn.external_source(source=lambda: data)
            image = lib.fn.external_source(source=lambda: is_image)
            placeholder = lib.fn.external_source(source=lambda: blank, layout="HWC")
            if image:
                out = lib.fn.decoders.image(encoded)
            else:
                out = placeholder
            return out
        return pipe()
    assert_same(define)
    out = define(ours).run()[0]
    assert out.at(0).shape == (12, 20, 3) and out.at(1).shape == (2, 2, 3)


def test_the_documented_example_rotates_a_quarter_of_the_images(small_root):
    """DALI's example: rotate where a uniform draw is under 0.25, else flip. Random, so checked by itself:
    about a quarter taken, and each sample is exactly its branch's result."""
    @ours.pipeline_def(enable_conditionals=True, batch_size=8, num_threads=2, device_id=None, seed=11)
    def pipe(angle):
        jpegs, labels = fn.readers.file(file_root=small_root)
        images = fn.decoders.image(jpegs)
        do_rotate = fn.random.uniform(range=[0, 1]) < 0.25
        if do_rotate:
            images = fn.rotate(images, angle=angle if angle is not None else fn.random.uniform(range=[10, 30]),
                               fill_value=0)
        else:
            images = fn.flip(images)
        return images, labels, do_rotate

    @ours.pipeline_def(batch_size=8, num_threads=1, device_id=None)
    def references():
        jpegs, labels = fn.readers.file(file_root=small_root)
        images = fn.decoders.image(jpegs)
        return fn.rotate(images, angle=20, fill_value=0), fn.flip(images), images

    rotated, flipped, decoded = references().run()
    for angle in (20, None):
        p, taken = pipe(angle), []
        for _ in range(40):  # 320 samples, the 8 files 40 times
            images, labels, do_rotate = p.run()
            for i in range(8):
                taken.append(bool(do_rotate.at(i)))
                if not taken[-1]:
                    np.testing.assert_array_equal(images.at(i), flipped.at(i))
                elif angle == 20:
                    np.testing.assert_array_equal(images.at(i), rotated.at(i))
                else:  # a random angle in [10, 30): the rotated image's bounding box is larger
                    h, w = decoded.at(i).shape[:2]
                    assert images.at(i).shape[0] > min(h, w) and images.at(i).shape[1] > min(h, w)
        assert abs(np.mean(taken) - 0.25) < 0.07, np.mean(taken)


def test_errors_are_dalis(dali, root):
    def define(lib, kind):
        @lib.pipeline_def(enable_conditionals=True, batch_size=2, num_threads=1, device_id=None)
        def pipe():
            jpegs, labels = lib.fn.readers.file(file_root=root)
            if kind == "one_branch":
                if labels[0] == 0:
                    only_here = labels + 1
                return only_here
            if kind == "not_scalar":
                if labels == 0:  # labels are [1]-shaped: DALI wants a scalar condition (labels[0])
                    labels = labels + 1
                return labels
            return labels[0] and labels[0] == 1  # `and` takes booleans only
        return pipe()

    for lib in (dali, ours):
        with pytest.raises(RuntimeError, match="only_here"):
            define(lib, "one_branch")
    with pytest.raises(RuntimeError, match="only one branch .*`else` branch"):
        define(ours, "one_branch")
    for kind, error, match in (("not_scalar", ValueError, "scalar"), ("and_int", TypeError, "booleans")):
        theirs = define(dali, kind)
        theirs.build()
        with pytest.raises(RuntimeError):
            theirs.run()
        with pytest.raises(error, match=match):
            define(ours, kind).run()


def test_unsupported_forms_are_refused(root):
    def define(kind):
        @ours.pipeline_def(enable_conditionals=True, batch_size=2, num_threads=1, device_id=None)
        def pipe():
            jpegs, labels = fn.readers.file(file_root=root)
            coin = fn.random.coin_flip()
            if kind == "return":
                if coin:
                    return labels
            if kind == "break":
                for _ in range(2):
                    if coin:
                        break
            if kind == "while":
                while coin:
                    labels = labels + 1
            if kind == "ifexp":
                labels = labels if coin else labels + 1
            return labels
        return pipe()

    for kind, match in (("return", "`return` inside an `if` on a DataNode"), ("break", "`break`"),
                        ("while", "`while` loop on a DataNode"), ("ifexp", "conditional expression")):
        with pytest.raises(NotImplementedError, match=match):
            define(kind)
    assert len(define("none").run()[0]) == 2


def test_conditionals_are_off_unless_asked(root):
    def body():
        jpegs, labels = fn.readers.file(file_root=root)
        if fn.random.coin_flip():
            labels = labels + 1
        return labels

    with pytest.raises(TypeError, match="enable_conditionals=True"):
        ours.pipeline_def(batch_size=2, device_id=None)(body)()
    pipe = ours.pipeline_def(batch_size=2, num_threads=1, device_id=None)(body)(enable_conditionals=True)
    assert pipe.run()[0].as_array().shape == (2, 1)


# ------------------------------------------------------ DALI's conditionals tutorial: fn._conditional by name

def _explicit(lib, values, truths, inner):
    """split / merge / not_ / validate_logical written out (DALI's conditionals tutorial), with a nested
    split on the true side and the sides themselves as outputs (batches of their samples only)."""
    @lib.pipeline_def(batch_size=len(values), num_threads=1, device_id=None)
    def pipe():
        x = lib.fn.external_source(source=lambda: values)
        pred = lib.fn.external_source(source=lambda: truths)
        deeper = lib.fn.external_source(source=lambda: inner)
        true_x, false_x = lib.fn._conditional.split(x, predicate=pred)
        true_deeper, _ = lib.fn._conditional.split(deeper, predicate=pred)
        a, b = lib.fn._conditional.split(true_x, predicate=true_deeper)
        true_done = lib.fn._conditional.merge(a * 10, b - 1, predicate=true_deeper)
        merged = lib.fn._conditional.merge(true_done, false_x + 100, predicate=pred)
        negated = lib.fn._conditional.not_(pred)
        checked = lib.fn._conditional.validate_logical(pred, expression_name="and", expression_side="left")
        return merged, negated, checked, true_x, false_x, a
    return pipe()


def _lists(outputs):
    return [[np.asarray(out.at(i)).tolist() for i in range(len(out))] for out in outputs]


def test_explicit_split_merge_and_not_are_dalis(dali):
    rng = np.random.default_rng()
    for size in (7, 1, 5):
        values = [rng.uniform(-9, 9, (int(rng.integers(1, 4)),)).astype(np.float32) for _ in range(size)]
        truths = [np.array(bool(b)) for b in rng.integers(0, 2, size)]
        inner = [np.array(bool(b)) for b in rng.integers(0, 2, size)]
        theirs, mine = _explicit(dali, values, truths, inner), _explicit(ours, values, truths, inner)
        theirs.build()
        expected, got = _lists(theirs.run()), _lists(mine.run())
        assert got == expected, (values, truths, inner)
        assert [len(x) for x in got[3:5]] == [sum(map(bool, truths)), size - sum(map(bool, truths))]


def test_explicit_split_and_merge_refuse_what_dali_refuses():
    values = [np.float32([k]) for k in range(3)]
    truths = [np.array(k == 1) for k in range(3)]

    def build(body):
        @ours.pipeline_def(batch_size=3, num_threads=1, device_id=None)
        def pipe():
            x = fn.external_source(source=lambda: values)
            pred = fn.external_source(source=lambda: truths)
            return body(x, pred)
        return pipe().run()

    with pytest.raises(TypeError, match="predicate must be a DataNode"):
        build(lambda x, pred: tuple(fn._conditional.split(x, predicate=True)))
    with pytest.raises(ValueError, match="does not come from a fn._conditional.split"):
        build(lambda x, pred: fn._conditional.merge(x, x, predicate=pred))
    with pytest.raises(RuntimeError, match="no value for it"):
        build(lambda x, pred: fn._conditional.merge(*reversed(fn._conditional.split(x, predicate=pred)),
                                                    predicate=pred))
    with pytest.raises(ValueError, match="scalars"):
        build(lambda x, pred: tuple(fn._conditional.split(x, predicate=x)))  # a 1-element array, not 0-d
    with pytest.raises(TypeError, match="booleans"):
        build(lambda x, pred: fn._conditional.validate_logical(x[0], expression_name="or", expression_side="right"))
