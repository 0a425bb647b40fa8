"""A built-in ImageNet-like sample dataset, generated on the spot.

The demo, the benchmarks and the tests need a folder of JPEGs that decodes
like ImageNet: mostly 500x375 photos in both orientations, other aspect
ratios, a few large images and a few grayscale ones, at quality ~90 with 4:2:0
chroma subsampling and about 110 KB a file. Random noise would be the wrong
test: it compresses badly and decodes far slower than a photograph. So each
image is a "dead leaves" picture -- occluding shapes whose sizes follow a
power law, the classic model of natural-image statistics (scale invariance,
sharp edges, flat regions) -- with a 1/f texture and soft shading on top.
Nothing is downloaded; the same arguments always give the same files.
"""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

# (width, height, weight): ImageNet's most common sizes, then the long tail.
_SIZES = [
    (500, 375, 50), (375, 500, 14), (500, 333, 10), (333, 500, 3),
    (500, 400, 4), (500, 500, 4), (500, 281, 3), (640, 480, 4),
    (400, 300, 3), (800, 600, 2), (1024, 768, 2), (1600, 1200, 1),
]


def _pick_size(rng: np.random.Generator) -> tuple[int, int]:
    weights = np.array([w for _, _, w in _SIZES], dtype=float)
    width, height, _ = _SIZES[rng.choice(len(_SIZES), p=weights / weights.sum())]
    return width, height


def _one_over_f_noise(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Gaussian noise with a 1/f amplitude spectrum, scaled to unit std."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    amplitude = 1.0 / np.maximum(np.hypot(fx, fy), 1.0 / max(height, width))
    spectrum = amplitude * (rng.standard_normal(amplitude.shape)
                            + 1j * rng.standard_normal(amplitude.shape))
    field = np.fft.irfft2(spectrum, s=(height, width))
    return (field / (field.std() + 1e-12)).astype(np.float32)


def make_image(seed: int, width: int, height: int, grayscale: bool = False) -> Image.Image:
    """One procedural natural-looking RGB (or L) image, a pure function of its arguments."""
    rng = np.random.default_rng(seed)
    # Natural colours are correlated across channels and rarely saturated.
    gray_levels = rng.uniform(30, 220, size=(6, 1))
    palette = np.clip(gray_levels + rng.normal(0, 30, size=(6, 3)), 0, 255)
    background = tuple(int(c) for c in palette[0])
    canvas = Image.new("RGB", (width, height), background)
    draw = ImageDraw.Draw(canvas)
    diagonal = math.hypot(width, height)
    # Power-law radii (density ~ r^-3), drawn back to front: large leaves first
    # so small ones occlude them, as in the dead-leaves model.
    count = int(rng.integers(700, 1000))
    radii = np.sort(diagonal * 0.008 / np.sqrt(1.0 - rng.random(count) * 0.995))[::-1]
    for radius in np.minimum(radii, diagonal * 0.4):
        cx, cy = rng.random() * width, rng.random() * height
        aspect = math.exp(rng.normal(0.0, 0.4))
        rx, ry = radius * aspect, radius / aspect
        base = palette[rng.integers(0, len(palette))]
        color = tuple(int(c) for c in np.clip(base + rng.normal(0, 35, 3), 0, 255))
        if rng.random() < 0.7:
            draw.ellipse((cx - rx, cy - ry, cx + rx, cy + ry), fill=color)
        else:
            sides = int(rng.integers(3, 7))
            angle0 = rng.random() * 2 * math.pi
            points = [(cx + rx * math.cos(angle0 + 2 * math.pi * k / sides),
                       cy + ry * math.sin(angle0 + 2 * math.pi * k / sides)) for k in range(sides)]
            draw.polygon(points, fill=color)
    canvas = canvas.filter(ImageFilter.GaussianBlur(radius=0.6))
    pixels = np.asarray(canvas, dtype=np.float32)
    # Texture: luminance-correlated 1/f noise plus weaker per-channel grain,
    # and a broad illumination gradient.
    texture = _one_over_f_noise(rng, height, width)[..., None] * 22.0
    grain = rng.standard_normal((height, width, 3)).astype(np.float32) * 5.0
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    light = 1.0 + 0.25 * np.sin(xx / width * math.pi * rng.random() + yy / height * 2.0)
    pixels = np.clip(pixels * light[..., None] + texture + grain, 0, 255).astype(np.uint8)
    image = Image.fromarray(pixels, "RGB")
    return image.convert("L") if grayscale else image


def _write_image(root: Path, num_classes: int, seed: int, quality: int, index: int) -> None:
    """Image ``index`` of the folder, written under a temporary name and renamed (no half files)."""
    rng = np.random.default_rng([seed, index])
    width, height = _pick_size(rng)
    grayscale = rng.random() < 0.01
    image = make_image(int(rng.integers(2**63)), width, height, grayscale)
    path = root / f"class_{index % num_classes:02d}" / f"img_{index:05d}.JPEG"
    tmp = path.with_suffix(".tmp")
    image.save(tmp, "JPEG", quality=quality, subsampling="4:2:0")
    os.replace(tmp, path)


def make_sample_folder(root: str | os.PathLike, num_images: int = 2000, num_classes: int = 10,
                       seed: int = 0, quality: int = 90, workers: int | None = None,
                       processes: bool = False) -> Path:
    """Write an ImageFolder tree ``root/class_XX/img_XXXXX.JPEG`` unless it is already complete.

    About 1% of the images are grayscale JPEGs, as in ImageNet. ``processes=True`` writes them from
    worker processes (a many-core machine's way to make a large folder quickly). Returns ``root``.
    """
    root = Path(root)
    marker = root / ".complete"
    expected = f"{num_images} {num_classes} {seed} {quality} v1"
    if marker.exists() and marker.read_text() == expected:
        return root
    if marker.exists():  # another size or seed was made here: its images go, or the folder would mix both
        marker.unlink()
        for old in root.glob("class_*/img_*.JPEG"):
            old.unlink()

    for label in range(num_classes):
        (root / f"class_{label:02d}").mkdir(parents=True, exist_ok=True)
    write = functools.partial(_write_image, root, num_classes, seed, quality)
    # Drawing holds the GIL for part of each image: processes scale where threads stop at a few cores.
    pool = ProcessPoolExecutor(workers) if processes else ThreadPoolExecutor(workers or os.cpu_count() or 1)
    with pool:
        list(pool.map(write, range(num_images), chunksize=64 if processes else 1))
    marker.write_text(expected)
    return root


def cache_root() -> Path:
    """fastload's cache folder: ``$FASTLOAD_CACHE``, else ``$XDG_CACHE_HOME/fastload``, else ~/.cache/fastload."""
    return Path(os.environ.get("FASTLOAD_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fastload"))


def default_sample_root(num_images: int = 2000) -> Path:
    """Where the demo keeps its generated folder of ``num_images`` (in ``cache_root()``; one folder per size, so
    a small run does not replace the demo's 2,000 images)."""
    return cache_root() / ("sample-imagenet" if num_images == 2000 else f"sample-imagenet-{num_images}")


def sample_folder(num_images: int = 2000) -> str:
    """The built-in sample folder of ``num_images`` JPEGs, generated the first time (the benchmarks' data
    when they are given none); says where it is."""
    root = str(default_sample_root(num_images))
    print(f"sample folder: {root} ({num_images} ImageNet-like JPEGs; generated once)", flush=True)
    make_sample_folder(root, num_images=num_images)
    return root
