"""fastload.compat.rocal's COCO reader (``fn.readers.coco`` + ``fn.decoders.image(annotations_file=...)``)
and the boxes rocAL's meta nodes move, against the rules read in rocAL's sources (ROCm/rocAL 0981d5bb:
coco_meta_data_reader.cpp, coco_file_source_reader.cpp, meta_node_resize.cpp,
meta_node_crop_mirror_normalize.cpp, meta_node_crop.cpp, meta_node_flip.cpp, bounding_box_graph.cpp)
written out by hand here, and rocAL's tests/python_api/coco_reader.py run through fastload.compat.run."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal.pipeline import Pipeline
from fastload.compat.rocal.plugin.pytorch import ROCALClassificationIterator
from fastload.sample_data import make_image

from rocal_scripts import run_rocal_script

# file name, size, boxes [x, y, w, h, category id]
IMAGES = [("a.jpg", (200, 150), [(10, 20, 50, 40, 18), (150, 100, 40, 40, 3)]),
          ("b.jpg", (120, 160), [(0, 0, 120, 160, 7)]),
          ("c.jpg", (1200, 800), [(600, 400, 300, 200, 3)]),  # decoded at 3/4: 900x600
          ("d.jpg", (64, 64), []),  # in the json, no annotation: not a sample
          ("e.jpg", (90, 70), [(80, 60, 30, 30, 18), (5, 5, 0, 10, 7)])]
CATEGORIES = [18, 3, 7]  # numbered 1, 2, 3 in this order


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    images = root / "train2017"
    images.mkdir()
    for n, (name, (width, height), _) in enumerate(IMAGES):
        make_image(n, width, height).save(images / name, quality=90)
    make_image(9, 30, 30).save(images / "z-unlisted.jpg")
    annotations = {"images": [{"id": 100 + n, "file_name": name, "width": w, "height": h}
                              for n, (name, (w, h), _) in enumerate(IMAGES)],
                   "categories": [{"id": c, "name": f"c{c}"} for c in CATEGORIES],
                   "annotations": [{"id": 1000 + 10 * n + k, "image_id": 100 + n, "bbox": list(box[:4]),
                                    "category_id": box[4], "iscrowd": 0}
                                   for n, (_, _, boxes) in enumerate(IMAGES) for k, box in enumerate(boxes)]}
    path = root / "instances.json"
    path.write_text(json.dumps(annotations))
    return str(images), str(path)


def coco_pipeline(coco, build=lambda images: images, batch_size=4, **reader_args) -> Pipeline:
    images_root, annotations = coco
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=0, seed=2, rocal_cpu=True)
    with pipe, pytest.warns(UserWarning, match="2 files of .* have no annotation"):
        jpegs, bboxes, labels = fn.readers.coco(annotations_file=annotations, **reader_args)
        decoded = fn.decoders.image(jpegs, output_type=types.RGB, file_root=images_root,
                                    annotations_file=annotations, random_shuffle=False, shard_id=0, num_shards=1)
        outputs = build(decoded)
        pipe.set_outputs(*(outputs if isinstance(outputs, tuple) else (outputs,)))
    pipe.build()
    return pipe


def ltrb(box, sx=1.0, sy=1.0):
    x, y, w, h = box[:4]
    return [x * sx, y * sy, (x + w) * sx, (y + h) * sy]


def test_annotated_images_their_boxes_labels_ids_and_sizes(coco):
    """The annotated files in sorted order (d.jpg and an unlisted file skipped), pixel [l, t, r, b] boxes
    at the decoded size (c.jpg's scaled by its 3/4 decode), labels numbered by the json's category order,
    the json's ids and sizes."""
    pipe = coco_pipeline(coco)
    samples = [IMAGES[n] for n in (0, 1, 2, 4)]
    outputs = pipe.run()
    assert outputs[0].get_rois()[:, 2:].tolist() == [[200, 150], [120, 160], [900, 600], [90, 70]]
    scale = [1.0, 1.0, 0.75, 1.0]
    cords, labels = pipe.get_bounding_box_cords(), pipe.get_bounding_box_labels()
    for n, (_, _, boxes) in enumerate(samples):
        assert cords[n].dtype == np.float32 and labels[n].dtype == np.int32
        expected = [v for box in boxes for v in ltrb(box, scale[n], scale[n])]
        np.testing.assert_allclose(cords[n], expected, rtol=1e-6)
        assert labels[n].tolist() == [CATEGORIES.index(box[4]) + 1 for box in boxes]
    ids, sizes = np.zeros(4, np.int32), np.zeros(8, np.int32)
    pipe.get_image_id(ids)
    pipe.get_img_sizes(sizes)
    assert ids.tolist() == [100, 101, 102, 104]
    assert sizes.tolist() == [200, 150, 120, 160, 1200, 800, 90, 70]
    assert pipe.get_bounding_box_count() == 6  # the batch's boxes together, as rocAL counts them
    with pytest.raises(TypeError, match="writable, contiguous int32 numpy array"):
        pipe.get_image_id([0, 0, 0, 0])
    pipe.rocal_reset_loaders()
    with pytest.raises(RuntimeError, match="fn.readers.coco gives boxes"):
        next(iter(ROCALClassificationIterator(pipe)))


def test_the_last_batch_is_filled_with_the_last_image_and_its_boxes_and_shards_split_the_images(coco):
    pipe = coco_pipeline(coco, batch_size=3)
    ids, epochs = np.zeros(3, np.int32), []
    for _ in range(2):
        seen = []
        while pipe.run() is not None:
            pipe.get_image_id(ids)
            seen.append((ids.tolist(), [c.tolist() for c in pipe.get_bounding_box_cords()]))
        epochs.append(seen)
        pipe.rocal_reset_loaders()
    assert epochs[0] == epochs[1] and [batch[0] for batch in epochs[0]] == [[100, 101, 102], [104, 104, 104]]
    assert epochs[0][1][1][0] == epochs[0][1][1][2]  # the copies carry the last image's boxes
    images_root, annotations = coco
    shards = []
    for shard_id in range(2):
        pipe = Pipeline(batch_size=2, num_threads=1, rocal_cpu=True)
        with pipe, pytest.warns(UserWarning):
            jpegs, _, _ = fn.readers.coco(annotations_file=annotations)
            pipe.set_outputs(fn.decoders.image(jpegs, file_root=images_root, shard_id=shard_id, num_shards=2))
        pipe.run()
        pipe.get_image_id(ids[:2])
        shards.append(ids[:2].tolist())
    assert shards == [[100, 101], [102, 104]]


def test_a_coin_flip_mirrors_each_image_and_its_boxes_together(coco):
    """crop_mirror_normalize(mirror=coin_flip): an image that comes out mirrored has mirrored boxes."""
    pipe = coco_pipeline(coco, batch_size=4, build=lambda images: (
        images,
        fn.crop_mirror_normalize(images, crop=(60, 80), crop_pos_x=0.0, crop_pos_y=0.0, mean=[0, 0, 0],
                                 std=[1, 1, 1], mirror=fn.random.coin_flip(probability=0.5))))
    seen = set()
    for _ in range(4):
        plain, out = pipe.run()
        cords = pipe.get_bounding_box_cords()
        for n in range(4):
            window, image = plain.at(n)[:60, :80], out.at(n)[:60, :80]
            mirrored = np.array_equal(image, window[:, ::-1])
            assert mirrored or np.array_equal(image, window)
            first = IMAGES[0][2][0] if n == 0 else None
            if first is not None:  # a.jpg's first box, (10, 20, 60, 60) in the 80x60 window
                assert cords[0][:4].tolist() == ([20, 20, 70, 60] if mirrored else [10, 20, 60, 60])
            seen.add(mirrored)
        pipe.rocal_reset_loaders()
    assert seen == {True, False}


def test_copy_data_through_a_ctypes_pointer(coco):
    """rocAL's scripts copy outputs into torch tensors through ctypes.c_void_p: fp16 NCHW here."""
    import ctypes

    import torch
    pipe = coco_pipeline(coco, build=lambda images: fn.crop_mirror_normalize(
        images, crop=(32, 48), mean=[0, 0, 0], std=[1, 1, 1], mirror=0, output_layout=types.NCHW,
        output_dtype=types.FLOAT16))
    (out,) = pipe.run()
    target = torch.empty(out.dimensions(), dtype=getattr(torch, out.dtype()))
    out.copy_data(ctypes.c_void_p(target.data_ptr()), types.HOST_MEMORY)
    assert target.dtype == torch.float16 and torch.equal(target, out.batch)
    with pytest.raises(ValueError, match=r"copy_data into torch.float32 \(4, 3, 32, 48\): the batch is torch.float16"):
        out.copy_data(np.zeros(target.shape, np.float32))
    with pytest.raises(ValueError, match="null pointer"):
        out.copy_data(ctypes.c_void_p(0), types.HOST_MEMORY)
    with pytest.raises(NotImplementedError, match="device pointer"):
        out.copy_data(ctypes.c_void_p(target.data_ptr()), types.DEVICE_MEMORY)


def test_xywh_without_box_moving_operators_and_raw_category_ids(coco):
    pipe = coco_pipeline(coco, ltrb=False, avoid_class_remapping=True)
    pipe.run()
    np.testing.assert_allclose(pipe.get_bounding_box_cords()[0], [10, 20, 50, 40, 150, 100, 40, 40])
    assert pipe.get_bounding_box_labels()[0].tolist() == [18, 3]
    moved = coco_pipeline(coco, ltrb=False, build=lambda images: fn.flip(images, horizontal=0))
    moved.run()  # after a meta node rocAL's boxes are LTRB again
    np.testing.assert_allclose(moved.get_bounding_box_cords()[0], [10, 20, 60, 60, 150, 100, 190, 140])


def test_resize_then_crop_mirror_normalize_moves_the_boxes_as_rocals_meta_nodes(coco):
    """coco_reader.py's chain: resize to 300x300 scales the boxes; crop_mirror_normalize's 224x224 window at
    (0, 0) keeps a box when a quarter of it is inside, clips and shifts it, mirrors in pixels; a sample
    left without a box gets [0, 0, 224, 224] with label 0; colour operators leave the boxes."""
    for mirror in (0, 1):
        pipe = coco_pipeline(coco, build=lambda images: fn.crop_mirror_normalize(
            fn.color_twist(fn.resize(images, resize_width=300, resize_height=300), saturation=0.3),
            crop=(224, 224), crop_pos_x=0.0, crop_pos_y=0.0, mean=[0, 0, 0], std=[1, 1, 1], mirror=mirror))
        pipe.run()
        cords = [c.reshape(-1, 4) for c in pipe.get_bounding_box_cords()]
        labels = pipe.get_bounding_box_labels()
        decoded = [(200, 150), (120, 160), (900, 600), (90, 70)]
        for n, sample in enumerate((0, 1, 2, 4)):
            kept = []
            sx, sy = 300 / decoded[n][0], 300 / decoded[n][1]
            scale = 0.75 if sample == 2 else 1.0
            for box in IMAGES[sample][2]:
                left, t, r, b = ltrb(box, scale * sx, scale * sy)
                inside = max(0, min(r, 224) - max(left, 0)) * max(0, min(b, 224) - max(t, 0))
                if (r - left) * (b - t) > 0 and inside >= 0.25 * (r - left) * (b - t):
                    clipped = [max(left, 0), max(t, 0), min(r, 224), min(b, 224)]
                    if mirror:
                        clipped = [224 - clipped[2], clipped[1], 224 - clipped[0], clipped[3]]
                    kept.append((clipped, CATEGORIES.index(box[4]) + 1))
            if not kept:
                kept = [([0, 0, 224, 224], 0)]
            np.testing.assert_allclose(cords[n], [k[0] for k in kept], rtol=1e-6, atol=1e-4)
            assert labels[n].tolist() == [k[1] for k in kept], (mirror, sample)


def test_flip_and_a_fixed_crop_move_the_boxes(coco):
    pipe = coco_pipeline(coco, build=lambda images: fn.crop(fn.flip(images, horizontal=1, vertical=1),
                                                            crop=(40, 80), crop_pos_x=10, crop_pos_y=30))
    pipe.run()
    first = pipe.get_bounding_box_cords()[0].reshape(-1, 4)
    # a.jpg (200x150) flipped both ways: (10, 20, 60, 60) -> (140, 90, 190, 130), (150, 100, 190, 140) ->
    # (10, 10, 50, 50); the 80x40 window at (10, 30) keeps the second's 40x20 part of 40x40 (a half)
    np.testing.assert_allclose(first, [[0, 0, 40, 20]])
    assert pipe.get_bounding_box_labels()[0].tolist() == [2]


def test_what_fastload_does_not_move_as_rocal_is_refused_by_name(coco):
    with pytest.raises(NotImplementedError, match="fn.rotate on images of fn.readers.coco"):
        coco_pipeline(coco, build=lambda images: fn.rotate(images, angle=10.0))
    with pytest.raises(NotImplementedError, match="a random fn.crop on images of fn.readers.coco"):
        coco_pipeline(coco, build=lambda images: fn.crop(images))
    for build in (lambda images: fn.random_crop(images, crop_area_factor=None, crop_aspect_ratio=None,
                                                crop_pox_x=None, crop_pox_y=None),
                  lambda images: fn.transpose(images, perm=[1, 0, 2], output_layout=types.NHWC)):
        with pytest.raises(NotImplementedError, match="rocAL has no meta node for it and hands on the boxes"):
            coco_pipeline(coco, build=build)
    with pytest.raises(NotImplementedError, match="second branch"):
        coco_pipeline(coco, build=lambda images: (fn.resize(images, resize_width=8, resize_height=8),
                                                  fn.flip(images, horizontal=1)))
    with pytest.raises(NotImplementedError, match=r"readers.coco\(masks=True\)"):
        with Pipeline(batch_size=1, rocal_cpu=True):
            fn.readers.coco(annotations_file=coco[1], masks=True)
    with pytest.raises(RuntimeError, match="already has a reader"):
        with Pipeline(batch_size=1, rocal_cpu=True):
            fn.readers.coco(annotations_file=coco[1])
            fn.readers.file(file_root=coco[0])
    with pytest.raises(Exception, match="passes the 90x70 image's edge"):
        coco_pipeline(coco, build=lambda images: fn.crop(images, crop=(20, 85), crop_pos_x=10, crop_pos_y=0)).run()


def test_malformed_annotations_and_folders_are_named(coco, tmp_path):
    images_root, annotations = coco
    data = json.loads(open(annotations).read())
    data["annotations"].append({"id": 7, "image_id": 100, "bbox": [1, 1, 2, 2], "category_id": 99})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="annotation 7 names category 99"):
        with Pipeline(batch_size=1, rocal_cpu=True):
            jpegs, _, _ = fn.readers.coco(annotations_file=str(bad))
            fn.decoders.image(jpegs, file_root=images_root)
    mixed = tmp_path / "mixed"
    (mixed / "a").mkdir(parents=True)
    (mixed / "z.jpg").write_bytes(b"")
    with pytest.raises(ValueError, match="holds folders and files"):
        with Pipeline(batch_size=1, rocal_cpu=True):
            jpegs, _, _ = fn.readers.coco(annotations_file=annotations)
            fn.decoders.image(jpegs, file_root=str(mixed))


COCO_READER_SCRIPT = '''
from math import sqrt
import torch
import itertools
import os
import ctypes
from amd.rocal.pipeline import Pipeline
import amd.rocal.fn as fn
import amd.rocal.types as types
import numpy as np
from parse_config import parse_args


class ROCALCOCOIterator(object):
    def __init__(self, pipelines, tensor_layout=types.NCHW, reverse_channels=False, multiplier=None, offset=None, tensor_dtype=types.FLOAT, device="cpu", display=False):

        try:
            assert pipelines is not None, "Number of provided pipelines has to be at least 1"
        except Exception as ex:
            print(ex)
        self.loader = pipelines
        self.tensor_format = tensor_layout
        self.multiplier = multiplier if multiplier else [1.0, 1.0, 1.0]
        self.offset = offset if offset else [0.0, 0.0, 0.0]
        self.reverse_channels = reverse_channels
        self.tensor_dtype = tensor_dtype
        self.device = device
        self.device_id = self.loader._device_id
        self.bs = self.loader._batch_size
        self.output_list = self.dimensions = self.torch_dtype = None
        self.display = display
        self.image_id = np.zeros(self.bs, dtype="int32")
        self.bboxes_label_count = np.zeros(self.bs, dtype="int32")
        self.img_size = np.zeros((self.bs * 2), dtype="int32")
        self.output_memory_type = self.loader._output_memory_type

    def next(self):
        return self.__next__()

    def __next__(self):
        if self.loader.rocal_run() != 0:
            raise StopIteration
        else:
            self.output_tensor_list = self.loader.get_output_tensors()

        if self.output_list is None:
            self.output_list = []
            for i in range(len(self.output_tensor_list)):
                self.dimensions = self.output_tensor_list[i].dimensions()
                self.torch_dtype = self.output_tensor_list[i].dtype()
                if self.device == "cpu":
                    self.output = torch.empty(
                        self.dimensions, dtype=getattr(torch, self.torch_dtype))
                else:
                    torch_gpu_device = torch.device('cuda', self.device_id)
                    self.output = torch.empty(self.dimensions, dtype=getattr(
                        torch, self.torch_dtype), device=torch_gpu_device)
                self.output_tensor_list[i].copy_data(ctypes.c_void_p(
                    self.output.data_ptr()), self.output_memory_type)
                self.output_list.append(self.output)
        else:
            for i in range(len(self.output_tensor_list)):
                self.output_tensor_list[i].copy_data(ctypes.c_void_p(
                    self.output_list[i].data_ptr()), self.output_memory_type)

        self.labels = self.loader.get_bounding_box_labels()
        self.bboxes = self.loader.get_bounding_box_cords()
        self.loader.get_image_id(self.image_id)
        image_id_tensor = torch.tensor(self.image_id)
        image_size_tensor = torch.tensor(self.img_size).view(-1, self.bs, 2)

        for i in range(self.bs):
            if self.display:
                img = self.output
                draw_patches(img[i], self.image_id[i],
                             self.bboxes[i], self.device, self.tensor_dtype, self.tensor_format)
        return (self.output), self.bboxes, self.labels, image_id_tensor, image_size_tensor

    def reset(self):
        self.loader.rocal_reset_loaders()

    def __iter__(self):
        return self


def draw_patches(img, idx, bboxes, device, dtype, layout):
    image = img.detach().numpy()
    np.save("output_folder/coco_reader/" + str(idx) + "_" + "train" + ".npy", image)
    np.save("output_folder/coco_reader/" + str(idx) + "_" + "boxes" + ".npy", np.reshape(bboxes, (-1, 4)))


def main():
    args = parse_args()
    image_path = args.image_dataset_path
    annotation_path = args.json_path
    rocal_cpu = False if args.rocal_gpu else True
    batch_size = args.batch_size
    display = args.display
    num_threads = args.num_threads
    local_rank = args.local_rank
    world_size = args.world_size
    random_seed = args.seed
    tensor_format = types.NHWC if args.NHWC else types.NCHW
    tensor_dtype = types.FLOAT16 if args.fp16 else types.FLOAT
    try:
        path = "output_folder/coco_reader/"
        isExist = os.path.exists(path)
        if not isExist:
            os.makedirs(path)
    except OSError as error:
        print(error)

    pipe = Pipeline(batch_size=batch_size, num_threads=num_threads, device_id=args.local_rank,
                    seed=random_seed, rocal_cpu=rocal_cpu, tensor_layout=tensor_format, tensor_dtype=tensor_dtype)
    with pipe:
        jpegs, bboxes, labels = fn.readers.coco(
            annotations_file=annotation_path)
        images_decoded = fn.decoders.image(jpegs, output_type=types.RGB, file_root=image_path,
                                           annotations_file=annotation_path, random_shuffle=False, shard_id=local_rank, num_shards=world_size)
        res_images = fn.resize(
            images_decoded, resize_width=300, resize_height=300)
        saturation = fn.uniform(range=[0.1, 0.4])
        contrast = fn.uniform(range=[0.1, 25.0])
        brightness = fn.uniform(range=[0.875, 1.125])
        hue = fn.uniform(range=[5.0, 170.0])
        ct_images = fn.color_twist(
            res_images, saturation=saturation, contrast=contrast, brightness=brightness, hue=hue)
        flip_coin = fn.random.coin_flip(probability=0.5)
        cmn_images = fn.crop_mirror_normalize(ct_images,
                                              crop=(224, 224),
                                              crop_pos_x=0.0,
                                              crop_pos_y=0.0,
                                              mean=[0, 0, 0],
                                              std=[1, 1, 1],
                                              mirror=flip_coin,
                                              output_layout=tensor_format,
                                              output_dtype=tensor_dtype)
        pipe.set_outputs(cmn_images)
    pipe.build()
    if (args.rocal_gpu):
        data_loader = ROCALCOCOIterator(
            pipe, multiplier=pipe._multiplier, offset=pipe._offset, display=display, tensor_layout=tensor_format, tensor_dtype=tensor_dtype, device="cuda")
    else:
        data_loader = ROCALCOCOIterator(
            pipe, multiplier=pipe._multiplier, offset=pipe._offset, display=display, tensor_layout=tensor_format, tensor_dtype=tensor_dtype, device="cpu")

    import timeit
    start = timeit.default_timer()
    for epoch in range(int(args.num_epochs)):
        print("EPOCH:::::", epoch)
        for i, it in enumerate(data_loader, 0):
            if args.print_tensor:
                print("\\nIMAGES : \\n", it[0])
                print("\\nBBOXES:\\n", it[1])
                print("\\nLABELS:\\n", it[2])
                print("\\nIMAGE ID:\\n", it[3])
                print("\\nIMAGE SIZE:\\n", it[4])
        data_loader.reset()
    stop = timeit.default_timer()

    print('\\n Time: ', stop - start)

    print("##############################  COCO READER  SUCCESS  ############################")


if __name__ == '__main__':
    main()
'''

def test_rocals_coco_reader_script(coco, tmp_path):
    """tests/python_api/coco_reader.py through ``python -m fastload.compat.run``: its own ROCALCOCOIterator
    (copy_data into torch tensors through ctypes pointers, get_bounding_box_labels / cords,
    get_image_id), its pipeline and loop as written; only draw_patches saves with numpy instead of cv2.
    a.jpg's saved boxes are the unmirrored or the mirrored crop of its resized boxes (its coin flip)."""
    images_root, annotations = coco
    done = run_rocal_script(tmp_path, "coco_reader.py", COCO_READER_SCRIPT, "--image-dataset-path", images_root,
                            "--json-path", annotations, "--display", "--NHWC", "--batch-size", "2")
    assert "COCO READER  SUCCESS" in done.stdout
    out = tmp_path / "output_folder" / "coco_reader"
    boxes = np.load(out / "100_boxes.npy")  # a.jpg: 200x150 -> 300x300: sx 1.5, sy 2
    plain = np.array([[15, 40, 90, 120]])  # the second box, (225, 200, 285, 280), lies outside the window
    mirrored = np.array([[224 - 90, 40, 224 - 15, 120]])
    image = np.load(out / "100_train.npy")
    assert image.shape == (224, 224, 3) and image.dtype == np.float32
    assert np.allclose(boxes, plain) or np.allclose(boxes, mirrored)
