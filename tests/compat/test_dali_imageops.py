"""fastload.compat.dali.imageops against real DALI's CPU operators on the same inputs.

Each test runs one or a few DALI pipelines (device_id=None: CPU only) over a batch of awkward
images and compares sample by sample. Unless a test says otherwise the measured difference is
zero: the functions reproduce DALI's float32 arithmetic, rounding and border rules bit for bit.
"""

import io
import random
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import TESTDATA
from fastload.compat.dali import imageops
from fastload.rng import SampleRandom
from fastload.sample_data import make_image

try:  # the tests that run DALI take the ``dali`` fixture (conftest.py): without DALI they skip, the others run
    from nvidia.dali import fn, pipeline_def, types
except ImportError:
    fn = pipeline_def = types = None

PHOTOS = TESTDATA / "photos" / "hymenoptera_subset"
needs_photos = pytest.mark.skipif(not PHOTOS.is_dir(), reason="shared test data (photos) not present")

INTERP = DALI_TYPES = {}
if types is not None:
    INTERP = {"nn": types.INTERP_NN, "linear": types.INTERP_LINEAR, "cubic": types.INTERP_CUBIC,
              "lanczos3": types.INTERP_LANCZOS3, "triangular": types.INTERP_TRIANGULAR,
              "gaussian": types.INTERP_GAUSSIAN}
    DALI_TYPES = {torch.uint8: types.UINT8, torch.int8: types.INT8, torch.uint16: types.UINT16,
                  torch.int16: types.INT16, torch.uint32: types.UINT32, torch.int32: types.INT32,
                  torch.uint64: types.UINT64, torch.int64: types.INT64, torch.float16: types.FLOAT16,
                  torch.float32: types.FLOAT, torch.float64: types.FLOAT64, torch.bool: types.BOOL}


def run_dali(inputs, build, layout="HWC", seed=None):
    """Run ``build(*nodes)`` once over a batch; ``inputs`` is a list of per-input sample lists.
    Returns one list of numpy samples per pipeline output."""
    batch = len(inputs[0])

    @pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=seed if seed is not None else -1)
    def pipe():
        nodes = [fn.external_source(source=(lambda samples: lambda: samples)(samples), batch=True,
                                    layout=layout if k == 0 and layout else None)
                 for k, samples in enumerate(inputs)]
        out = build(*nodes)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    p = pipe()
    p.build()
    outputs = p.run()
    return [[np.array(o.at(i)) for i in range(batch)] for o in outputs]


def jpeg_bytes(image: Image.Image, quality: int = 90) -> bytes:
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return out.getvalue()


def synthetic(seed: int, width: int, height: int) -> np.ndarray:
    """A photo-like image as decoded from a quality-90 JPEG."""
    return np.array(Image.open(io.BytesIO(jpeg_bytes(make_image(seed, width, height)))).convert("RGB"))


def noise(seed: int, height: int, width: int, channels: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, channels), dtype=np.uint8)


def max_diff(mine: torch.Tensor, theirs: np.ndarray) -> float:
    assert tuple(mine.shape) == theirs.shape, (tuple(mine.shape), theirs.shape)
    if mine.numel() == 0:
        return 0.0
    a = mine.double().numpy() if mine.dtype not in (torch.uint16, torch.uint32, torch.uint64) \
        else mine.to(torch.float64).numpy()
    return float(np.abs(a - theirs.astype(np.float64)).max())


# Photos with every JPEG flavour of the set: 4:2:0, 4:4:4, progressive, tall, odd sizes
PHOTO_NAMES = ["train/ants/ant photos.jpg", "train/ants/formica.jpeg", "train/ants/swiss-army-ant.jpg",
               "train/bees/205835650_e6f2614bee.jpg", "val/ants/Ant-1818.jpg", "train/ants/0013035.jpg",
               "val/bees/149973093_da3c446268.jpg", "val/ants/F.pergan.28(f).jpg"]


def photo_paths():
    return [PHOTOS / name for name in PHOTO_NAMES if (PHOTOS / name).is_file()]


def photo_crops(count: int):
    """Awkwardly sized crops of real photos (the resampling cost grows with the pixels)."""
    sizes = [(193, 257), (131, 97), (120, 181), (77, 230), (211, 149)]
    crops = []
    for path, (h, w) in zip(photo_paths(), sizes[:count]):
        image = np.array(Image.open(path).convert("RGB"))
        crops.append(np.ascontiguousarray(image[:h, :w]))
    return crops


# ---------------------------------------------------------------------------------------------
# decode


@needs_photos
def test_decode_matches_dalis_cpu_decoder(dali):
    # JPEG photos (4:2:0, 4:4:4, progressive; all 45 JPEGs of the set were measured too) and
    # EXIF-rotated JPEGs: measured bit-exact for all four output types. Known differences, not
    # tested: CMYK JPEGs (+-1, Pillow's CMYK->RGB; +-2 for GRAY), GRAY of PNGs (DALI's differs by
    # up to 44 levels), a 16-bit APNG, and which corrupt JPEGs each library still decodes.
    paths = photo_paths() + sorted((TESTDATA / "jpeg_zoo").glob("pil__hopper_orientation_*.jpg"))
    datas = [np.frombuffer(p.read_bytes(), dtype=np.uint8) for p in paths]
    kinds = ["RGB", "BGR", "GRAY", "YCbCr"]
    outputs = run_dali([datas], lambda d: [fn.decoders.image(d, device="cpu", output_type=getattr(types, k))
                                           for k in kinds], layout=None)
    for kind, decoded in zip(kinds, outputs):
        for path, data, theirs in zip(paths, datas, decoded):
            assert max_diff(imageops.decode(data.tobytes(), kind), theirs) == 0, (kind, path.name)


def test_decode_refuses_what_dali_refuses():
    gif = io.BytesIO()
    make_image(1, 20, 10).save(gif, "GIF")
    with pytest.raises(ValueError, match="GIF is not a format DALI decodes"):
        imageops.decode(gif.getvalue())
    with pytest.raises(ValueError, match="unknown image format"):
        imageops.decode(b"definitely not an image")
    with pytest.raises(ValueError, match="cannot decode image"):
        imageops.decode(jpeg_bytes(make_image(2, 64, 48))[:300])
    with pytest.raises(ValueError, match="output_type"):
        imageops.decode(jpeg_bytes(make_image(2, 8, 8)), "HSV")


# ---------------------------------------------------------------------------------------------
# random crop windows


def ks_statistic(a, b) -> float:
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    below_a, below_b = np.searchsorted(a, grid, "right") / len(a), np.searchsorted(b, grid, "right") / len(b)
    return float(np.max(np.abs(below_a - below_b)))


def generator_kwargs(kwargs):
    return dict(area=tuple(kwargs.get("random_area", (0.08, 1.0))),
                aspect_ratio=tuple(kwargs.get("random_aspect_ratio", (3 / 4, 4 / 3))),
                num_attempts=kwargs.get("num_attempts", 10))


def test_random_crop_window_distribution_matches_dali(dali):
    # Philox vs SplitMix64: compare distributions. Two-sample KS over 3000 windows each; the
    # measured statistics are 0.007-0.03 (the 1% critical value is 0.042).
    n = 3000
    cases = [((480, 640), {}), ((100, 37), {}), ((7, 5), {}),  # (7, 5): granular, 9 window shapes
             ((300, 300), dict(random_area=[0.3, 0.6], random_aspect_ratio=[0.5, 2.0]))]
    outs = run_dali([[np.array(shape, np.int64)] * n for shape, _ in cases],
                    lambda *nodes: [x for node, (_, kwargs) in zip(nodes, cases)
                                    for x in fn.random_crop_generator(node, **kwargs)],
                    layout=None, seed=1234)
    for k, ((height, width), kwargs) in enumerate(cases):
        anchors, shapes = outs[2 * k], outs[2 * k + 1]
        theirs = np.array([np.r_[a, s] for a, s in zip(anchors, shapes)], dtype=np.float64)
        mine = np.array([imageops.random_crop_window(height, width, SampleRandom(7, 0, i), **generator_kwargs(kwargs))
                         for i in range(n)], dtype=np.float64)
        for name, column in [("area", lambda w: w[:, 2] * w[:, 3]), ("aspect", lambda w: np.log(w[:, 3] / w[:, 2])),
                             ("y", lambda w: (w[:, 0] + 0.5) / (height - w[:, 2] + 1)),
                             ("x", lambda w: (w[:, 1] + 0.5) / (width - w[:, 3] + 1))]:
            assert ks_statistic(column(theirs), column(mine)) < 0.045, (height, width, kwargs, name)


def test_random_crop_window_fallbacks_match_dali(dali):
    cases = [((10, 200), {}, (10, 13)),  # too wide for any 3/4..4/3 window: full height, int(10 * 4/3) wide
             ((33, 1000), dict(random_area=[0.5, 1.0]), (33, 44)),  # 44 needs DALI's float32 4/3, not 1.333333
             ((1000, 9), {}, (12, 9)),  # too tall
             ((20, 20), dict(random_area=[0.9, 1.0], random_aspect_ratio=[1.2, 1.5], num_attempts=3), (16, 20))]
    outs = run_dali([[np.array(shape, np.int64)] * 50 for shape, _, _ in cases],
                    lambda *nodes: [fn.random_crop_generator(node, **kwargs)[1]
                                    for node, (_, kwargs, _) in zip(nodes, cases)],
                    layout=None, seed=99)
    for (shape, kwargs, window), shapes in zip(cases, outs):
        mine = {imageops.random_crop_window(*shape, SampleRandom(3, 0, i), **generator_kwargs(kwargs))[2:]
                for i in range(50)}
        assert {tuple(s) for s in shapes} == mine == {window}, shape


def test_image_random_crop_window_sizes_match_dali(dali):
    # fn.decoders.image_random_crop uses the same generator: the decoded crops' sizes.
    n = 1500
    data = np.frombuffer(jpeg_bytes(make_image(5, 97, 61)), dtype=np.uint8)
    crops, = run_dali([[data] * n], lambda d: fn.decoders.image_random_crop(d, device="cpu"), layout=None, seed=5)
    theirs = np.array([c.shape[:2] for c in crops], dtype=np.float64)
    mine = np.array([imageops.random_crop_window(61, 97, SampleRandom(11, 0, i))[2:] for i in range(n)],
                    dtype=np.float64)
    assert ks_statistic(theirs[:, 0] * theirs[:, 1], mine[:, 0] * mine[:, 1]) < 0.06
    assert ks_statistic(np.log(theirs[:, 1] / theirs[:, 0]), np.log(mine[:, 1] / mine[:, 0])) < 0.06


def test_random_resized_crop_is_a_region_resize(dali):
    # fn.random_resized_crop resamples the window as a region of the whole image (edge taps read
    # pixels outside it): resize(roi_start, roi_end) reproduces it exactly, crop-then-resize not.
    # A 64x50 image with area 50*50 and ratio 1 leaves only the vertical offset (0..14) to find.
    image = synthetic(3, 50, 64)
    outs, = run_dali([[image] * 10], lambda d: fn.random_resized_crop(d, size=[37, 29], random_area=[2500 / 3200] * 2,
                                                                      random_aspect_ratio=[1.0, 1.0]), seed=3)
    t = torch.from_numpy(image)
    for theirs in outs:
        region = [y for y in range(15) if max_diff(imageops.resize(t, size=(37, 29), roi_start=(y, 0),
                                                                   roi_end=(y + 50, 50)), theirs) == 0]
        cropped = [y for y in range(15) if max_diff(imageops.resize(t[y:y + 50], size=(37, 29)), theirs) == 0]
        assert len(region) == 1 and not cropped


# ---------------------------------------------------------------------------------------------
# resize


SIZE_CASES = [
    dict(resize_x=37), dict(resize_y=23.5), dict(resize_x=41, resize_y=19), dict(resize_shorter=31),
    dict(resize_longer=47), dict(size=(29, 0)), dict(size=(0, 53)), dict(size=(33, 44), mode="not_larger"),
    dict(size=(33, 44), mode="not_smaller"), dict(size=(33, 0), mode="stretch"),
    dict(resize_shorter=40, max_size=60), dict(size=(50, 50), mode="not_smaller", max_size=(70, 55)),
    dict(resize_x=31, max_size=25), dict(resize_x=-37, resize_y=20), dict(resize_x=121, resize_y=7.3),
    dict(size=(17.49, 16.5)), dict(resize_shorter=224), dict(resize_longer=1000.5, max_size=900),
]
AWKWARD = [(1, 1), (1, 57), (63, 1), (2, 3), (97, 13), (13, 97), (101, 103), (331, 7), (7, 331), (480, 640),
           (641, 479), (250, 251), (1000, 3), (89, 144), (233, 377)]


def as_dali_args(kwargs):
    return {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}


def test_resize_output_size_matches_dali(dali):
    images = [np.zeros((h, w, 1), np.uint8) for h, w in AWKWARD]
    outs = run_dali([images], lambda d: [fn.resize(d, interp_type=types.INTERP_NN, **as_dali_args(kwargs))
                                         for kwargs in SIZE_CASES])
    for kwargs, results in zip(SIZE_CASES, outs):
        for (h, w), theirs in zip(AWKWARD, results):
            assert imageops.resize_output_size(h, w, **kwargs) == theirs.shape[:2], (h, w, kwargs)


@needs_photos
def test_resize_matches_dali_on_photos(dali):
    # Down- and upscaling real photos with each filter: measured bit-exact, uint8 and float32
    # (uint8 needs DALI's pass order and its SSE blocks' round-half-to-even reproduced).
    images = photo_crops(3)
    sizes = [dict(resize_shorter=97), dict(resize_x=331), dict(size=(224, 224)), dict(resize_longer=150),
             dict(resize_x=150, resize_y=113.3)]
    variants = [dict(), dict(interp_type="nn"), dict(interp_type="cubic"), dict(interp_type="lanczos3"),
                dict(interp_type="triangular"), dict(antialias=False), dict(dtype=torch.float32)]
    cases = [dict(**v, **k) for k in sizes for v in variants]

    def build(d):
        return [fn.resize(d, **{k: INTERP[x] if k == "interp_type" else types.FLOAT if k == "dtype" else x
                                for k, x in as_dali_args(case).items()}) for case in cases]

    for case, outs in zip(cases, run_dali([images], build)):
        for image, theirs in zip(images, outs):
            assert max_diff(imageops.resize(torch.from_numpy(image), **case), theirs) == 0, case


def test_resize_filters_and_modes_on_small_images_match_dali(dali):
    # every filter and argument combination, on noise of awkward small sizes
    images = [noise(i, h, w) for i, (h, w) in enumerate([(1, 1), (1, 57), (63, 1), (2, 3), (97, 13), (13, 97),
                                                         (40, 41), (29, 64)])]
    cases = [dict(resize_x=41, resize_y=19, interp_type="gaussian"), dict(resize_shorter=31, antialias=False),
             dict(size=(33, 44), mode="not_smaller", interp_type="lanczos3"), dict(resize_x=-37, resize_y=20),
             dict(resize_x=121, resize_y=7.3, interp_type="cubic", antialias=False),
             dict(size=(17.49, 16.5), interp_type="triangular"), dict(resize_y=23.5, interp_type="nn"),
             dict(resize_x=30, resize_y=50, min_filter="linear", mag_filter="cubic"),
             dict(resize_x=30, resize_y=50, min_filter="lanczos3", mag_filter="nn", dtype=torch.float32)]

    def build(d):
        return [fn.resize(d, **{k: INTERP[v] if k in ("interp_type", "min_filter", "mag_filter") else
                                types.FLOAT if k == "dtype" else v for k, v in as_dali_args(c).items()})
                for c in cases]

    for case, outs in zip(cases, run_dali([images], build)):
        for image, theirs in zip(images, outs):
            assert max_diff(imageops.resize(torch.from_numpy(image), **case), theirs) == 0, case


def test_resize_regions_match_dali(dali):
    # random sizes, regions (some reversed: flips), fractional and missing output extents
    rnd = random.Random(9)
    images, starts, ends, sizes = [], [], [], []
    for i in range(40):
        h, w = rnd.randint(2, 80), rnd.randint(2, 80)
        images.append(noise(i, h, w))
        start = [rnd.uniform(0, h * 0.6), rnd.uniform(0, w * 0.6)]
        end = [rnd.uniform(start[0] + 0.5, h), rnd.uniform(start[1] + 0.5, w)]
        for d in range(2):
            if rnd.random() < 0.3:
                start[d], end[d] = end[d], start[d]
        starts.append(np.array(start, np.float32))
        ends.append(np.array(end, np.float32))
        sizes.append(np.array([rnd.uniform(1, 120), rnd.choice([0.0, rnd.uniform(1, 120)])], np.float32))
    interps = ["linear", "cubic", "lanczos3", "nn"]
    outs = run_dali([images, starts, ends, sizes],
                    lambda d, a, b, s: [fn.resize(d, roi_start=a, roi_end=b, size=s, interp_type=INTERP[interp])
                                        for interp in interps])
    for interp, results in zip(interps, outs):
        for image, start, end, size, theirs in zip(images, starts, ends, sizes, results):
            mine = imageops.resize(torch.from_numpy(image), roi_start=tuple(start.tolist()),
                                   roi_end=tuple(end.tolist()), size=tuple(size.tolist()), interp_type=interp)
            assert max_diff(mine, theirs) == 0, interp


# ---------------------------------------------------------------------------------------------
# crop, flip, crop_mirror_normalize

CROP_IMAGES = [(10, 10), (11, 13), (31, 7), (64, 33), (100, 101)]


CROP_CASES = [
    dict(crop_h=3, crop_w=2, crop_pos_x=0.3, crop_pos_y=0.77),
    dict(crop_h=4, crop_w=6),  # odd remainders: anchors round half away from zero
    dict(crop_h=3, crop_w=3, rounding="truncate"),
    dict(crop_h=15, crop_w=12, out_of_bounds_policy="pad", fill_values=[7, 8, 9]),
    dict(crop_h=15, crop_w=12, out_of_bounds_policy="trim_to_shape"),
    # fill values are C-cast to the output type: 300 wraps to 44 in uint8 (measured)
    dict(crop_h=15.7, crop_w=2.9, out_of_bounds_policy="pad", fill_values=300, crop_pos_x=0.1, crop_pos_y=0.9),
    dict(crop_h=5, crop_w=0),  # 0: the whole axis
]


def test_crop_matches_dali(dali):
    images = [noise(i, h, w) for i, (h, w) in enumerate(CROP_IMAGES)]
    cases = [(kwargs, dtype) for kwargs in CROP_CASES for dtype in (None, torch.float32)]
    outs = run_dali([images], lambda d: [fn.crop(d, **as_dali_args(kwargs), **({"dtype": types.FLOAT} if dtype else {}))
                                         for kwargs, dtype in cases])
    for (kwargs, dtype), results in zip(cases, outs):
        for image, theirs in zip(images, results):
            assert max_diff(imageops.crop(torch.from_numpy(image), dtype=dtype, **kwargs), theirs) == 0, kwargs


def test_crop_out_of_bounds_error_names_the_sizes(dali):
    with pytest.raises(Exception, match="out of bounds"):
        run_dali([[noise(0, 4, 4)]], lambda d: fn.crop(d, crop_h=7, crop_w=3))
    with pytest.raises(ValueError, match=r"\(4, 4\).*\(-2, 1\).*\(7, 3\)"):
        imageops.crop(torch.from_numpy(noise(0, 4, 4)), crop_h=7, crop_w=3)
    with pytest.raises(ValueError, match="crop_pos_x"):
        imageops.crop(torch.from_numpy(noise(0, 4, 4)), crop_h=2, crop_w=2, crop_pos_x=1.5)


def test_flip_matches_dali(dali):
    images = [noise(i, h, w) for i, (h, w) in enumerate(CROP_IMAGES)]
    cases = [dict(), dict(horizontal=0, vertical=1), dict(horizontal=1, vertical=1), dict(horizontal=0)]
    for case, outs in zip(cases, run_dali([images], lambda d: [fn.flip(d, **c) for c in cases])):
        for image, theirs in zip(images, outs):
            assert max_diff(imageops.flip(torch.from_numpy(image), **case), theirs) == 0
    chw = [np.ascontiguousarray(i.transpose(2, 0, 1)) for i in images]
    for case, outs in zip(cases, run_dali([chw], lambda d: [fn.flip(d, **c) for c in cases], layout="CHW")):
        for image, theirs in zip(chw, outs):
            assert max_diff(imageops.flip(torch.from_numpy(image), layout="CHW", **case), theirs) == 0


IMAGENET = dict(mean=[0.485 * 255, 0.456 * 255, 0.406 * 255], std=[0.229 * 255, 0.224 * 255, 0.225 * 255])


CMN_CASES = [
    dict(), dict(crop_h=5, crop_w=6, mirror=True), IMAGENET, dict(IMAGENET, scale=64, shift=128),
    dict(mean=128.0, std=64.0, scale=0.5, shift=0.25), dict(mean=300, std=0.01),  # float16 ties, saturation
    dict(crop_h=9, crop_w=9, pad_output=True, mirror=True, mean=[1, 2, 3], std=[2, 3, 4], out_of_bounds_policy="pad"),
    dict(crop_h=12, crop_w=12, out_of_bounds_policy="pad", fill_values=[9, 8, 7], mean=[100] * 3, std=[50] * 3),
    dict(crop_h=12, crop_w=12, out_of_bounds_policy="pad", fill_values=3, pad_output=True),
    dict(crop_pos_x=0.2, crop_pos_y=0.8, crop_h=4, crop_w=3, output_layout="HWC"),
]


def test_crop_mirror_normalize_matches_dali(dali):
    # Not tested: per-channel fill_values with scalar mean/std, where DALI 2.4 normalises channels
    # 1.. with garbage (it indexes its one-element mean/std per channel); here every channel uses them.
    images = [noise(i, h, w) for i, (h, w) in enumerate(CROP_IMAGES)]
    dtypes = (torch.float32, torch.float16, torch.uint8, torch.int8)
    cases = [(kwargs, dtype) for kwargs in CMN_CASES for dtype in dtypes]
    outs = run_dali([images], lambda d: [fn.crop_mirror_normalize(d, dtype=DALI_TYPES[dtype], **as_dali_args(kwargs))
                                         for kwargs, dtype in cases])
    for (kwargs, dtype), results in zip(cases, outs):
        for image, theirs in zip(images, results):
            mine = imageops.crop_mirror_normalize(torch.from_numpy(image), dtype=dtype, **kwargs)
            assert mine.dtype == dtype and max_diff(mine, theirs) == 0, (kwargs, dtype)


def test_crop_mirror_normalize_chw_input(dali):
    images = [np.ascontiguousarray(noise(i, h, w).transpose(2, 0, 1)) for i, (h, w) in enumerate(CROP_IMAGES)]
    outs, = run_dali([images], lambda d: fn.crop_mirror_normalize(d, crop_h=5, crop_w=3, mirror=True,
                                                                   output_layout="HWC", **IMAGENET), layout="CHW")
    for image, theirs in zip(images, outs):
        mine = imageops.crop_mirror_normalize(torch.from_numpy(image), crop_h=5, crop_w=3, mirror=True,
                                              output_layout="HWC", layout="CHW", **IMAGENET)
        assert max_diff(mine, theirs) == 0


# ---------------------------------------------------------------------------------------------
# rotate


def test_rotate_matches_dali(dali):
    images = [synthetic(7, 161, 121), synthetic(8, 97, 131), noise(1, 11, 13), noise(2, 1, 7), synthetic(9, 150, 40)]
    variants = [dict(), dict(fill_value=0), dict(fill_value=77.6, keep_size=True), dict(size=(50, 61)),
                dict(interp_type="nn", fill_value=3), dict(dtype=torch.float32)]
    cases = [(angle, v) for angle in (0, 10, 33.3, 90, 180, -45) for v in variants]

    def build(d):
        return [fn.rotate(d, angle=angle, **{k: (INTERP[x] if k == "interp_type" else types.FLOAT if k == "dtype"
                                                  else list(x) if isinstance(x, tuple) else x)
                                             for k, x in v.items()}) for angle, v in cases]

    for (angle, variant), outs in zip(cases, run_dali([images], build)):
        for image, theirs in zip(images, outs):
            assert max_diff(imageops.rotate(torch.from_numpy(image), angle, **variant), theirs) == 0, (angle, variant)


def test_rotated_canvas_size_matches_dali(dali):
    # the bounding box and its parity rule, for awkward sizes and angles near the 45-degree switch
    cases = [((h, w), a) for h, w in [(1, 1), (2, 3), (5, 5), (4, 6), (7, 331), (97, 13), (101, 103)]
             for a in [0, 1, 10, 33.3, 44.9, 45, 45.1, 89.99, 90, 135, 180, -45, 270, 300.5]]
    images = [np.zeros((h, w, 1), np.uint8) for (h, w), _ in cases]
    angles = [np.array(a, np.float32) for _, a in cases]
    outs, = run_dali([images, angles], lambda d, a: fn.rotate(d, angle=a, interp_type=types.INTERP_NN))
    for ((h, w), angle), theirs in zip(cases, outs):
        assert imageops.rotated_size(h, w, angle) == theirs.shape[:2], (h, w, angle)


# ---------------------------------------------------------------------------------------------
# colour


def test_color_ops_match_dali(dali):
    images = [synthetic(7, 120, 91), noise(3, 37, 41)]
    floats = [i.astype(np.float32) / 255 for i in images]
    twists = [dict(brightness=1.3), dict(contrast=0.6), dict(hue=30), dict(saturation=0.3),
              dict(hue=-100, saturation=1.6, brightness=1.1, contrast=0.9)]
    hsvs = [dict(hue=45), dict(saturation=0.2), dict(value=1.4), dict(hue=200, saturation=1.5, value=0.7)]
    contrasts = [dict(brightness=1.5), dict(brightness_shift=0.1), dict(contrast=2.0),
                 dict(contrast=0.5, contrast_center=100), dict(brightness=0.7, brightness_shift=-0.05, contrast=1.3)]
    ops = ([(fn.color_twist, imageops.color_twist, k, t) for k in twists for t in (None, torch.float32)]
           + [(fn.hsv, imageops.hsv, k, t) for k in hsvs for t in (None, torch.float32)]
           + [(fn.brightness_contrast, imageops.brightness_contrast, k, t)
              for k in contrasts for t in (None, torch.float32)])

    def build(d):
        return [op(d, **k, **({"dtype": DALI_TYPES[t]} if t else {})) for op, _, k, t in ops]

    for source in (images, floats):
        for (_, mine_op, kwargs, dtype), outs in zip(ops, run_dali([source], build)):
            for image, theirs in zip(source, outs):
                assert max_diff(mine_op(torch.from_numpy(image), dtype=dtype, **kwargs), theirs) == 0, (mine_op, kwargs)
    to_uint8, = run_dali([floats], lambda d: fn.brightness_contrast(d, contrast=1.3, dtype=types.UINT8))
    for image, theirs in zip(floats, to_uint8):
        mine = imageops.brightness_contrast(torch.from_numpy(image), contrast=1.3, dtype=torch.uint8)
        assert max_diff(mine, theirs) == 0


# ---------------------------------------------------------------------------------------------
# cast and type promotion

NUMERIC = [torch.uint8, torch.int8, torch.uint16, torch.int16, torch.uint32, torch.int32, torch.uint64, torch.int64,
           torch.float16, torch.float32, torch.float64, torch.bool]


def cast_inputs():
    rng = np.random.default_rng(0)
    halves = rng.integers(0, 0x7C00, 2000).astype(np.uint16)  # exact float16 midpoints: ties
    low = halves.view(np.float16).astype(np.float64)
    ties = (low + (halves + 1).view(np.float16).astype(np.float64)) / 2
    specials = [0, 1, -1, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, 127.5, 128, 255.5, 256, -128.5, -129, 300.7,
                -300.7, 32767.5, 65535.5, 65536, 70000, -70000, 2 ** 31 - 0.5, 2 ** 31, -2 ** 31 - 1, 4.3e9,
                2 ** 32, 2 ** 53, 1e19, -1e19, 2 ** 63, 1e30, -1e30, 3.3, -3.7, 65519.9, 65520]
    values = {}
    for dtype in NUMERIC:
        name = str(dtype).split(".")[1]
        if dtype.is_floating_point:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values[dtype] = np.concatenate([specials, ties, -ties]).astype(name)
        elif dtype == torch.bool:
            values[dtype] = np.array([0, 1, 1, 0], dtype=bool)
        else:
            info = np.iinfo(name)
            candidates = [0, 1, info.max, info.min, info.max - 1, 127, 128, 255, 256, -1, 7, 65535, 65536,
                          2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1]
            values[dtype] = np.array([v for v in candidates if info.min <= v <= info.max], dtype=name)
    return values


def test_cast_matches_dali_for_every_type_pair(dali):
    values = cast_inputs()
    outs = run_dali([[values[t]] for t in NUMERIC],
                    lambda *nodes: [fn.cast(node, dtype=DALI_TYPES[to]) for node in nodes for to in NUMERIC],
                    layout=None)
    pairs = [(source, to) for source in NUMERIC for to in NUMERIC]
    for (source, to), (theirs,) in zip(pairs, outs):
        mine = imageops.cast(torch.from_numpy(values[source]), to)
        assert mine.dtype == to
        a = mine.to(torch.float64).numpy() if mine.dtype in (torch.uint16, torch.uint32, torch.uint64) \
            else mine.numpy().astype(np.float64)
        b = theirs.astype(np.float64)
        assert np.array_equal(a, b, equal_nan=True), (source, to)


def test_promote_matches_dali_arithmetic(dali):
    # float16 has no CPU arithmetic in DALI; bool / bool is refused.
    dtypes = [t for t in NUMERIC if t != torch.float16]
    values = [[np.ones(3, dtype=str(t).split(".")[1])] for t in dtypes]

    def build(*nodes):
        return [x * y for x in nodes for y in nodes] + \
               [x / y for i, x in enumerate(nodes) for j, y in enumerate(nodes)
                if not dtypes[i] == dtypes[j] == torch.bool]

    outs = run_dali(values, build, layout=None)
    products = outs[:len(dtypes) ** 2]
    quotients = iter(outs[len(dtypes) ** 2:])
    for k, (a, b) in enumerate((a, b) for a in dtypes for b in dtypes):
        assert str(imageops.promote(a, b)).split(".")[1] == str(products[k][0].dtype), (a, b)
        if not a == b == torch.bool:
            assert str(imageops.true_divide_type(a, b)).split(".")[1] == str(next(quotients)[0].dtype), (a, b)
