"""COCO instances files as both front ends read them (DALI's ``fn.readers.coco``, rocAL's COCO reader):
the json's three lists, checked, and the categories numbered as both remap labels."""

from __future__ import annotations

import json


def load_instances(where: str) -> dict:
    """A COCO instances json as a dict with its "images", "annotations" and "categories" lists; OSError or ValueError
    (a KeyError, TypeError) as json gives."""
    with open(where) as file:
        data = json.load(file)
    for key in ("images", "annotations", "categories"):
        if not isinstance(data.get(key), list):
            raise KeyError(f"no {key!r} list")
    return data


def category_numbers(categories: list) -> dict:
    """Category id -> its number 1..N in the order the json lists them, as rocAL and DALI both remap labels:
    a repeated id keeps its first place (std::map::insert / emplace)."""
    order = {}
    for n, category in enumerate(categories, 1):
        order.setdefault(category["id"], n)
    return order
