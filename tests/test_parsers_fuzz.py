"""Property-based tests of the byte-level parsers that read files from outside: tar headers and member names
(tarshards), TFRecord framing and the tf.train.Example parser (tfrecords), labels of any type; and the
coverage-guided fuzz targets of benchmarks/fuzz_parsers.py run for a few seconds each.

Each property states the parser's contract against hostile input: valid files round-trip against the
writers (Python's tarfile, ``tfrecords.example``); random bytes and random corruptions of valid files end
in the module's documented outcome (an index that says where it stopped, a ValueError) within a bounded
time, never another exception, a hang or an allocation of a size read from the file. Hypothesis runs
derandomized with a small number of examples, so the suite stays fast and stable."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tarfile
import tempfile

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fastload import tarshards, tfrecords  # noqa: E402
from fastload.shardfiles import Sequential  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BOUND = 2.0  # seconds one example may take: a parser that loops on a header fails here, not in CI's timeout

# member names: path segments of letters, digits, unicode, dots (hidden files, several extensions), long
_segment = st.text(st.sampled_from("abcXYZ019_-.éü日本"), min_size=1, max_size=40).filter(
    lambda s: s not in (".", ".."))
_name = st.lists(_segment, min_size=1, max_size=8).map("/".join).filter(lambda n: len(n.encode()) < 400)
_members = st.lists(st.tuples(_name, st.integers(0, 1500)), min_size=0, max_size=8)


def _write_tar(members, tar_format) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tar_format) as archive:
        for number, (name, size) in enumerate(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = size, 0
            archive.addfile(info, io.BytesIO(bytes([number % 251]) * size))
    return out.getvalue()


@contextlib.contextmanager
def _bounded(seconds: float = BOUND):
    """Fail, rather than hang, where the body runs past ``seconds`` (an interval timer's signal; the main
    thread, where pytest runs tests)."""
    def expired(*_):
        raise TimeoutError(f"a parser ran past {seconds} s on one example")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _index_both_ways(data: bytes):
    """build_index of ``data`` as a local file and as a stream, within the time bound: the two must agree."""
    with tempfile.NamedTemporaryFile(suffix=".tar") as file:
        file.write(data)
        file.flush()
        with _bounded():
            local = tarshards.build_index(file.name)
            streamed = tarshards.build_index(None, io.BytesIO(data))
    assert local == streamed
    return local


def _grouped(names):
    """webdataset 1.0.2's rules over member names (the reference): its tar iterator skips ``__meta__`` names,
    base_plus_ext's pattern splits the key from the extensions (no match: in no sample), group_by_keys makes a
    run of one key a sample."""
    samples = []
    for name in names:
        match = re.match(r"^((?:.*/|)[^.]+)[.]([^/]*)$", name)
        if re.match(r"__[^/]*__($|/)", name) or not match:
            continue
        key, extension = match.group(1), match.group(2).lower()
        if not samples or samples[-1][0] != key:
            samples.append([key, []])
        samples[-1][1].append(extension)
    return samples


@PROPERTY
@given(members=_members, tar_format=st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT]))
def test_tar_headers_round_trip_against_pythons_tarfile_writer(members, tar_format):
    """Archives tarfile writes (GNU long names, pax path records, ustar prefixes; unicode, dots, sizes 0 to
    1500) read back member for member: names, data offsets, sizes and bytes as tarfile reads them, and the
    samples grouped as webdataset groups them."""
    try:
        data = _write_tar(members, tar_format)
    except ValueError:  # a name ustar cannot hold (no prefix split): not an archive to read back
        return
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        expected = [(m.name, m.offset_data, m.size) for m in archive if m.isreg()]
    got = list(tarshards.members(Sequential(stream=io.BytesIO(data)), lambda name, size: True))
    assert [(name, offset, size) for name, offset, size, _ in got] == expected
    assert all(payload == data[offset:offset + size] for _, offset, size, payload in got)
    index = _index_both_ways(data)
    assert index["error"] is None
    reference = _grouped([name for name, _, _ in expected])
    assert [key for key, _, _ in index["samples"]] == [key for key, _ in reference]
    for (key, found, _), (_, extensions) in zip(index["samples"], reference):
        assert set(found) == set(extensions)
    assert len(index["problems"]) == sum(len(e) != len(set(e)) for _, e in reference)


def _headers(data: bytes) -> list[int]:
    """Offsets of the headers of a valid archive (tarfile reads it: the writer's own output)."""
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return [m.offset for m in archive]


def _with_checksum(block: bytearray) -> bytearray:
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return block


_valid_tar = st.builds(_write_tar, st.lists(st.tuples(_name, st.integers(0, 700)), min_size=1, max_size=5),
                       st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]))


@PROPERTY
@given(data=_valid_tar, choice=st.data())
def test_corrupt_tar_headers_end_the_index_with_a_reason_never_hang_or_raise(data, choice):
    """A header's size field replaced by any 12 bytes (negative and huge base-256, octal with signs and
    junk), its typeflag or name by any bytes, its checksum recomputed so the header is believed -- or any
    bytes of the file flipped: the index is built within the time bound, says where it stopped and why,
    and never raises; every size it records lies in the file or is the one member its end cuts."""
    blob = bytearray(data)
    header = choice.draw(st.sampled_from(_headers(data)), label="header")
    block = bytearray(blob[header:header + 512])
    field = choice.draw(st.sampled_from(["size", "base256", "kind", "name", "flips"]), label="field")
    if field == "size":
        block[124:136] = choice.draw(st.binary(min_size=12, max_size=12), label="size bytes")
    elif field == "base256":
        sign = choice.draw(st.sampled_from([0x80, 0xFF]), label="sign")
        block[124:136] = bytes([sign]) + choice.draw(st.binary(min_size=11, max_size=11), label="magnitude")
    elif field == "kind":
        block[156] = choice.draw(st.integers(0, 255), label="typeflag")
    elif field == "name":
        block[:100] = choice.draw(st.binary(min_size=100, max_size=100), label="name")
    if field != "flips":
        blob[header:header + 512] = _with_checksum(block)
    else:
        for at in choice.draw(st.lists(st.integers(0, len(blob) - 1), min_size=1, max_size=8), label="flips"):
            blob[at] ^= choice.draw(st.integers(1, 255), label="xor")
    index = _index_both_ways(bytes(blob))
    assert tarshards.is_whole_index(index)
    cut = {position for position, reason in index["problems"] if "cut short" in reason}
    for position, (_, found, _) in enumerate(index["samples"]):
        for offset, size in found.values():
            assert offset + size <= len(blob) or position in cut
    json.dumps(index)  # the index is cached as JSON


@PROPERTY
@given(data=st.binary(max_size=3000))
def test_random_bytes_index_as_a_tar_with_an_error_never_an_exception(data):
    index = _index_both_ways(data)
    assert tarshards.is_whole_index(index)
    assert index["error"] is not None or not data.strip(b"\0") or index["samples"] or len(data) >= 512


def _reference_label(extension: str, text: str):
    """What parse_label must give: an int64 from ASCII digits (an optional sign, whitespace around) or a
    JSON integer (or {"label": n} / {"cls": n}); None where it must raise ValueError."""
    if extension != "json":
        stripped = text.strip()
        value = int(stripped) if re.fullmatch(r"[+-]?[0-9]+", stripped) else None
    else:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if isinstance(value, dict):
            value = value.get("label", value.get("cls"))
        value = value if isinstance(value, int) and not isinstance(value, bool) else None
    return value if value is not None and -(1 << 63) <= value < 1 << 63 else None


_json = st.recursive(st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) |
                     st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) |
                     st.dictionaries(st.sampled_from(["label", "cls", "x"]), inner, max_size=3), max_leaves=6)
_label_text = st.one_of(
    st.integers(-(1 << 70), 1 << 70).map(str),
    st.tuples(st.sampled_from(["", " ", "\n", "\t", " \u3000"]), st.integers(-(1 << 66), 1 << 66),
              st.sampled_from(["", " ", "\n", "\r\n"])).map(lambda t: f"{t[0]}{t[1]}{t[2]}"),
    st.floats().map(str), st.text(st.characters(categories=["Nd"]), max_size=4),  # unicode digits
    st.text(max_size=12), _json.map(json.dumps))


@PROPERTY
@given(extension=st.sampled_from(["cls", "txt", "json"]), text=_label_text)
def test_labels_of_any_type_are_int64_or_a_value_error(extension, text):
    """Int strings with whitespace and signs, ints past int64, floats, unicode digits, any text, any JSON:
    parse_label gives the int64 the reference reads, or raises ValueError (the sample's error)."""
    expected = _reference_label(extension, text)
    if expected is None:
        with pytest.raises(ValueError):
            tarshards.parse_label(extension, text)
    else:
        assert tarshards.parse_label(extension, text) == expected


_floats32 = st.floats(width=32, allow_nan=False)
_int64 = st.integers(-(1 << 63), (1 << 63) - 1)
_feature_values = st.one_of(st.lists(st.binary(max_size=30), max_size=4), st.lists(_int64, min_size=1, max_size=6),
                            st.lists(_floats32, min_size=1, max_size=6))
_features = st.dictionaries(st.text(max_size=20), _feature_values, max_size=5)


@PROPERTY
@given(features=_features)
def test_examples_round_trip_for_random_features(features):
    """example() -> parse_example() for any names and lists of bytes, int64s and float32s."""
    assert tfrecords.parse_example(tfrecords.example(features)) == features


def _records(features_list) -> bytes:
    return b"".join(tfrecords.frame(tfrecords.example(f)) for f in features_list)


def _tfrecord_index_both_ways(data: bytes) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".tfrecord") as file:
        file.write(data)
        file.flush()
        with _bounded():
            local = tfrecords.build_index(file.name, None, tfrecords.IMAGE_FEATURE, tfrecords.LABEL_FEATURE)
            streamed = tfrecords.build_index(None, io.BytesIO(data), tfrecords.IMAGE_FEATURE,
                                             tfrecords.LABEL_FEATURE)
    assert local == streamed
    assert tfrecords.is_whole_index(local, [tfrecords.IMAGE_FEATURE, tfrecords.LABEL_FEATURE])
    for offset, size, label, problem in local["records"]:
        assert offset + size <= len(data) and -(1 << 63) <= label < 1 << 63 and (problem is None or label == -1)
    return local


_valid_records = st.lists(st.fixed_dictionaries({tfrecords.IMAGE_FEATURE: st.lists(st.binary(max_size=40),
                                                                                    min_size=1, max_size=2),
                                                 tfrecords.LABEL_FEATURE: st.lists(_int64, min_size=1, max_size=2)}),
                          min_size=1, max_size=4).map(_records)


@PROPERTY
@given(data=_valid_records, choice=st.data())
def test_mutated_tfrecord_files_index_record_by_record_never_raise(data, choice):
    """Any bytes of a valid file flipped, a length field replaced by any u64 with its CRC made valid, or the
    file cut anywhere: build_index gives each record its label or its reason, the same from a file and a
    stream, within the time bound, and never raises."""
    blob = bytearray(data)
    how = choice.draw(st.sampled_from(["flips", "length", "cut"]), label="how")
    if how == "flips":
        for at in choice.draw(st.lists(st.integers(0, len(blob) - 1), min_size=1, max_size=6), label="flips"):
            blob[at] ^= choice.draw(st.integers(1, 255), label="xor")
    elif how == "length":
        length = struct.pack("<Q", choice.draw(st.integers(0, (1 << 64) - 1), label="length"))
        blob[:12] = length + struct.pack("<I", tfrecords.masked_crc(length))
    else:
        del blob[choice.draw(st.integers(0, len(blob) - 1), label="cut"):]
    _tfrecord_index_both_ways(bytes(blob))


@PROPERTY
@given(data=st.binary(max_size=2000))
def test_random_bytes_as_tfrecords_and_examples_raise_only_the_documented_errors(data):
    _tfrecord_index_both_ways(data)
    for parse in (tfrecords.parse_example, tfrecords.unframe):
        try:
            with _bounded():
                parse(data)
        except ValueError:
            pass


@PROPERTY
@given(features=_features, choice=st.data())
def test_mutated_examples_parse_or_raise_value_error(features, choice):
    """Valid Examples with bytes flipped, inserted or cut: parsed, or a ValueError (the record's error)."""
    blob = bytearray(tfrecords.example(features))
    for _ in range(choice.draw(st.integers(1, 4), label="edits")):
        at = choice.draw(st.integers(0, len(blob)), label="at")
        edit = choice.draw(st.sampled_from(["flip", "insert", "cut"]), label="edit")
        if edit == "flip" and at < len(blob):
            blob[at] ^= choice.draw(st.integers(1, 255), label="xor")
        elif edit == "insert":
            blob[at:at] = choice.draw(st.binary(min_size=1, max_size=4), label="inserted")
        else:
            del blob[at:]
    try:
        with _bounded():
            parsed = tfrecords.parse_example(bytes(blob))
    except ValueError:
        return
    assert all(isinstance(name, str) and isinstance(values, list) for name, values in parsed.items())


atheris = None
try:
    import atheris  # noqa: F401
except ImportError:
    pass


@pytest.mark.skipif(atheris is None, reason="atheris (coverage-guided fuzzing) is not installed")
@pytest.mark.parametrize("target", ["tar", "tfrecord", "jpeg"])
def test_each_fuzz_target_runs_a_few_seconds_without_a_finding(target, tmp_path):
    """benchmarks/fuzz_parsers.py's targets, seeded from tests/data/fuzz/<target>/, 20,000 inputs each from
    libFuzzer's fixed seed 1 (the same inputs every run, whatever the machine's load: about 5 s each): a crash
    or an undocumented exception fails the run (libFuzzer exits non-zero and writes the input)."""
    done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "fuzz_parsers.py"), target,
                           "--runs", "20000", "--no-corpus-update", "--artifacts", str(tmp_path), "--", "-seed=1"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    found = sorted(os.listdir(tmp_path))
    assert done.returncode == 0 and not found, f"findings {found}: {(done.stdout + done.stderr)[-3000:]}"
    assert f"{target}: done" in done.stderr, done.stderr[-2000:]
