import torch
from PIL import Image
import torchvision
import pytest

import fastload
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
