"""fastload.compat.rocal's operators and rocAL's rules where they differ from DALI's, each from rocAL's sources
(ROCm/rocAL at 0981d5bb, cited in fastload/compat/rocal): folder reading, resize sizes and buffers, crop
placement, crop_mirror_normalize's defaults (NHWC uint8, mirror=1)."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
import torch

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal import imageops
from fastload.compat.rocal.ops_readers import list_folder
from fastload.compat.rocal.pipeline import Pipeline
from fastload.sample_data import make_image


def test_folder_reading_follows_rocal(tmp_path):
    """Sorted folders are labels 0, 1, ... (an empty one still takes its label); in each, the files directly
    inside, sorted, with rocAL's extensions in any case or none; others and sub-folders skipped; a file
    name met again keeps the first label (rocAL looks labels up by name)."""
    for name in ("b_dogs", "a_cats", "c_empty", "d_birds"):
        (tmp_path / name).mkdir()
    for path in ("a_cats/x.JPG", "a_cats/y.webp", "a_cats/notes.txt", "a_cats/raw", "b_dogs/z.PnG",
                 "b_dogs/x.JPG", "d_birds/w.tiff"):
        (tmp_path / path).write_bytes(b"...")
    (tmp_path / "a_cats" / "deeper").mkdir()
    (tmp_path / "a_cats" / "deeper" / "v.jpg").write_bytes(b"...")
    with pytest.warns(UserWarning, match="1 files share a name with a file of an earlier folder"):
        found = [(p.split(str(tmp_path) + "/")[1], label) for p, label in list_folder(str(tmp_path))]
    assert found == [("a_cats/raw", 0), ("a_cats/x.JPG", 0), ("a_cats/y.webp", 0), ("b_dogs/x.JPG", 0),
                     ("b_dogs/z.PnG", 1), ("d_birds/w.tiff", 3)]


def test_a_root_holding_images_is_read_flat_with_label_0(tmp_path):
    for name in ("2.jpg", "1.jpeg", "skip.txt"):
        (tmp_path / name).write_bytes(b"...")
    assert [(p.rsplit("/", 1)[1], label) for p, label in list_folder(str(tmp_path))] == [("1.jpeg", 0),
                                                                                          ("2.jpg", 0)]


def test_a_file_list_keeps_the_listed_names_of_the_folder_for_images_and_is_read_in_order_for_audio(tmp_path):
    """rocAL's file list: its label reader parses ``line >> name >> label`` (lines whose label is no int
    skipped; a name's first label kept). The image loaders are not given the list: they walk the folder
    as without one and keep the names it lists. The audio loader reads the list's paths in order, at any
    depth, regular files only, a name listed twice read twice; an absolute path is refused (rocAL reads
    the previous line's file in its place)."""
    from fastload.compat.rocal.ops_readers import listed_files
    for path in ("b/deep/x.jpg", "a/y.JPEG", "c.png", "a/x.jpg", "a/notes.txt"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(b"...")
    listing = tmp_path / "list.txt"
    listing.write_text("b/deep/x.jpg 7\nc.png +2\na/missing.jpg 1\nheader line\na/y.JPEG 3extra\n"
                       "a/x.jpg 9\na/notes.txt 4\nc.png 5\n\n")
    found = [(p.split(str(tmp_path) + "/")[1], label) for p, label in list_folder(str(tmp_path), str(listing))]
    assert found == [("c.png", 2)]  # the root holds an image: read flat; the folders' files are not seen
    (tmp_path / "c.png").unlink()
    found = [(p.split(str(tmp_path) + "/")[1], label) for p, label in list_folder(str(tmp_path), str(listing))]
    assert found == [("a/x.jpg", 7), ("a/y.JPEG", 3)]  # folders a and b; b's file is a level too deep
    (tmp_path / "c.png").write_bytes(b"...")
    found = [(p.split(str(tmp_path) + "/")[1], label) for p, label in listed_files(str(tmp_path), str(listing))]
    assert found == [("b/deep/x.jpg", 7), ("c.png", 2), ("a/y.JPEG", 3), ("a/x.jpg", 7), ("a/notes.txt", 4),
                     ("c.png", 2)]
    listing.write_text(f"c.png 1\n{tmp_path / 'a' / 'x.jpg'} 2\n")
    with pytest.raises(NotImplementedError, match="line 2: an absolute path"):
        listed_files(str(tmp_path), str(listing))
    # as getline and >> read: a bare carriage return ends no line (the rest of that line is not read), a
    # no-break space is part of a name, \r\n ends a line, and a name's bytes need not be UTF-8
    (tmp_path / "a\xa0b.png").write_bytes(b"...")
    (tmp_path / b"\xff.png".decode("utf-8", "surrogateescape")).write_bytes(b"...")
    listing.write_bytes(b"c.png 1\ra/x.jpg 2\r\na\xc2\xa0b.png 3\r\n\xff.png\t4\n")
    found = [(p.split(str(tmp_path) + "/")[1], label) for p, label in listed_files(str(tmp_path), str(listing))]
    assert found == [("c.png", 1), ("a\xa0b.png", 3), (b"\xff.png".decode("utf-8", "surrogateescape"), 4)]


@pytest.mark.parametrize("source, args, expected", [
    ((500, 375), dict(resize_shorter=256), (341, 256)),  # NOT_SMALLER to a square; the other side lround
    ((375, 500), dict(resize_shorter=256), (256, 341)),
    ((500, 375), dict(resize_longer=100), (100, 75)),
    ((500, 375), dict(resize_width=300, resize_height=300), (300, 300)),  # DEFAULT with both: stretch
    ((500, 375), dict(resize_width=300), (300, 225)),  # DEFAULT with one: keeps the aspect
    ((500, 375), dict(resize_width=300, scaling_mode=1), (300, 375)),  # STRETCH: the missing side kept
    ((500, 375), dict(resize_width=300, resize_height=300, scaling_mode=2), (400, 300)),
    ((500, 375), dict(resize_width=300, resize_height=300, scaling_mode=3), (300, 225)),
    ((500, 375), dict(resize_width=300, resize_height=300, scaling_mode=2, max_size=(350, 350)), (350, 263)),
    ((500, 375), dict(resize_width=600, resize_height=100, max_size=(400,)), (400, 100)),  # each side clamped
    ((500, 375), dict(resize_width=300, max_size=(0, 100)), (300, 100)),  # a 0 leaves its side unbounded
])
def test_resize_output_sizes(source, args, expected):
    """ResizeNode::adjust_out_roi_size's rules (rocAL/source/augmentations/geometry_augmentations/
    node_resize.cpp); max_size is (width, height) as rocAL's C++ reads it."""
    assert imageops.resize_size(*source, **args) == expected


def test_resize_buffers():
    assert imageops.resize_buffer((1000, 1000), resize_width=300, resize_height=200) == (300, 200)
    assert imageops.resize_buffer((1000, 1000), resize_shorter=256) == (1536, 1536)
    assert imageops.resize_buffer((1000, 1000), resize_width=300) == (300, 1800)
    assert imageops.resize_buffer((1000, 1000), resize_width=300, scaling_mode=1) == (300, 1000)
    assert imageops.resize_buffer((1000, 1000), resize_shorter=256, max_size=(400, 300)) == (400, 300)
    assert imageops.resize_buffer((1000, 1000), resize_width=300, max_size=(0, 100)) == (300, 100)
    assert imageops.resize_buffer((1000, 1000), resize_shorter=256, max_size=(500, 0)) == (500, 1536)


def test_max_size_zeros_and_images_cut_to_their_buffer(tmp_path):
    """rocalResize keeps max_size's 0s (no bound on that side; [0, 0] no max_size), and ResizeNode cuts each
    image to the output buffer: a 40x300 image resized to a shorter side of 20 would be 20x150, but the
    buffer is 6 x 20 = 120 high, so it is 20x120 (squeezed), as RPP is handed it."""
    (tmp_path / "c").mkdir()
    make_image(1, 40, 300).save(tmp_path / "c" / "tall.jpg", quality=95)
    make_image(2, 500, 375).save(tmp_path / "c" / "wide.jpg", quality=95)
    pipe = Pipeline(batch_size=2, num_threads=1, rocal_cpu=True, seed=9)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=str(tmp_path))
        images = fn.decoders.image(jpegs, file_root=str(tmp_path))
        pipe.set_outputs(fn.resize(images, resize_shorter=20), fn.resize(images, resize_width=300, max_size=[0, 100]),
                         fn.resize(images, resize_width=30, max_size=[0, 0]), images)
    short, bounded, unbounded, decoded = pipe.run()
    assert short.dimensions() == [2, 120, 120, 3] and short.get_rois()[:, 2:].tolist() == [[20, 120], [27, 20]]
    tall = decoded.at(0)[:300, :40]
    assert np.array_equal(short.at(0)[:120, :20], imageops.resample(torch.from_numpy(tall), 20, 120, "linear").numpy())
    assert bounded.dimensions() == [2, 100, 300, 3] and bounded.get_rois()[:, 2:].tolist() == [[300, 100], [300, 100]]
    assert unbounded.dimensions() == [2, 180, 30, 3] and unbounded.get_rois()[:, 2:].tolist() == [[30, 180], [30, 23]]


def test_crop_placement_rules():
    """Fixed-anchor crops shrink a side larger than the image and round the anchor half to even
    (parameter_rocal_crop.cpp); fn.crop's crop_pos_x/y are whole-pixel offsets, 0.5 being 0 (node_crop.cpp)."""
    assert imageops.anchored_crop(100, 50, 40, 20, 0.5, 0.5) == (30, 15, 40, 20)
    assert imageops.anchored_crop(101, 51, 40, 20, 0.5, 0.5) == (30, 16, 40, 20)  # 30.5 -> 30, 15.5 -> 16
    assert imageops.anchored_crop(30, 20, 40, 40, 0.5, 0.5) == (0, 0, 30, 20)  # shrinks to the image
    assert imageops.fixed_crop(100, 50, 40, 20, 0.5, 0.5) == (0, 0, 40, 20)
    assert imageops.fixed_crop(100, 50, 40, 20, 7.9, 3.0) == (7, 3, 40, 20)
    assert imageops.fixed_crop(100, 50, 40, 20, 150, 3.0) == (0, 3, 40, 20)  # past the image: 0


@pytest.fixture(scope="module")
def one_photo(tmp_path_factory):
    root = tmp_path_factory.mktemp("one")
    (root / "c").mkdir()
    make_image(3, 97, 61).save(root / "c" / "p.jpg", quality=95)
    return str(root)


def _run(root, build, batch_size=1):
    pipe = Pipeline(batch_size=batch_size, num_threads=1, rocal_cpu=True, seed=9)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=root)
        images = fn.decoders.image(jpegs, file_root=root)
        pipe.set_outputs(images, *build(images))
    return pipe.run()


def test_crop_mirror_normalize_defaults_mirror_and_nhwc_uint8(one_photo):
    """rocAL's crop_mirror_normalize mirrors unless told mirror=0 and outputs NHWC uint8 by default (the
    normalized values rounded and saturated); with FLOAT, (x - mean) / std in pixel units."""
    decoded, mirrored, plain, normalized, nchw = _run(one_photo, lambda images: (
        fn.crop_mirror_normalize(images, crop=(40, 50)),
        fn.crop_mirror_normalize(images, crop=(40, 50), mirror=0),
        fn.crop_mirror_normalize(images, crop=(40, 50), mirror=0, mean=[10.0, 20.0, 30.0], std=[2.0, 4.0, 8.0],
                                 output_dtype=types.FLOAT),
        fn.crop_mirror_normalize(images, crop=(40, 50), mirror=0, output_layout=types.NCHW)))
    image = torch.from_numpy(decoded.at(0)[:61, :97])
    x, y, w, h = imageops.anchored_crop(97, 61, 50, 40, 0.5, 0.5)
    window = image[y:y + h, x:x + w]
    assert mirrored.dimensions() == [1, 40, 50, 3] and mirrored.dtype() == "uint8" and mirrored.layout() == "NHWC"
    assert torch.equal(torch.from_numpy(plain.at(0)), window)
    assert torch.equal(torch.from_numpy(mirrored.at(0)), window.flip(1))
    expected = (window.float() - torch.tensor([10.0, 20.0, 30.0])) / torch.tensor([2.0, 4.0, 8.0])
    assert normalized.dtype() == "float32" and torch.allclose(torch.from_numpy(normalized.at(0)), expected)
    assert nchw.layout() == "NCHW" and torch.equal(torch.from_numpy(nchw.at(0)), window.permute(2, 0, 1))


def test_flip_crop_and_center_crop(one_photo):
    decoded, flipped, cropped, centred, larger = _run(one_photo, lambda images: (
        fn.flip(images, horizontal=1, vertical=1), fn.crop(images, crop=(20, 30)),
        fn.center_crop(images, crop=(21, 31)), fn.center_crop(images, crop=(80, 200))))
    image = torch.from_numpy(decoded.at(0)[:61, :97])
    assert torch.equal(torch.from_numpy(flipped.at(0)[:61, :97]), image.flip(0).flip(1))
    assert torch.equal(torch.from_numpy(cropped.at(0)), image[:20, :30])  # crop_pos 0.5 -> pixel 0
    assert torch.equal(torch.from_numpy(centred.at(0)), image[20:41, 33:64])  # 20.0, 33.0
    # a window larger than the image: the whole image, at the top left of the 80x200 buffer
    assert larger.dimensions() == [1, 80, 200, 3] and larger.get_rois().tolist() == [[0, 0, 97, 61]]
    assert torch.equal(torch.from_numpy(larger.at(0)[:61, :97]), image)


def test_random_crop_window_is_rocals_five_draws_then_the_central_crop():
    """RocalRandomCropParam::fill_crop_dims: area and aspect ratio drawn until the window is strictly inside,
    then the drifts; after five misses, the central crop with the aspect ratio clamped to [0.75, 1.333]."""
    draws = iter([0.25, 1.0, 0.5, 0.2])
    assert imageops.random_crop_window_xywh(100, 100, lambda low, high: next(draws)) == (25, 10, 50, 50)
    misses = iter([0.99, 1.333] * 5)  # 36 x 27 never fits 10 rows
    assert imageops.random_crop_window_xywh(100, 10, lambda low, high: next(misses)) == (43, 0, 13, 10)
    ranges = []
    imageops.random_crop_window_xywh(100, 100, lambda low, high: ranges.append((low, high)) or (low + high) / 2)
    assert ranges == [(0.08, 0.99), (0.75, 1.333), (0.01, 0.99), (0.01, 0.99)]


def test_random_crop_with_rocals_draws_and_its_python_defaults_refused(one_photo, tmp_path):
    """fn.random_crop with None for its four parameters (the only values rocAL's binding takes): each image a
    window of the decoded one, at a size rocAL's draws or its central fallback give, in the input's buffer.
    rocAL's own defaults (lists and numbers) fail in its binding: a TypeError here too."""
    free = dict(crop_area_factor=None, crop_aspect_ratio=None, crop_pox_x=None, crop_pox_y=None)
    root = tmp_path / "copies"
    (root / "c").mkdir(parents=True)
    for name in "abcdef":  # six files of one photo: six samples, six draws
        shutil.copy(f"{one_photo}/c/p.jpg", root / "c" / f"{name}.jpg")
    pipe = Pipeline(batch_size=6, num_threads=1, rocal_cpu=True, seed=4)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=str(root))
        images = fn.decoders.image(jpegs, file_root=str(root))
        pipe.set_outputs(images, fn.random_crop(images, **free))
    decoded, cropped = pipe.run()
    image = torch.from_numpy(decoded.at(0)[:61, :97])
    assert cropped.dimensions() == decoded.dimensions()
    sizes = set()
    for index, (_, _, w, h) in enumerate(cropped.get_rois().tolist()):
        window = torch.from_numpy(cropped.at(index)[:h, :w])
        assert any(torch.equal(image[y:y + h, x:x + w], window) for y in range(61 - h + 1) for x in range(97 - w + 1))
        central = (w, h) == (81, 61)  # 97 x 61 is wider than 1.333: 81 columns, centred
        assert central or (0.08 * 0.99 <= w * h / (97 * 61) <= 0.99 and 0.75 * 0.9 <= w / h <= 1.333 * 1.1)
        sizes.add((w, h))
    assert len(sizes) > 1  # drawn per image
    with pytest.raises(TypeError, match="RocalFloatParam"):
        with Pipeline(batch_size=1, num_threads=1, rocal_cpu=True):
            fn.random_crop(fn.decoders.image(fn.readers.file(file_root=one_photo)[0], file_root=one_photo))
    with pytest.raises(NotImplementedError, match="parameter handle for crop_area_factor"):
        with Pipeline(batch_size=1, num_threads=1, rocal_cpu=True):
            fn.random_crop(fn.decoders.image(fn.readers.file(file_root=one_photo)[0], file_root=one_photo),
                           **dict(free, crop_area_factor=fn.uniform(range=[0.3, 0.6])))


def test_transpose_swaps_rows_and_columns_and_moves_channels_as_perm_says(one_photo):
    """perm orders an image's dimensions as its layout names them (HWC, or CHW after an NCHW operator);
    output_layout must name the result; the buffer's sides swap with the image's. [1, 0, 2] and [2, 1, 0]
    keep each image's region (a decoded image in its larger buffer); the other perms hand on the whole
    buffer, as rocAL does, so they take images of the buffer's size (here cropped)."""
    decoded, swapped, planar_swapped, window, planar, chw, back, whc, chw_swapped = _run(one_photo, lambda images: (
        fn.transpose(images, perm=[1, 0, 2]),
        fn.transpose(images, perm=[2, 1, 0], output_layout=types.NCHW),
        hwc := fn.crop_mirror_normalize(images, crop=(40, 50), mirror=0),
        fn.transpose(hwc, perm=[2, 0, 1], output_layout=types.NCHW),
        chw := fn.crop_mirror_normalize(images, crop=(40, 50), mirror=0, output_layout=types.NCHW),
        fn.transpose(chw, perm=[1, 2, 0]),
        fn.transpose(chw, perm=[2, 1, 0]),
        fn.transpose(chw, perm=[0, 2, 1], output_layout=types.NCHW)))
    image = torch.from_numpy(decoded.at(0)[:61, :97])
    height, width = decoded.dimensions()[1:3]
    assert swapped.dimensions() == [1, width, height, 3] and swapped.get_rois().tolist() == [[0, 0, 61, 97]]
    assert torch.equal(torch.from_numpy(swapped.at(0)[:97, :61]), image.transpose(0, 1))
    assert planar_swapped.dimensions() == [1, 3, width, height]
    assert torch.equal(torch.from_numpy(planar_swapped.at(0)[:, :97, :61]), image.permute(2, 1, 0))
    crop = torch.from_numpy(window.at(0))  # (40, 50, 3)
    assert planar.layout() == "NCHW" and torch.equal(torch.from_numpy(planar.at(0)), crop.permute(2, 0, 1))
    assert planar.get_rois().tolist() == [[0, 0, 50, 40]]
    assert torch.equal(torch.from_numpy(chw.at(0)), crop.permute(2, 0, 1))
    assert back.layout() == "NHWC" and torch.equal(torch.from_numpy(back.at(0)), crop)
    assert whc.dimensions() == [1, 50, 40, 3] and torch.equal(torch.from_numpy(whc.at(0)), crop.transpose(0, 1))
    assert chw_swapped.dimensions() == [1, 3, 50, 40]
    assert torch.equal(torch.from_numpy(chw_swapped.at(0)), crop.permute(2, 1, 0))


def test_transpose_refuses_an_image_smaller_than_the_buffer_rocal_would_hand_on_whole(one_photo):
    with pytest.raises(NotImplementedError, match="hands on the whole buffer"):
        _run(one_photo, lambda images: (fn.transpose(images, perm=[2, 0, 1], output_layout=types.NCHW),))


@pytest.mark.parametrize("perm, layout, error, match", [
    ([2, 0, 1], "NHWC", ValueError, "give output_layout=types.NCHW"),
    ([0, 2, 1], "NHWC", NotImplementedError, "between its rows and columns"),
    ([0, 1], "NHWC", ValueError, "three dimensions"),
])
def test_transpose_refuses_what_rocal_mislabels_or_cannot_name(one_photo, perm, layout, error, match):
    with pytest.raises(error, match=match):
        with Pipeline(batch_size=1, num_threads=1, rocal_cpu=True):
            images = fn.decoders.image(fn.readers.file(file_root=one_photo)[0], file_root=one_photo)
            fn.transpose(images, perm=perm, output_layout=getattr(types, layout))


def test_random_crop_decoders_keep_rocals_defaults_and_cut_to_the_cap(one_photo):
    pipe = Pipeline(batch_size=4, num_threads=1, rocal_cpu=True, seed=2)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=one_photo)
        sliced = fn.decoders.image_slice(jpegs, file_root=one_photo, max_decoded_width=30, max_decoded_height=20)
        pipe.set_outputs(sliced)
    (out,) = pipe.run()
    op = next(op for op in pipe._dali_pipeline._graph.ops if op.name == "rocal.decoders.image_slice")
    assert op.args["ratio"] == (0.75, 1.33333) and op.args["attempts"] == 100
    assert out.dimensions() == [4, 20, 30, 3]
    assert all(w <= 30 and h <= 20 for _, _, w, h in out.get_rois().tolist())


def test_resize_output_types(one_photo):
    decoded, as_float, nchw = _run(one_photo, lambda images: (
        fn.resize(images, resize_width=20, resize_height=10, output_dtype=types.FLOAT),
        fn.resize(images, resize_width=20, resize_height=10, output_layout=types.NCHW)))
    assert as_float.dtype() == "float32" and as_float.dimensions() == [1, 10, 20, 3]
    assert float(as_float.at(0).max()) > 1  # pixel values, not scaled to [0, 1]
    assert nchw.dimensions() == [1, 3, 10, 20] and nchw.dtype() == "uint8"
    assert np.abs(nchw.at(0).transpose(1, 2, 0).astype(float) - as_float.at(0)).max() <= 0.5 + 1e-4


def _rpp_bilinear(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """RPP's host bilinear resize written out from its source, one pixel at a time
    (resize_bilinear_u8_u8_host_tensor, compute_resize_bilinear_src_loc_and_weights,
    compute_bilinear_interpolation_3c_pkd): c = (d + 0.5) * ratio - 0.5, taps ceil(c - 1) and the next,
    both capped to [0, side - 2]; SIMD columns rounded half to even, the last width % 8 truncated."""
    src_h, src_w = image.shape[:2]
    out = np.zeros((height, width, image.shape[2]))

    def taps(d, size, out_size):
        c = (d + 0.5) * size / out_size - 0.5
        first = int(np.ceil(c - 1))
        return min(max(first, 0), size - 2), min(max(first + 1, 0), size - 2), first - (c - 1)
    for y in range(height):
        y0, y1, wy = taps(y, src_h, height)
        for x in range(width):
            x0, x1, wx = taps(x, src_w, width)
            value = (wy * (wx * image[y0, x0] + (1 - wx) * image[y0, x1])
                     + (1 - wy) * (wx * image[y1, x0] + (1 - wx) * image[y1, x1]))
            out[y, x] = np.round(value) if x < (width & ~7) else np.trunc(value)
    return np.clip(out, 0, 255)


@pytest.mark.parametrize("size", [(13, 7), (40, 50), (97, 61), (150, 100)])
def test_linear_resize_is_rpps_plain_bilinear(size):
    """No antialiasing when shrinking (unlike DALI's linear), the last row and column never read, the
    scalar tail truncated: within one level of RPP's formula in float64 (float32 here, as RPP), most
    pixels equal."""
    rng = np.random.default_rng(size[0])
    image = rng.integers(0, 256, (61, 97, 3), dtype=np.uint8)
    ours = imageops.resample(torch.from_numpy(image), *size, "linear").numpy().astype(float)
    reference = _rpp_bilinear(image.astype(float), *size)
    assert np.abs(ours - reference).max() <= 1 and (ours == reference).mean() > 0.99


def test_rotation_is_rpps_warp():
    """A quarter turn of a 5x5 image about its centre (2, 2) moves pixels exactly (the warp's integer
    centre, pixel centres at integer coordinates); outside the source is 0; the last row and column are
    never sampled by the bilinear taps (RPP caps them at side - 2)."""
    image = torch.arange(25, dtype=torch.uint8).reshape(5, 5, 1).expand(5, 5, 3).contiguous()
    turned = imageops.rotate(image, 90.0)[..., 0]
    # dst (x, y) reads src (cx - (y - cy), cy + (x - cx)) = (4 - y, x): a counter-clockwise quarter turn
    expected = torch.tensor([[image[x, 4 - y, 0] for x in range(5)] for y in range(5)])
    inside = (expected % 5 != 4) & (expected < 20)  # sources off the last row and column
    assert torch.equal(turned[inside], expected[inside])
    wide = imageops.rotate(torch.full((4, 8, 3), 200, dtype=torch.uint8), 90.0)
    assert wide[0, 0, 0] == 0 and wide[2, 4, 0] == 200  # a corner leaves the source; the centre stays


def test_nearest_takes_rpps_source_pixel():
    image = torch.arange(10, dtype=torch.uint8).reshape(1, 10, 1).expand(3, 10, 3).contiguous()
    out = imageops.resample(image, 4, 3, "nn")
    assert out[0, :, 0].tolist() == [1, 3, 6, 8]  # floor((x + 0.5) * 2.5)


def _rpp_color_twist_pixel(rgb, brightness, contrast, hue, saturation):
    """compute_color_twist_host (ROCm/rpp src/modules/tensor/cpu/kernel/color_twist.cpp) for one pixel,
    line by line, in float64; then the u8 store (half to even, saturated)."""
    import math
    r, g, b = (c / 255 for c in rgb)
    cmax, cmin = max(r, g, b), min(r, g, b)
    delta = cmax - cmin
    h = s = add = 0.0
    if delta != 0 and cmax != 0:
        s = delta / cmax
        if cmax == r:
            h, add = g - b, 0.0
        elif cmax == g:
            h, add = b - r, 2.0
        else:
            h, add = r - g, 4.0
        h /= delta
    v = cmax
    h += math.fmod(int(hue), 360) * 0.01666667 + add
    h = h - 6 if h >= 6 else h
    h = h + 6 if h < 0 else h
    s = max(0.0, min(1.0, s * saturation))
    i, f = int(h), h - int(h)
    vsat = v * s
    p, q, t = v - vsat, v - vsat * f, v - vsat + vsat * f
    r, g, b = {0: (v, t, p), 1: (q, v, p), 2: (p, v, t), 3: (p, q, v), 4: (t, p, v), 5: (v, p, q)}.get(i, (r, g, b))
    return [min(255, max(0, round(c * brightness * 255 + contrast))) for c in (r, g, b)]


@pytest.mark.parametrize("params", [(1.0, 0.0, 0.0, 1.0), (1.3, 12.0, 75.0, 0.6), (0.7, 1.0, 359.9, 1.8),
                                    (1.0, 1.0, -30.0, 0.3)])
def test_color_twist_is_rpps_fused_twist(params):
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 256, (40, 3)).tolist() + [[0, 0, 0], [255, 255, 255], [90, 90, 90], [255, 0, 0],
                                                        [12, 200, 200]]
    image = torch.tensor(pixels, dtype=torch.uint8).reshape(1, -1, 3)
    ours = imageops.color_twist(image, *params)[0].tolist()
    expected = [_rpp_color_twist_pixel(p, *params) for p in pixels]
    differences = [abs(a - b) for row_a, row_b in zip(ours, expected) for a, b in zip(row_a, row_b)]
    assert max(differences) <= 1 and sum(d > 0 for d in differences) <= 3  # float32 against float64
    if params == (1.0, 0.0, 0.0, 1.0):  # the identity twist gives the pixels back
        assert ours == pixels


def test_fn_color_twist_in_a_pipeline(one_photo):
    decoded, twisted, drawn = _run(one_photo, lambda images: (
        fn.color_twist(images, brightness=1.2, contrast=5.0, hue=30.0, saturation=0.8),
        fn.color_twist(images, hue=None)))
    image = torch.from_numpy(decoded.at(0)[:61, :97].copy())
    assert torch.equal(torch.from_numpy(twisted.at(0)[:61, :97]), imageops.color_twist(image, 1.2, 5.0, 30.0, 0.8))
    assert not torch.equal(torch.from_numpy(drawn.at(0)[:61, :97]), imageops.color_twist(image, 1.0, 1.0, 0.0, 1.0))


def _hexcone(pixels, hue, saturation):
    """The HSV hexcone in float64 (Python's colorsys), as RPP's hue and saturation kernels compute it."""
    import colorsys
    out = []
    for rgb in pixels:
        h, s, v = colorsys.rgb_to_hsv(*(c / 255 for c in rgb))
        h = (h + hue / 360) % 1.0
        s = min(1.0, max(0.0, s * saturation))
        out.append([min(255, max(0, round(c * 255))) for c in colorsys.hsv_to_rgb(h, s, v)])
    return out


@pytest.mark.parametrize("hue,saturation", [(150.0, 1.0), (-37.5, 1.0), (719.2, 1.0), (0.0, 0.3),
                                            (0.0, 1.7), (0.0, -0.4), (200.0, 0.5)])
def test_hue_and_saturation_are_the_hsv_hexcone(hue, saturation):
    """fn.hue / fn.saturation against colorsys in float64 on random pixels of an awkward-sized image: at most
    one level apart (float32 against float64), any real angle (negative, past 360) wrapped as RPP does."""
    rng = np.random.default_rng(int(abs(hue) * 10 + abs(saturation) * 100))
    image = torch.from_numpy(rng.integers(0, 256, (7, 13, 3), dtype=np.uint8))
    image[0, :4] = torch.tensor([[0, 0, 0], [255, 255, 255], [90, 90, 90], [255, 0, 0]], dtype=torch.uint8)
    ours = imageops.hue_saturation(image, hue=hue, saturation=saturation).reshape(-1, 3).tolist()
    expected = _hexcone(image.reshape(-1, 3).tolist(), hue, saturation)
    assert max(abs(a - b) for row_a, row_b in zip(ours, expected) for a, b in zip(row_a, row_b)) <= 1


def test_hue_saturation_identities():
    rng = np.random.default_rng(3)
    image = torch.from_numpy(rng.integers(0, 256, (9, 11, 3), dtype=np.uint8))
    for turn in (0.0, 360.0, -360.0):
        assert torch.equal(imageops.hue_saturation(image, hue=turn), image)
    grey = imageops.hue_saturation(image, saturation=0.0)  # no chroma left: every channel is the value
    assert torch.equal(grey, image.max(-1, keepdim=True).values.expand(-1, -1, 3))


@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.2, 0.3, 7.0])
def test_gamma_table_is_rpps_truncated_power(gamma):
    """RPP's table truncates 255 * (i / 255) ** gamma; away from whole numbers that is the exact value's
    floor, and at a whole number float32 may fall either side (one level)."""
    table = imageops.gamma_lut(gamma).long()
    exact = 255 * (np.arange(256) / 255) ** gamma
    floor = np.floor(exact)
    near_whole = np.abs(exact - np.round(exact)) < 1e-4
    assert np.array_equal(table.numpy()[~near_whole], floor[~near_whole])
    assert np.abs(table.numpy()[near_whole] - exact[near_whole]).max(initial=0) <= 1
    assert table[0] == 0 and table[255] == 255


def test_rocals_unit_test_colour_branches(one_photo):
    """tests/python_api/unit_test.py's hue (150), saturation (0.3), gamma_correction (rocAL's 0.5), exposure
    (1.0), color_temp (70), blend (the image with its rotation by 45, ratio 0.5), and nop / copy, NHWC uint8."""
    outputs = _run(one_photo, lambda images: (
        fn.hue(images, hue=150.0), fn.saturation(images, saturation=0.3), fn.gamma_correction(images),
        fn.exposure(images, exposure=1.0), fn.color_temp(images, adjustment_value=70),
        fn.blend(images, fn.rotate(images, angle=45.0, dest_width=120, dest_height=120), ratio=0.5),
        fn.nop(images), fn.copy(images), fn.hue(images), fn.gamma_correction(images, gamma=None)))
    decoded, hued, saturated, gamma, exposed, warm, blended, nop, copied, random_hue, random_gamma = outputs
    image = torch.from_numpy(decoded.at(0)[:61, :97].copy())

    def at(output):
        return torch.from_numpy(output.at(0)[:61, :97].copy())
    assert torch.equal(at(hued), imageops.hue_saturation(image, hue=150.0))
    assert torch.equal(at(saturated), imageops.hue_saturation(image, saturation=0.3))
    assert torch.equal(at(gamma), imageops.gamma_lut(0.5)[image.long()])
    assert torch.equal(at(exposed), (image.float() * 2).clamp(max=255).to(torch.uint8))
    expected_warm = image.int() + torch.tensor([70, 0, -70])
    assert torch.equal(at(warm), expected_warm.clamp(0, 255).to(torch.uint8))
    turned = imageops.rotate(image, 45.0)
    assert torch.equal(at(blended), ((image.float() + turned.float()) / 2).round().to(torch.uint8))
    assert torch.equal(at(nop), image) and torch.equal(at(copied), image)
    assert not torch.equal(at(random_hue), image) and not torch.equal(at(random_gamma), image)
    with pytest.raises(TypeError):  # rocAL's nop takes no layout or type (its unit_test's nop branch fails too)
        _run(one_photo, lambda images: (fn.nop(images, output_layout=types.NHWC),))


def test_warp_affine_maps_rocals_matrix_to_rpps_and_generalizes_rotate(one_photo):
    """unit_test.py's warp_affine branch (416x416, matrix [1, 1, 0.5, 0.5, 7, 7]); rocAL's [x0, x1, y0, y1,
    o0, o1] reaches RPP as [x0, y0, x1, y1, o0, o1] (its second and third numbers swap places); the identity
    gives the image back but for the last row and column, which RPP's bilinear never reads; a shift moves
    the image, and a rotation's matrix warps as fn.rotate does."""
    image = torch.from_numpy(np.random.default_rng(8).integers(0, 256, (23, 31, 3), dtype=np.uint8))
    same = imageops.warp_affine(image, (1, 0, 0, 0, 1, 0))  # RPP's taps stop at side - 2: the last row and
    assert torch.equal(same[:-1, :-1], image[:-1, :-1])      # column repeat the ones before them
    assert torch.equal(same[:-1, -1], image[:-1, -2]) and torch.equal(same[-1, :-1], image[-2, :-1])
    shifted = imageops.warp_affine(image, (1, 0, 2, 0, 1, -1))  # src = dst + (2, -1)
    assert torch.equal(shifted[1:-1, :-3], image[:-2, 2:-1]) and shifted[0].max() == 0
    cos, sin = np.float32(np.cos(np.radians(30))), np.float32(np.sin(np.radians(30)))
    assert torch.equal(imageops.warp_affine(image, (cos, -sin, 0, sin, cos, 0)), imageops.rotate(image, 30.0))
    decoded, unit, identity, swapped = _run(one_photo, lambda images: (
        fn.warp_affine(images, dest_height=416, dest_width=416, matrix=[1.0, 1.0, 0.5, 0.5, 7.0, 7.0],
                       output_layout=types.NHWC, output_dtype=types.UINT8),
        fn.warp_affine(images, matrix=[1, 0, 0, 0, 1, 0]),
        fn.warp_affine(images, matrix=[1, 0, 3, 0, 1, 0])))
    photo = torch.from_numpy(decoded.at(0)[:61, :97].copy())
    assert unit.at(0).shape == (416, 416, 3)
    assert torch.equal(torch.from_numpy(unit.at(0)[:61, :97].copy()),
                       imageops.warp_affine(photo, (1.0, 0.5, 1.0, 0.5, 7.0, 7.0)))
    assert torch.equal(torch.from_numpy(identity.at(0)[:60, :96].copy()), photo[:60, :96])
    # rocAL's third number (y0) is RPP's second (m1): src_x = dst_x + 3 * dy, a shear, not a shift
    assert torch.equal(torch.from_numpy(swapped.at(0)[:61, :97].copy()),
                       imageops.warp_affine(photo, (1, 3, 0, 0, 1, 0)))
    with pytest.raises(ValueError, match="six numbers"):
        _run(one_photo, lambda images: (fn.warp_affine(images, matrix=[1, 0, 0, 1]),))


def test_resize_crop_mirror_and_resize_crop_follow_rocal(one_photo):
    """unit_test.py's resize_crop_mirror (400x400 from a 200x200 top-left window, mirrored by default) and
    resize_crop (416x416 from area 0.25, aspect 1.2, drifts 0.6 / 0.4) branches. rocAL's Python hands crop_w
    to the C API's crop height and crop_h to its width, so a 30-wide, 50-high request reads a window 50 wide
    and 30 high, as it does in rocAL."""
    decoded, rcm, swapped, plain, crop, drawn = _run(one_photo, lambda images: (
        fn.resize_crop_mirror(images, resize_height=400, resize_width=400, crop_h=200, crop_w=200),
        fn.resize_crop_mirror(images, resize_height=20, resize_width=24, crop_w=30, crop_h=50, mirror=0),
        fn.resize_crop_mirror(images, resize_height=20, resize_width=24, crop_w=30, crop_h=50, mirror=0,
                              output_dtype=types.FLOAT),
        fn.resize_crop(images, resize_width=416, resize_height=416, crop_area_factor=0.25, crop_aspect_ratio=1.2,
                       x_drift=0.6, y_drift=0.4),
        fn.resize_crop(images, resize_width=32, resize_height=32)))
    photo = torch.from_numpy(decoded.at(0)[:61, :97].copy())
    whole = imageops.resample(photo, 400, 400, "linear").flip(1)  # the 200x200 window is cut to the image
    assert rcm.at(0).shape == (400, 400, 3) and torch.equal(torch.from_numpy(rcm.at(0).copy()), whole)
    window = imageops.resample(photo[:30, :50], 24, 20, "linear")
    assert torch.equal(torch.from_numpy(swapped.at(0).copy()), window)
    assert plain.at(0).dtype == np.float32 and np.array_equal(plain.at(0), window.float().numpy())
    left, top, w, h = imageops.crop_resize_window(97, 61, 0.25, 1.2, 0.6, 0.4)
    assert (w, h) == (int((0.25 * 97 * 61 * 1.2) ** 0.5), int((0.25 * 97 * 61 / 1.2) ** 0.5))
    assert (left, top) == (int(0.6 * (97 - w)), int(0.4 * (61 - h)))
    expected = imageops.resample(photo[top:top + h, left:left + w], 416, 416, "linear")
    assert torch.equal(torch.from_numpy(crop.at(0).copy()), expected)
    assert drawn.at(0).shape == (32, 32, 3)
    with pytest.raises(ValueError, match="must not be 0"):
        _run(one_photo, lambda images: (fn.resize_crop(images, resize_width=0, resize_height=4),))


def test_roi_resize_is_fn_crops_window_resized(one_photo):
    """fn.roi_resize: the window fn.crop cuts (whole-pixel offsets; a size past the image is the image's)
    resampled as fn.resize does, into a resize_width x resize_height buffer, in the output layout and
    type asked; a window passing the image's edge (rocAL reads the buffer beyond it), a zero size, a
    missing ROI and a negative position are refused."""
    decoded, roi, whole, nchw = _run(one_photo, lambda images: (
        fn.roi_resize(images, resize_width=33, resize_height=27, roi_w=40, roi_h=25, roi_pos_x=7.9, roi_pos_y=3),
        fn.roi_resize(images, resize_width=16, resize_height=16, roi_w=500, roi_h=20, roi_pos_x=0, roi_pos_y=41,
                      interpolation_type=types.NEAREST_NEIGHBOR_INTERPOLATION),
        fn.roi_resize(images, resize_width=20, resize_height=10, roi_w=30, roi_h=30, roi_pos_x=0, roi_pos_y=0,
                      output_layout=types.NCHW, output_dtype=types.FLOAT)))
    photo = torch.from_numpy(decoded.at(0)[:61, :97].copy())
    assert torch.equal(torch.from_numpy(roi.at(0).copy()), imageops.resample(photo[3:28, 7:47], 33, 27, "linear"))
    # 500 wide is past the 97-wide image: the window is the image's whole width
    assert torch.equal(torch.from_numpy(whole.at(0).copy()), imageops.resample(photo[41:61, :], 16, 16, "nn"))
    with pytest.raises(Exception, match="passes the 97x61 image's edge"):
        _run(one_photo, lambda images: (fn.roi_resize(images, resize_width=4, resize_height=4, roi_w=90, roi_h=4,
                                                      roi_pos_x=10, roi_pos_y=0),))
    expected = imageops.resample(photo[:30, :30], 20, 10, "linear").permute(2, 0, 1).float()
    assert nchw.at(0).dtype == np.float32 and torch.equal(torch.from_numpy(nchw.at(0).copy()), expected)
    with pytest.raises(ValueError, match="must not be 0"):
        _run(one_photo, lambda images: (fn.roi_resize(images, resize_width=0, resize_height=4, roi_w=4, roi_h=4,
                                                      roi_pos_x=0, roi_pos_y=0),))
    with pytest.raises(TypeError, match="give roi_w, roi_h, roi_pos_x and roi_pos_y"):
        _run(one_photo, lambda images: (fn.roi_resize(images, resize_width=4, resize_height=4),))
    with pytest.raises(ValueError, match="roi_pos_x=-30 \\(rocAL stores it as an unsigned pixel count\\)"):
        _run(one_photo, lambda images: (fn.roi_resize(images, resize_width=4, resize_height=4, roi_w=4, roi_h=4,
                                                      roi_pos_x=-30, roi_pos_y=0),))
    with pytest.raises(ValueError, match="fn.crop: crop_pos_y=nan"):
        _run(one_photo, lambda images: (fn.crop(images, crop=(4, 4), crop_pos_y=float("nan")),))


@pytest.mark.parametrize("height, width", [(22, 34), (40, 16), (6, 90)])
def test_pixelate_at_50_percent_is_rpps_2x2_block_mean(height, width):
    """At 50 % (rocAL's default) on even sides RPP's bilinear halving samples each 2x2 block's centre: its
    mean, exactly (the last small row and column take source row / column side - 2 twice: RPP's taps stop
    there), rounded half to even, except the last (small width % 8) columns, which RPP's scalar tail
    truncates; the nearest-neighbour doubling then repeats each as a 2x2 block. Written from
    rppt_pixelate_host and resize.cpp as a closed form, independently of imageops.resample."""
    image = torch.randint(0, 256, (height, width, 3), generator=torch.Generator().manual_seed(height * width),
                          dtype=torch.uint8)
    rows = torch.arange(height // 2) * 2
    cols = torch.arange(width // 2) * 2
    below, right = (rows + 1).clamp(max=height - 2), (cols + 1).clamp(max=width - 2)
    x = image.long()
    total = x[rows][:, cols] + x[rows][:, right] + x[below][:, cols] + x[below][:, right]
    mean = total.double() / 4
    small = mean.round()  # half to even, as _mm256_cvtps_epi32
    tail = (width // 2) & ~7
    small[:, tail:] = mean[:, tail:].floor()
    expected = small.to(torch.uint8).repeat_interleave(2, 0).repeat_interleave(2, 1)
    assert torch.equal(imageops.pixelate(image, 50.0), expected)


def test_pixelate_in_a_pipeline_and_blur_refused_with_the_reason(one_photo):
    decoded, pixelated, coarse = _run(one_photo, lambda images: (fn.pixelate(images),
                                                                 fn.pixelate(images, pixelate_percent=80.0)))
    image = torch.from_numpy(decoded.at(0)[:61, :97].copy())
    assert torch.equal(torch.from_numpy(pixelated.at(0)[:61, :97].copy()), imageops.pixelate(image, 50.0))
    assert imageops.pixelate_size(97, 80.0) == 19 and imageops.pixelate_size(61, 50.0) == 30
    blocky = torch.from_numpy(coarse.at(0)[:61, :97].copy())
    assert blocky.shape == (61, 97, 3) and len(torch.unique(blocky[:, :, 0], dim=0)) <= 12  # 12 source rows
    with pytest.raises(ValueError, match="pixelate_percent 100"):
        _run(one_photo, lambda images: (fn.pixelate(images, pixelate_percent=100),))
    with pytest.raises(NotImplementedError, match="fn.blur is not supported: rocAL's 3x3 box filter reads"):
        _run(one_photo, lambda images: (fn.blur(images),))


def test_salt_and_pepper_follows_rpps_rule_and_rocals_argument_slots(one_photo):
    """One draw per pixel (its channels alike): noisy with p_noise, then salt with p_salt; values on 0-1
    truncated to uint8. Through rocAL's binding noise_val is the salt value and salt_val the pepper one."""
    image = torch.randint(0, 256, (120, 90, 3), generator=torch.Generator().manual_seed(1), dtype=torch.uint8)
    all_salt = imageops.snp_noise(image, 1.0, 1.0, 0.8, 0.2, torch.Generator().manual_seed(2))
    assert bool((all_salt == int(np.float32(0.8) * np.float32(255))).all())  # 204
    out = imageops.snp_noise(image, 0.3, 0.5, 1.0, 0.0, torch.Generator().manual_seed(3))
    changed = (out != image).any(dim=2)
    salt, pepper = (out == 255).all(dim=2) & changed, (out == 0).all(dim=2) & changed
    assert bool((salt | pepper | ~changed).all())  # a changed pixel is wholly salt or wholly pepper
    assert 0.12 < float(salt.float().mean()) < 0.18 and 0.12 < float(pepper.float().mean()) < 0.18
    assert torch.equal(imageops.snp_noise(image, 0.0, 0.5, 1.0, 0.0, torch.Generator().manual_seed(3)), image)
    decoded, noisy, again = _run(one_photo, lambda images: (
        fn.snp_noise(images, p_noise=1.0, p_salt=0.0, noise_val=0.9, salt_val=0.2),
        fn.snp_noise(images, p_noise=1.0, p_salt=1.0, noise_val=0.9, salt_val=0.2)))
    assert bool((torch.from_numpy(noisy.at(0).copy())[:61, :97] == 51).all())  # salt_val: the pepper
    assert bool((torch.from_numpy(again.at(0).copy())[:61, :97] == 229).all())  # noise_val: the salt
    with pytest.raises(ValueError, match="p_noise=1.5 is not in"):
        _run(one_photo, lambda images: (fn.snp_noise(images, p_noise=1.5),))


def test_jitter_takes_each_pixel_from_its_window():
    """Each output pixel is the input pixel at (row + floor(u1 k) - bound, column + floor(u2 k) - bound),
    clamped to the image, bound = (k - 1) // 2; k = 1 changes nothing."""
    height, width = 41, 67
    rows, cols = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    image = torch.stack([rows, cols, torch.zeros_like(rows)], dim=2).to(torch.uint8)
    assert torch.equal(imageops.jitter(image, 1, torch.Generator().manual_seed(0)), image)
    for k in (2, 3, 4, 5):
        out = imageops.jitter(image, k, torch.Generator().manual_seed(k)).long()
        bound = (k - 1) // 2
        dr, dc = out[..., 0] - rows, out[..., 1] - cols
        inner = (rows >= bound) & (rows < height - k) & (cols >= bound) & (cols < width - k)
        assert int(dr[inner].min()) == -bound and int(dr[inner].max()) == k - 1 - bound, k
        assert int(dc[inner].min()) == -bound and int(dc[inner].max()) == k - 1 - bound, k
        assert int(out[..., 0].max()) <= min(height - bound, height - 1) and int(out[..., 1].max()) <= width - 1
    with pytest.raises(ValueError, match="taller than twice the 4-row image"):
        imageops.jitter(image[:4], 11, torch.Generator().manual_seed(0))


def test_snow_stamps_rpps_flake_and_rain_blends_rpps_drops():
    """Snow and rain against RPP's loops written out here (batch_pd snow_host_batch, kernel/rain.cpp), with
    the same draws: flakes stamped one by one, saturating; drops drawn on a layer of 200 blended with
    alpha, the rest darkened."""
    image = torch.randint(0, 200, (37, 53, 3), generator=torch.Generator().manual_seed(4), dtype=torch.uint8)
    out = imageops.snow(image, 2.0, torch.Generator().manual_seed(5))
    flakes = int(np.float32(2.0) / np.float32(100) * 53 * 37 * 3)
    generator = torch.Generator().manual_seed(5)
    rows = torch.randint(0, 37, (flakes,), generator=generator)
    cols = torch.randint(0, 53, (flakes,), generator=generator)
    expected = image.numpy().astype(np.int32)
    for row, col in zip(rows.tolist(), cols.tolist()):
        if row + 5 < 37 and col + 5 < 53:
            expected[row:row + 5, col:col + 5] = np.minimum(
                expected[row:row + 5, col:col + 5] + imageops.SNOW_STAMP.numpy().astype(np.int32)[:, :, None], 255)
    assert np.array_equal(out.numpy(), expected)

    wet = imageops.rain(image, 3.0, 2, 6, 0.25, 0.3, torch.Generator().manual_seed(6))
    drops, slant = int(np.float32(3.0) * np.float32(0.004) * 37 * 53), math.sin(0.3) * 6
    generator = torch.Generator().manual_seed(6)
    high = int(53 - slant - 1)
    xs = torch.randint(0, high + 1, (drops,), generator=generator).tolist()
    ys = torch.randint(0, high + 1, (drops,), generator=generator).tolist()
    layer = np.zeros(37 * 53, np.float32)
    for x0, y0 in zip(xs, ys):
        for j in range(6):
            x, y = x0 + int(j * slant / 6), y0 + j
            if x < 53 and y < 37:
                for k in range(2):
                    if y * 53 + x + k < layer.size:
                        layer[y * 53 + x + k] = 200
    src = image.numpy().astype(np.float32)
    expected = np.clip(np.round((layer.reshape(37, 53, 1) - src) * np.float32(0.25) + src), 0, 255)
    assert np.array_equal(wet.numpy(), expected.astype(np.uint8))
    dry = imageops.rain(image, 3.0, 0, 0, 0.25, 0.0, torch.Generator().manual_seed(6))  # rocAL's 0 sizes
    assert np.array_equal(dry.numpy(), np.round(src * np.float32(0.75)).astype(np.uint8))


def test_noise_and_weather_run_in_a_pipeline_and_fog_is_refused(one_photo):
    decoded, jittered, snowy, wet = _run(one_photo, lambda images: (
        fn.jitter(images), fn.snow(images), fn.rain(images, rain=0.5, rain_width=2, rain_height=16)))
    for out in (jittered, snowy, wet):
        assert out.at(0).shape == decoded.at(0).shape and out.at(0).dtype == np.uint8
    assert not np.array_equal(wet.at(0), decoded.at(0))
    with pytest.raises(TypeError, match="give rain="):
        _run(one_photo, lambda images: (fn.rain(images),))
    with pytest.raises(NotImplementedError, match="fog_mask.hpp"):
        _run(one_photo, lambda images: (fn.fog(images),))


def test_the_noise_operators_seed_changes_their_noise(one_photo):
    """fn.snp_noise's and fn.jitter's ``seed`` (RPP's generator's in rocAL): the same seed, the same noise;
    another seed, other noise."""
    outputs = _run(one_photo, lambda images: tuple(
        op(images, seed=seed, **args) for seed in (5, 5, 6)
        for op, args in ((fn.snp_noise, {"p_noise": 0.3, "p_salt": 0.5, "noise_val": 1.0, "salt_val": 0.0}),
                         (fn.jitter, {"kernel_size": 3}))))
    snp5, jitter5, snp5_again, jitter5_again, snp6, jitter6 = (out.at(0) for out in outputs[1:])
    assert np.array_equal(snp5, snp5_again) and np.array_equal(jitter5, jitter5_again)
    assert not np.array_equal(snp5, snp6) and not np.array_equal(jitter5, jitter6)


def test_rpps_sse_sin_cos_and_atan2():
    """RPP's SSE sincos_ps and atan2_ps (Cephes single precision), as imageops emulates them op for op: within
    1e-7 and 3e-7 of the exact values over their ranges, and atan2's special cases as its masks make them
    (0 / 0 gives NaN, its ORed bits)."""
    x = np.linspace(-np.pi, np.pi, 20001).astype(np.float32)
    sin, cos = imageops._sincos_ps(x)
    assert sin.dtype == np.float32 and np.abs(sin - np.sin(x.astype(np.float64))).max() < 1e-7
    assert np.abs(cos - np.cos(x.astype(np.float64))).max() < 1e-7
    rng = np.random.default_rng(4)
    y, x = rng.uniform(-1, 1, (2, 20001)).astype(np.float32)
    assert np.abs(imageops._atan2_ps(y, x) - np.arctan2(y.astype(np.float64), x.astype(np.float64))).max() < 3e-7
    special = imageops._atan2_ps(np.float32([0, 0, 1, -1, 0]), np.float32([0, -1, 0, 0, 1]))
    assert np.isnan(special[0]) and special[1:].tolist() == [np.float32(np.pi), np.float32(np.pi / 2),
                                                            -np.float32(np.pi / 2), 0.0]


@pytest.mark.parametrize("height, width", [(38, 52), (64, 98), (300, 300)])
def test_fish_eye_is_rpps_fisheye(height, width):
    """Against the fisheye formula in double precision (radius r -> (r + 1 - sqrt(1 - r^2)) / 2 along the same
    angle, the source pixel truncated): outside the inscribed ellipse 0; inside, off the centre row and column
    at least 99.5% of pixels the same source pixel, and every other one a source pixel one step off, where
    RPP's float arithmetic lands below a whole pixel the exact value reaches (along the centre row and
    column it does so everywhere: sin and cos of pi/2 and 0 are 1e-8 off in float)."""
    rng = np.random.default_rng(height)
    image = torch.from_numpy(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
    out, src = imageops.fish_eye(image).numpy(), image.numpy()
    exact = np.zeros_like(out)
    near = np.ones((height, width), bool)
    for i in range(height):
        for j in range(width):
            ni, nj = 2 * i / height - 1, 2 * j / width - 1
            r = math.hypot(ni, nj)
            if r > 1:
                continue
            shrunk, theta = (r + 1 - math.sqrt(1 - r * r)) / 2, math.atan2(ni, nj)
            si, sj = int((shrunk * math.sin(theta) + 1) * height / 2), int((shrunk * math.cos(theta) + 1) * width / 2)
            if si * width + sj < height * width:
                exact[i, j] = src[si, sj]
            near[i, j] = any((out[i, j] == src[a, b]).all() for a in range(max(si - 1, 0), min(si + 2, height))
                             for b in range(max(sj - 1, 0), min(sj + 2, width)))
    same = (out == exact).all(axis=2)
    off_axis = np.ones_like(same)
    off_axis[height // 2, :] = off_axis[:, width // 2] = False
    # the centre row and column are not asserted beyond this: there RPP's release build (-Ofast -mfma)
    # rounds otherwise than its source read op for op, which fastload follows (at the exact centre the
    # source's 0 / 0 in atan2_ps reads the top-left pixel; a fused build keeps the centre's own)
    assert same[off_axis].mean() >= 0.995 and near[off_axis].all()
    assert not out[[0, 0, -1, -1], [0, -1, 0, -1]].any()  # the corners lie outside the ellipse


def test_fish_eye_in_a_pipeline_and_what_rpp_reads_wrongly_is_refused(one_photo):
    """As rocAL's augmentation notebook uses it (after a resize to 300x300): NHWC uint8 of the buffer's size.
    Refused: an image smaller than its buffer (RPP's scalar path strides rows by the image's width through the
    buffer) and an NCHW input (the node hands the planar buffer to RPP as packed)."""
    resized, eye = _run(one_photo, lambda images: (
        lambda small: (small, fn.fish_eye(small)))(fn.resize(images, resize_width=300, resize_height=300)))[1:]
    assert eye.dimensions() == [1, 300, 300, 3]
    assert np.array_equal(eye.at(0), imageops.fish_eye(torch.from_numpy(resized.at(0).copy())).numpy())
    with pytest.raises(Exception, match="a 97x61 image in a 1000x1000 buffer"):
        _run(one_photo, lambda images: (fn.fish_eye(images),))
    with pytest.raises(NotImplementedError, match=r"fish_eye\(output_layout=NHWC, output_dtype=FLOAT\)"):
        _run(one_photo, lambda images: (fn.fish_eye(fn.resize(images, resize_width=8, resize_height=8),
                                                    output_dtype=types.FLOAT),))
    with pytest.raises(NotImplementedError, match="fish_eye of an NCHW UINT8 input"):
        _run(one_photo, lambda images: (fn.fish_eye(fn.resize(images, resize_width=8, resize_height=8,
                                                              output_layout=types.NCHW)),))


ROCAL_NAMES = {  # every function and class rocAL_pybind/amd/rocal's modules define (ROCm/rocAL 0981d5bb)
    "fn": "blend snow exposure fish_eye fog brightness brightness_fixed lens_correction blur contrast flip "
          "gamma_correction hue jitter pixelate rain resize resize_crop_mirror resize_crop roi_resize "
          "resize_mirror_normalize random_crop rotate saturation ssd_random_crop warp_affine vignette "
          "crop_mirror_normalize center_crop crop color_twist uniform random_bbox_crop one_hot box_encoder color_temp "
          "nop copy snp_noise box_iou_matcher external_source preemphasis_filter spectrogram to_decibels resample "
          "tensor_add_tensor_float tensor_mul_scalar_float nonsilent_region slice normalize mel_filter_bank "
          "transpose log1p",
    "decoders": "image image_raw image_random_crop image_slice audio",
    "readers": "coco file tfrecord caffe caffe2 video video_resize sequence_reader mxnet webdataset numpy cifar10",
    "random": "coin_flip uniform normal",
    "plugin.pytorch": "ROCALGenericIterator ROCALClassificationIterator ROCALAudioIterator ROCALNumpyIterator "
                      "draw_patches",
    "plugin.generic": "ROCALGenericIterator ROCALClassificationIterator ROCALNumpyIterator draw_patches",
    "plugin.tf": "ROCALGenericImageIterator ROCALGenericIteratorDetection ROCALIterator ROCAL_iterator",
}
REFUSED = {"fn.ssd_random_crop", "fn.random_bbox_crop",
           "random.normal", "plugin.pytorch.draw_patches",
           "plugin.generic.draw_patches", "plugin.tf.ROCALGenericImageIterator",
           "plugin.tf.ROCALGenericIteratorDetection", "plugin.tf.ROCALIterator", "plugin.tf.ROCAL_iterator"}


@pytest.mark.parametrize("module", sorted(ROCAL_NAMES))
def test_every_name_of_rocals_python_api_exists_and_what_does_not_run_says_so(module):
    """A script that calls any of rocAL's functions or classes finds it: the ones fastload does not run raise
    NotImplementedError naming themselves (never an AttributeError, never a silent stand-in)."""
    import importlib
    mod = importlib.import_module(f"fastload.compat.rocal.{module}")
    for name in ROCAL_NAMES[module].split():
        assert hasattr(mod, name), f"{module}.{name}"
        qualified = f"{module}.{name}"
        if qualified not in REFUSED:
            continue
        with pytest.raises(NotImplementedError, match=name):
            with Pipeline(batch_size=1, num_threads=1, device_id=0, rocal_cpu=True):
                getattr(mod, name)()


def _separable_reference(image: np.ndarray, width: int, height: int, kind: str) -> np.ndarray:
    """RPP's separable resize (resize.cpp: GenericFilter, compute_resize_src_loc, compute_*_coefficient,
    normalized taps clamped to the image), written per output pixel in float64, before rounding."""
    def value(x):
        a = abs(x)
        if kind == "cubic":
            return 0.0 if a >= 2 else (a * a * (-0.5 * a + 2.5) - 4 * a + 2 if a > 1 else a * a * (1.5 * a - 2.5) + 1)
        if kind == "lanczos":
            return 0.0 if a >= 3 else float(np.sinc(x) * np.sinc(x / 3))
        if kind == "gaussian":
            return math.exp(-4 * x * x)
        return max(0.0, 1 - a)

    def axis(size, out):
        ratio = size / out
        radius = {"cubic": 2.0, "lanczos": 3.0}.get(kind, 1.0)
        scale = 1.0
        if kind != "cubic" and size > out:
            radius, scale = radius * ratio, 1 / ratio
        taps = math.ceil(2 * radius)
        matrix = np.zeros((out, size))
        for d in range(out):
            first = math.ceil(d * ratio + (ratio - 1) / 2 - radius)
            weights = [value((first + k - ((d + 0.5) * ratio - 0.5)) * scale) for k in range(taps)]
            for k, w in enumerate(weights):
                matrix[d, min(max(first + k, 0), size - 1)] += w / sum(weights)
        return matrix

    rows, cols = axis(image.shape[0], height), axis(image.shape[1], width)
    return np.einsum("ys,xt,stc->yxc", rows, cols, image.astype(np.float64))


@pytest.mark.parametrize("kind", ["cubic", "lanczos", "gaussian", "triangular"])
def test_rpps_separable_resize_on_awkward_sizes(kind):
    """Shrinking (the filter widened by the ratio, but cubic's) and enlarging, fresh random images of
    awkward sizes: within a level of RPP's formulas in float64, and equal but for under 3 % (RPP's
    float32 positions, coefficients and sums)."""
    generator = np.random.default_rng(7)
    for (h, w), (out_h, out_w) in [((37, 53), (16, 23)), ((29, 31), (61, 47)), ((97, 18), (13, 40)), ((5, 3), (5, 3))]:
        image = generator.integers(0, 256, (h, w, 3), dtype=np.uint8)
        out = imageops.resample(torch.from_numpy(image), out_w, out_h, kind).numpy().astype(int)
        assert out.shape == (out_h, out_w, 3)
        expected = np.clip(np.rint(_separable_reference(image, out_w, out_h, kind)), 0, 255)
        assert np.abs(out - expected).max() <= 1, (kind, h, w, out_h, out_w)
        assert (out != expected).mean() < 0.03, (kind, h, w, out_h, out_w)
        gray = imageops.resample(torch.from_numpy(image[:, :, :1].copy()), out_w, out_h, kind)
        assert torch.equal(gray, torch.from_numpy(out[:, :, :1].astype(np.uint8)))  # one channel alike


def test_rpps_one_channel_resize_that_would_read_past_its_rows_is_refused():
    """RPP's one-channel horizontal pass loads four taps from a start clamped once, in 16-column blocks up
    to where a group's taps come within int(radius) of the row's end: a filter wider than that margin
    (Lanczos, and triangular or Gaussian shrinking) then weighs values past the row in the last blocks
    for many output widths, so RPP's output there is memory past the image: refused, where RGB (whose
    pass clamps each tap) runs. Cubic's four taps always stay within its margin."""
    image = torch.from_numpy(np.random.default_rng(5).integers(0, 256, (40, 500, 3), dtype=np.uint8))
    for kind, width in [("lanczos", 224), ("triangular", 160), ("gaussian", 256)]:
        assert imageops.resample(image, width, 20, kind).shape == (20, width, 3)
        with pytest.raises(ValueError, match="reads past the end of the row"):
            imageops.resample(image[:, :, :1].contiguous(), width, 20, kind)
    for kind, width in [("lanczos", 600), ("triangular", 176), ("gaussian", 300), ("cubic", 224)]:
        assert imageops.resample(image[:, :, :1].contiguous(), width, 20, kind).shape == (20, width, 1)


def test_rpps_lanczos_and_cubic_are_pillows_away_from_the_borders():
    """Pillow's LANCZOS (a = 3, widened when shrinking) and BICUBIC (a = -0.5, here enlarging, where neither
    widens) are the filters RPP's are: the same pixels where no tap reaches a border (Pillow drops the
    taps outside the image, RPP repeats the edge), within a level (rounding; the first 16 columns, rounded
    in RPP too). Cubic enlarges a smooth image: Pillow rounds and clips between its passes, which cubic's
    overshoot on noise would turn into several levels."""
    from PIL import Image
    noise = np.random.default_rng(3).integers(0, 256, (83, 77, 3), dtype=np.uint8)
    y, x = np.mgrid[:9, :11]
    smooth = np.stack([128 + 60 * np.sin(x / 3 + c) * np.cos(y / 4) for c in range(3)], -1).round().astype(np.uint8)
    for kind, pil, small, (out_w, out_h), margin in [("lanczos", Image.LANCZOS, noise, (15, 26), 4),
                                                     ("cubic", Image.BICUBIC, smooth, (16, 21), 3)]:
        ours = imageops.resample(torch.from_numpy(small), out_w, out_h, kind).numpy().astype(int)
        theirs = np.asarray(Image.fromarray(small).resize((out_w, out_h), pil)).astype(int)
        inner = (slice(margin, out_h - margin), slice(margin, min(out_w, 16) - margin))
        assert np.abs(ours[inner] - theirs[inner]).max() <= 1, kind


def _turbojpeg():
    """rocAL's decoder library, libturbojpeg, through ctypes where this machine has it (Debian's
    libturbojpeg0, or the file FASTLOAD_TURBOJPEG names), else None; and a decode as rocAL's
    TJDecoder::decode calls it: tjDecompress2 given the cap (USER_GIVEN_SIZE) or the image's size within
    it (USER_GIVEN_SIZE_ORIG), TJFLAG_ACCURATEDCT, the size its scaling-factor loop reports."""
    import ctypes
    import ctypes.util
    import os
    name = os.environ.get("FASTLOAD_TURBOJPEG") or ctypes.util.find_library("turbojpeg")
    if not name:
        return None
    lib = ctypes.CDLL(name)
    lib.tjInitDecompress.restype = ctypes.c_void_p
    lib.tjDestroy.argtypes = [ctypes.c_void_p]
    lib.tjDecompressHeader3.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong] + \
        [ctypes.POINTER(ctypes.c_int)] * 4
    lib.tjDecompress2.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p] + \
        [ctypes.c_int] * 5

    def decode(data: bytes, max_w: int, max_h: int, keep_original: bool, gray: bool):
        handle = lib.tjInitDecompress()  # one per call: a failed call leaves a handle failing
        try:
            w, h, sub, space = (ctypes.c_int() for _ in range(4))
            if lib.tjDecompressHeader3(handle, data, len(data), *(ctypes.byref(v) for v in (w, h, sub, space))):
                return None
            w, h, planes = w.value, h.value, 1 if gray else 3
            out = np.zeros((max_h, max_w * planes), np.uint8)
            ask = (min(w, max_w), min(h, max_h)) if keep_original else (max_w, max_h)
            if lib.tjDecompress2(handle, data, len(data), out.ctypes.data, ask[0], max_w * planes, ask[1],
                                 6 if gray else 0, 4096):  # TJPF_GRAY / TJPF_RGB, TJFLAG_ACCURATEDCT
                return None
        finally:
            lib.tjDestroy(handle)
        if keep_original and w <= max_w and h <= max_h:
            got = (w, h)
        else:
            got = next((-(-w * m // 8), -(-h * m // 8)) for m in range(16, 0, -1)
                       if -(-w * m // 8) <= max_w and -(-h * m // 8) <= max_h)
        return out[:got[1], :got[0] * planes].reshape(got[1], got[0], planes)
    return decode


def test_user_given_size_needs_the_c_extension_and_says_so_when_built(monkeypatch, tmp_path):
    """Without fastload._jpeg (an optional build) DCT scaling is missing: what needs it for most JPEGs is
    refused where it is built, not image by image."""
    from fastload import decode
    from fastload.compat.rocal import JsonPipeline
    monkeypatch.setattr(decode, "_jpeg", None)
    with pytest.raises(RuntimeError, match="needs fastload's C extension"):
        JsonPipeline({"pipeline": [{"operation": "Resize", "dest_width": 8, "dest_height": 8, "is_output": True}]})
    with Pipeline(batch_size=1, num_threads=1, rocal_cpu=True):
        with pytest.raises(RuntimeError, match="needs fastload's C extension"):
            fn.external_source(source=iter([]), mode=types.EXTSOURCE_FNAME)


def test_decode_sizes_follow_turbojpegs_scaling_factors():
    """USER_GIVEN_SIZE_ORIG (the decoders' default) keeps an image within the cap and scales a larger one
    down; USER_GIVEN_SIZE (fn.external_source's, the JSON pipelines') takes the largest of TurboJPEG's
    16 factors 2/1 ... 1/8 that fits, enlarging small images; over 8x the cap is refused."""
    import io
    import warnings
    sizes = {(100, 80): ((100, 80), (200, 160)), (600, 400): ((600, 400), (975, 650)),
             (900, 600): ((900, 600), (900, 600)), (1200, 800): ((900, 600), (900, 600)),
             (500, 375): ((500, 375), (1000, 750))}
    for (w, h), (kept, given) in sizes.items():
        out = io.BytesIO()
        make_image(w, w, h).save(out, "JPEG", quality=90)
        for keep, expected in ((True, kept), (False, given)):
            for color, channels in (("RGB", 3), ("GRAY", 1)):
                image = imageops.decode(out.getvalue(), color, 1000, 1000, keep_original=keep)
                assert image.shape == (expected[1], expected[0], channels), (w, h, keep, color)
    with pytest.raises(ValueError, match="over 8x"):
        imageops.decode(out.getvalue(), "RGB", 60, 40, keep_original=False)
    png = io.BytesIO()
    make_image(1, 50, 40).save(png, "PNG")
    for keep in (True, False):  # no DCT scaling: at its size, said aloud (rocAL's decoder cannot read it)
        with pytest.warns(UserWarning, match="a PNG image in a rocAL pipeline"):
            assert imageops.decode(png.getvalue(), "RGB", 1000, 1000, keep_original=keep).shape == (40, 50, 3)
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="larger than max_decoded_width"):
        imageops.decode(png.getvalue(), "RGB", 45, 45, keep_original=False)
    mpo = io.BytesIO()  # a camera's JPEG with a second picture appended: Pillow says MPO, TurboJPEG reads it
    make_image(2, 100, 80).save(mpo, "MPO", save_all=True, append_images=[make_image(3, 100, 80)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert imageops.decode(mpo.getvalue(), "RGB", 1000, 1000, keep_original=False).shape == (160, 200, 3)
    from conftest import TESTDATA
    cmyk = TESTDATA / "jpeg_zoo" / "pil__pil_sample_cmyk.jpg"  # TurboJPEG cannot give it as RGB: the same
    if cmyk.exists():
        with pytest.warns(UserWarning, match="a CMYK JPEG in a rocAL pipeline"):
            assert imageops.decode(cmyk.read_bytes(), "RGB", 1000, 1000, keep_original=False).shape == (100, 100, 3)


def test_decoding_is_libturbojpegs_for_both_size_policies():
    """Pixel for pixel what rocAL's TurboJPEG call gives, RGB and GRAY, both policies, caps that keep,
    shrink and enlarge, on the shared odd JPEGs and on generated ones of awkward sizes and subsamplings
    (run where libturbojpeg is installed; 584 decodes identical with libjpeg-turbo 2.1.5)."""
    import glob
    import io
    import warnings
    from PIL import Image
    from conftest import TESTDATA
    reference = _turbojpeg()
    if reference is None:
        pytest.skip("libturbojpeg is not installed (Debian's libturbojpeg0; or set FASTLOAD_TURBOJPEG)")
    items = [open(path, "rb").read() for path in sorted(glob.glob(str(TESTDATA / "**" / "*.jp*g"), recursive=True))]
    rng = np.random.default_rng()
    for w, h in [(37, 23), (333, 501), (999, 1), (1201, 799)]:
        for subsampling in (0, 1, 2):
            out = io.BytesIO()
            Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(out, "JPEG", quality=90,
                                                                                 subsampling=subsampling)
            items.append(out.getvalue())
    compared = 0
    for data in items:
        for cap in ((1000, 1000), (224, 300), (512, 97)):
            for keep in (True, False):
                for color in ("RGB", "GRAY"):
                    expected = reference(data, *cap, keep, color == "GRAY")
                    if expected is None:
                        continue  # libturbojpeg refuses it (rocAL puts another image in its place)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        got = imageops.decode(data, color, *cap, keep_original=keep).numpy()
                    assert np.array_equal(got, expected), (cap, keep, color)
                    compared += 1
    assert compared > 200


def test_decoding_within_the_cap_is_pillows_whichever_decoder_runs():
    """Three-component JPEGs within max_decoded_width x height decode through fastload's libjpeg-turbo
    binding, the others (grayscale, CMYK, PNG, data libjpeg warns about) through Pillow: the pixels are
    Pillow's either way, and what Pillow cannot read is an error either way. Real odd files from other
    projects' test suites (../shared/testdata)."""
    import io
    import glob
    from PIL import Image
    from conftest import TESTDATA
    from fastload.decode import _jpeg
    files = sorted(glob.glob(str(TESTDATA / "**" / "*.jp*g"), recursive=True))
    if not files:
        pytest.skip(f"no shared test data at {TESTDATA}")
    through_turbo = 0
    for path in files:
        data = open(path, "rb").read()
        try:
            with Image.open(io.BytesIO(data)) as image:
                expected = torch.from_numpy(np.array(image.convert("RGB")))
        except Exception:
            with pytest.raises(Exception):
                imageops.decode(data, "RGB", 1 << 20, 1 << 20)
            continue
        assert torch.equal(imageops.decode(data, "RGB", 1 << 20, 1 << 20), expected), path
        with Image.open(io.BytesIO(data)) as image:
            through_turbo += imageops._turbo_rgb(_jpeg, data, image) is not None
    assert _jpeg is None or through_turbo >= 20
