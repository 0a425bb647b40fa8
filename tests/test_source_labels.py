"""Labels from outside -- an Encoded item's, a file list's -- of any type: a class index within int64 is
taken as that integer, anything else is refused naming the sample, never truncated or overflowed later."""

import io
import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fastload
from fastload import transforms as T
from fastload.sample_data import make_image
from fastload.sources import INT64

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True)


def _jpeg() -> bytes:
    out = io.BytesIO()
    make_image(0, 16, 12).save(out, "JPEG")
    return out.getvalue()


JPEG = _jpeg()
TRANSFORM = T.Compose([T.RandomResizedCrop(8), T.ToDtype(torch.float32, scale=True)])
LABELS = st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=8), st.booleans(), st.none(),
                   st.binary(max_size=4), st.lists(st.integers(), max_size=2),
                   st.integers(-2**70, 2**70),
                   st.integers(*INT64).map(np.int64), st.floats(-10, 10).map(np.float32),
                   st.integers(-5, 5).map(torch.tensor), st.floats(-5, 5).map(torch.tensor))


@SETTINGS
@given(label=LABELS)
def test_an_encoded_label_is_an_int64_class_index_or_refused_by_name(label):
    try:
        source = fastload.Encoded([(JPEG, 0), (JPEG, label)], TRANSFORM, name="mine")
    except ValueError as error:
        assert "mine[1]" in str(error)
        integral = isinstance(label, (int, np.integer)) or (isinstance(label, torch.Tensor)
                                                            and not label.is_floating_point())
        assert not integral or not INT64[0] <= int(label) <= INT64[1]
        return
    value = source.samples[1][1]
    assert type(value) is int and value == int(label) and INT64[0] <= value <= INT64[1]
    batch = next(iter(fastload.DataLoader(source, batch_size=2)))
    assert batch[1].tolist() == [0, value]


def test_a_float_label_is_refused_not_truncated():
    with pytest.raises(ValueError, match=r"encoded\[0\]: label 2.9 is not a class index"):
        fastload.Encoded([(JPEG, 2.9)])
    with pytest.raises(ValueError, match="int64"):
        fastload.Encoded([(JPEG, 2**63)])
    # with a target_transform the label is the user's to map, as torch's would be
    source = fastload.Encoded([(JPEG, "cat")], TRANSFORM, target_transform=lambda name: {"cat": 3}[name])
    assert next(iter(fastload.DataLoader(source, batch_size=1)))[1].tolist() == [3]


@SETTINGS
@given(label=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Cc", "Zl", "Zp")),
                     min_size=1, max_size=24))
def test_a_file_list_label_is_ascii_decimal_within_int64(tmp_path_factory, label):
    folder = tmp_path_factory.mktemp("list")
    (folder / "a.jpg").write_bytes(JPEG)
    (folder / "list.txt").write_text(f"a.jpg {label}\n", encoding="utf-8")
    try:
        source = fastload.FileList(folder / "list.txt")
    except ValueError as error:
        assert "list.txt:1" in str(error)
        stripped = label.lstrip("+-")
        assert not (label.count("-") + label.count("+") <= 1 and stripped.isascii() and stripped.isdigit()
                    and len(stripped) <= 20 and label[0] in "+-0123456789" and INT64[0] <= int(label) <= INT64[1])
        return
    assert source.samples[0][1] == int(label) and INT64[0] <= int(label) <= INT64[1]


@SETTINGS
@given(content=st.binary(max_size=200))
def test_any_bytes_as_a_file_list_are_samples_or_one_error_naming_the_line(tmp_path_factory, content):
    folder = tmp_path_factory.mktemp("list")
    (folder / "list.txt").write_bytes(content)
    try:
        source = fastload.FileList(folder / "list.txt")
    except ValueError as error:
        assert f"{folder / 'list.txt'}:" in str(error)
        return
    lines = [line.decode("utf-8").strip() for line in content.splitlines()]  # (bytes' line ends: \n, \r)
    kept = [line for line in lines if line and not line.startswith("#")]
    assert len(source.samples) == len(kept)
    for (path, label), line in zip(source.samples, kept):
        name, text = line.rsplit(None, 1)
        assert path == os.path.join(str(folder), name) and label == int(text)
