"""Tar shards in WebDataset's layout as a source: each sample is a byte range of a shard.

A WebDataset shard is a plain tar whose members are grouped into samples by
key: the member's path up to the first "." of its file name
(``train/n01440764_10026.jpg`` and ``train/n01440764_10026.cls`` are one
sample, key ``train/n01440764_10026``), as webdataset's ``base_plus_ext``
splits them. ``TarShards`` indexes every shard once (member offsets, sizes
and keys, from the tar headers), caches the index beside the shard (or in a
cache folder when the shard's folder is read-only), and from then on a
sample is ``(shard, offset, size)``: the order, sharding across ranks,
exact resume, the fast path and the device path work as for a folder, each
read a ``pread`` of one range instead of an ``open`` of one file.

Shards may be local paths or any fsspec URL (``https://``, ``s3://`` with
s3fs installed, ...), read in either mode, indexed (one ranged request per
sample) or streaming (whole shards in a local cache): ``shardfiles.py``,
which ``TFRecords`` shares. ``fastload pack`` writes shards.

Shards come from outside, so nothing in one is trusted. The index is built
from the tar headers by ``members`` here, not by Python's tarfile (whose
3.11 reads a header with a negative base-256 size forever): each 512-byte
header's checksum is verified, its size is octal or positive base-256 up
to ``MAX_SIZE``, GNU long names and pax headers (``path``, ``size``) are
read up to ``MAX_EXTENDED`` bytes (names up to ``MAX_NAME`` characters),
and every size is checked against what the file holds before it is used. A
header that fails ends the index there, the reason recorded; the member
whose data runs past the end is that sample's error. Members are grouped
as webdataset's ``group_by_keys`` groups them: a run of consecutive
members with one key is a sample, so a key seen again after another one is
a new sample (``000.jpg 000.cls 001.jpg 001.cls 000.jpg`` is three
samples, the last without a label); two members with one name in a run
(``000.jpg 000.jpg``) make that sample an error naming the member
(webdataset raises there too), never one of them silently dropped. A
member webdataset puts in no sample (``README``, ``.hidden``,
``__info__/x.json``: ``in_a_sample``) is left out and does not split one. A
label (``parse_label``) is an int64 written as ASCII digits, or a JSON
integer; anything else is that sample's error, so ``on_error="skip"``
skips just it.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from pathlib import Path
from typing import BinaryIO, Callable

from .errors import DecodeError
from .shardcache import LOCK_TIMEOUT
from .shardfiles import Sequential, ShardedSource, ShardFiles
from .sources import INT64

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")  # the first one a sample has is its image
LABEL_EXTENSIONS = ("cls", "txt", "json")  # likewise for its label; see parse_label
INDEX_VERSION = 2
MAX_TEXT = 4096  # members up to this size that are not images are kept in the index as text
MAX_CLASSES = 1 << 20  # labels up to this are given a class name list (``TarShards.classes``)
BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)
MAX_SIZE = INT64[1]  # a member size past this (an off_t) is a corrupt header
MAX_EXTENDED = 1 << 20  # bytes of a GNU long name or pax header read into memory; more is a corrupt header
MAX_NAME = 1 << 16  # characters of a member name (PATH_MAX is 4096); longer is a corrupt header
REGULAR_TYPES = (b"0", b"\0", b"7")  # regular and contiguous files (tarfile's REGULAR_TYPES less GNU sparse)
NO_DATA_TYPES = (b"1", b"2", b"3", b"4", b"5", b"6")  # links, devices, folders, fifos: no data follows
EXTENDED = (b"L", b"K", b"x", b"X", b"g")  # GNU long name and link name, pax (and Solaris's) headers
GNU_TYPES = (b"L", b"K", b"S")
_OCTAL = re.compile(rb"[0-7]*")
_PAX_LENGTH = re.compile(rb"([0-9]{1,20}) ")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_META = re.compile(r"__[^/]*__($|/)")
_BASE_PLUS_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")  # webdataset's base_plus_ext, to the letter


def in_a_sample(name: str) -> bool:
    """Whether webdataset reads a member into a sample: ``base_plus_ext``'s pattern finds a key (a "." after
    at least one other character, and no "/" after that ".") and it is not metadata (``__key__``,
    ``__info__/...``: its tar iterator's ``skip_meta``). Other members belong to no sample and do not
    interrupt one."""
    return _BASE_PLUS_EXT.match(name) is not None and not _META.match(name)


def split_key(name: str) -> tuple[str, str]:
    """(key, extension) of a member as webdataset's ``base_plus_ext`` splits it: the path up to the first "."
    of the file name (less a leading "." of it), and the rest, lower-cased; a name it does not split (not
    ``in_a_sample``), up to its file name's first "."."""
    match = _BASE_PLUS_EXT.match(name)
    if match is not None:
        return match.group(1), match.group(2).lower()
    folder, _, base = name.rpartition("/")
    stem, dot, extension = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (extension.lower() if dot else "")


class CorruptTar(ValueError):
    """A tar header that cannot be trusted: a bad checksum, a size that is not a number, negative or past
    ``MAX_SIZE``, an extended header over ``MAX_EXTENDED`` bytes or malformed, a header cut short."""


class CutShort(CorruptTar):
    """A member whose data runs past the file's end (a truncated shard, or a size no header should have):
    ``member`` is its name where it is a regular file (``members`` yielded it), else None."""

    def __init__(self, message: str, member: str | None):
        super().__init__(message)
        self.member = member


def _text(field: bytes) -> str:
    """A header's string field: up to its first NUL, as tarfile decodes names (UTF-8, undecodable bytes
    kept as surrogates)."""
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _number(field: bytes, what: str) -> int:
    """A numeric field: octal digits (NUL- or space-padded), or GNU's base-256 (first byte 0x80, big-endian).
    A negative base-256 number (first byte 0xff) is refused: it is what makes Python 3.11's tarfile read one
    header forever."""
    if field[:1] == b"\x80":
        value = int.from_bytes(field[1:], "big")
    elif field[:1] and field[0] & 0x80:
        raise CorruptTar(f"{what} is a negative or malformed base-256 number ({field.hex()})")
    else:
        digits = field.split(b"\0", 1)[0].strip()
        if not _OCTAL.fullmatch(digits):
            raise CorruptTar(f"{what} {field!r} is not an octal number")
        value = int(digits, 8) if digits else 0
    if value > MAX_SIZE:
        raise CorruptTar(f"{what} {value} is past {MAX_SIZE}")
    return value


def parse_header(block: bytes) -> tuple[str, int, bytes]:
    """(name, size, typeflag) of one 512-byte ustar / GNU / v7 header, its checksum verified (the unsigned
    sum or the signed one some old tars wrote, as tarfile accepts); CorruptTar saying why not. The name is
    ustar's ``prefix/name`` (not for GNU's own types); extended headers (GNU's L, pax x and g) are the
    caller's (``members``)."""
    if len(block) != BLOCK:
        raise CorruptTar(f"a header of {len(block)} bytes (the file ends inside it)")
    stored = _number(block[148:156], "header checksum")
    unsigned = 256 + sum(block) - sum(block[148:156])
    if stored != unsigned and stored != unsigned - 256 * (sum(b >= 0x80 for b in block[:148]) +
                                                          sum(b >= 0x80 for b in block[156:])):  # signed bytes
        raise CorruptTar(f"bad header checksum ({stored} stored, {unsigned} computed)")
    kind = block[156:157]
    name = _text(block[:100])
    prefix = _text(block[345:500]) if block[257:263] == b"ustar\0" else ""
    if prefix and kind not in GNU_TYPES:
        name = f"{prefix}/{name}"
    return name, _number(block[124:136], "member size"), kind


def parse_pax(data: bytes) -> dict[str, str]:
    """A pax extended header's records (``"%d %s=%s\n"``, the length counting the whole record) as
    {keyword: value}; CorruptTar for a record that does not frame."""
    records, at = {}, 0
    while at < len(data) and data[at] != 0:
        match = _PAX_LENGTH.match(data, at)
        length = int(match.group(1)) if match else 0
        record = data[at:at + length]
        if not match or length <= len(match.group(0)) or len(record) < length or not record.endswith(b"\n") \
                or b"=" not in record:
            raise CorruptTar(f"a malformed pax record at byte {at} of its header: {data[at:at + 40]!r}")
        keyword, _, value = record[len(match.group(0)):-1].partition(b"=")
        records[keyword.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        at += length
    return records


def members(file: Sequential, keep: Callable[[str, int], bool]):
    """(name, data offset, size, data) of each regular file of the tar read from ``file``, in order; ``data``
    is the member's bytes where ``keep(name, size)`` asks for them, else None. Reads headers only (and the
    members kept): GNU long names (L) and long link names (K), pax extended headers (x, and g for every
    member after it: ``path`` and ``size``) are applied to the member they precede. Ends at the first zero
    block or the file's end. Raises CorruptTar at a header that cannot be trusted and at the first member
    whose data runs past the file's end -- after yielding that member, with its declared size and no data.
    Every size is range-checked before it is used: extended headers against ``MAX_EXTENDED``, data
    against the file's size (a stream: against what it holds, read in bounded chunks)."""
    global_pax: dict[str, str] = {}
    pax: dict[str, str] = {}
    long_name = None
    while True:
        at = file.at
        block = file.take(BLOCK)
        if not block or block == ZERO_BLOCK:
            if at == 0 and not block:
                raise CorruptTar("an empty file")
            return
        try:
            name, size, kind = parse_header(block)
        except CorruptTar as error:
            raise CorruptTar(f"at byte {at}: {error}") from None
        if kind in EXTENDED:
            if size > MAX_EXTENDED:
                raise CorruptTar(f"at byte {at}: an extended header ({kind.decode()!r}) of {size} bytes (at most "
                                 f"{MAX_EXTENDED})")
            data = file.take(size)
            if len(data) < size:
                raise CorruptTar(f"at byte {at}: the file ends inside an extended header")
            file.skip(-size % BLOCK)
            if kind == b"L":
                long_name = _text(data)
            elif kind in (b"x", b"X"):
                pax.update(parse_pax(data))
            elif kind == b"g":
                global_pax.update(parse_pax(data))
            continue
        fields = {**global_pax, **pax}
        if long_name is not None:
            name = long_name
        name = fields.get("path", name)
        if len(name) > MAX_NAME:  # (each name is kept in the index: a shard of such names would fill memory)
            raise CorruptTar(f"at byte {at}: a member name of {len(name)} characters (at most {MAX_NAME})")
        if "size" in fields:
            if not fields["size"].isascii() or not fields["size"].isdigit() or len(fields["size"]) > 19 \
                    or int(fields["size"]) > MAX_SIZE:
                raise CorruptTar(f"at byte {at}: pax size {fields['size'][:40]!r} is not a size")
            size = int(fields["size"])
        pax, long_name = {}, None
        regular = kind in REGULAR_TYPES and not (kind == b"\0" and name.endswith("/")) and \
            not any(key.startswith("GNU.sparse.") for key in fields)
        if not regular and kind in NO_DATA_TYPES:
            continue  # links, folders, devices: tarfile reads no data after them whatever the size says
        offset = file.at
        left = file.left()
        wanted = regular and keep(name, size) and (left is None or size <= left)
        data = file.take(size) if wanted else None
        got = len(data) if data is not None else file.skip(size)
        if got < size:
            if regular:
                yield name, offset, size, None
            raise CutShort(f"the file ends {got} bytes into member {name!r}, whose header at byte {at} says "
                           f"{size} (truncated, or a corrupt size)", name if regular else None)
        file.skip(-size % BLOCK)
        if regular:
            yield name, offset, size, data


def build_index(path: str | None, stream: BinaryIO | None = None) -> dict:
    """A shard's index from its tar headers (the local file ``path``, or read once as ``stream``): per
    sample (a run of members with one key, in order), its key, the (offset, size) of each member by
    extension, and the text of its small non-image members (labels); ``problems``: [sample position,
    reason] for a sample that cannot be read (a duplicate member, a member cut by the file's end). A shard
    that ends early (truncated) or has a corrupt header is indexed up to there and says so (``"error"``);
    the member cut by its end is kept with the size its header declares, so reading it is that sample's
    error. Never more than the headers (and small members) are read, and no size from the file is used
    before it is checked against the file's (``members``)."""
    samples: list[list] = []
    problems: dict[int, str] = {}
    error = None
    count = 0

    def keep(name: str, size: int) -> bool:
        # small members (labels) go into the index, so opening the shards reads no sample
        return size <= MAX_TEXT and split_key(name)[1] not in IMAGE_EXTENSIONS

    with Sequential(path, stream) as file:
        try:
            for name, offset, size, data in members(file, keep):
                count += 1
                if not in_a_sample(name):
                    continue
                key, extension = split_key(name)
                if not samples or samples[-1][0] != key:  # webdataset's group_by_keys: a new key, a new sample
                    samples.append([key, {}, {}])
                _, found, texts = samples[-1]
                if extension in found:
                    problems.setdefault(len(samples) - 1, f"two {name!r} members in one sample (a duplicate "
                                                          f"file name, which webdataset refuses too)")
                    continue
                found[extension] = [offset, size]
                if data is not None:
                    texts[extension] = data.decode("utf-8", "replace")
        except CorruptTar as failure:
            error = f"cannot read past {count} members: {failure}"
            if isinstance(failure, CutShort) and failure.member is not None:  # the sample it ends in
                cut = f"the shard is cut short: {failure}"
                last = len(samples) - 1
                problems[last] = f"{problems[last]}; {cut}" if last in problems else cut
    return {"version": INDEX_VERSION, "error": error, "samples": samples,
            "problems": sorted([position, reason] for position, reason in problems.items())}


def is_whole_index(index: dict) -> bool:
    """Whether a cached index is one of this version, whole (a malformed one is rebuilt)."""
    samples, problems = index.get("samples"), index.get("problems")
    return index.get("version") == INDEX_VERSION and "error" in index and isinstance(samples, list) and \
        isinstance(problems, list) and all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], int)
                                           and isinstance(p[1], str) for p in problems) and \
        all(isinstance(s, list) and len(s) == 3 and isinstance(s[1], dict) and isinstance(s[2], dict) and
            all(isinstance(m, list) and len(m) == 2 and all(type(v) is int and v >= 0 for v in m)
                for m in s[1].values()) for s in samples)


def parse_label(extension: str, text: str) -> int:
    """A label member's class, an int64: ``.cls`` and ``.txt`` hold an integer as ASCII digits (an optional
    sign, whitespace around); ``.json`` holds an integer or an object with an integer ``"label"`` (or
    ``"cls"``). ValueError saying why not: no integer ("2.9", "three", unicode digits, a JSON float, string,
    bool or list), or one outside int64 (a batch's label tensor is int64)."""
    if extension == "json":
        try:
            value = json.loads(text)
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None
        if isinstance(value, dict):
            value = value.get("label", value.get("cls"))
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"no integer label in {text.strip()[:60]!r}")
    else:
        stripped = text.strip()
        if not _INTEGER.fullmatch(stripped):
            raise ValueError(f"{stripped[:60]!r} is not an integer")
        if len(stripped.lstrip("+-").lstrip("0")) > 19:
            raise ValueError(f"{stripped[:60]!r} is outside int64")
        value = int(stripped)
    if not INT64[0] <= value <= INT64[1]:
        raise ValueError(f"{str(value)[:60]} is outside int64")
    return value


class TarShards(ShardedSource):
    """WebDataset tar shards as a source: ``fastload.DataLoader(TarShards("train-{0000..0146}.tar"), ...)``.

    A sample is a key's members: its image is the first of ``.jpg``, ``.jpeg``, ``.png``, ``.webp`` it has
    and its label the first of ``.cls``, ``.txt`` (an integer as text) or ``.json`` (an integer, or
    ``{"label": n}``); ``label_extensions`` changes that choice. Samples are numbered shard by shard in
    their order in the shard, so the order, sharding, resume and augmentation rules are a folder's
    (``fastload.Source``: shuffle, seed, drop_last, even_shards, rank, world_size). A sample with no
    image or no readable label (not an int64: see ``parse_label``), with a duplicate member, or whose bytes
    lie past the end of a truncated shard, is a DecodeError naming ``shard.tar:key`` and the reason when read
    (``on_error="skip"`` skips and reports it).

    Args:
        urls: a shard path or fsspec URL, a brace pattern (``train-{000000..001023}.tar``), a glob, or a
            list of them.
        transform, target_transform: as torchvision's.
        label_extensions: which members hold the label, in order of preference.
        storage_options: passed to the remote filesystem (fsspec's name for them): an S3 endpoint
            (``{"endpoint_url": ...}``), credentials, ``{"anon": True}``...
        cache_dir: where indexes go for remote shards and when a shard's folder is read-only.
        timeout: seconds a remote request (HTTP, S3) may wait to connect, or for the next bytes, before it
            fails (and is retried).
        retries, backoff: how many times a remote call that failed transiently (a 5xx or 429 answer, a reset
            connection, a timeout, a body cut short) is tried again, after ``backoff`` (0.25 s), then twice
            that, ...; then, or at once for a permanent failure (404, 403, a shard changed since it was
            indexed), it is an error naming the shard's URL and saying which (a DecodeError naming the key
            too, for a sample's read). ``self.retried`` counts the retries. Every read of a remote shard is
            checked to be of the version indexed (ETag, else last-modified time, and size).
        mode: ``"indexed"`` (the default for local shards): a sample is one ranged read, in a folder's order.
            ``"streaming"`` (the default for remote shards): a remote shard is fetched whole, in one
            sequential read, into a local cache, and read there; each rank reads a contiguous run of the
            epoch's shards, mixed by a shuffle buffer (``fastload.order.StreamOrder``), fetching the next
            ``read_ahead`` shards while it reads one. Both are pure functions of (seed, epoch): equal
            batch counts on every rank, exact and elastic resume.
        shuffle_buffer: streaming, ``shuffle=True``: samples a rank draws its next one from.
        read_ahead: streaming: shards fetched ahead of the one being read.
        cache_limit: streaming: bytes the local copies of remote shards may take (``cache_dir``/shards, else
            ``shards`` in fastload's cache folder, shared by the node's processes); the least recently
            used go first. It must hold ``read_ahead + 2`` shards per process. A fetched copy whose size is not
            the shard's is never kept.
        lock_timeout: streaming: seconds a process waits for another one's fetch of a shard (600) before an
            error naming that process (``fastload.shardcache.LockTimeout``).
        **order: ``shuffle``, ``seed``, ``drop_last``, ``even_shards``, ``rank``, ``world_size``: see
            ``fastload.Source``.
    """

    def __init__(self, urls, transform: Callable | None = None, target_transform: Callable | None = None, *,
                 label_extensions: tuple[str, ...] = LABEL_EXTENSIONS, cache_dir: str | None = None,
                 timeout: float = 60.0, retries: int = 3, mode: str | None = None, shuffle_buffer: int = 1000,
                 read_ahead: int = 2, cache_limit: int = 16 << 30, storage_options: dict | None = None,
                 backoff: float = 0.25, lock_timeout: float = LOCK_TIMEOUT, **order):
        self.storage = ShardFiles(urls, "fastload.TarShards", cache_dir=cache_dir, timeout=timeout,
                                  retries=retries, mode=mode, cache_limit=cache_limit,
                                  storage_options=storage_options, backoff=backoff,
                                  lock_timeout=lock_timeout)
        self.shards = self.storage.paths
        self.shuffle_buffer, self.read_ahead = shuffle_buffer, read_ahead
        self.ranges: list[tuple[int, int, int]] = []  # per sample: (shard number, offset, size) of its image
        self.problems: dict[int, str] = {}  # per bad sample: why it cannot be read
        samples: list[tuple[str, int]] = []
        names: dict[int, str] = {}  # label -> class name, from the samples' .class members (fastload pack's)
        for number, path in enumerate(self.shards):
            index = self.storage.index(number, "shard-index", ".idx.json", is_whole_index, build_index)
            found = dict(index["problems"])  # per sample of the shard: why its members cannot be read
            for position, (key, members, texts) in enumerate(index["samples"]):
                image = next((e for e in IMAGE_EXTENSIONS if e in members), None)
                label, problem = -1, found.get(position)
                if problem is None and image is None:
                    problem = f"no image member ({', '.join('.' + e for e in IMAGE_EXTENSIONS)}) " \
                              f"among {sorted(members)}"
                elif problem is None:  # labels checked here, per sample: a bad one is that sample's error
                    label, problem = self._label(members, texts, label_extensions)
                    if problem is None and "class" in texts and 0 <= label < MAX_CLASSES:
                        names.setdefault(label, texts["class"])
                if problem is not None:  # (its label stays -1: _label gives -1 with a problem)
                    self.problems[len(samples)] = problem
                offset, size = members[image] if image else (0, 0)
                self.ranges.append((number, offset, size))
                samples.append((f"{path}:{key}", label))
            if index["error"] and not index["samples"]:
                raise ValueError(f"fastload.TarShards: {path}: not a readable tar ({index['error']})")
            if index["error"] and len(samples) - 1 in self.problems and \
                    "the shard is cut short" not in self.problems[len(samples) - 1]:  # the sample it ends in
                self.problems[len(samples) - 1] += f" (the shard is cut short: {index['error']})"
        super().__init__(samples, transform, target_transform, **order)
        # torchvision's list of class names by label, where the samples carry them (a label none names: its
        # number); None where none does
        self.classes = [names.get(label, str(label)) for label in range(max(names) + 1)] if names else None

    def _repr_parts(self) -> list:
        return [("shards", self._paths(vars(self).get("shards"))), *super()._repr_parts(),
                ("mode", self._quoted(getattr(vars(self).get("storage"), "mode", None)))]

    @staticmethod
    def _label(members: dict, texts: dict, extensions) -> tuple[int, str | None]:
        found = next((e for e in extensions if e in members), None)
        if found is None:
            return -1, f"no label member ({', '.join('.' + e for e in extensions)}) among {sorted(members)}"
        if found not in texts:
            return -1, f"its .{found} member is over {MAX_TEXT} bytes or lies past the end of the shard"
        try:
            return parse_label(found, texts[found]), None
        except ValueError as error:
            return -1, f"unreadable label in its .{found} member: {error}"

    def read(self, index: int) -> bytes:
        """The sample's image bytes: one ranged read of its shard (``ShardFiles.read``)."""
        if index in self.problems:
            raise DecodeError(index, self.samples[index][0], self.problems[index])
        data = self.read_range(index)
        if len(data) < self.ranges[index][2]:
            raise DecodeError(index, self.samples[index][0], f"the shard ends {self.ranges[index][2] - len(data)} "
                                                             f"bytes into this image (truncated)")
        if not data:
            raise DecodeError(index, self.samples[index][0], "empty image member")
        return data

    @classmethod
    def write(cls, samples, path: str | Path) -> str:
        """Write ``samples`` [(key, image bytes, label)] as one shard in WebDataset's layout (``key.jpg`` or
        the image's own extension given as ``key.png`` etc., and ``key.cls``); returns the path."""
        path = os.fspath(path)
        with tarfile.open(path, "w") as archive:
            for key, data, label in samples:
                stem, dot, extension = key.partition(".")
                add_member(archive, f"{stem}.{extension if dot else 'jpg'}", data)
                add_member(archive, f"{stem}.cls", str(int(label)).encode())
        return path


def add_member(archive: tarfile.TarFile, name: str, payload: bytes) -> None:
    """One member with ``payload``, as shards are written (mtime 0, mode 644: the same bytes every time)."""
    import io
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(payload), 0, 0o644
    archive.addfile(info, io.BytesIO(payload))
