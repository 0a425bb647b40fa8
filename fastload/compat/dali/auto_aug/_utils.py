"""What AutoAugment, RandAugment and TrivialAugment share: the translations' magnitude ranges (relative to
the image shape or absolute) and the select that explains a missing ``shape``."""

from __future__ import annotations

from . import augmentations as a
from .core import MissingArgException, select


def max_translate_hw(max_translate):
    if isinstance(max_translate, (tuple, list)):
        height, width = max_translate
        return height, width
    return max_translate, max_translate


def parse_validate_offset(use_shape, max_translate_abs=None, max_translate_rel=None, default_translate_abs=250,
                          default_translate_rel=1.0):
    if not isinstance(use_shape, bool):
        raise Exception(f"The `use_shape` is a flag that should be set to either True or False, got {use_shape}.")
    if use_shape:
        if max_translate_abs is not None:
            raise Exception("The argument `max_translate_abs` cannot be used with image shapes. You may use "
                            "`max_translate_rel` instead.")
        return max_translate_hw(default_translate_rel if max_translate_rel is None else max_translate_rel)
    if max_translate_rel is not None:
        raise Exception("The argument `max_translate_rel` cannot be used without image shapes. You may use "
                        "`max_translate_abs` instead.")
    return max_translate_hw(default_translate_abs if max_translate_abs is None else max_translate_abs)


def get_translations(use_shape, default_translate_abs, default_translate_rel, max_translate_abs=None,
                     max_translate_rel=None):
    """[translate_x, translate_y] with magnitudes up to the largest shift: a fraction of the image's
    extent with ``use_shape``, else pixels."""
    height, width = parse_validate_offset(use_shape, max_translate_abs=max_translate_abs,
                                          max_translate_rel=max_translate_rel,
                                          default_translate_abs=default_translate_abs,
                                          default_translate_rel=default_translate_rel)
    if use_shape:
        return [a.translate_x.augmentation((0, width), True), a.translate_y.augmentation((0, height), True)]
    return [a.translate_x_no_shape.augmentation((0, width), True),
            a.translate_y_no_shape.augmentation((0, height), True)]


def pretty_select(augmentations, aug_ids, op_kwargs, auto_aug_name, ref_suite_name):
    try:
        return select(augmentations, aug_ids, **op_kwargs)
    except MissingArgException as e:
        if e.missing_args != ["shape"] or e.augmentation.op not in (a.translate_x.op, a.translate_y.op):
            raise
        raise Exception(f"The augmentation `{e.augmentation.name}` requires `shape` argument that describes image "
                        f"shape (in HWC layout). Please provide it as `shape` argument to `{auto_aug_name}` call. "
                        f"You can get the image shape from encoded images with `fn.peek_image_shape`. "
                        f"Alternatively, you can use `translate_x_no_shape`/`translate_y_no_shape` that does not "
                        f"rely on image shape, but uses offset from fixed range: for reference see "
                        f"`{ref_suite_name}` and its `use_shape` argument. ")
