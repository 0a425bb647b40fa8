import dataclasses

import pytest
import torch
from PIL import Image
from torchvision import transforms as v1
from torchvision.transforms import v2

from fastload import transforms as T
from fastload.kernels.normalize import Normalization
from fastload.transforms import CenterCropGeometry, Draw, UnsupportedTransform, compile_plan

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def test_v1_and_v2_train_recipes_compile_to_the_same_plan_but_for_the_first_op():
    """v1's ToTensor divides by 255 and v2's ToDtype multiplies by 1/255 (different float32 values): the
    plans record which, and the statistics as float32 values, and are otherwise the same."""
    plan_v1 = compile_plan(v1.Compose([v1.RandomResizedCrop(224), v1.RandomHorizontalFlip(),
                                       v1.ToTensor(), v1.Normalize(MEAN, STD)]))
    plan_v2 = compile_plan(v2.Compose([v2.RandomResizedCrop(224), v2.RandomHorizontalFlip(), v2.ToImage(),
                                       v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]))
    plan_fl = compile_plan(T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                                      T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)]))
    assert plan_v2 == plan_fl and plan_v1 != plan_v2
    assert dataclasses.replace(plan_v1, normalization=plan_v2.normalization) == plan_v2
    statistics = ("normalize", tuple(torch.tensor(MEAN).tolist()), tuple(torch.tensor(STD).tolist()))
    assert plan_v1.normalization == Normalization("divide", torch.float32, (statistics,))
    assert plan_v2.normalization == Normalization("multiply", torch.float32, (statistics,))
    assert plan_v1.output_size == (224, 224) and plan_v1.hflip_p == 0.5
    assert plan_v1.scale == pytest.approx([1 / (255 * s) for s in STD])
    assert plan_v1.shift == pytest.approx([-m / s for m, s in zip(MEAN, STD)])


@pytest.mark.parametrize("steps, unit, unit_dtype, value_steps", [
    ([v2.ToImage(), v2.ToDtype(torch.float16, scale=True), v2.Normalize([0.5], [0.25])], "multiply", torch.float16,
     (("normalize", (0.5,) * 3, (0.25,) * 3),)),
    ([v1.ToTensor(), v2.ToDtype(torch.float16), v1.Normalize([0.1], [0.3])], "divide", torch.float32,
     (("to", torch.float16), ("normalize", (0.0999755859375,) * 3, (0.300048828125,) * 3))),
    ([v1.PILToTensor(), v1.ConvertImageDtype(torch.float16)], "divide", torch.float16, ()),
    ([v2.ToImage(), v2.ToDtype(torch.float32), v2.Normalize([127.5], [64.0]), v2.ToDtype(torch.float32)], "none",
     torch.float32, (("normalize", (127.5,) * 3, (64.0,) * 3),)),
    ([v1.ToTensor(), v1.Normalize(MEAN, STD), v2.ToDtype(torch.bfloat16), v1.Normalize([1.0], [2.0])], "divide",
     torch.float32, (("normalize", tuple(torch.tensor(MEAN).tolist()), tuple(torch.tensor(STD).tolist())),
                     ("to", torch.bfloat16), ("normalize", (1.0,) * 3, (2.0,) * 3))),
])
def test_value_steps_are_torchvisions_ops_in_each_dtype(steps, unit, unit_dtype, value_steps):
    """The statistics are Normalize's, converted to the image's dtype of the moment; a float-to-float ToDtype
    is a conversion step, one to the dtype already there none."""
    plan = compile_plan(v2.Compose([v2.CenterCrop(8)] + steps))
    assert plan.normalization == Normalization(unit, unit_dtype, value_steps)


@pytest.mark.parametrize("steps, why", [
    ([v2.ToImage(), v2.ToDtype(torch.float16, scale=True), v2.Normalize([0.5], [1e-8])], "std that is 0"),
    ([v2.ToImage(), v2.ToDtype(torch.float64, scale=True)], "dtype torch.float64"),
    ([v1.ToTensor(), v1.ConvertImageDtype(torch.float64)], "dtype torch.float64"),
    ([v2.ToImage(), v2.ToDtype(torch.float16, scale=True), v2.ColorJitter(0.4)], "color on torch.float16"),
    ([v1.ToTensor(), v2.ColorJitter(0.4), v2.ToDtype(torch.float16), v1.Normalize([0.5], [0.2])],
     "after color operations on floats"),
])
def test_value_steps_it_cannot_compute_exactly_are_refused(steps, why):
    with pytest.raises(UnsupportedTransform, match=why):
        compile_plan(v2.Compose([v2.CenterCrop(8)] + steps))


def test_to_tensor_under_another_default_dtype_is_refused():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with pytest.raises(UnsupportedTransform, match="default dtype"):
            compile_plan(v1.Compose([v1.CenterCrop(8), v1.ToTensor()]))
    finally:
        torch.set_default_dtype(previous)


def test_uint8_and_half_outputs():
    plan = compile_plan(v2.Compose([v2.Resize(256), v2.CenterCrop(224), v2.PILToTensor()]))
    assert plan.scale is None and plan.dtype == torch.uint8 and plan.output_size == (224, 224)
    plan = compile_plan(v1.Compose([v1.CenterCrop((20, 30)), v1.PILToTensor(), v1.ConvertImageDtype(torch.float16)]))
    assert plan.dtype == torch.float16 and plan.scale == pytest.approx([1 / 255] * 3)


@pytest.mark.parametrize("transform, name", [
    (v2.Compose([v2.RandomResizedCrop(8), v2.GaussianBlur(3), v2.ToImage()]), "GaussianBlur"),
    (v2.Compose([v2.ColorJitter(0.4), v2.RandomResizedCrop(8), v2.ToImage()]), "color before the crop"),
    (v2.Compose([v2.RandomResizedCrop(8), v2.Grayscale(1), v2.ToImage()]), "one output channel"),
    (v1.Compose([v1.RandomResizedCrop(8), v1.ColorJitter(0.4), v1.ToTensor()]), "ColorJitter"),
    (v2.Compose([v2.RandomResizedCrop(8), v2.ColorJitter(0.4), T.ToDtype(torch.float32, scale=True),
                 v2.RandomGrayscale()]), "both before and after"),
    (v2.Compose([v2.RandomResizedCrop(8), T.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD),
                 v2.ColorJitter(0.4)]), "not ToDtype"),
    (v2.Compose([v2.RandomResizedCrop(8), v2.RandomApply([v2.RandomGrayscale(0.5)]), v2.ToImage()]),
     "RandomGrayscale with p < 1"),
    (v2.Compose([v2.Resize(8), v2.ToImage()]), "no fixed output size"),
    (v2.Compose([v2.Resize(None, max_size=8), v2.ToImage()]), "no fixed output size"),
    (v2.Compose([v2.RandomResizedCrop(8)]), "PIL image"),
    (v2.Compose([v2.Resize(10), v2.RandomResizedCrop(8), v2.ToImage()]), "second resampling"),
    (v2.Compose([v2.RandomResizedCrop(8), v2.ToDtype(torch.float32), v2.ToImage()]), "ToImage first"),
    (None, "no transform"),
    (v2.Compose([v2.RandomRotation(10), v2.RandomResizedCrop(8), v2.ToImage()]), "before a crop or resize"),
    (v2.Compose([v2.Resize(10), v2.RandomRotation(10), v2.CenterCrop(8), v2.ToImage()]), "to a fixed size"),
    (v2.Compose([v2.Resize((8, 8)), v2.RandomAffine(10), v2.CenterCrop(6), v2.ToImage()]), "a crop or resize after"),
    (v2.Compose([v2.CenterCrop(8), v2.RandomRotation(10, expand=True), v2.ToImage()]), "expand=True with a random"),
    (v2.Compose([v2.CenterCrop(8), v2.RandomRotation((9, 9), expand=True, center=(1, 1)), v2.ToImage()]),
     "or a center"),
    (v2.Compose([v2.CenterCrop(8), v2.RandomRotation(10, v2.InterpolationMode.BICUBIC), v2.ToImage()]),
     "interpolation bicubic"),
    (v2.Compose([v2.CenterCrop(8), v2.RandomRotation(10), v2.RandomAffine(5), v2.ToImage()]), "a second rotation"),
    (v2.Compose([v2.CenterCrop(8), v2.ColorJitter(0.4), v2.RandomRotation(10), v2.ToImage()]), "do not commute"),
    (v2.Compose([v2.CenterCrop(8), v2.RandomRotation(10, fill={Image.Image: 1}), v2.ToImage()]), "fill per input"),
    (v2.Compose([v2.CenterCrop(8), v2.RandomRotation(10, fill=256), v2.ToImage()]), "fill outside"),
    (v2.Compose([v2.CenterCrop(8), v2.RandomAffine(10, fill=(1, 2)), v2.ToImage()]), "neither 1 nor 3"),
    (v2.Compose([v2.CenterCrop(8), v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD),
                 v2.RandomRotation(10)]), "not ToDtype"),
    (v2.Compose([v2.CenterCrop(8), v2.RandomApply([v2.RandomRotation(10)]), v2.ToImage()]), "inside RandomApply"),
])
def test_unsupported_pipelines_name_the_reason(transform, name):
    with pytest.raises(UnsupportedTransform, match=name):
        compile_plan(transform)


def test_fastload_to_dtype_accepts_pil_images():
    out = T.ToDtype(torch.float32, scale=True)(Image.new("RGB", (3, 2), (255, 0, 0)))
    assert out.shape == (3, 2, 3) and out[0].eq(1).all() and out[1:].eq(0).all()


def test_color_transforms_compile_to_kernel_slots():
    plan = compile_plan(T.Compose([T.RandomResizedCrop(16), T.RandomVerticalFlip(0.25),
                                   T.RandomApply([T.ColorJitter(0.4, 0.3, 0.2, 0.1)], p=0.8),
                                   T.RandomGrayscale(0.2), T.ToDtype(torch.float16, scale=True)]))
    assert plan.vflip_p == 0.25 and plan.color_quantized and plan.color_slots == 5
    assert plan.color == ((0.8, (("jitter", (0.6, 1.4), (0.7, 1.3), (0.8, 1.2), (-0.1, 0.1)),)),
                          (0.2, (("gray",),)))
    float_plan = compile_plan(T.Compose([T.CenterCrop(8), T.ToDtype(torch.float32, scale=True),
                                         T.ColorJitter(hue=0.2), T.Grayscale(3), T.Normalize(MEAN, STD)]))
    assert not float_plan.color_quantized and float_plan.color_slots == 5
    assert compile_plan(T.Compose([T.CenterCrop(8), T.ColorJitter(), T.ToImage()])).color == ()


def test_color_parameters_follow_torchvision_ranges_and_orders():
    from fastload.kernels.augment import BRIGHTNESS, CONTRAST, GRAYSCALE, HUE, NONE, SATURATION
    from fastload.rng import SampleRandom
    plan = compile_plan(T.Compose([T.RandomResizedCrop(16), T.RandomApply([T.ColorJitter(0.4, 0.3, 0.2, 0.1)], 0.8),
                                   T.RandomGrayscale(0.2), T.ToImage()]))
    ranges = {BRIGHTNESS: (0.6, 1.4), CONTRAST: (0.7, 1.3), SATURATION: (0.8, 1.2), HUE: (-0.1, 0.1)}
    orders, applied, gray = set(), 0, 0
    for index in range(2000):
        color = plan.sample(100, 80, SampleRandom(0, 0, index)).color
        jitter, last = color[:4], color[4]
        if jitter[0][0] != NONE:
            applied += 1
            assert sorted(op for op, _ in jitter) == [BRIGHTNESS, CONTRAST, SATURATION, HUE]
            assert all(ranges[op][0] <= factor <= ranges[op][1] for op, factor in jitter)
            orders.add(tuple(op for op, _ in jitter))
        else:
            assert all(op == NONE for op, _ in jitter)
        gray += last[0] == GRAYSCALE
    assert len(orders) == 24  # every permutation of the four operations occurs
    assert abs(applied / 2000 - 0.8) < 0.04 and abs(gray / 2000 - 0.2) < 0.04


@pytest.mark.parametrize("resize", [None, 5])
def test_center_crop_is_placed_as_torchvision_places_it_even_when_it_pads(resize):
    """A crop larger than the image pads (crop - size) // 2 before it -- not round(half): with odd
    differences of 3, 7, ... the two disagree by a pixel."""
    import itertools

    import numpy as np
    from fastload.cpu_augment import transform_image
    from fastload.decode import Decoded
    from fastload.rng import SampleRandom
    for height, width, crop in itertools.product(range(1, 9), range(1, 9), [(3, 4), (7, 7), (6, 11)]):
        image = Image.fromarray((np.arange(height * width * 3).reshape(height, width, 3) % 250 + 1).astype(np.uint8))
        steps = [v2.CenterCrop(crop), v2.PILToTensor()]
        if resize is not None:
            steps.insert(0, v2.Resize(resize))
        transform = v2.Compose(steps)
        geometry = compile_plan(transform).sample(width, height, SampleRandom(0, 0, 0))
        ours = np.asarray(transform_image(Decoded(image, 1), geometry, Image.Resampling.BILINEAR))
        assert torch.equal(torch.from_numpy(ours.copy()).permute(2, 0, 1), transform(image)), \
            (height, width, crop, geometry)


def test_resize_of_the_long_side_then_center_crop_equals_torchvision():
    """v2's Resize(None, max_size) scales the long side to max_size; a CenterCrop after it fixes the size."""
    import numpy as np
    from fastload.cpu_augment import transform_image
    from fastload.decode import Decoded
    from fastload.rng import SampleRandom
    transform = v2.Compose([v2.Resize(None, max_size=40), v2.CenterCrop(24), v2.PILToTensor()])
    plan = compile_plan(transform)
    assert plan.output_size == (24, 24)
    for width, height in [(100, 60), (60, 100), (37, 91), (24, 24)]:
        image = Image.fromarray((np.arange(height * width * 3).reshape(height, width, 3) % 251).astype(np.uint8))
        geometry = plan.sample(width, height, SampleRandom(0, 0, 0))
        ours = np.asarray(transform_image(Decoded(image, 1), geometry, plan.resample))
        assert torch.equal(torch.from_numpy(ours.copy()).permute(2, 0, 1), transform(image)), (width, height)


# Every transform class the plan accepts, with arguments, and a pipeline it can sit in.
_ACCEPTED = [
    (v2.RandomResizedCrop, (8,), "geometry"), (v1.RandomResizedCrop, (8,), "geometry"),
    (v2.Resize, ((8, 8),), "geometry"), (v1.Resize, ((8, 8),), "geometry"),
    (v2.CenterCrop, (8,), "geometry"), (v1.CenterCrop, (8,), "geometry"),
    (v2.RandomHorizontalFlip, (), "flip"), (v1.RandomHorizontalFlip, (), "flip"),
    (v2.RandomVerticalFlip, (), "flip"), (v1.RandomVerticalFlip, (), "flip"),
    (v2.ColorJitter, (0.2, 0.2), "color"), (v2.Grayscale, (3,), "color"), (v2.RandomGrayscale, (), "color"),
    (v2.ToImage, (), "to_tensor"), (v2.PILToTensor, (), "to_tensor"), (v1.PILToTensor, (), "to_tensor"),
    (v1.ToTensor, (), "to_float"), (v2.ToDtype, (torch.float32, True), "to_float"),
    (v1.ConvertImageDtype, (torch.float32,), "to_float"), (v2.Normalize, ([0.5] * 3, [0.2] * 3), "normalize"),
    (v1.Normalize, ([0.5] * 3, [0.2] * 3), "normalize"),
    (v2.RandomRotation, (10,), "warp"), (v1.RandomRotation, (10,), "warp"),
    (v2.RandomAffine, (10, (0.1, 0.1)), "warp"), (v1.RandomAffine, (10, (0.1, 0.1)), "warp"),
]


def _pipeline(t, role):
    if role == "geometry":
        return [t, v2.ToImage()]
    if role == "to_tensor":
        return [v2.CenterCrop(8), t]
    if role == "to_float":
        return [v2.CenterCrop(8), v2.Identity() if isinstance(t, v1.ToTensor) else v2.ToImage(), t]
    if role == "normalize":
        return [v2.CenterCrop(8), v2.ToImage(), v2.ToDtype(torch.float32, scale=True), t]
    return [v2.CenterCrop(8), t, v2.ToImage()]


def _remove_identity(steps):
    return [s for s in steps if not isinstance(s, v2.Identity)]


@pytest.mark.parametrize("base, args, role", _ACCEPTED,
                         ids=[f"{'v2' if '.v2' in b.__module__ else 'v1'}-{b.__name__}" for b, _, _ in _ACCEPTED])
def test_a_subclass_that_overrides_behaviour_runs_as_given(base, args, role):
    plain = _remove_identity(_pipeline(base(*args), role))
    compile_plan(v2.Compose(plain))  # the class itself compiles
    quiet = type("Quiet" + base.__name__, (base,), {"__init__": lambda self, *a: base.__init__(self, *a)})
    compile_plan(v2.Compose(_remove_identity(_pipeline(quiet(*args), role))))  # an __init__ override changes nothing
    names = [n for n in ("forward", "__call__", "transform", "make_params", "get_params", "_transform",
                         "_get_params") if hasattr(base, n)]
    for name in names:
        subclass = type("My" + base.__name__, (base,), {name: lambda self, *a, **k: None})
        if getattr(subclass, name) is getattr(base, name):
            continue  # v2 rebinds get_params to v1's on every subclass: the override never takes effect
        with pytest.raises(UnsupportedTransform, match=f"My{base.__name__} .*overrides {name}"):
            compile_plan(v2.Compose(_remove_identity(_pipeline(subclass(*args), role))))


def test_antialias_false_on_tensors_runs_as_given_and_v1_color_says_why():
    with pytest.raises(UnsupportedTransform, match="antialias=False on a tensor image"):
        compile_plan(v2.Compose([v2.ToImage(), v2.Resize((8, 8), antialias=False)]))
    compile_plan(v2.Compose([v2.Resize((8, 8), antialias=False), v2.ToImage()]))  # PIL: always antialiased
    compile_plan(v2.Compose([v2.ToImage(), v2.Resize((8, 8), interpolation=v2.InterpolationMode.NEAREST,
                                                     antialias=False)]))
    with pytest.raises(UnsupportedTransform, match="ImageEnhance"):
        compile_plan(v1.Compose([v1.CenterCrop(8), v1.ColorJitter(0.4), v1.ToTensor()]))


def test_rotation_and_affine_compile_to_an_affine_step():
    """v1 and v2 (and fastload.transforms) compile alike: after the resampling step, with the flips drawn
    before it folded into its input, its fill in levels (as torchvision fills a PIL image: int), and the
    semantics of what it meets (a PIL image here, a tensor after ToImage)."""
    plans = [compile_plan(m.Compose([m.RandomResizedCrop((20, 30)), m.RandomHorizontalFlip(),
                                     m.RandomRotation(15, fill=(1.7, 2, 3)), m.RandomVerticalFlip()] + tail))
             for m, tail in ((v1, [v1.ToTensor()]), (v2, [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]),
                             (T, [T.ToDtype(torch.float32, scale=True)]))]
    assert dataclasses.replace(plans[0], normalization=plans[1].normalization) == plans[1] == plans[2]
    affine = plans[0].affine
    assert affine == T.AffineGeometry((20, 30), (20, 30), (-15.0, 15.0), rotation=True, nearest=True,
                                      fill=(1.0, 2.0, 3.0), pil=True, pre_flips=(True, False))
    assert plans[0].output_size == plans[0].resampled_size == (20, 30)
    on_tensor = compile_plan(v2.Compose([v2.ToImage(), v2.CenterCrop(8), v2.ToDtype(torch.float32, scale=True),
                                         v2.RandomAffine(10, shear=(1, 2, 3, 4), fill=0.5,
                                                         interpolation=v2.InterpolationMode.BILINEAR)]))
    assert on_tensor.affine.fill == (127.5, 127.5, 127.5) and not on_tensor.affine.pil
    assert on_tensor.affine.shear == (1.0, 2.0, 3.0, 4.0) and not on_tensor.affine.nearest
    no_fill = [v2.CenterCrop(8), v2.ToImage(), v2.RandomRotation(5, fill=None)]
    assert compile_plan(v2.Compose(no_fill)).affine.fill is None
    no_fill[1:] = no_fill[2], no_fill[1]  # torchvision fills a PIL image with 0 when fill is None
    assert compile_plan(v2.Compose(no_fill)).affine.fill == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("angle", [90.0, 45.0, 30.0, 180.0])
@pytest.mark.parametrize("pil", [True, False])
def test_expand_with_a_fixed_angle_has_torchvisions_size(angle, pil):
    """One angle, one output size: Pillow's rule on a PIL image, torchvision's on a tensor."""
    steps = [v2.CenterCrop((20, 31)), v2.RandomRotation((angle, angle), expand=True), v2.ToImage()]
    plan = compile_plan(v2.Compose(steps if pil else [steps[0], steps[2], steps[1]]))
    image = Image.new("RGB", (31, 20))
    expected = v2.functional.rotate(image if pil else v2.functional.pil_to_tensor(image), angle, expand=True)
    assert plan.output_size == tuple(v2.functional.get_size(expected)) and plan.resampled_size == (20, 31)


def test_affine_parameters_are_drawn_as_torchvision_draws_them():
    """make_params' order on the sample's stream: angle, tx, ty, scale, shear x, shear y -- each only where
    set -- in float32, translations rounded to whole pixels."""
    import struct
    from fastload.rng import SampleRandom

    def f32(x):
        return struct.unpack("f", struct.pack("f", x))[0]

    affine = compile_plan(v2.Compose([v2.CenterCrop((20, 30)), v2.RandomAffine(10, (0.1, 0.2), (0.8, 1.2),
                                                                              (-5, 5, -3, 3)), v2.ToImage()])).affine
    for index in range(50):
        stream = SampleRandom(0, 0, index)
        u = [stream.random() for _ in range(6)]
        translate = (round(f32(-3 + 6 * u[1])), round(f32(-4 + 8 * u[2])))  # 0.1 of 30, 0.2 of 20 pixels
        assert affine.draw(SampleRandom(0, 0, index)) == dict(angle=f32(-10 + 20 * u[0]), translate=translate,
                                                               scale=f32(0.8 + 0.4 * u[3]),
                                                               shear=(f32(-5 + 10 * u[4]), f32(-3 + 6 * u[5])))
    rotation = compile_plan(v2.Compose([v2.CenterCrop(8), v2.RandomRotation((5, 9)), v2.ToImage()])).affine
    stream = SampleRandom(1, 2, 3)
    assert rotation.draw(stream) == dict(angle=f32(5 + 4 * SampleRandom(1, 2, 3).random()))
    only_angle = compile_plan(v2.Compose([v2.CenterCrop(8), v2.RandomAffine(30), v2.ToImage()])).affine
    assert only_angle.draw(SampleRandom(1, 2, 3)) == dict(angle=f32(-30 + 60 * SampleRandom(1, 2, 3).random()),
                                                          translate=(0, 0), scale=1.0, shear=(0.0, 0.0))


def test_flips_before_the_rotation_fold_into_its_input():
    """A flip before the rotation is drawn into ``pre_flips`` (never ``hflip``), one after it into ``vflip``; the
    kernel's map (``Draw.warp``) reads the flipped input where ``affine`` reads the unflipped one."""
    from fastload.rng import SampleRandom
    plan = compile_plan(v2.Compose([v2.RandomResizedCrop((20, 30)), v2.RandomHorizontalFlip(),
                                    v2.RandomRotation(40), v2.RandomVerticalFlip(), v2.ToImage()]))
    geometries = [plan.sample(64, 48, SampleRandom(0, 0, index)) for index in range(400)]
    assert not any(g.hflip or g.pre_flips[1] for g in geometries)
    assert 150 < sum(g.pre_flips[0] for g in geometries) < 250 and 150 < sum(g.vflip for g in geometries) < 250
    for index, g in enumerate(geometries[:20]):
        stream = SampleRandom(0, 0, index)
        plan.geometry.sample(64, 48, stream)
        assert g.affine == plan.affine.sample(stream)
        a, b, c, d, e, f = g.affine
        for x, y in ((0.5, 0.5), (29.5, 3.25), (7.0, 19.5)):
            u, v = a * x + b * y + c, d * x + e * y + f
            a2, b2, c2, d2, e2, f2 = g.warp
            assert (a2 * x + b2 * y + c2, d2 * x + e2 * y + f2) == pytest.approx((30 - u if g.pre_flips[0] else u, v))


def test_a_draws_resampled_size_is_height_width_as_every_size():
    """Draw.resampled_size is (height, width) like Plan.resampled_size and the geometries' output_size, though
    a draw's boxes and ``resize`` are Pillow's (left, top, right, bottom) and (width, height); the draw's
    old name, Geometry, still imports."""
    assert Draw(resize=(30, 20)).resampled_size == (20, 30)
    assert Draw(crop=(5, 2, 45, 12)).resampled_size == (10, 40)
    assert Draw(resize=(30, 20), post_crop=(1, 2, 25, 18)).resampled_size == (16, 24)
    assert CenterCropGeometry((16, 24)).sample(100, 50, None).resampled_size == (16, 24)
    from fastload.transforms import Geometry
    assert Geometry is Draw
