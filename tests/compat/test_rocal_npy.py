"""fastload.compat.rocal's numpy reader (``fn.readers.numpy``), ``fn.log1p`` and the ROCALNumpyIterators,
against numpy's own arrays and rocAL's rules (ROCm/rocAL 0981d5bb: numpy_data_reader.cpp,
numpy_loader.cpp, plugin/generic.py and pytorch.py), and rocAL's tests/python_api/numpy_reader.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal import imageops
from fastload.compat.rocal.pipeline import Pipeline
from fastload.compat.rocal.plugin import generic, pytorch

from rocal_scripts import run_rocal_script


def numpy_pipeline(batch_size=4, outputs=lambda arrays: arrays, **reader_args) -> Pipeline:
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=0, seed=3, rocal_cpu=True)
    with pipe:
        pipe.set_outputs(outputs(fn.readers.numpy(**reader_args)))
    pipe.build()
    return pipe


@pytest.fixture()
def volumes(tmp_path):
    """Five float32 arrays of awkward shapes (one Fortran-ordered), in files named out of order."""
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape in
              [(3, 7, 2), (5, 4, 3), (1, 9, 2), (4, 4, 4), (2, 2, 5)]]
    root = tmp_path / "volumes"
    root.mkdir()
    for n, array in enumerate(arrays):
        np.save(root / f"v{n:02d}.npy", np.asfortranarray(array) if n == 3 else array)
    (root / "notes.txt").write_text("not read")
    return root, arrays


def as_rocal_reads(array: np.ndarray, fortran: bool) -> np.ndarray:
    return np.ascontiguousarray(array.T) if fortran else array


def test_arrays_are_batched_at_the_datasets_largest_shape_with_the_last_batch_filled(volumes):
    """[batch] + the largest shape over all files, each array at its origin and zeros elsewhere, the
    sorted .npy files only, a Fortran-ordered array as rocAL reads it (its transpose), the last batch
    filled with the shard's last file; the numpy iterator gives the arrays alone and does not reset."""
    root, arrays = volumes
    read = [as_rocal_reads(a, n == 3) for n, a in enumerate(arrays)]
    largest = tuple(np.max([a.shape for a in read], axis=0))
    loader = generic.ROCALNumpyIterator(numpy_pipeline(file_root=str(root)))
    assert len(loader) == 2
    for epoch in range(2):
        batches = list(loader)
        assert [len(b) for b in batches] == [1, 1] and batches[0][0].shape == (4,) + largest
        got = np.concatenate([b[0] for b in batches])
        assert got.dtype == np.float32
        for n, expected in enumerate(read + [read[-1]] * 3):
            window = tuple(slice(0, k) for k in expected.shape)
            assert np.array_equal(got[n][window], expected), (epoch, n)
            rest = got[n].copy()
            rest[window] = 0
            assert not rest.any(), (epoch, n)
        assert list(loader) == []  # no reset of its own, as rocAL's
        loader.reset()


def test_one_shard_reads_alike_whether_it_sticks_to_itself_or_not(volumes):
    """With one shard the "next" shard is the same one, so pad_last_batch=False reads the same with
    stick_to_shard False as True (as the image decoders do); with two shards it stays refused."""
    root, _ = volumes

    def epochs(**args):  # three epochs: without padding, each begins where the last stopped
        loader = generic.ROCALNumpyIterator(numpy_pipeline(file_root=str(root), pad_last_batch=False, **args))
        batches = []
        for _ in range(3):
            batches += [batch[0].copy() for batch in loader]
            loader.reset()
        return batches
    sticking, moving = epochs(stick_to_shard=True), epochs(stick_to_shard=False)
    assert len(sticking) == len(moving) > 0 and all(np.array_equal(a, b) for a, b in zip(sticking, moving))
    with pytest.raises(NotImplementedError, match="pad_last_batch=False, stick_to_shard=False"):
        numpy_pipeline(file_root=str(root), pad_last_batch=False, stick_to_shard=False, num_shards=2)


def test_files_shards_partial_batches_and_the_pytorch_iterator(volumes):
    """files= in the order given (relative to file_root, non-.npy names left out), shard_id/num_shards as
    contiguous blocks, LAST_BATCH_PARTIAL cut to the real arrays; the PyTorch iterator's tensors."""
    root, arrays = volumes
    pipe = numpy_pipeline(batch_size=2, file_root=str(root), files=["v04.npy", "v01.npy", "notes.txt"])
    (batch,), = list(pytorch.ROCALNumpyIterator(pipe))
    assert isinstance(batch, torch.Tensor) and batch.dtype == torch.float32 and batch.shape == (2, 5, 4, 5)
    assert torch.equal(batch[0, :2, :2, :5], torch.from_numpy(arrays[4]))
    assert torch.equal(batch[1, :5, :4, :3], torch.from_numpy(arrays[1]))

    sizes, second = [], None
    for shard_id in range(2):
        pipe = numpy_pipeline(batch_size=2, file_root=str(root), shard_id=shard_id, num_shards=2,
                              last_batch_policy=types.LAST_BATCH_PARTIAL)
        batches = [batch for batch, in generic.ROCALNumpyIterator(pipe)]
        sizes.append([batch.shape[0] for batch in batches])
        second = np.concatenate(batches)
    assert sizes == [[2, 1], [2, 1]]  # files 0-1 and 2-4, every shard reading 3 an epoch, cut to them
    for got, n in zip(second, (2, 3, 4)):
        expected = as_rocal_reads(arrays[n], n == 3)
        assert np.array_equal(got[tuple(slice(0, k) for k in expected.shape)], expected)
    outputs, labels = next(iter(generic.ROCALGenericIterator(numpy_pipeline(file_root=str(root)))))
    assert labels is None and outputs[0].shape[0] == 4  # rocAL's generic iterator: labels for its label readers only


def test_uint8_images_go_through_the_image_operators(tmp_path):
    """With output_layout NHWC (or NCHW), uint8 arrays of three dimensions are images: fn.resize resizes
    each array's own pixels (not the padded buffer) as it resizes a decoded image."""
    rng = np.random.default_rng(5)
    images = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in [(37, 51, 3), (64, 29, 3), (50, 50, 3)]]
    for layout, stored in ((types.NHWC, images), (types.NCHW, [im.transpose(2, 0, 1) for im in images])):
        root = tmp_path / layout.name
        root.mkdir()
        for n, image in enumerate(stored):
            np.save(root / f"{n}.npy", image)
        pipe = numpy_pipeline(batch_size=3, file_root=str(root), output_layout=layout,
                              outputs=lambda arrays: fn.resize(arrays, resize_width=24, resize_height=20,
                                                               output_layout=types.NCHW))
        (out,), = list(generic.ROCALNumpyIterator(pipe))
        expected = np.stack([imageops.resample(torch.from_numpy(im), 24, 20, "linear").numpy() for im in images])
        assert out.shape == (3, 3, 20, 24) and np.array_equal(out, expected.transpose(0, 3, 1, 2)), layout


def test_a_file_that_changes_after_the_build_is_an_error_naming_it(tmp_path):
    """The batch's type and shape are fixed at the build (rocAL's evaluator); a file rewritten since with
    another type, more dimensions or a larger shape is a DecodeError naming it, not a silent cast."""
    from fastload.errors import DecodeError
    root = tmp_path / "changing"
    root.mkdir()
    for name in ("a", "b"):
        np.save(root / f"{name}.npy", np.ones((2, 2), np.float32))
    for changed in (np.ones((2, 2), np.int16), np.ones((3, 5), np.float32), np.ones((2, 2, 1), np.float32)):
        loader = generic.ROCALNumpyIterator(numpy_pipeline(batch_size=2, file_root=str(root)))
        np.save(root / "a.npy", changed)
        with pytest.raises(DecodeError, match=r"a\.npy.*changed since the pipeline was built"):
            next(loader)
        loader.loader.rocal_release()
        np.save(root / "a.npy", np.ones((2, 2), np.float32))


def test_log1p_of_int16_arrays(tmp_path):
    """fn.log1p: log(1 + |x|) in float32 of int16 arrays (the extremes included), shape kept."""
    rng = np.random.default_rng(2)
    root = tmp_path / "int16"
    root.mkdir()
    arrays = [rng.integers(-32768, 32768, (6, 5, 4, 3), dtype=np.int16) for _ in range(2)]
    arrays[0].flat[:2] = [-32768, 32767]
    for n, array in enumerate(arrays):
        np.save(root / f"{n}.npy", array)
    pipe = numpy_pipeline(batch_size=2, file_root=str(root), output_layout=types.NHWC, outputs=fn.log1p)
    (out,), = list(generic.ROCALNumpyIterator(pipe))
    expected = np.log1p(np.abs(np.stack(arrays).astype(np.float64)))
    assert out.dtype == np.float32 and out.shape == (2, 6, 5, 4, 3)
    np.testing.assert_allclose(out, expected, rtol=2e-7, atol=0)


def test_what_rocal_does_not_read_is_refused_by_name(tmp_path, volumes):
    root, _ = volumes

    def refused(match, make, **args):
        folder = tmp_path / match[:6].replace(" ", "_").replace(".", "_")
        folder.mkdir()
        make(folder)
        with pytest.raises(ValueError, match=match):
            numpy_pipeline(file_root=str(folder), **args)

    refused("big-endian", lambda d: np.save(d / "a.npy", np.zeros(3, dtype=">f4")))
    refused("type float64 is not one rocAL reads", lambda d: np.save(d / "a.npy", np.zeros(3)))
    refused("its tensors have no int8 size", lambda d: np.save(d / "a.npy", np.zeros(3, np.int8)))
    refused("a 0-d array", lambda d: np.save(d / "a.npy", np.float32(3)))

    def channels(folder):
        np.save(folder / "a.npy", np.zeros((4, 4, 3), np.uint8))
        np.save(folder / "b.npy", np.zeros((4, 4, 1), np.uint8))
    refused("the images have \\[1, 3\\] channels", channels, output_layout=types.NHWC)

    def version_2(folder):
        with open(folder / "a.npy", "wb") as file:
            np.lib.format.write_array(file, np.zeros(3, np.float32), version=(2, 0))
    refused("version 2.0", version_2)

    def mixed(folder):
        np.save(folder / "a.npy", np.zeros((2, 2), np.float32))
        np.save(folder / "b.npy", np.zeros((2, 2), np.int32))
    refused("rocAL reads arrays of one type", mixed)

    def both(folder):
        (folder / "0-sub").mkdir()
        np.save(folder / "0-sub" / "x.npy", np.zeros(2, np.float32))
        np.save(folder / "a.npy", np.zeros(2, np.float32))
    refused("reads that folder twice", both)
    refused("the arrays have 2 dimensions, fewer than", lambda d: np.save(d / "a.npy", np.zeros((2, 2), np.uint8)),
            output_layout=types.NHWC)
    refused("malformed|cannot|magic", lambda d: (d / "a.npy").write_bytes(b"not an npy file"))
    with pytest.raises(ValueError, match="1 listed files do not exist"):
        numpy_pipeline(file_root=str(root), files=["v00.npy", "gone.npy"])
    with pytest.raises(TypeError, match="takes an image: fn.readers.numpy's output is one when"):
        numpy_pipeline(file_root=str(root), outputs=lambda arrays: fn.resize(arrays, resize_width=4,
                                                                              resize_height=4))
    with pytest.raises(ValueError, match="fn.log1p takes an int16 array"):
        numpy_pipeline(file_root=str(root), outputs=fn.log1p)


NUMPY_READER_SCRIPT = '''
from amd.rocal.pipeline import Pipeline
from amd.rocal.plugin.generic import ROCALNumpyIterator
import amd.rocal.fn as fn
import amd.rocal.types as types

import os
import shutil
import numpy as np
from parse_config import parse_args


def draw_patches(image, idx, args=None):
    # image is expected as a numpy array
    if not args.NHWC:
        image = image.transpose([1, 2, 0])
    np.save("output_folder/numpy_reader/" + str(idx) + ".npy", image)


def main():
    args = parse_args()
    # Args
    data_path = args.image_dataset_path
    rocal_cpu = False if args.rocal_gpu else True
    batch_size = args.batch_size
    num_threads = args.num_threads
    random_seed = args.seed
    local_rank = args.local_rank
    world_size = args.world_size
    output_layout = types.NHWC if args.NHWC else types.NCHW
    augmentation_name = args.augmentation_name

    try:
        path = "output_folder/numpy_reader/"
        if not os.path.exists(path):
            os.makedirs(path)
    except OSError as error:
        print(error)

    if augmentation_name == "log1p":
        # Create int16 numpy files since log1p only supports int16 inputs
        new_data_path = 'log1p_inputs'
        if os.path.exists(new_data_path):
            shutil.rmtree(new_data_path)
        os.makedirs(new_data_path)
        for i in range(10):
            np_array = np.random.randn(128, 128, 128, 4)
            np.save(os.path.join(new_data_path, f'{i}.npy'), np_array.astype(np.int16))
        data_path = new_data_path

    pipeline = Pipeline(batch_size=batch_size, num_threads=num_threads,
                        device_id=local_rank, seed=random_seed, rocal_cpu=rocal_cpu)

    with pipeline:
        numpy_reader_output = fn.readers.numpy(
            file_root=data_path, shard_id=local_rank, num_shards=world_size, output_layout=types.NHWC)
        if augmentation_name == "log1p":
            output = fn.log1p(numpy_reader_output)
        else:
            output = fn.resize(
                numpy_reader_output, resize_width=400, resize_height=400, output_layout=output_layout)
        pipeline.set_outputs(output)

    pipeline.build()

    cnt = 0
    numpyIteratorPipeline = ROCALNumpyIterator(pipeline)
    for epoch in range(args.num_epochs):
        print("epoch:: ", epoch)
        for i, [batch] in enumerate(numpyIteratorPipeline):
            if i == 0 and args.print_tensor:
                print(batch)
            for img in batch:
                if args.display:
                    draw_patches(img, cnt, args)
                cnt += 1
        numpyIteratorPipeline.reset()
    print("##############################  NUMPY READER SUCCESS  ############################")


if __name__ == '__main__':
    main()
'''

@pytest.mark.parametrize("augmentation", ["resize", "log1p"])
def test_rocals_numpy_reader_script(tmp_path, augmentation):
    """tests/python_api/numpy_reader.py through ``python -m fastload.compat.run`` with rocAL's parse_config,
    as written but for saving with numpy where it draws with cv2 (this machine has none): resize of NHWC
    uint8 images to 400x400 NCHW, and log1p of the 128x128x128x4 int16 arrays it writes itself."""
    rng = np.random.default_rng(9)
    data = tmp_path / "images"
    data.mkdir()
    images = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in [(120, 90, 3), (77, 130, 3), (100, 100, 3)]]
    for n, image in enumerate(images):
        np.save(data / f"img{n}.npy", image)
    display = ["--display"] if augmentation == "resize" else []  # its drawing transposes a 4-D array by 3 axes
    done = run_rocal_script(tmp_path, "numpy_reader.py", NUMPY_READER_SCRIPT, "--image-dataset-path", str(data),
                            "--augmentation-name", augmentation, "--batch-size", "2", *display)
    assert "NUMPY READER SUCCESS" in done.stdout
    saved = sorted((tmp_path / "output_folder" / "numpy_reader").glob("*.npy"), key=lambda p: int(p.stem))
    if augmentation == "resize":
        assert len(saved) == 4  # two batches of two: the third file, then the last one repeated
        for path, image in zip(saved, images + images[-1:]):
            expected = imageops.resample(torch.from_numpy(image), 400, 400, "linear").numpy()
            assert np.array_equal(np.load(path), expected.transpose(2, 0, 1).transpose(1, 2, 0)), path.name
    else:  # the script's own ten int16 files, read and log1p'd (values: test_log1p_of_int16_arrays)
        assert len(list((tmp_path / "log1p_inputs").glob("*.npy"))) == 10 and saved == []
