import torch
from PIL import Image
import torchvision
import pytest

import fastload
from fastload import transforms as T
from fastload.sources import FileList, ImageFolder


def test_image_folder_matches_torchvision(image_folder):
    (image_folder / "class_1" / "UPPER.JPG").write_bytes((image_folder / "class_1" / "img_008.jpg").read_bytes())
    (image_folder / "class_1" / "notes.txt").write_text("not an image")
    try:
        ours = ImageFolder(image_folder)
        theirs = torchvision.datasets.ImageFolder(image_folder)
        assert ours.classes == theirs.classes
        assert ours.class_to_idx == theirs.class_to_idx
        assert ours.samples == theirs.samples
        assert ours.targets == theirs.targets
        assert any(path.endswith("UPPER.JPG") for path, _ in ours.samples)
    finally:
        (image_folder / "class_1" / "UPPER.JPG").unlink()
        (image_folder / "class_1" / "notes.txt").unlink()


def test_standalone_iteration_yields_torchvision_samples(image_folder):
    transform = torchvision.transforms.v2.Compose([torchvision.transforms.v2.CenterCrop(32),
                                                   torchvision.transforms.v2.PILToTensor()])
    ours = list(ImageFolder(image_folder, transform))
    theirs = torchvision.datasets.ImageFolder(image_folder, transform)
    assert len(ours) == len(theirs)
    for (image, label), (ref_image, ref_label) in zip(ours, theirs):
        assert label == ref_label and torch.equal(image, ref_image)


def test_file_list_format(tmp_path, image_folder):
    (tmp_path / "dir with space").mkdir()
    src = next((image_folder / "class_0").iterdir())
    (tmp_path / "dir with space" / "a b.jpg").write_bytes(src.read_bytes())
    (tmp_path / "list.txt").write_text("# comment\n\n  dir with space/a b.jpg   3\n" + f"{src} 1\n")
    files = FileList(tmp_path / "list.txt")
    assert files.samples == [(str(tmp_path / "dir with space" / "a b.jpg"), 3), (str(src), 1)]
    assert FileList(tmp_path / "list.txt", root="/elsewhere").samples[0][0] == "/elsewhere/dir with space/a b.jpg"
    image, label = next(iter(files))
    with Image.open(src) as original:
        assert label == 3 and image.size == original.size


@pytest.mark.parametrize("line", ["only_a_path.jpg", "path.jpg label", "path.jpg 1.5"])
def test_file_list_malformed_line_names_its_number(tmp_path, line):
    (tmp_path / "list.txt").write_text(f"ok.jpg 0\n# c\n{line}\n")
    with pytest.raises(ValueError, match=r"list.txt:3: expected 'path label'"):
        FileList(tmp_path / "list.txt")



def test_file_list_that_is_not_utf8_names_the_file_and_line(tmp_path):
    (tmp_path / "list.txt").write_bytes(b"ok.jpg 0\r\n# c\rcaf\xe9.jpg 1\nlast.jpg 2\n")
    with pytest.raises(ValueError, match=r"list.txt:3: not UTF-8 text \(byte 4 of the line is b'\\xe9'\)"):
        FileList(tmp_path / "list.txt")
    (tmp_path / "list.txt").write_bytes(b"ok.jpg 0\r\n# c\rcaf\xc3\xa9.jpg 1\n")  # the same lines, UTF-8
    assert FileList(tmp_path / "list.txt", root="/r").samples == [("/r/ok.jpg", 0), ("/r/caf\u00e9.jpg", 1)]

def test_sources_shard_by_rank_and_epoch(image_folder):
    shards = [ImageFolder(image_folder, shuffle=True, seed=1, rank=r, world_size=2) for r in range(2)]
    first = [s.shard() for s in shards]
    # 23 samples over 2 ranks: 12 each, the first index of the permutation repeated as padding
    assert len(shards[0]) == len(first[0]) == len(first[1]) == 12
    assert set(first[0]) | set(first[1]) == set(range(23))
    assert len(set(first[0]) & set(first[1])) == 1
    shards[0].set_epoch(1)
    assert shards[0].shard() != first[0]


def test_sources_split_across_stock_torch_workers(image_folder):
    transform = torchvision.transforms.v2.Compose([torchvision.transforms.v2.Resize((8, 8)),
                                                   torchvision.transforms.v2.PILToTensor()])
    source = ImageFolder(image_folder, transform)
    loader = torch.utils.data.DataLoader(source, batch_size=4, num_workers=2)
    labels = torch.cat([labels for _, labels in loader]).tolist()
    assert sorted(labels) == sorted(source.targets)


def _encoded_items(folder):
    """(bytes, label) for every file of a folder, in ImageFolder's order."""
    reference = fastload.ImageFolder(folder)
    return [(open(path, "rb").read(), label) for path, label in reference.samples]


@pytest.mark.parametrize("kind", ["bytes", "numpy", "tensor"])
def test_encoded_bytes_take_the_fast_path_with_the_folder_s_batches(image_folder, kind):
    import numpy as np
    items = _encoded_items(image_folder)
    if kind == "numpy":
        items = [(np.frombuffer(data, np.uint8), label) for data, label in items]
    elif kind == "tensor":
        items = [(torch.frombuffer(bytearray(data), dtype=torch.uint8), label) for data, label in items]
    transform = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True)])
    options = dict(batch_size=5, num_workers=2, shuffle=True, seed=3)
    encoded = fastload.DataLoader(fastload.Encoded(items, transform), **options)
    folder = fastload.DataLoader(fastload.ImageFolder(image_folder, transform), **options)
    assert encoded.fast_path and len(encoded) == len(folder)
    for (images, labels), (ref_images, ref_labels) in zip(encoded, folder, strict=True):
        assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)


def test_encoded_bytes_shard_resume_and_name_bad_samples(image_folder):
    items = _encoded_items(image_folder)
    items[4] = (b"not an image", items[4][1])
    transform = T.Compose([T.CenterCrop(8), T.ToImage()])
    shards = [fastload.DataLoader(fastload.Encoded(items, transform, rank=r, world_size=2, name="mine"),
                                  batch_size=4, on_error="skip") for r in range(2)]
    seen = [label for loader in shards for _, labels in loader for label in labels.tolist()]
    assert len(seen) == 24 and shards[0].stats.skipped[0][2] == "mine[4]"  # 23 + 1 padding, one replaced
    with pytest.raises(fastload.DecodeError, match=r"mine\[4\]"):
        list(fastload.DataLoader(fastload.Encoded(items, transform, name="mine"), batch_size=4))
    loader = fastload.DataLoader(fastload.Encoded(items[:4] + items[5:], transform), batch_size=4, shuffle=True)
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    rest = [labels.tolist() for _, labels in iterator]
    resumed = fastload.DataLoader(fastload.Encoded(items[:4] + items[5:], transform), batch_size=4, shuffle=True)
    resumed.load_state_dict(state)
    assert [labels.tolist() for _, labels in resumed] == rest


def test_encoded_bytes_with_a_transform_that_does_not_fuse_run_as_given(image_folder):
    from torchvision.transforms import v2
    items = _encoded_items(image_folder)
    transform = v2.Compose([v2.ToImage(), v2.GaussianBlur(3, sigma=1.0), v2.CenterCrop(8)])
    with pytest.warns(UserWarning, match="GaussianBlur"):
        loader = fastload.DataLoader(fastload.Encoded(items, transform), batch_size=23)
    assert not loader.fast_path
    images, labels = next(iter(loader))
    expected = torch.stack([transform(fastload.ImageFolder(image_folder).load(i)[0]) for i in range(23)])
    assert torch.equal(images, expected)


def test_source_reprs_are_short_and_made_without_io(image_folder, numbered_list, tmp_path, monkeypatch):
    import builtins
    import os
    items = _encoded_items(image_folder)
    shards = [fastload.TarShards.write([(f"s{n}_{i}", data, label) for i, (data, label) in enumerate(items)],
                                       tmp_path / f"train-{n}.tar") for n in range(3)]
    records = fastload.TFRecords.write(items, tmp_path / "train.tfrecord")
    crop = T.Compose([T.CenterCrop(8)])
    sources = [ImageFolder(image_folder, crop, shuffle=True, seed=3, rank=1, world_size=2),
               FileList(numbered_list, target_transform=abs, drop_last=True, even_shards=False),
               fastload.Encoded(items, name="db"), fastload.TarShards(shards), fastload.TFRecords(records)]

    def refuse(*args, **kwargs):
        raise AssertionError("I/O in a repr")
    for module, name in ((builtins, "open"), (os, "stat"), (os, "scandir"), (os, "listdir")):
        monkeypatch.setattr(module, name, refuse)
    try:
        texts = [repr(source) for source in sources]
    finally:
        monkeypatch.undo()
    assert texts == [
        f"ImageFolder(root={str(image_folder)!r}, samples=23, classes=3, transform=Compose, shuffle=True, seed=3, "
        f"rank=1/2)",
        f"FileList(list_file={str(numbered_list)!r}, samples=23, target_transform=abs, shuffle=False, "
        f"drop_last=True, even_shards=False, rank=0/1)",
        "Encoded(name='db', samples=23, shuffle=False, rank=0/1)",
        f"TarShards(shards=[{shards[0]!r}, ..., {shards[2]!r}] (3 files), samples=69, shuffle=False, rank=0/1, "
        f"mode='indexed')",
        f"TFRecords(files=[{records!r}], samples=23, shuffle=False, rank=0/1, mode='indexed')"]


def test_the_repr_of_a_half_made_source_shows_what_is_set():
    """As in a debugger, or an error's report, when __init__ raised (a missing folder, an unreadable shard)."""
    half = ImageFolder.__new__(ImageFolder)
    assert repr(half) == "ImageFolder()"
    half.root = "/data/train"
    assert repr(half) == "ImageFolder(root='/data/train')"
    assert repr(fastload.TarShards.__new__(fastload.TarShards)) == "TarShards()"
    assert repr(fastload.TFRecords.__new__(fastload.TFRecords)) == "TFRecords()"


def test_a_symlink_loop_is_listed_once_and_named(tmp_path):
    """A link back to a folder above it: torchvision's walk lists the files under it at every level until
    the path is too long for the system; fastload's ImageFolder lists them once and names the link. A link
    to a sibling folder (no loop) is followed, as torchvision follows it."""
    import torchvision
    from PIL import Image
    for folder in ("a/inner", "b"):
        (tmp_path / folder).mkdir(parents=True)
    for number, folder in enumerate(("a", "a/inner", "b")):
        Image.new("RGB", (4, 4)).save(tmp_path / folder / f"{number}.jpg")
    (tmp_path / "a" / "inner" / "sibling").symlink_to(tmp_path / "b", target_is_directory=True)
    expected = torchvision.datasets.ImageFolder(str(tmp_path)).samples  # no loop yet: the same samples
    assert fastload.ImageFolder(tmp_path).samples == expected
    (tmp_path / "a" / "inner" / "up").symlink_to(tmp_path / "a", target_is_directory=True)
    with pytest.warns(RuntimeWarning, match="loop.*inner/up"):
        source = fastload.ImageFolder(tmp_path)
    assert source.samples == expected
