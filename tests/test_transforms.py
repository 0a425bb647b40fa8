import pytest
import torch
from PIL import Image
from torchvision import transforms as v1
from torchvision.transforms import v2

from fastload import transforms as T
from fastload.transforms import UnsupportedTransform, compile_plan

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def test_v1_and_v2_train_recipes_compile_to_the_same_plan():
    plan_v1 = compile_plan(v1.Compose([v1.RandomResizedCrop(224), v1.RandomHorizontalFlip(),
                                       v1.ToTensor(), v1.Normalize(MEAN, STD)]))
    plan_v2 = compile_plan(v2.Compose([v2.RandomResizedCrop(224), v2.RandomHorizontalFlip(), v2.ToImage(),
                                       v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]))
    plan_fl = compile_plan(T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                                      T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)]))
    assert plan_v1 == plan_v2 == plan_fl
    assert plan_v1.output_size == (224, 224) and plan_v1.hflip_p == 0.5
    assert plan_v1.scale == pytest.approx([1 / (255 * s) for s in STD])
    assert plan_v1.shift == pytest.approx([-m / s for m, s in zip(MEAN, STD)])


def test_uint8_and_half_outputs():
    plan = compile_plan(v2.Compose([v2.Resize(256), v2.CenterCrop(224), v2.PILToTensor()]))
    assert plan.scale is None and plan.dtype == torch.uint8 and plan.output_size == (224, 224)
    plan = compile_plan(v1.Compose([v1.CenterCrop((20, 30)), v1.PILToTensor(), v1.ConvertImageDtype(torch.float16)]))
    assert plan.dtype == torch.float16 and plan.scale == pytest.approx([1 / 255] * 3)


@pytest.mark.parametrize("transform, name", [
    (v2.Compose([v2.RandomResizedCrop(8), v2.ColorJitter(0.4), v2.ToImage()]), "ColorJitter"),
    (v2.Compose([v2.Resize(8), v2.ToImage()]), "no fixed output size"),
    (v2.Compose([v2.RandomResizedCrop(8)]), "PIL image"),
    (v2.Compose([v2.Resize(10), v2.RandomResizedCrop(8), v2.ToImage()]), "second resampling"),
    (v2.Compose([v2.RandomResizedCrop(8), v2.ToDtype(torch.float32), v2.ToImage()]), "ToImage first"),
    (None, "no transform"),
])
def test_unsupported_pipelines_name_the_reason(transform, name):
    with pytest.raises(UnsupportedTransform, match=name):
        compile_plan(transform)


def test_fastload_to_dtype_accepts_pil_images():
    out = T.ToDtype(torch.float32, scale=True)(Image.new("RGB", (3, 2), (255, 0, 0)))
    assert out.shape == (3, 2, 3) and out[0].eq(1).all() and out[1:].eq(0).all()
