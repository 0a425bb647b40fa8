"""DALI's ResNet-50 training pipeline on this machine's CPU: real DALI vs the same pipeline on
fastload.compat.dali, with the native fastload loader beside them, in one run on the same data.

The pipeline is the training branch of DALI's ResNet-50 example
(docs/examples/use_cases/pytorch/resnet50/main.py with --dali_cpu): file
reader with random shuffle and pad_last_batch, random-crop decode (area
[0.1, 1], aspect [0.8, 1.25], 100 attempts), resize to 224x224 (triangular),
crop_mirror_normalize to float32 CHW with a coin-flip mirror; batch 64,
num_threads = cores, DALIClassificationIterator(reader_name="Reader",
last_batch_policy=PARTIAL). The native loader runs the same transform as
torchvision names it (RandomResizedCrop(224, scale=(0.1, 1), ratio=(0.8,
1.25)), flip, float32, normalize). Each loader runs in its own subprocess:
a warm-up epoch, then ``--epochs`` timed ones. ``--loaders
fastload.compat.rocal,fastload.compat.rocal+dct,fastload-rocal-recipe`` runs rocAL's ImageNet training
pipeline (image_slice, TRIANGULAR resize 224, a coin-flip
crop_mirror_normalize to float NCHW) on fastload.compat.rocal beside the
native loader with that transform (its "vs native" column); "+dct" is the
same pipeline with fastload's ``dct_scaling="auto"``. This machine's throughput
drifts by 10-20% over minutes, so ``--rounds`` runs every loader that many
times, alternating their order, and the ratios are the medians of each
round's ratios (loaders of one round ran within seconds of each other). Run
with no arguments it first generates the built-in sample folder (2,000
JPEGs).

``--pipeline detection`` runs a detection pipeline instead, on real DALI's
CPU operators and on fastload.compat.dali (``DETECTION_LOADERS``), over a
generated COCO set (``--coco-images`` JPEGs of 240-480 pixels a side, one to
six boxes each, written once under the temporary folder): DALI's SSD
training chain (docs/examples/use_cases/pytorch/single_stage_detector):
fn.readers.coco (ratio, ltrb, skip_empty, random_shuffle), random_bbox_crop
(SSD's thresholds, scaling [0.3, 1], aspect [0.5, 2], 50 attempts),
decoders.image_slice of the window, a coin-flip fn.flip with fn.bb_flip on
its boxes, resize to 300x300, crop_mirror_normalize to float32 CHW, and
fn.box_encoder onto 1,083 anchors (so every output is dense); batches are
taken with ``run()``. The cropped images are also zoomed out with fn.paste
(ratio 1.5, then resized to 150x150) into a second image output, their
boxes moved with fn.bbox_paste, as SSD's "expand" step does. A quick check that it runs: ``--pipeline detection
--coco-images 16 --batch-size 4 --epochs 1 --rounds 1``.

``--pipeline gallery`` and ``--pipeline geometry`` run on real DALI's CPU
operators and on fastload.compat.dali (``GALLERY_LOADERS``,
``GEOMETRY_LOADERS``) over the sample folder (the built-in one of
``--images`` JPEGs; below the default count, a folder of that many under the
temporary folder, so a quick check reads only those), read with
fn.readers.file (random shuffle) and fn.decoders.image to RGB; batches are
taken with ``run()``. ``gallery`` chains the operators of DALI's augmentation
gallery (docs/examples/image_processing/augmentation_gallery) on each
sample: brightness_contrast and hue and saturation with per-sample random
values, a fixed color_twist, rotate by a random angle in [-30, 30] (fill 0),
a coin-flip horizontal flip, water, sphere, jpeg_compression_distortion
(quality 50), gaussian_blur (window 5), erase of a centred box (40% of each
side, fill 118), grid_mask (tile 64, ratio 0.4, random angle), resize to
224x224 and crop_mirror_normalize to float32 CHW. ``geometry`` is a
resize/warp chain: resize_shorter=256 (antialias), warp_affine by a
per-sample matrix (fn.transforms.rotation of [-15, 15] degrees and
fn.transforms.scale of [0.9, 1.1] about (128, 128), then
fn.transforms.translation of [-16, 16] pixels, joined with
fn.transforms.combine; inverse_map=False), rotate by [-10, 10] degrees
(keep_size), experimental.warp_perspective by a fixed mild perspective, a
centred 224x224 fn.crop and crop_mirror_normalize to float32 CHW. Quick
checks that they run: ``--pipeline gallery --images 16 --batch-size 4
--epochs 1 --rounds 1`` (and the same with ``geometry``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from fastload.cli.bench import machine, measure, run_in_child

LOADERS = ("dali", "fastload.compat.dali", "fastload")
# rocAL's ImageNet training pipeline (docs/examples/pytorch/imagenet_training/imagenet_training.py) on
# fastload.compat.rocal, and the native loader with the same transform as torchvision names it
ROCAL_LOADERS = ("fastload.compat.rocal", "fastload.compat.rocal+dct", "fastload-rocal-recipe")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
DETECTION_LOADERS = ("dali-detection", "fastload.compat.dali-detection")
GALLERY_LOADERS = ("dali-gallery", "fastload.compat.dali-gallery")
GEOMETRY_LOADERS = ("dali-geometry", "fastload.compat.dali-geometry")
SAMPLE_IMAGES = 2000  # the built-in sample folder's size


def coco_sample(count: int, root: str | None = None) -> tuple[str, str]:
    """A generated COCO set of ``count`` JPEGs (random sizes and pixels, one to six boxes each, four
    categories): (image folder, annotations file); written once, reused when already there."""
    import tempfile

    import numpy as np
    from PIL import Image
    root = root or os.path.join(tempfile.gettempdir(), f"fastload-bench-coco-{count}")
    folder, annotations = os.path.join(root, "images"), os.path.join(root, "instances.json")
    if os.path.exists(annotations):
        return folder, annotations
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(2026)
    images, boxes = [], []
    for k in range(count):
        h, w = (int(v) for v in rng.integers(240, 481, 2))
        ramp = np.linspace(0, 255, w, dtype=np.float32)[None, :, None] * rng.uniform(0.2, 1.0, 3)
        pixels = (ramp + rng.normal(0, 20, (h, w, 3))).clip(0, 255).astype(np.uint8)  # compresses like a photo
        name = f"{k:06d}.jpg"
        Image.fromarray(pixels).save(os.path.join(folder, name), quality=90)
        images.append({"id": k + 1, "file_name": name, "width": w, "height": h})
        for _ in range(int(rng.integers(1, 7))):
            bw, bh = float(rng.uniform(10, w / 2)), float(rng.uniform(10, h / 2))
            x, y = float(rng.uniform(0, w - bw)), float(rng.uniform(0, h - bh))
            boxes.append({"id": len(boxes) + 1, "image_id": k + 1, "bbox": [x, y, bw, bh], "iscrowd": 0,
                          "area": bw * bh, "category_id": int(rng.integers(1, 5))})
    with open(annotations + ".part", "w") as out:
        json.dump({"images": images, "annotations": boxes,
                   "categories": [{"id": c, "name": f"c{c}"} for c in range(1, 5)]}, out)
    os.replace(annotations + ".part", annotations)
    return folder, annotations


def _anchors() -> list[float]:
    """1,083 ltrb anchors: a 19x19 grid of centres, three sizes each."""
    anchors = []
    for i in range(19):
        for j in range(19):
            cx, cy = (j + 0.5) / 19, (i + 0.5) / 19
            for size in (0.1, 0.3, 0.6):
                anchors += [max(cx - size / 2, 0.0), max(cy - size / 2, 0.0), min(cx + size / 2, 1.0),
                            min(cy + size / 2, 1.0)]
    return anchors


def _detection_pipeline(lib, root: str, batch_size: int, workers: int):
    """DALI's SSD training chain (see the module docstring) with ``lib``'s operators over ``root``'s
    images/ and instances.json (``coco_sample``)."""
    images_dir, annotations = os.path.join(root, "images"), os.path.join(root, "instances.json")
    fn, types = lib.fn, lib.types
    anchors = _anchors()

    @lib.pipeline_def(batch_size=batch_size, num_threads=workers, device_id=None, seed=12)
    def ssd():
        jpegs, boxes, labels = fn.readers.coco(file_root=images_dir, annotations_file=annotations, skip_empty=True,
                                               ratio=True, ltrb=True, random_shuffle=True, name="Reader")
        anchor, shape, boxes, labels = fn.random_bbox_crop(
            boxes, labels, aspect_ratio=[0.5, 2.0], thresholds=[0.0, 0.1, 0.3, 0.5, 0.7, 0.9],
            scaling=[0.3, 1.0], bbox_layout="xyXY", allow_no_crop=True, num_attempts=50)
        images = fn.decoders.image_slice(jpegs, anchor, shape, device="cpu", output_type=types.RGB)
        zoomed = fn.paste(images, ratio=1.5, fill_value=(104, 117, 123), paste_x=0.25, paste_y=0.75)
        coin = fn.random.coin_flip(probability=0.5)
        images = fn.flip(images, horizontal=coin)
        boxes = fn.bb_flip(boxes, ltrb=True, horizontal=coin)
        images = fn.resize(images, resize_x=300, resize_y=300)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD])
        zoomed_boxes = fn.bbox_paste(boxes, ratio=1.5, paste_x=0.25, paste_y=0.75, ltrb=True)
        zoomed = fn.resize(zoomed, resize_x=150, resize_y=150)
        encoded_boxes, encoded_labels = fn.box_encoder(boxes, labels, anchors=anchors, criteria=0.5)
        return images, encoded_boxes, encoded_labels, zoomed, zoomed_boxes

    pipe = ssd()
    pipe.build()
    return pipe


def _sample_root(count: int) -> str:
    """The built-in sample folder at its default size; a smaller or larger count gets its own folder of
    ``count`` JPEGs under the temporary folder (the built-in one may already hold more images than asked for,
    and a reader reads them all)."""
    import tempfile

    from fastload.sample_data import make_sample_folder, sample_folder
    if count == SAMPLE_IMAGES:
        return sample_folder(count)
    return str(make_sample_folder(os.path.join(tempfile.gettempdir(), f"fastload-bench-sample-{count}"), count))


def _gallery_pipeline(lib, root: str, batch_size: int, workers: int):
    """DALI's augmentation gallery chained on each sample (see the module docstring), with ``lib``'s
    operators over the image folder ``root``."""
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=batch_size, num_threads=workers, device_id=None, seed=12)
    def gallery():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        images = fn.brightness_contrast(images, brightness=fn.random.uniform(range=[0.7, 1.3]),
                                        contrast=fn.random.uniform(range=[0.7, 1.3]))
        images = fn.hue(images, hue=fn.random.uniform(range=[-30.0, 30.0]))
        images = fn.saturation(images, saturation=fn.random.uniform(range=[0.5, 1.5]))
        images = fn.color_twist(images, brightness=1.1, contrast=0.9, hue=10.0, saturation=1.2)
        images = fn.rotate(images, angle=fn.random.uniform(range=[-30.0, 30.0]), fill_value=0)
        images = fn.flip(images, horizontal=fn.random.coin_flip(probability=0.5))
        images = fn.water(images)
        images = fn.sphere(images)
        images = fn.jpeg_compression_distortion(images, quality=50)
        images = fn.gaussian_blur(images, window_size=5)
        images = fn.erase(images, anchor=[0.3, 0.3], shape=[0.4, 0.4], normalized=True, axis_names="HW",
                          fill_value=118)
        images = fn.grid_mask(images, ratio=0.4, tile=64, angle=fn.random.uniform(range=[0.0, 1.0]))
        images = fn.resize(images, resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD])
        return images, labels

    pipe = gallery()
    pipe.build()
    return pipe


def _geometry_pipeline(lib, root: str, batch_size: int, workers: int):
    """A resize/warp chain (see the module docstring) with ``lib``'s operators over the image folder
    ``root``."""
    fn, types = lib.fn, lib.types
    # a mild perspective (output to input, DALI's default inverse mapping), row-major 3x3
    perspective = [1.0, 0.05, 0.0, 0.02, 1.0, 0.0, 0.0001, 0.0002, 1.0]

    @lib.pipeline_def(batch_size=batch_size, num_threads=workers, device_id=None, seed=12)
    def geometry():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_shorter=256, antialias=True)
        rotation = fn.transforms.rotation(angle=fn.random.uniform(range=[-15.0, 15.0]), center=[128, 128])
        scale = fn.transforms.scale(scale=fn.random.uniform(range=[0.9, 1.1], shape=[2]), center=[128, 128])
        translation = fn.transforms.translation(offset=fn.random.uniform(range=[-16.0, 16.0], shape=[2]))
        matrix = fn.transforms.combine(rotation, scale, translation)
        images = fn.warp_affine(images, matrix=matrix, fill_value=0, inverse_map=False)
        images = fn.rotate(images, angle=fn.random.uniform(range=[-10.0, 10.0]), fill_value=0, keep_size=True)
        images = fn.experimental.warp_perspective(images, matrix=perspective, fill_value=0)
        images = fn.crop(images, crop=(224, 224))
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD])
        return images, labels

    pipe = geometry()
    pipe.build()
    return pipe


class _RunBatches:
    """A pipeline read with ``run()`` as ``measure`` reads a loader: its first two outputs per batch (images
    and encoded boxes, or images and labels); an epoch is the reader's epoch size in whole batches."""

    def __init__(self, pipe, batch_size: int):
        import numpy as np
        self.pipe, self.batch_size, self.np = pipe, batch_size, np
        meta = pipe.reader_meta("Reader")
        self.batches = max(1, meta["epoch_size"] // batch_size)
        loader = getattr(pipe, "_loader", None)
        self.stats = loader.stats if loader is not None else None

    def __len__(self) -> int:
        return self.batches

    def __iter__(self):
        for _ in range(self.batches):
            images, second, *_others = self.pipe.run()
            yield self.np.asarray(images.as_tensor()), self.np.asarray(second.as_tensor())


def _resnet50_pipeline(lib, root: str, batch_size: int, workers: int):
    @lib.pipeline_def(batch_size=batch_size, num_threads=workers, device_id=None, seed=12)
    def create_dali_pipeline(data_dir, crop):
        images, labels = lib.fn.readers.file(file_root=data_dir, random_shuffle=True, pad_last_batch=True,
                                             name="Reader")
        images = lib.fn.decoders.image_random_crop(images, device="cpu", output_type=lib.types.RGB,
                                                   random_aspect_ratio=[0.8, 1.25], random_area=[0.1, 1.0],
                                                   num_attempts=100)
        images = lib.fn.resize(images, device="cpu", resize_x=crop, resize_y=crop,
                               interp_type=lib.types.INTERP_TRIANGULAR)
        mirror = lib.fn.random.coin_flip(probability=0.5)
        images = lib.fn.crop_mirror_normalize(images, dtype=lib.types.FLOAT, output_layout="CHW",
                                              crop=(crop, crop), mean=[m * 255 for m in MEAN],
                                              std=[s * 255 for s in STD], mirror=mirror)
        return images, labels

    pipe = create_dali_pipeline(data_dir=root, crop=224)
    pipe.build()
    return pipe


class _IteratorBatches:
    """A DALI-style iterator as ``measure`` reads a loader: (images, labels) batches, len, batch_size."""

    def __init__(self, iterator, batch_size: int, stats=None):
        self.iterator, self.batch_size, self.stats = iterator, batch_size, stats

    def __len__(self) -> int:
        return len(self.iterator)

    def __iter__(self):
        for outputs in self.iterator:
            yield outputs[0]["data"], outputs[0]["label"]


def _rocal_train_pipeline(root: str, batch_size: int, workers: int, **fastload_args):
    """train_pipeline of rocAL's ImageNet training example, as that script defines it (crop 224)."""
    import fastload.compat.rocal.fn as fn
    import fastload.compat.rocal.types as types
    from fastload.compat.rocal.pipeline import Pipeline
    pipe = Pipeline(batch_size=batch_size, num_threads=workers, device_id=0, seed=10, rocal_cpu=True,
                    tensor_dtype=types.FLOAT, tensor_layout=types.NCHW, prefetch_queue_depth=6,
                    mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD], output_memory_type=types.HOST_MEMORY,
                    **fastload_args)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=root)
        decode = fn.decoders.image_slice(jpegs, output_type=types.RGB, file_root=root, shard_id=0, num_shards=1,
                                         random_shuffle=True)
        res = fn.resize(decode, resize_width=224, resize_height=224, output_layout=types.NHWC,
                        output_dtype=types.UINT8, interpolation_type=types.TRIANGULAR_INTERPOLATION)
        flip_coin = fn.random.coin_flip(probability=0.5)
        cmnp = fn.crop_mirror_normalize(res, output_layout=types.NCHW, output_dtype=types.FLOAT, crop=(224, 224),
                                        mirror=flip_coin, mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD])
        pipe.set_outputs(cmnp)
    pipe.build()
    return pipe


class _RocalBatches:
    """rocAL's PyTorch iterator as ``measure`` reads a loader: (images, labels) batches, len, batch_size."""

    def __init__(self, iterator, batch_size: int):
        self.iterator, self.batch_size = iterator, batch_size

    def __len__(self) -> int:
        return len(self.iterator)

    def __iter__(self):
        for (images,), labels in self.iterator:
            yield images, labels


def _make_loader(name: str, root: str, batch_size: int, workers: int):
    import torch

    import fastload
    for loaders, build in ((DETECTION_LOADERS, _detection_pipeline), (GALLERY_LOADERS, _gallery_pipeline),
                           (GEOMETRY_LOADERS, _geometry_pipeline)):
        if name in loaders:  # (real DALI's name, fastload.compat.dali's name)
            if name == loaders[0]:
                import nvidia.dali as lib
            else:
                import fastload.compat.dali as lib
            return _RunBatches(build(lib, root, batch_size, workers), batch_size)
    if name.startswith("fastload.compat.rocal"):  # "+dct": with fastload's dct_scaling="auto"
        from fastload.compat.rocal.plugin.pytorch import ROCALClassificationIterator
        extra = {"dct_scaling": "auto"} if name.endswith("+dct") else {}
        return _RocalBatches(ROCALClassificationIterator(_rocal_train_pipeline(root, batch_size, workers, **extra)),
                             batch_size)
    if name == "fastload-rocal-recipe":  # rocAL's image_slice window: area [0.08, 1], aspect [0.75, 1.33333]
        t = fastload.transforms
        transform = t.Compose([t.RandomResizedCrop(224, scale=(0.08, 1.0), ratio=(0.75, 1.33333)),
                               t.RandomHorizontalFlip(), t.ToDtype(torch.float32, scale=True), t.Normalize(MEAN, STD)])
        return fastload.DataLoader(fastload.ImageFolder(root, transform), batch_size=batch_size, shuffle=True,
                                   num_workers=workers)
    if name == "fastload":
        t = fastload.transforms
        transform = t.Compose([t.RandomResizedCrop(224, scale=(0.1, 1.0), ratio=(0.8, 1.25)),
                               t.RandomHorizontalFlip(), t.ToDtype(torch.float32, scale=True), t.Normalize(MEAN, STD)])
        return fastload.DataLoader(fastload.ImageFolder(root, transform), batch_size=batch_size, shuffle=True,
                                   num_workers=workers)
    if name == "dali":
        import nvidia.dali as lib
        from nvidia.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy
    else:
        import fastload.compat.dali as lib
        from fastload.compat.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy
    pipe = _resnet50_pipeline(lib, root, batch_size, workers)
    iterator = DALIClassificationIterator(pipe, reader_name="Reader", auto_reset=True,
                                          last_batch_policy=LastBatchPolicy.PARTIAL)
    return _IteratorBatches(iterator, batch_size, getattr(pipe, "loader", None) and pipe.loader.stats)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", help="ImageFolder root (default: the built-in sample)")
    parser.add_argument("--images", type=int, default=SAMPLE_IMAGES, help="size of the generated sample")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after one warm-up epoch")
    parser.add_argument("--loaders", help=f"default: {','.join(LOADERS)}; with --pipeline detection, "
                                          f"{','.join(DETECTION_LOADERS)}; gallery, {','.join(GALLERY_LOADERS)}; "
                                          f"geometry, {','.join(GEOMETRY_LOADERS)}")
    parser.add_argument("--pipeline", choices=("resnet50", "detection", "gallery", "geometry"), default="resnet50")
    parser.add_argument("--coco-images", type=int, default=500, help="size of the generated COCO set "
                                                                     "(--pipeline detection)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of every loader, alternating their order")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one loader, print JSON
    args = parser.parse_args(argv)

    if args.one:
        loader = _make_loader(args.one, args.root, args.batch_size, args.workers)
        print(json.dumps(measure(args.one, loader, args.epochs, "cpu", True)))
        return 0
    root = args.root
    if args.pipeline == "detection":  # a folder holding images/ and instances.json
        root = os.path.dirname(coco_sample(args.coco_images, root)[0])
    elif args.pipeline in ("gallery", "geometry") and root is None:
        root = _sample_root(args.images)
    elif root is None:
        from fastload.sample_data import sample_folder
        root = sample_folder(args.images)
    defaults = {"resnet50": LOADERS, "detection": DETECTION_LOADERS, "gallery": GALLERY_LOADERS,
                "geometry": GEOMETRY_LOADERS}[args.pipeline]
    names = (args.loaders or ",".join(defaults)).split(",")
    peer = defaults[0]  # real DALI
    rounds = []
    for round_number in range(args.rounds):
        order = names if round_number % 2 == 0 else names[::-1]
        results = {}
        for name in order:
            command = [sys.executable, os.path.abspath(__file__), root, "--one", name, "--batch-size",
                       str(args.batch_size), "--workers", str(args.workers), "--epochs", str(args.epochs)]
            results[name] = run_in_child(name, command)
        rounds.append(results)
    print(f"\nmachine: {machine()}")
    what = {"detection": "DALI's SSD training chain (coco reader, random_bbox_crop, image_slice, paste + "
                         "bbox_paste, flip + bb_flip, resize 300, crop_mirror_normalize, box_encoder)",
            "resnet50": "DALI's ResNet-50 training pipeline (random-crop decode, resize 224, crop_mirror_normalize "
                        "float32 CHW, coin-flip mirror)",
            "gallery": "DALI's augmentation gallery chained (brightness_contrast, hue, saturation, color_twist, "
                       "rotate, flip, water, sphere, jpeg_compression_distortion, gaussian_blur, erase, grid_mask, "
                       "resize 224, crop_mirror_normalize)",
            "geometry": "a resize/warp chain (resize_shorter 256 antialias, warp_affine by combined "
                        "rotation/scale/translation transforms, rotate, experimental.warp_perspective, crop 224, "
                        "crop_mirror_normalize)"}[args.pipeline]
    print(f"data: {root}; batch {args.batch_size}, {args.workers} threads; {what}; "
          f"{args.epochs} timed epochs, {args.rounds} rounds\n")
    width = max(22, *(len(name) for name in names))
    print(f"{'round':<6} " + " ".join(f"{name:>{width}}" for name in names) + " (images/s)")
    for number, results in enumerate(rounds, 1):
        print(f"{number:<6} " + " ".join(f"{results[name]['images_per_s']:>{width}.0f}" for name in names))
    print(f"\n{'loader':<{width}} {'median img/s':>12} {'vs DALI':>8} {'vs native':>10} {'peak memory MB':>15}")
    for name in names:
        def ratio(peer):
            if peer not in names:
                return "-"
            values = [r[name]["images_per_s"] / r[peer]["images_per_s"] for r in rounds]
            return f"{statistics.median(values):.2f}x"
        median = statistics.median(r[name]["images_per_s"] for r in rounds)
        peak = max(r[name]["peak_mb"] for r in rounds)
        native = "fastload-rocal-recipe" if name in ROCAL_LOADERS else "fastload"
        print(f"{name:<{width}} {median:>12.0f} {ratio(peer):>8} {ratio(native):>10} {peak:>15.0f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": machine(), "rounds": rounds}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
