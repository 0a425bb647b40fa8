import pytest
import torch
from PIL import Image

from fastload import recipes
from fastload.transforms import RandomResizedCropGeometry, ResizeGeometry, compile_plan


def test_resnet50_recipes_take_the_fast_path():
    train, evaluate = compile_plan(recipes.resnet50_train()), compile_plan(recipes.resnet50_eval())
    assert isinstance(train.geometry, RandomResizedCropGeometry)
    assert train.hflip_p == 0.5 and train.output_size == (224, 224)
    assert isinstance(evaluate.geometry, ResizeGeometry) and evaluate.output_size == (224, 224)
    assert evaluate.hflip_p == 0
    assert train.dtype == evaluate.dtype == torch.float32


def test_simclr_compiles_and_still_runs_as_torchvision():
    plan = compile_plan(recipes.simclr())
    assert plan.color_slots == 5 and plan.color_quantized and plan.output_size == (224, 224)
    out = recipes.simclr(size=32)(Image.new("RGB", (50, 40), (200, 30, 90)))
    assert out.shape == (3, 32, 32) and out.dtype == torch.float32


def test_by_name_accepts_dashes_and_underscores_and_lists_known_names():
    assert compile_plan(recipes.by_name("resnet50-eval", size=64)).output_size == (64, 64)
    assert compile_plan(recipes.by_name("resnet50_train")).output_size == (224, 224)
    with pytest.raises(ValueError, match="known: resnet50-train, resnet50-eval, simclr"):
        recipes.by_name("vit")
