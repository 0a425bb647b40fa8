"""fastload.compat.rocal's pipelines: rocAL's own example scripts (its Python API page, tests/python_api) run
with only their imports changed, and rocAL's pipeline, epoch and iterator rules, each from rocAL's sources
(ROCm/rocAL at 0981d5bb; there is no rocAL to compare with on this machine, which has no ROCm)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal.definition import RocalGraph
from fastload.compat.rocal.pipeline import Pipeline, pipeline_def
from fastload.compat.rocal.plugin import generic
from fastload.compat.rocal.plugin.pytorch import ROCALClassificationIterator
from fastload.errors import DecodeError
from fastload.sample_data import make_image, make_sample_folder


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """10 ImageNet-like JPEGs in 3 class folders (4, 3, 3)."""
    return str(make_sample_folder(tmp_path_factory.mktemp("rocal_photos"), num_images=10, num_classes=3))


def labels_of(root) -> list[int]:
    import os
    folders = sorted(name for name in os.listdir(root) if os.path.isdir(os.path.join(root, name)))
    return [label for label, name in enumerate(folders) for _ in sorted(os.listdir(os.path.join(root, name)))]


def test_the_python_api_pages_first_pipeline_and_training_loop(photos):
    """docs/how-to/using-with-python.rst: Pipeline(...), `with pipe:` reader + decoder + resize (the page's
    resize_x/resize_y, rocAL's older names), build, ROCALClassificationIterator over epochs. rocAL's
    operators output NHWC uint8 whatever the pipeline's tensor_layout/tensor_dtype (which the iterator
    keeps, unapplied); labels are int64 [batch]."""
    batch_size, num_threads, local_rank, world_size, random_seed, rocal_cpu = 4, 1, 0, 1, 7, True
    data_path = photos
    pipe = Pipeline(batch_size=batch_size, num_threads=num_threads, device_id=local_rank, seed=random_seed,
                    rocal_cpu=rocal_cpu, tensor_layout=types.NCHW, tensor_dtype=types.FLOAT)
    rocal_device = 'cpu' if rocal_cpu else 'gpu'
    decoder_device = 'cpu' if rocal_cpu else 'gpu'
    with pipe:
        jpegs, _ = fn.readers.file(file_root=data_path, shard_id=local_rank, num_shards=world_size,
                                   random_shuffle=True)
        images = fn.decoders.image(jpegs, file_root=data_path, device=decoder_device, output_type=types.RGB,
                                   shard_id=0, num_shards=1, random_shuffle=True)
        images = fn.resize(images, device=rocal_device, resize_x=300, resize_y=300)
        pipe.set_outputs(images)
    pipe.build()
    data_loader = ROCALClassificationIterator(pipe, device="cpu")
    assert len(data_loader) == 3  # 10 images, padded to 12 with the last one (pad_last_batch)
    for epoch in range(2):
        seen = []
        for i, it in enumerate(data_loader, 0):
            (images,), labels = it
            assert images.shape == (4, 300, 300, 3) and images.dtype == torch.uint8
            assert labels.dtype == torch.int64 and labels.shape == (4,)
            seen += labels.tolist()
        assert i == 2 and sorted(seen[:10]) != [] and len(seen) == 12
        assert sorted(seen) == sorted(labels_of(photos) + [2, 2])  # the shard's last file twice more


def test_rocals_pipeline_test_script(photos, tmp_path):
    """tests/python_api/pipeline.py: image_slice + resize (NCHW uint8) + a coin-flip crop_mirror_normalize
    (NCHW float), read with the PyTorch iterator, then with pipe.run(): layout(), dtype(), batch_size(),
    at(i).transpose(...)."""
    pipe = Pipeline(batch_size=3, num_threads=1, device_id=0, seed=5, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=photos)
        decode = fn.decoders.image_slice(jpegs, output_type=types.RGB, file_root=photos, shard_id=0, num_shards=1,
                                         random_shuffle=True)
        res = fn.resize(decode, resize_width=64, resize_height=64, output_layout=types.NCHW,
                        output_dtype=types.UINT8)
        flip_coin = fn.random.coin_flip(probability=0.5)
        cmnp = fn.crop_mirror_normalize(res, output_layout=types.NCHW, output_dtype=types.FLOAT, crop=(64, 64),
                                        mirror=flip_coin, mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                        std=[0.229 * 255, 0.224 * 255, 0.225 * 255])
        pipe.set_outputs(cmnp)
    pipe.build()
    batches = list(ROCALClassificationIterator(pipe))
    assert len(batches) == 4 and all(out[0].shape == (3, 3, 64, 64) for out, _ in batches)
    assert all(out[0].dtype == torch.float32 and -3 < float(out[0].min()) < float(out[0].max()) < 3
               for out, _ in batches)
    output_data_batch = pipe.run()  # the iterator reset the loaders at the epoch's end: a new epoch
    assert len(output_data_batch) == 1
    assert output_data_batch[0].layout() == "NCHW" and output_data_batch[0].dtype() == "float32"
    assert output_data_batch[0].batch_size() == 3
    image = output_data_batch[0].at(2).transpose([1, 2, 0])
    assert image.shape == (64, 64, 3) and image.dtype == np.float32


def test_rocals_decoder_test_script(photos):
    """tests/python_api/decoder.py: @pipeline_def(seed=...) with function keyword arguments (device, path)
    and Pipeline ones mixed in one call, the generic (numpy) iterator, next(iter(...)), images[0][0]."""
    @pipeline_def(seed=1549361629)
    def image_decoder_pipeline(device="cpu", path=photos):
        jpegs, labels = fn.readers.file(file_root=path)
        images = fn.decoders.image(jpegs, file_root=path, device=device, output_type=types.RGB, shard_id=0,
                                   num_shards=1, random_shuffle=False)
        return fn.resize(images, device=device, resize_width=300, resize_height=300)

    pipe = image_decoder_pipeline(batch_size=4, num_threads=1, device_id=0, rocal_cpu=True,
                                  tensor_layout=types.NHWC, reverse_channels=True, mean=[0, 0, 0],
                                  std=[255, 255, 255], device="cpu", path=photos)
    pipe.build()
    data_loader = generic.ROCALClassificationIterator(pipe, device="cpu")
    images = next(iter(data_loader))
    batch = images[0][0]
    assert isinstance(batch, np.ndarray) and batch.shape == (4, 300, 300, 3) and batch.dtype == np.uint8
    assert batch.max() > 1  # mean/std of the Pipeline are kept for rocAL's iterators, never applied
    assert images[1].dtype == np.int64 and images[1].tolist() == labels_of(photos)[:4]  # not shuffled
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):  # (rocAL asserts)
        image_decoder_pipeline(batch_size=4, colour=1)


def test_the_generic_iterator_stops_without_resetting_and_does_not_cut_partial_batches(photos):
    def make(policy):
        pipe = Pipeline(batch_size=4, num_threads=1, seed=3, rocal_cpu=True)
        with pipe:
            jpegs, _ = fn.readers.file(file_root=photos)
            pipe.set_outputs(fn.resize(fn.decoders.image(jpegs, file_root=photos, last_batch_policy=policy),
                                       resize_width=8, resize_height=8))
        return pipe.build()

    numpy_batches = generic.ROCALClassificationIterator(make(types.LAST_BATCH_PARTIAL))
    assert len(numpy_batches) == 3 and [len(b[1]) for b in numpy_batches] == [4, 4, 4]
    assert list(numpy_batches) == []  # no reset at the end of an epoch: the caller resets
    numpy_batches.reset()
    assert len(list(numpy_batches)) == 3
    torch_batches = ROCALClassificationIterator(make(types.LAST_BATCH_PARTIAL))
    assert [len(labels) for _, labels in torch_batches] == [4, 4, 2]  # the 2 padded copies cut away
    assert [len(labels) for _, labels in torch_batches] == [4, 4, 2]  # it reset by itself
    drop = ROCALClassificationIterator(make(types.LAST_BATCH_DROP))
    assert len(drop) == 2 and [len(labels) for _, labels in drop] == [4, 4]


def test_run_protocol_and_labels(photos):
    """run() returns a list per set_outputs argument (the reader's empty label list keeps its place), None
    when the epoch is done; get_image_labels() is int32 [batch]; rocal_reset_loaders() starts the next
    epoch; get_remaining_images() and is_empty() count down by batches."""
    @pipeline_def
    def labelled(path):
        jpegs, labels = fn.readers.file(file_root=path)
        images = fn.decoders.image(jpegs, file_root=path)
        return fn.resize(images, resize_width=16, resize_height=12), labels

    pipe = labelled(photos, batch_size=5, num_threads=1, rocal_cpu=True)
    pipe.build()
    assert pipe.get_remaining_images() == 10 and pipe.get_last_batch_padded_size() == 0
    images, labels = pipe.run()
    assert labels == [] and images.dimensions() == [5, 12, 16, 3] and images.dtype() == "uint8"
    assert pipe.get_image_labels().dtype == np.int32 and pipe.get_image_labels().tolist() == labels_of(photos)[:5]
    assert pipe.get_remaining_images() == 5 and not pipe.is_empty()
    assert pipe.run() is not None and pipe.is_empty() and pipe.run() is None
    pipe.rocal_reset_loaders()
    assert pipe.get_remaining_images() == 10 and pipe.run()[0].batch_size() == 5


def test_outputs_are_buffers_of_the_operators_largest_size(photos, tmp_path):
    """A decoder's output is a max_decoded_height x max_decoded_width buffer with each image at its top left
    and zeros elsewhere (rocAL: per-sample ROIs in a dense buffer); a resize that keeps the aspect ratio
    gets a buffer MAX_ASPECT_RATIO (6) times the side it was given."""
    import os
    pipe = Pipeline(batch_size=2, num_threads=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=photos)
        decoded = fn.decoders.image(jpegs, file_root=photos, max_decoded_width=640, max_decoded_height=600)
        shorter = fn.resize(decoded, resize_shorter=40)
        pipe.set_outputs(decoded, shorter)
    decoded, shorter = pipe.run()
    assert decoded.dimensions() == [2, 600, 640, 3] and shorter.dimensions() == [2, 240, 240, 3]
    first = sorted(os.path.join(r, f) for r, _, files in os.walk(photos) for f in files if f.endswith(".JPEG"))[0]
    from PIL import Image
    expected = np.asarray(Image.open(first).convert("RGB"))
    height, width = expected.shape[:2]
    assert np.array_equal(decoded.at(0)[:height, :width], expected) and decoded.at(0)[height:].max() == 0
    assert decoded.get_rois()[0].tolist() == [0, 0, width, height]
    roi = shorter.get_rois()[0]  # resize_shorter=40 of a 500x375 photo: 53x40 (rocAL's lround)
    assert sorted(roi[2:].tolist()) == [40, round(40 * max(width, height) / min(width, height))]


def test_unsupported_operators_and_arguments_are_refused(photos):
    pipe = Pipeline(batch_size=2, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=photos)
        images = fn.decoders.image(jpegs, file_root=photos)
        with pytest.raises(NotImplementedError, match="fn.fog is not supported"):
            fn.fog(images)
        with pytest.raises(NotImplementedError, match="pad_last_batch=False, stick_to_shard=False"):
            fn.decoders.image(jpegs, file_root=photos, pad_last_batch=False, stick_to_shard=False, num_shards=2)
        with pytest.raises(NotImplementedError, match="fn.rotate: interpolation_type LANCZOS_INTERPOLATION"):
            fn.rotate(images, angle=10.0, interpolation_type=types.LANCZOS_INTERPOLATION)
        with pytest.raises(ValueError, match="cannot be combined"):
            fn.resize(images, resize_width=4, resize_shorter=4)
    with pytest.raises(NotImplementedError, match="display=True"):
        ROCALClassificationIterator(_small_pipeline(photos), display=True)


def _small_pipeline(root):
    pipe = Pipeline(batch_size=2, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=root)
        pipe.set_outputs(fn.resize(fn.decoders.image(jpegs, file_root=root), resize_width=8, resize_height=8))
    return pipe


def test_an_unmodified_rocal_script_runs_through_fastload_compat_run(photos, tmp_path):
    """`python -m fastload.compat.run script.py` makes `amd.rocal` resolve to fastload's package."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from amd.rocal.pipeline import pipeline_def
        from amd.rocal.plugin.pytorch import ROCALClassificationIterator
        import amd.rocal.fn as fn
        import amd.rocal.types as types

        @pipeline_def
        def train_pipe(path):
            jpegs, _ = fn.readers.file(file_root=path)
            images = fn.decoders.image(jpegs, file_root=path, output_type=types.RGB, random_shuffle=True)
            images = fn.resize(images, resize_width=32, resize_height=32)
            return fn.crop_mirror_normalize(images, crop=(32, 32), mirror=fn.random.coin_flip(),
                                            mean=[128.0] * 3, std=[64.0] * 3, output_dtype=types.FLOAT,
                                            output_layout=types.NCHW)

        pipe = train_pipe({photos!r}, batch_size=4, num_threads=1, device_id=0, rocal_cpu=True)
        pipe.build()
        for [images], labels in ROCALClassificationIterator(pipe):
            print(tuple(images.shape), labels.tolist(), sys.argv[1:])
    """))
    done = subprocess.run([sys.executable, "-m", "fastload.compat.run", str(script), "--epochs", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("(4, 3, 32, 32)") and "['--epochs', '1']" in line
                                   for line in lines)


def test_one_hot_labels_follow_rocals_rule(photos):
    """fn.one_hot: label L at place L - 1, label 0 at the last place (rocalGetOneHotImageLabels), int32
    of shape (1, batch, classes)."""
    pipe = Pipeline(batch_size=10, num_threads=1, rocal_cpu=True)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=photos)
        fn.one_hot(labels, num_classes=3)
        pipe.set_outputs(fn.resize(fn.decoders.image(jpegs, file_root=photos), resize_width=8, resize_height=8))
    _, one_hot = next(iter(ROCALClassificationIterator(pipe)))
    assert one_hot.shape == (1, 10, 3) and one_hot.dtype == torch.int32
    places = [(label - 1) % 3 for label in labels_of(photos)]
    assert one_hot[0].argmax(1).tolist() == places and one_hot.sum().item() == 10
    # the pipeline's own getter, as rocAL's plugins call it: into a tensor, or through its address
    into, through = torch.zeros(10, 3, dtype=torch.int32), torch.zeros(30, dtype=torch.int32)
    pipe.rocal_run()
    pipe.get_one_hot_encoded_labels(into, types.HOST_MEMORY)
    pipe.get_one_hot_encoded_labels(through.data_ptr(), types.HOST_MEMORY)
    assert torch.equal(into.reshape(-1), through) and into.sum().item() == 10
    with pytest.raises(ValueError, match="writes 30 contiguous int32 values"):
        pipe.get_one_hot_encoded_labels(torch.zeros(10, 3, dtype=torch.int64))


ROCAL_PIPELINE_METHODS = (  # every method of rocAL_pybind/amd/rocal/pipeline.py's Pipeline (ROCm/rocAL 0981d5bb)
    "build rocal_run define_graph get_handle copyToExternalTensor get_one_hot_encoded_labels set_outputs "
    "__enter__ __exit__ set_seed create_int_param create_float_param update_int_param update_float_param "
    "get_int_value get_float_value get_image_name get_image_id get_bounding_box_count get_bounding_box_labels "
    "get_bounding_box_cords get_ascii_datas get_mask_count get_mask_coordinates get_image_labels "
    "copy_encoded_boxes_and_lables get_encoded_boxes_and_lables get_img_sizes get_roi_img_sizes "
    "get_image_name_length get_remaining_images rocal_release rocal_reset_loaders is_empty timing_info "
    "get_matched_indices get_output_tensors get_last_batch_padded_size run")


def test_every_method_of_rocals_pipeline_exists():
    """A script finds each of rocAL's Pipeline methods: those fastload does not run raise
    NotImplementedError naming themselves, never AttributeError."""
    refused = {"copyToExternalTensor", "get_image_name", "get_image_name_length", "get_roi_img_sizes",
               "get_mask_count", "get_mask_coordinates"}
    pipe = Pipeline(batch_size=1, num_threads=1, rocal_cpu=True)
    for name in ROCAL_PIPELINE_METHODS.split():
        assert callable(getattr(Pipeline, name)), name
        if name in refused:
            with pytest.raises(NotImplementedError, match=f"Pipeline.{name} is not supported"):
                getattr(pipe, name)(1)


def test_decoders_cap_large_jpegs_by_dct_scaling(tmp_path):
    """Larger than max_decoded_width x max_decoded_height: decoded at the largest M/8 scale that fits
    (libjpeg-turbo's scaled IDCT, aspect kept, ceil(side * M / 8)): 1200x800 in 1000x1000 -> 900x600 (3/4);
    at 1/2 the pixels are Pillow's draft decode's (the same libjpeg scaling)."""
    from PIL import Image
    (tmp_path / "a").mkdir()
    make_image(1, 1200, 800).save(tmp_path / "a" / "big.jpg", quality=90)
    make_image(2, 520, 390).save(tmp_path / "a" / "mid.jpg", quality=90)
    pipe = Pipeline(batch_size=2, num_threads=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=str(tmp_path))
        pipe.set_outputs(fn.decoders.image(jpegs, file_root=str(tmp_path), max_decoded_width=1000,
                                           max_decoded_height=1000))
    (out,) = pipe.run()
    assert out.get_rois().tolist() == [[0, 0, 900, 600], [0, 0, 520, 390]]
    pipe = Pipeline(batch_size=2, num_threads=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=str(tmp_path))
        pipe.set_outputs(fn.decoders.image(jpegs, file_root=str(tmp_path), max_decoded_width=300,
                                           max_decoded_height=300))
    (out,) = pipe.run()
    assert out.get_rois().tolist() == [[0, 0, 300, 200], [0, 0, 260, 195]]  # 2/8 and 4/8
    draft = Image.open(tmp_path / "a" / "mid.jpg")
    draft.draft("RGB", (260, 195))
    assert np.array_equal(out.at(1)[:195, :260], np.asarray(draft.convert("RGB")))


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_rocals_external_source_test_script(photos, mode):
    """tests/python_api/external_source_reader.py's three modes (its sources as written there, reading with
    Pillow where it uses OpenCV): file names, encoded bytes (with their lengths), and pixels in a padded
    buffer with each sample's ROI. 10 samples in batches of 3 are ceil(10 / 3) = 4 batches, the sources
    wrapping around; the labels are the source's."""
    import glob
    import os

    from PIL import Image
    files = sorted(glob.glob(os.path.join(photos, "*", "*.JPEG")))
    batch_size = 3

    class ExternalInputIterator:
        def __iter__(self):
            self.i, self.n = 0, len(files)
            return self

        def __next__(self):
            batch, labels, heights, widths = [], [], [], []
            for label in range(1, batch_size + 1):
                name = files[self.i]
                if mode == 0:
                    batch.append(name)
                elif mode == 1:
                    batch.append(np.frombuffer(open(name, "rb").read(), dtype=np.uint8))
                    heights.append(len(batch[-1]))
                else:
                    image = np.asarray(Image.open(name).convert("RGB"))
                    padded = np.zeros((640, 640, 3), dtype=np.uint8)
                    padded[:image.shape[0], :image.shape[1]] = image
                    batch.append(padded)
                    heights.append(image.shape[0])
                    widths.append(image.shape[1])
                labels.append(label)
                self.i = (self.i + 1) % self.n
            labels = np.array(labels).astype("int32")
            return (batch, labels) if mode == 0 else (batch, labels, heights) if mode == 1 else \
                (batch, labels, heights, widths, 640, 640)

    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=0, prefetch_queue_depth=4, seed=1,
                    rocal_cpu=True, tensor_layout=types.NCHW)
    with pipe:
        jpegs, _ = fn.external_source(source=ExternalInputIterator(), mode=mode, max_width=2000, max_height=2000)
        output = fn.resize(jpegs, resize_width=30, resize_height=20, output_layout=types.NCHW,
                           output_dtype=types.UINT8)
        pipe.set_outputs(output)
    pipe.build()
    batches = list(generic.ROCALClassificationIterator(pipe, device="cpu"))
    assert len(batches) == 4
    for outputs, labels in batches:
        assert outputs[0].shape == (3, 3, 20, 30) and outputs[0].dtype == np.uint8
        assert labels.tolist() == [1, 2, 3]
    from fastload.compat.rocal import imageops
    with open(files[0], "rb") as file:
        # fn.external_source decodes with USER_GIVEN_SIZE: enlarged by the largest DCT scale that fits
        # (mode 2's pixels are the test's own Pillow decode)
        first = imageops.resample(imageops.decode(file.read(), "RGB", 2000, 2000, keep_original=mode == 2), 30, 20,
                                  "linear")
    assert np.array_equal(batches[0][0][0][0].transpose(1, 2, 0), first.numpy())  # file 0, resized
    assert np.array_equal(batches[3][0][0][1], batches[0][0][0][0])  # sample 10 wrapped around to file 0


def test_the_python_api_pages_rotated_pipeline_and_show_images(photos):
    """The page's rotated pipeline (with the @pipeline_def its call needs, and its broken comment line
    mended), run() unpacked as the page does, then show_images' indexing of the batch (its plotting left
    out). The rotated images keep the decoder's 1000x1000 buffer, each at its top left."""
    from fastload.compat.rocal import imageops
    image_dir, max_batch_size = photos, 2

    @pipeline_def
    def rotated_pipeline():
        jpegs, labels = fn.readers.file(file_root=image_dir, random_shuffle=True)
        images = fn.decoders.image(jpegs, device='cpu')
        # Rotate the decoded images at an angle of 10 and fill the remaining space with black color (0)
        rotated_images = fn.rotate(images, angle=10.0, fill_value=0)
        return rotated_images, labels

    pipe = rotated_pipeline(batch_size=max_batch_size, num_threads=1, device_id=0, rocal_cpu=True)
    pipe.build()
    pipe_out = pipe.run()
    images, labels = pipe_out
    assert labels == [] and images.dimensions() == [2, 1000, 1000, 3]
    for j in range(max_batch_size):  # show_images: img = image_batch[j]; plt.imshow(img)
        img = images[j]
        assert img.shape == (1000, 1000, 3) and img.dtype == np.uint8
    first = sorted(os.path.join(r, f) for r, _, files in os.walk(photos) for f in files if f.endswith(".JPEG"))[0]
    with open(first, "rb") as file:
        expected = imageops.rotate(imageops.decode(file.read(), "RGB", 1000, 1000), 10.0)
    height, width = expected.shape[:2]
    assert np.array_equal(images[0][:height, :width], expected.numpy()) and images[0][height:].max() == 0


def test_rocals_unit_test_rotate_brightness_and_contrast_branches(photos):
    """tests/python_api/unit_test.py's branches: rotate (angle 45 into a 416x416 buffer), brightness
    (1.9, shift 20) and contrast (30, centre 80), NHWC uint8 as the script asks; the colour ones are RPP's
    point formulas, rounded half to even and saturated."""
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=0, seed=1, rocal_cpu=True,
                    tensor_layout=types.NHWC, tensor_dtype=types.UINT8, output_memory_type=types.HOST_MEMORY)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=photos)
        images = fn.decoders.image(jpegs, file_root=photos, device='cpu', max_decoded_width=416,
                                   max_decoded_height=416, output_type=types.RGB, shard_id=0, num_shards=1,
                                   random_shuffle=False)
        rotated = fn.rotate(images, angle=45.0, dest_width=416, dest_height=416, output_layout=types.NHWC,
                            output_dtype=types.UINT8, interpolation_type=types.LINEAR_INTERPOLATION)
        bright = fn.brightness(images, brightness=1.9, brightness_shift=20.0, output_layout=types.NHWC,
                               output_dtype=types.UINT8)
        contrasted = fn.contrast(images, contrast=30.0, contrast_center=80.0, output_layout=types.NHWC,
                                 output_dtype=types.UINT8)
        random_bright = fn.brightness(images)
        pipe.set_outputs(images, rotated, bright, contrasted, random_bright)
    decoded, rotated, bright, contrasted, random_bright = pipe.run()
    assert rotated.dimensions() == [2, 416, 416, 3]
    height, width = decoded.get_rois()[0][3], decoded.get_rois()[0][2]
    image = torch.from_numpy(decoded.at(0)[:height, :width].copy())
    assert np.array_equal(bright.at(0)[:height, :width],
                          (image.float() * 1.9 + 20).round().clamp(0, 255).to(torch.uint8).numpy())
    assert np.array_equal(contrasted.at(0)[:height, :width],
                          ((image.float() - 80) * 30 + 80).round().clamp(0, 255).to(torch.uint8).numpy())
    assert not np.array_equal(random_bright.at(0), decoded.at(0))  # drawn from rocAL's default ranges


def imagenet_train_pipeline(data_path, batch_size=4, crop=64, fp16=False):
    """train_pipeline of rocAL's docs/examples/pytorch/imagenet_training/imagenet_training.py, small."""
    pipe = Pipeline(batch_size=batch_size, num_threads=2, device_id=0, seed=10, rocal_cpu=True,
                    tensor_dtype=types.FLOAT16 if fp16 else types.FLOAT, tensor_layout=types.NCHW,
                    prefetch_queue_depth=6, mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                    std=[0.229 * 255, 0.224 * 255, 0.225 * 255], output_memory_type=types.HOST_MEMORY)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=data_path)
        decode = fn.decoders.image_slice(jpegs, output_type=types.RGB, file_root=data_path, shard_id=0,
                                         num_shards=1, random_shuffle=True)
        res = fn.resize(decode, resize_width=crop, resize_height=crop, output_layout=types.NHWC,
                        output_dtype=types.UINT8, interpolation_type=types.TRIANGULAR_INTERPOLATION)
        flip_coin = fn.random.coin_flip(probability=0.5)
        cmnp = fn.crop_mirror_normalize(res, output_layout=types.NCHW, output_dtype=types.FLOAT, crop=(crop, crop),
                                        mirror=flip_coin, mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                        std=[0.229 * 255, 0.224 * 255, 0.225 * 255])
        pipe.set_outputs(cmnp)
    return pipe.build()


@pytest.mark.parametrize("fused", [True, False])
def test_the_copies_that_fill_the_last_batch_are_augmented_anew(photos, monkeypatch, fused):
    """LAST_BATCH_FILL pads 10 photos to 12 with two copies of the shard's last file; in rocAL each copy is
    a sample of its own that its random operators draw for (here the random-crop decoder's window and the
    mirror coin), and so in fastload, on the fused path and operator by operator alike."""
    if not fused:
        monkeypatch.setattr(RocalGraph, "_lower", lambda self, graph: "forced for the test")
    pipe = imagenet_train_pipeline(photos)
    assert pipe.loader.fast_path == fused
    pipe.run(), pipe.run()
    (images,) = pipe.run()
    images = torch.as_tensor(np.asarray(images))
    labels = pipe.get_image_labels()
    assert labels[2] == labels[3] == labels_of(photos)[-1]  # positions 10 and 11: the last photo, twice
    assert not torch.equal(images[2], images[3])


def test_the_imagenet_training_graph_is_fused_and_equals_the_operator_run(photos, monkeypatch):
    """rocAL's ImageNet training graph lowers to a fused plan (the fast path): the same samples, windows
    and flips as the operator-by-operator run; pixels differ by resampling arithmetic (Pillow's triangle
    filter against the torch one; at borders Pillow renormalizes where RPP repeats the edge pixel): mean
    under 0.5 levels, 99th percentile of each image at most 6."""
    fused = imagenet_train_pipeline(photos)
    assert fused.unfused is None and fused.loader.fast_path
    monkeypatch.setattr(RocalGraph, "_lower", lambda self, graph: "forced for the test")
    slow = imagenet_train_pipeline(photos)
    assert not slow.loader.fast_path
    std = torch.tensor([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1) * 255
    for _ in range(3):
        (f_images,), (s_images,) = fused.run(), slow.run()
        assert np.array_equal(fused.get_image_labels(), slow.get_image_labels())
        assert f_images.dimensions() == s_images.dimensions() == [4, 3, 64, 64] and f_images.layout() == "NCHW"
        levels = (torch.from_numpy(np.stack([f_images.at(i) for i in range(4)]))
                  - torch.from_numpy(np.stack([s_images.at(i) for i in range(4)]))).abs() * std
        assert levels.mean() < 0.5 and levels.flatten(1).quantile(0.99, dim=1).max() <= 6, levels.max()
    fused.rocal_reset_loaders()  # the three run() calls read the whole epoch (12 samples)
    batches = list(ROCALClassificationIterator(fused))
    (first,), _ = batches[0]
    assert len(batches) == 3 and first.shape == (4, 3, 64, 64) and first.dtype == torch.float32


def test_without_padding_the_last_batch_wraps_and_the_next_epoch_goes_on(photos):
    """decoders.image(pad_last_batch=False): 10 files in batches of 4 give 2 batches (rocAL's loader stops
    when fewer than a batch are left); the next epoch starts at the ninth file and wraps (rocAL's reader
    keeps its position across rocal_reset_loaders)."""
    pipe = Pipeline(batch_size=4, num_threads=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=photos)
        images = fn.decoders.image(jpegs, file_root=photos, pad_last_batch=False)
        pipe.set_outputs(fn.resize(images, resize_width=8, resize_height=8))
    pipe.build()
    every = labels_of(photos)
    epochs = []
    for _ in range(2):
        labels = []
        while pipe.run() is not None:
            labels += pipe.get_image_labels().tolist()
        epochs.append(labels)
        pipe.rocal_reset_loaders()
    assert epochs[0] == every[:8]
    assert epochs[1] == every[8:] + every[:6]


def _tfrecord_folder(root, photos):
    """The photos as rocAL's TF classification data: two TFRecord files (sorted names: a-, b-) of Examples
    with image/encoded, image/class/label (this test's own numbering, 10 + n) and image/filename."""
    from fastload import tfrecords
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(photos) for f in files if d != photos)
    records = [tfrecords.frame(tfrecords.example({"image/encoded": [open(path, "rb").read()],
                                                  "image/class/label": [10 + n],
                                                  "image/filename": [os.path.basename(path).encode()]}))
               for n, path in enumerate(paths)]
    os.makedirs(root)
    for name, part in (("b-train.tfrecord", records[6:]), ("a-train.tfrecord", records[:6])):
        with open(os.path.join(root, name), "wb") as out:
            out.write(b"".join(part))
    return paths


def test_rocals_tf_classification_reader_script(photos, tmp_path):
    """rocAL's tests/python_api/tf_classification_reader.py: fn.readers.tfrecord (the key map, features) and
    fn.decoders.image(jpegs, user_feature_key_map, path): the folder's files in sorted order, records in
    order, labels as the records hold them (no offset), images as the file reader decodes the same JPEGs;
    image_random_crop decodes whole images here, as rocAL's does after a TFRecord reader."""
    image_path = str(tmp_path / "tf" / "classification")
    paths = _tfrecord_folder(image_path, photos)
    feature_key_map = {
        'image/encoded': 'image/encoded',
        'image/class/label': 'image/class/label',
        'image/filename': 'image/filename'
    }
    outputs = {}
    for decoder in (fn.decoders.image, fn.decoders.image_random_crop):
        pipe = Pipeline(batch_size=4, num_threads=1, device_id=0, seed=1, rocal_cpu=True)
        with pipe:
            inputs = fn.readers.tfrecord(path=image_path, reader_type=0, user_feature_key_map=feature_key_map,
                                         features={"image/encoded": None, "image/class/label": None,
                                                   "image/filename": None})
            jpegs = inputs["image/encoded"]
            assert inputs["image/class/label"] == []
            images = decoder(jpegs, user_feature_key_map=feature_key_map, output_type=types.RGB, path=image_path)
            pipe.set_outputs(fn.resize(images, resize_width=40, resize_height=30))
        pipe.build()
        loader = ROCALClassificationIterator(pipe)
        assert len(loader) == 3  # 10 records, the last batch filled with the last one
        batches = [(images.clone(), labels.tolist()) for (images,), labels in loader]
        outputs[decoder] = torch.cat([images for images, _ in batches])
        assert [label for _, labels in batches for label in labels] == [10 + n for n in range(10)] + [19, 19]
    assert torch.equal(outputs[fn.decoders.image], outputs[fn.decoders.image_random_crop])
    reference = Pipeline(batch_size=12, num_threads=1, rocal_cpu=True)  # the same JPEGs, read as files
    with reference:
        jpegs, _ = fn.readers.file(file_root=photos)
        reference.set_outputs(fn.resize(fn.decoders.image(jpegs, file_root=photos), resize_width=40,
                                        resize_height=30))
    reference.build()
    (files,), _ = next(iter(ROCALClassificationIterator(reference)))
    assert torch.equal(outputs[fn.decoders.image][:10], files[:10]) and len(paths) == 10


def test_the_tfrecord_reader_refuses_what_rocal_cannot_read(photos, tmp_path):
    """A record with no image/filename (rocAL keys records by it), a name used twice (rocAL would read the
    first record for both), num_shards > 1 (rocAL's internal loaders), detection, and a missing key."""
    from fastload import tfrecords
    keys = {"image/encoded": "image/encoded", "image/class/label": "image/class/label",
            "image/filename": "image/filename"}
    data = open(next(os.path.join(d, f) for d, _, files in os.walk(photos) for f in files if d != photos),
                "rb").read()

    def folder(name, *records):
        root = tmp_path / name
        root.mkdir()
        (root / "train.tfrecord").write_bytes(b"".join(tfrecords.frame(tfrecords.example(r)) for r in records))
        return str(root)

    def build(root, **decoder):
        pipe = Pipeline(batch_size=2, rocal_cpu=True)
        with pipe:
            jpegs = fn.readers.tfrecord(root, keys, {})["image/encoded"]
            pipe.set_outputs(fn.decoders.image(jpegs, user_feature_key_map=keys, path=root, **decoder))

    image = {"image/encoded": [data], "image/class/label": [1]}
    with pytest.raises(ValueError, match=r"record 1 has no bytes feature 'image/filename'"):
        build(folder("unnamed", {**image, "image/filename": [b"a.jpg"]}, image))
    twice = folder("twice", {**image, "image/filename": [b"a.jpg"]}, {**image, "image/filename": [b"a.jpg"]})
    with pytest.raises(ValueError, match=r"record 0 and .*record 1 are both named 'a.jpg'"):
        build(twice)
    named = folder("named", {**image, "image/filename": [b"a.jpg"]})
    with pytest.raises(NotImplementedError, match=r"num_shards=2\) after fn.readers.tfrecord"):
        build(named, num_shards=2)
    with pytest.raises(ValueError, match="path= names the folder of TFRecord files"):
        build("")
    pipe = Pipeline(batch_size=2, rocal_cpu=True)
    with pipe:
        with pytest.raises(NotImplementedError, match=r"reader_type=1"):
            fn.readers.tfrecord(named, keys, {}, reader_type=1)
        with pytest.raises(KeyError, match="image/filename"):
            fn.readers.tfrecord(named, {"image/class/label": "l"}, {})
        with pytest.raises(ValueError, match=r"features \['image/text'\] are not in user_feature_key_map"):
            fn.readers.tfrecord(named, keys, {"image/text": None})
        jpegs = fn.readers.tfrecord(named, keys, {})["image/encoded"]
        with pytest.raises(NotImplementedError, match="image_slice after fn.readers.tfrecord"):
            fn.decoders.image_slice(jpegs)


def _webdataset_folder(root, photos, drop=None, large=False):
    """The photos as rocAL's web_dataset_reader test data: two tars (sorted names: a-, b-) of samples
    key.JPEG + key.cls (this test's own numbering as text, 10 + n); ``drop``: the n whose .cls is left out;
    also a key with only a .png in the first tar (no sample for rocAL). Returns the photos' paths."""
    import tarfile

    from fastload.tarshards import add_member
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(photos) for f in files if d != photos)
    os.makedirs(root)
    for name, part in (("b-train.tar", range(6, 10)), ("a-train.tar", range(0, 6))):
        with tarfile.open(os.path.join(root, name), "w") as archive:
            if name.startswith("a"):
                add_member(archive, "no-jpeg.png", b"\x89PNG not read")
            for n in part:
                add_member(archive, f"sample{n:02d}.JPEG", open(paths[n], "rb").read())
                if n != drop:
                    add_member(archive, f"sample{n:02d}.cls", (b"x" * 300) if large else f"{10 + n}\n".encode())
    return paths


def _webdataset_pipeline(image_path, batch_size=4, missing=types.MISSING_COMPONENT_ERROR, **decoder):
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=0, seed=1, rocal_cpu=True)
    with pipe:
        img_raw = fn.readers.webdataset(path=image_path, ext=[{'JPEG', 'cls'}], index_paths="",
                                        missing_components_behavior=missing)
        img = fn.decoders.image(img_raw, file_root=image_path, max_decoded_width=500, max_decoded_height=500,
                                index_path="", **decoder)
        pipe.set_outputs(fn.resize(img, resize_width=40, resize_height=30))
    pipe.build()
    return pipe


def test_rocals_web_dataset_reader_script(photos, tmp_path):
    """rocAL's tests/python_api/web_dataset_reader.py: fn.readers.webdataset(ext=[{'JPEG', 'cls'}]) then
    fn.decoders.image(file_root=...): the tars in sorted order, samples in member order, keys without a
    JPEG left out; the iterator gives the .cls members' raw bytes (uint8 arrays) in place of labels, the
    last batch filled with the last sample (LAST_BATCH_FILL); the images are the file reader's."""
    image_path = str(tmp_path / "wds")
    paths = _webdataset_folder(image_path, photos)
    with pytest.warns(UserWarning, match="1 keys without a JPEG member are not samples"):
        pipe = _webdataset_pipeline(image_path)
    loader = ROCALClassificationIterator(pipe, display=0, device="cpu", device_id=0)
    assert len(loader) == 3
    for epoch in range(2):
        images, members = [], []
        for i, ([image_batch], meta_data) in enumerate(loader, 0):
            assert len(meta_data) == 1 and all(isinstance(m, np.ndarray) and m.dtype == np.uint8
                                               for m in meta_data[0])
            images.append(image_batch.clone())
            members += [bytes(m) for m in meta_data[0]]
        assert members == [f"{10 + n}\n".encode() for n in range(10)] + [b"19\n", b"19\n"], epoch
    with pytest.raises(RuntimeError, match="gives no labels: get_ascii_datas"):
        pipe.get_image_labels()
    pipe.rocal_reset_loaders()
    # rocAL's numpy iterator fills labels for its label readers only: None here
    assert [labels for _, labels in generic.ROCALGenericIterator(pipe)] == [None] * 3
    reference = Pipeline(batch_size=12, num_threads=1, rocal_cpu=True)  # the same JPEGs, read as files
    with reference:
        jpegs, _ = fn.readers.file(file_root=photos)
        reference.set_outputs(fn.resize(fn.decoders.image(jpegs, file_root=photos, max_decoded_width=500,
                                                          max_decoded_height=500),
                                        resize_width=40, resize_height=30))
    reference.build()
    (files,), _ = next(iter(ROCALClassificationIterator(reference)))
    assert torch.equal(torch.cat(images)[:10], files[:10]) and len(paths) == 10


def test_the_web_dataset_reader_shards_cuts_and_handles_missing_members(photos, tmp_path):
    """The decoder's shard_id / num_shards split the samples as the file reader does; LAST_BATCH_PARTIAL
    cuts the members too; a missing .cls stops the build (MISSING_COMPONENT_ERROR), drops the sample
    (SKIP) or gives an empty array (EMPTY); a member over rocAL's 200-byte buffer and an ext without a
    JPEG are refused."""
    image_path = str(tmp_path / "wds")
    _webdataset_folder(image_path, photos)
    shards = []
    for shard_id in range(2):
        with pytest.warns(UserWarning):
            pipe = _webdataset_pipeline(image_path, shard_id=shard_id, num_shards=2)
        shards.append([bytes(m) for _, (members,) in ROCALClassificationIterator(pipe) for m in members])
    assert shards == [[f"{10 + n}\n".encode() for n in range(5)] + [b"14\n"] * 3,
                      [f"{10 + n}\n".encode() for n in range(5, 10)] + [b"19\n"] * 3]
    with pytest.warns(UserWarning):
        pipe = _webdataset_pipeline(image_path, last_batch_policy=types.LAST_BATCH_PARTIAL)
    batches = [([images.shape[0]], len(members)) for (images,), (members,) in ROCALClassificationIterator(pipe)]
    assert batches == [([4], 4), ([4], 4), ([2], 2)]

    missing = str(tmp_path / "missing")
    _webdataset_folder(missing, photos, drop=3)
    with pytest.raises(ValueError, match=r"a-train.tar:sample03 has no \.cls member"):
        _webdataset_pipeline(missing)
    with pytest.warns(UserWarning, match="1 keys without a JPEG member are not samples; 1 samples lacking"):
        skip = _webdataset_pipeline(missing, missing=types.MISSING_COMPONENT_SKIP)
    assert [bytes(m) for _, (members,) in ROCALClassificationIterator(skip) for m in members][:9] == \
        [f"{10 + n}\n".encode() for n in range(10) if n != 3]
    with pytest.warns(UserWarning):
        empty = _webdataset_pipeline(missing, missing=types.MISSING_COMPONENT_EMPTY)
    members = [bytes(m) for _, (members,) in ROCALClassificationIterator(empty) for m in members]
    assert members[3] == b"" and len(members) == 12

    large = str(tmp_path / "large")
    _webdataset_folder(large, photos, large=True)
    with pytest.raises(NotImplementedError, match="over 200 bytes"):
        _webdataset_pipeline(large)
    with pytest.raises(ValueError, match="names no JPEG extension"):
        with Pipeline(batch_size=2, rocal_cpu=True):
            fn.readers.webdataset(path=image_path, ext=[{'png', 'cls'}])


def test_image_raw_takes_each_records_bytes_as_the_pixels(tmp_path):
    """fn.decoders.image_raw after fn.readers.tfrecord: each record's image/encoded bytes are the image's
    max_decoded_height x max_decoded_width x 3 pixels as stored (rocalRawTFRecordSource, SKIP_DECODE), the
    labels the records'; a record of another byte count is refused naming it (rocAL would leave stale
    bytes or overrun its buffer); after another reader it is refused."""
    from fastload import tfrecords
    rng = np.random.default_rng(5)
    pixels = [rng.integers(0, 256, (6, 10, 3), dtype=np.uint8) for _ in range(3)]
    root = tmp_path / "raw"
    root.mkdir()
    (root / "a.tfrecord").write_bytes(b"".join(tfrecords.frame(tfrecords.example(
        {"image/encoded": [p.tobytes()], "image/class/label": [n], "image/filename": [f"{n}.raw".encode()]}))
        for n, p in enumerate(pixels)))
    keys = {"image/encoded": "image/encoded", "image/class/label": "image/class/label",
            "image/filename": "image/filename"}

    def raw_pipeline(folder, width=10, height=6, output_type=types.BGR):
        pipe = Pipeline(batch_size=2, num_threads=1, device_id=0, seed=1, rocal_cpu=True)
        with pipe:
            jpegs = fn.readers.tfrecord(path=str(folder), reader_type=0, user_feature_key_map=keys,
                                        features={})["image/encoded"]
            pipe.set_outputs(fn.decoders.image_raw(jpegs, user_feature_key_map=keys, path=str(folder),
                                                   output_type=output_type, max_decoded_width=width,
                                                   max_decoded_height=height))
        pipe.build()
        return pipe

    batches = [(images.clone(), labels.tolist()) for (images,), labels in
               ROCALClassificationIterator(raw_pipeline(root))]
    assert [labels for _, labels in batches] == [[0, 1], [2, 2]]  # the last batch filled with the last record
    images = torch.cat([images for images, _ in batches])
    assert images.shape == (4, 6, 10, 3)  # NHWC uint8, the bytes as stored (BGR names them, swaps nothing)
    for image, expected in zip(images, pixels + pixels[-1:]):
        assert np.array_equal(image.numpy(), expected)
    with pytest.raises(DecodeError, match=r"0.raw.*180 bytes, not the 12x6x3 = 216"):
        raw_pipeline(root, width=12).run()
    with pytest.raises(DecodeError, match=r"180 bytes, not the 10x6x1 = 60"):
        raw_pipeline(root, output_type=types.GRAY).run()
    (gray,) = raw_pipeline(root, width=10, height=18, output_type=types.GRAY).run()  # 180 bytes as 10x18x1
    assert gray.dimensions() == [2, 18, 10, 1] and np.array_equal(gray.at(0).reshape(-1), pixels[0].reshape(-1))
    with pytest.raises(ValueError, match="image_raw reads what fn.readers.tfrecord recorded"):
        with Pipeline(batch_size=1, num_threads=1, rocal_cpu=True):
            fn.decoders.image_raw(fn.readers.file(file_root=str(root))[0])


def test_parameter_handles_are_read_as_the_operators_run(photos):
    """Pipeline.create_float_param / create_int_param give handles operators read when they run:
    brightness 1.0, then 0.5 after update_float_param (from the next epoch: batches made ahead keep the
    value they were made with, as rocAL's prefetch queue does); a mirror handle 0, then 1."""
    level = Pipeline.create_float_param(1.0)
    flip = Pipeline.create_int_param(0)
    assert Pipeline.get_float_value(level) == 1.0 and Pipeline.get_int_value(flip) == 0
    pipe = Pipeline(batch_size=4, num_threads=1, seed=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=photos)
        images = fn.resize(fn.decoders.image(jpegs, file_root=photos), resize_width=16, resize_height=12)
        pipe.set_outputs(images, fn.brightness(images, brightness=level, brightness_shift=0.0),
                         fn.crop_mirror_normalize(images, crop=(12, 16), mirror=flip))
    pipe.build()
    plain, bright, mirrored = (t.batch.clone() for t in pipe.run())
    assert torch.equal(bright, plain) and torch.equal(mirrored, plain)
    pipe.update_float_param(0.5, level)
    pipe.update_int_param(1, flip)
    assert pipe.get_float_value(level) == 0.5 and pipe.get_int_value(flip) == 1
    pipe.rocal_reset_loaders()
    plain, bright, mirrored = (t.batch.clone() for t in pipe.run())
    assert torch.equal(bright, torch.round(plain.float() * 0.5).to(torch.uint8))
    assert torch.equal(mirrored, plain.flip(2))
    with pytest.raises(TypeError, match="takes a handle from create_int_param"):
        pipe.update_int_param(1, 0.5)
    with pytest.raises(TypeError, match="takes a handle from create_int_param"):
        pipe.update_int_param(1, level)  # a float handle (rocAL's dynamic_cast fails and changes nothing)
    with pytest.raises(TypeError, match="an int parameter takes an int"):
        Pipeline.create_int_param(1.7)
    # a flip's flags and jitter's window take handles too; a window the handle makes 0 fails as it is read
    flipped, window = Pipeline.create_int_param(1), Pipeline.create_int_param(0)
    pipe = Pipeline(batch_size=2, num_threads=1, seed=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=photos)
        images = fn.resize(fn.decoders.image(jpegs, file_root=photos), resize_width=16, resize_height=12)
        pipe.set_outputs(images, fn.flip(images, horizontal=flipped))
    plain, mirrored = (t.batch for t in pipe.run())
    assert torch.equal(mirrored, plain.flip(2))
    pipe = Pipeline(batch_size=2, num_threads=1, seed=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=photos)
        pipe.set_outputs(fn.jitter(fn.decoders.image(jpegs, file_root=photos), kernel_size=window))
    with pytest.raises(Exception, match="kernel_size=0.0 is not a window"):
        pipe.run()
    with pytest.raises(NotImplementedError, match="random_crop: a parameter handle for crop_area_factor"):
        with Pipeline(batch_size=1, rocal_cpu=True):
            fn.random_crop(images, crop_area_factor=level, crop_aspect_ratio=None, crop_pox_x=None, crop_pox_y=None)


def test_a_parameter_handle_is_read_once_for_each_batch(photos, monkeypatch):
    """rocAL reads a handle once per batch: an update made while a batch is being made (here as its first
    sample is done) reaches none of that batch's samples, and all of the next one's."""
    from fastload.compat.rocal import ops_colour as operators
    level = Pipeline.create_float_param(1.0)
    pipe = Pipeline(batch_size=4, num_threads=1, seed=1, rocal_cpu=True)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=photos)
        images = fn.resize(fn.decoders.image(jpegs, file_root=photos), resize_width=16, resize_height=12)
        pipe.set_outputs(images, fn.brightness(images, brightness=level, brightness_shift=0.0))
    pipe.build()
    calls, as_output = [], operators.imageops.as_output

    def update_after_the_first_sample(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the first sample's resize and brightness are done
            pipe.update_float_param(0.5, level)
        return as_output(*args, **kwargs)
    monkeypatch.setattr(operators.imageops, "as_output", update_after_the_first_sample)
    plain, bright = (t.batch.clone() for t in pipe.run())
    assert len(calls) >= 8 and torch.equal(bright, plain)
    plain, bright = (t.batch.clone() for t in pipe.run())
    assert torch.equal(bright, torch.round(plain.float() * 0.5).to(torch.uint8))
    # its threads, prefetching the next batches, are joined here: left to the garbage collector, the
    # pipeline's cycle may be collected in one of those threads, which cannot join itself before the
    # no-thread check runs (seen once in CI)
    pipe.rocal_release()


@pytest.mark.parametrize("script, size, out", [("pytorch_classification_reader", (500, 375), 224),
                                               ("pytorch_diffusion_loader", (178, 218), 64)])
def test_rocals_pytorch_reader_scripts(script, size, out, tmp_path):
    """tests/python_api/pytorch_classification_reader.py (image_slice, resize to NCHW, crop_mirror_normalize
    to NHWC float16 with a coin flip) and pytorch_diffusion_loader.py (CelebA's 178x218 images capped by
    the decoder, a TRIANGULAR roi_resize, crop_mirror_normalize to NCHW float), unchanged, through
    ``python -m fastload.compat.run`` with a cv2 module beside them that saves what they draw: three
    epochs of 10 images in batches of 4 (the last filled), each drawn image the output's size."""
    from rocal_scripts import CV2_STAND_IN, SCRIPTS, run_rocal_script
    for n in range(10):
        folder = tmp_path / "data" / f"class_{n % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        make_image(n, *size).save(folder / f"{n}.jpg", quality=90)
    (tmp_path / "cv2.py").write_text(CV2_STAND_IN)
    done = run_rocal_script(tmp_path, f"{script}.py", (SCRIPTS / f"{script}.py").read_text(),
                            str(tmp_path / "data"), "cpu", "4")
    assert done.stdout.count("EPOCH") == 3
    saved = list((tmp_path / "output_folder").rglob("*.npy"))
    drawn = 3 * 12 if script == "pytorch_diffusion_loader" else 3 * 3  # every image, or each batch's first
    assert len(saved) == drawn and all(np.load(f).shape == (out, out, 3) for f in saved)


def test_rocals_decoder_script(tmp_path):
    """tests/python_api/decoder.py, unchanged, through ``python -m fastload.compat.run`` with a matplotlib
    beside it that keeps what show_images shows: @pipeline_def with its own device and path arguments and
    the pipeline's (tensor_layout, reverse_channels, mean, std), plugin.generic's iterator, the first
    batch's four 300x300 NHWC uint8 images, each the file reader's image resized."""
    from rocal_scripts import MATPLOTLIB_STAND_IN, SCRIPTS, run_rocal_script
    for n in range(5):
        folder = tmp_path / "data" / f"class_{n % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        make_image(n, 90 + 10 * n, 70).save(folder / f"{n}.jpg", quality=90)
    (tmp_path / "matplotlib").mkdir()
    for name, text in MATPLOTLIB_STAND_IN.items():
        (tmp_path / "matplotlib" / name).write_text(text)
    run_rocal_script(tmp_path, "decoder.py", (SCRIPTS / "decoder.py").read_text(), "cpu", str(tmp_path / "data"))
    shown = np.load(tmp_path / "shown.npy")
    assert shown.shape == (4, 300, 300, 3) and shown.dtype == np.uint8
    pipe = Pipeline(batch_size=4, num_threads=1, rocal_cpu=True)  # the same pipeline, written out
    with pipe:
        jpegs, _ = fn.readers.file(file_root=str(tmp_path / "data"))
        pipe.set_outputs(fn.resize(fn.decoders.image(jpegs, file_root=str(tmp_path / "data")), resize_width=300,
                                   resize_height=300))
    (images,) = pipe.run()
    assert np.array_equal(shown, images.batch.numpy())


def _raw_uncompressed_batch(pixels):
    """One batch of EXTSOURCE_RAW_UNCOMPRESSED ``pixels`` (two items alike) through fn.resize, as uint8."""
    class Source:
        def __iter__(self):
            self.n = 2
            return self

        def __next__(self):
            return [pixels, pixels], np.int32([1, 2]), [4, 4], [6, 6], 4, 6

    pipe = Pipeline(batch_size=2, num_threads=1, device_id=0, seed=1, rocal_cpu=True, tensor_layout=types.NCHW)
    with pipe:
        images, _ = fn.external_source(source=Source(), mode=types.EXTSOURCE_RAW_UNCOMPRESSED, max_width=6,
                                       max_height=4)
        pipe.set_outputs(fn.resize(images, resize_width=6, resize_height=4, output_layout=types.NCHW,
                                   output_dtype=types.UINT8))
    pipe.build()
    return next(iter(generic.ROCALClassificationIterator(pipe, device="cpu")))[0][0]


def test_raw_uncompressed_pixels_of_another_type_are_never_wrapped():
    """rocAL's binding casts each item to uint8 unchecked (pybind11's forcecast): 256 would be 0, 0.7 would be
    0. Another type is taken where the cast is exact, and refused, naming the item and value, where not."""
    pixels = np.arange(72, dtype=np.uint8).reshape(4, 6, 3) * 3
    expected = _raw_uncompressed_batch(pixels)
    assert np.array_equal(_raw_uncompressed_batch(pixels.astype(np.int64)), expected)
    assert np.array_equal(_raw_uncompressed_batch(pixels.astype(np.float32)), expected)
    wrapped = pixels.astype(np.int64)
    wrapped[1, 2, 0] = 256
    with pytest.raises(ValueError, match=r"item 0 of the batch has dtype int64 and 256 at \(1, 2, 0\): pixels "
                                         r"are uint8"):
        _raw_uncompressed_batch(wrapped)
    for bad in (0.7, -1.0, float("nan"), 1e30):
        fractional = pixels.astype(np.float64)
        fractional[3, 5, 2] = bad
        message = rf"item 0 of the batch has dtype float64 and {re.escape(repr(bad))} at \(3, 5, 2\)"
        with pytest.raises(ValueError, match=message):
            _raw_uncompressed_batch(fractional)
    with pytest.raises(ValueError, match="has dtype <U1, not uint8 pixels"):
        _raw_uncompressed_batch(np.full((4, 6, 3), "a"))


def test_a_malformed_cached_webdataset_index_is_rebuilt(photos, tmp_path):
    """An index file cut short or edited (here: of this version, without its samples) is built again, not a
    KeyError (the tar shards' rule, shared by rocAL's webdataset reader)."""
    import json

    from fastload.tarshards import INDEX_VERSION
    image_path = str(tmp_path / "wds")
    _webdataset_folder(image_path, photos)
    with pytest.warns(UserWarning, match="not samples"):
        _webdataset_pipeline(image_path)
    cached = [os.path.join(d, f) for d, _, files in os.walk(tmp_path) for f in files if f.endswith(".idx.json")]
    assert cached
    for path in cached:  # the file's identity and version kept: only the samples are gone
        with open(path) as file:
            index = json.load(file)
        assert index["version"] == INDEX_VERSION
        del index["samples"]
        with open(path, "w") as out:
            json.dump(index, out)
    with pytest.warns(UserWarning, match="not samples"):
        pipe = _webdataset_pipeline(image_path)
    assert len(ROCALClassificationIterator(pipe, display=0, device="cpu", device_id=0)) == 3


def test_rocals_pipeline_owns_a_dali_pipeline_rather_than_being_one(photos, monkeypatch):
    """rocAL's Pipeline is no DALI Pipeline (its run() returns rocAL's tensors, None at the epoch's end): it
    owns one (``RocalGraph``), into which its operators record and whose own run() gives it each batch.
    rocAL's operators outside a rocAL pipeline -- inside a DALI one included -- are refused."""
    from fastload.compat.dali import pipeline as dali_pipeline
    runs, dalis_run = [], dali_pipeline.Pipeline.run

    def counted(self):
        runs.append(self)
        return dalis_run(self)
    monkeypatch.setattr(dali_pipeline.Pipeline, "run", counted)
    pipe = Pipeline(batch_size=5, num_threads=1, rocal_cpu=True, seed=3)
    assert not isinstance(pipe, dali_pipeline.Pipeline)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=photos)
        pipe.set_outputs(fn.resize(fn.decoders.image(jpegs, file_root=photos), resize_width=8, resize_height=6),
                         labels)
    try:
        outputs = [pipe.run(), pipe.run(), pipe.run()]
        assert [None if out is None else len(out) for out in outputs] == [2, 2, None]
        assert outputs[0][0].batch.shape[:3] == (5, 6, 8) and outputs[0][1] == []
        assert runs == [pipe._dali_pipeline] * 2
    finally:
        pipe.rocal_release()
    with dali_pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None):
        with pytest.raises(RuntimeError, match="inside a rocAL pipeline's definition"):
            fn.readers.file(file_root=photos)
