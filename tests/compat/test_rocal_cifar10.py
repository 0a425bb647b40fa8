"""fastload.compat.rocal's CIFAR-10 reader (``fn.readers.cifar10``) against the binary format and rocAL's
rules (ROCm/rocAL 0981d5bb: cifar10_data_reader.cpp, cifar10_meta_data_reader.cpp), on CIFAR-10-shaped
files of random records, and rocAL's own test script (tests/python_api/cifar10_reader.py)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal.pipeline import Pipeline
from fastload.compat.rocal.plugin.generic import ROCALGenericIterator
from fastload.compat.rocal.plugin.pytorch import ROCALClassificationIterator

from rocal_scripts import run_rocal_script

RECORD = 3073


def write_batch(path, count: int, rng, trailing: int = 0) -> list[tuple[int, np.ndarray]]:
    """A CIFAR-10 binary batch of ``count`` random records (label byte, then R, G and B planes);
    returns [(label, (3, 32, 32) image)]."""
    labels = rng.integers(0, 10, count, dtype=np.uint8)
    images = rng.integers(0, 256, (count, 3, 32, 32), dtype=np.uint8)
    records = np.concatenate([labels[:, None], images.reshape(count, -1)], axis=1)
    path.write_bytes(records.tobytes() + bytes(trailing))
    return list(zip(labels.tolist(), images))


@pytest.fixture()
def cifar(tmp_path):
    """A cifar-10-batches-bin folder: data_batch_1 (5 records), data_batch_2 (4), a test batch and the
    meta file, which the default prefix leaves out."""
    rng = np.random.default_rng(7)
    root = tmp_path / "cifar-10-batches-bin"
    root.mkdir()
    records = write_batch(root / "data_batch_1.bin", 5, rng) + write_batch(root / "data_batch_2.bin", 4, rng)
    write_batch(root / "test_batch.bin", 3, rng)
    (root / "batches.meta.txt").write_text("airplane\nautomobile\n")
    return root, records


def cifar_pipeline(root, batch_size=4, **reader_args) -> Pipeline:
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=0, seed=5, rocal_cpu=True)
    with pipe:
        pipe.set_outputs(fn.readers.cifar10(file_root=str(root), **reader_args))
    pipe.build()
    return pipe


def test_the_generic_iterator_gives_the_records_planar_with_their_labels_and_the_last_batch_filled(cifar):
    """(N, 3, 32, 32) uint8 as the records hold them, int64 labels from each record's first byte, the files
    whose names hold data_batch_ in name order, 9 records in batches of 4 filled with the last one."""
    root, records = cifar
    loader = ROCALGenericIterator(cifar_pipeline(root))
    assert len(loader) == 3
    for epoch in range(2):
        batches = list(loader)
        assert len(batches) == 3
        for outputs, labels in batches:
            assert outputs[0].dtype == np.uint8 and outputs[0].shape == (4, 3, 32, 32)
            assert labels.dtype == np.int64 and labels.shape == (4,)
        images = np.concatenate([outputs[0] for outputs, _ in batches])
        labels = np.concatenate([labels for _, labels in batches])
        expected = records + [records[-1]] * 3
        assert labels.tolist() == [label for label, _ in expected], epoch
        assert np.array_equal(images, np.stack([image for _, image in expected])), epoch
        loader.reset()


def test_the_pytorch_iterator_and_an_operator_after_the_reader_see_the_images_as_images(cifar):
    """ROCALClassificationIterator gives uint8 (N, 3, 32, 32) tensors and int64 labels; an operator after
    the reader works on the pictures: crop_mirror_normalize's window, mirror and normalization equal
    torch's on the planar records."""
    root, records = cifar
    loader = ROCALClassificationIterator(cifar_pipeline(root, batch_size=9))
    (images,), labels = next(iter(loader))
    assert images.dtype == torch.uint8 and images.shape == (9, 3, 32, 32)
    assert labels.dtype == torch.int64 and labels.tolist() == [label for label, _ in records]

    pipe = Pipeline(batch_size=9, num_threads=1, device_id=0, seed=5, rocal_cpu=True)
    mean, std = [125.3, 123.0, 113.9], [63.0, 62.1, 66.7]
    with pipe:
        pixels = fn.readers.cifar10(file_root=str(root))
        pipe.set_outputs(fn.crop_mirror_normalize(pixels, crop=(24, 20), crop_pos_x=0.0, crop_pos_y=1.0,
                                                  mean=mean, std=std, mirror=1, output_layout=types.NCHW,
                                                  output_dtype=types.FLOAT))
    pipe.build()
    (out,), _ = next(iter(ROCALClassificationIterator(pipe)))
    source = torch.from_numpy(np.stack([image for _, image in records])).float()
    window = source[:, :, 8:32, 0:20].flip(-1)  # rows from the bottom (crop_pos_y 1), columns from the left
    expected = (window - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    assert out.shape == (9, 3, 24, 20)
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-5)


def test_folders_prefix_matching_shuffle_and_trailing_bytes(tmp_path):
    """A root of folders is read folder by folder (sorted); the prefix matches anywhere in a name, as
    rocAL's find() does; random_shuffle permutes each epoch's records; bytes after the last whole record
    are left out with a warning naming the file."""
    rng = np.random.default_rng(3)
    root = tmp_path / "split"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    first = write_batch(root / "b" / "cifar_data_batch_2.bin", 3, rng, trailing=100)
    second = write_batch(root / "a" / "data_batch_1.bin", 3, rng)
    with pytest.warns(UserWarning, match=r"cifar_data_batch_2\.bin: 100 bytes after its 3 records"):
        pipe = cifar_pipeline(root, batch_size=6)
    (images,), labels = next(iter(ROCALGenericIterator(pipe)))
    assert np.array_equal(images, np.stack([image for _, image in second + first]))

    with pytest.warns(UserWarning):
        shuffled = ROCALGenericIterator(cifar_pipeline(root, batch_size=6, random_shuffle=True))
    pairs = {bytes(image): label for label, image in second + first}
    orders = []
    for _ in range(3):
        (images,), labels = next(iter(shuffled))
        assert [pairs[bytes(image)] for image in images] == labels.tolist()  # each image keeps its label
        orders.append([bytes(image) for image in images])
        shuffled.reset()
    assert all(sorted(order) == sorted(pairs) for order in orders)
    assert len({tuple(order) for order in orders}) > 1  # the order changes from epoch to epoch


def test_last_batch_drop_and_partial(cifar):
    """9 records in batches of 4: DROP gives the two full batches, PARTIAL cuts the third to its one real
    record (the PyTorch iterator), each epoch."""
    root, records = cifar
    drop = ROCALGenericIterator(cifar_pipeline(root, last_batch_policy=types.LAST_BATCH_DROP))
    for _ in range(2):
        assert [labels.tolist() for _, labels in drop] == [[label for label, _ in records[:4]],
                                                          [label for label, _ in records[4:8]]]
        drop.reset()
    partial = ROCALClassificationIterator(cifar_pipeline(root, last_batch_policy=types.LAST_BATCH_PARTIAL))
    for _ in range(2):
        assert [len(labels) for _, labels in partial] == [4, 4, 1]
    # its one shard is its own "next" shard: stick_to_shard=False reads as True
    def epochs(stick):  # three epochs: without padding, each begins where the last stopped
        loader, batches = ROCALGenericIterator(cifar_pipeline(root, pad_last_batch=False, stick_to_shard=stick)), []
        for _ in range(3):
            batches += [labels.tolist() for _, labels in loader]
            loader.reset()
        return batches
    sticking, moving = epochs(True), epochs(False)
    assert sticking == moving and len(sticking) == 6 and sticking[0] != sticking[2]


def test_what_rocal_would_get_wrong_is_refused_by_name(cifar, tmp_path):
    root, _ = cifar
    with pytest.raises(NotImplementedError, match="image_type=RGB\\).*scrambling"):
        cifar_pipeline(root, image_type=types.RGB)
    with pytest.raises(NotImplementedError, match="num_shards=2.*ignores shard_id"):
        cifar_pipeline(root, num_shards=2)
    with pytest.raises(ValueError, match="shard_id=1\\) with num_shards=1"):
        cifar_pipeline(root, shard_id=1)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "data_batch_1.bin").symlink_to(root / "data_batch_1.bin")
    with pytest.raises(ValueError, match="1 symbolic links do, which rocAL does not read"):
        cifar_pipeline(linked)
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "data_batch_1.bin").write_bytes(bytes([12]) + bytes(3072))
    with pytest.warns(UserWarning, match="1 records have labels over 9"):
        cifar_pipeline(odd, batch_size=1)
    with pytest.raises(ValueError, match="no regular file in .* has 'train_' in its name"):
        cifar_pipeline(root, filename_prefix="train_")
    twice = tmp_path / "twice"
    for folder in ("a", "b"):
        (twice / folder).mkdir(parents=True)
        write_batch(twice / folder / "data_batch_1.bin", 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="share a name"):
        cifar_pipeline(twice)
    (twice / "z.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="holds folders and files"):
        cifar_pipeline(twice)


def test_rocals_cifar10_reader_script_runs_unmodified_but_for_its_drawing(cifar, tmp_path):
    """tests/python_api/cifar10_reader.py through ``python -m fastload.compat.run``: its pipeline, iterator
    and loop as written; only draw_patches saves each batch's first image with numpy instead of cv2,
    which this machine does not have."""
    root, records = cifar
    script = textwrap.dedent("""
        from amd.rocal.pipeline import Pipeline
        from amd.rocal.plugin.generic import ROCALGenericIterator
        import amd.rocal.fn as fn
        import sys
        import os
        import random

        def draw_patches(img, idx):
            import numpy as np
            img = img.transpose([1, 2, 0])
            np.save("output_folder/cifar10_reader/" + str(idx) + "_" + "train" + ".npy", img)

        def main():
            if len(sys.argv) < 4:
                print('Please pass cifar10_folder cpu/gpu batch_size')
                exit(0)
            try:
                path = "output_folder/cifar10_reader/"
                isExist = os.path.exists(path)
                if not isExist:
                    os.makedirs(path)
            except OSError as error:
                print(error)
            data_path = sys.argv[1]
            if (sys.argv[2] == "cpu"):
                rocal_cpu = True
            else:
                rocal_cpu = False
            batch_size = int(sys.argv[3])
            num_threads = 1
            device_id = 0
            local_rank = 0
            world_size = 1
            random_seed = random.SystemRandom().randint(0, 2**32 - 1)

            pipeline = Pipeline(batch_size=batch_size, num_threads=num_threads, device_id=device_id,
                                seed=random_seed, rocal_cpu=rocal_cpu)

            with pipeline:
                cifar10_reader_output = fn.readers.cifar10(file_root=data_path, shard_id=local_rank,
                                                           num_shards=world_size)
                pipeline.set_outputs(cifar10_reader_output)

            pipeline.build()

            cifar10IteratorPipeline = ROCALGenericIterator(pipeline)
            cnt = 0
            for epoch in range(1):
                print("+++++++++++++++++++++++++++++EPOCH+++++++++++++++++++++++++++++++++++++",epoch)
                for i , it in enumerate(cifar10IteratorPipeline):
                    for img in it[0]:
                        cnt += 1
                        draw_patches(img[0], cnt)
                cifar10IteratorPipeline.reset()
            print("*********************************************************************")

        if __name__ == '__main__':
            main()
    """)
    run_rocal_script(tmp_path, "cifar10_reader.py", script, str(root), "cpu", "4")
    saved = [np.load(tmp_path / "output_folder" / "cifar10_reader" / f"{n}_train.npy") for n in (1, 2, 3)]
    assert [image.shape for image in saved] == [(32, 32, 3)] * 3
    for saved_image, record in zip(saved, (0, 4, 8)):  # each batch's first image
        assert np.array_equal(saved_image, records[record][1].transpose(1, 2, 0))
