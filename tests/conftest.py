"""Shared fixtures: small real JPEG folders (made by the sample generator) and the shared test data."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

import torch

# Without a GPU, Triton kernels run in its interpreter; it must be chosen before any kernel is defined.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

if os.environ.get("TRITON_INTERPRET") == "1":
    # Triton 3.8's interpreter computes tl.fma as x * y + z in the inputs' precision, two roundings; the
    # device computes it with one, as torch's add with alpha does, and the kernels use it to round as
    # torchvision does (kernels/augment_torch.py's _blend). Model the device: float32's product is exact in
    # float64, so rounding the float64 sum to float32 is the one rounding (but for a double-rounding tie,
    # about one sum in 2**29).
    import numpy as np
    try:
        from triton.runtime import interpreter as _interpreter
    except ImportError:  # triton is optional: its tests skip
        _interpreter = None
    if _interpreter is not None:
        def _fused_multiply_add(self, x, y, z):
            data = (x.data.astype(np.float64) * y.data + z.data).astype(z.data.dtype)
            return _interpreter.TensorHandle(data, z.dtype.scalar)

        assert hasattr(_interpreter.InterpreterBuilder, "create_fma"), "Triton's interpreter changed: see tl.fma"
        _interpreter.InterpreterBuilder.create_fma = _fused_multiply_add


def torch_fuses_add_with_alpha() -> bool:
    """Whether this machine's torch CPU kernels compute add_ with alpha as one fused multiply-add, as its
    vectorized kernels (AVX2, AVX-512) and CUDA do; ATEN_CPU_CAPABILITY=default's kernels round twice."""
    x = torch.tensor([55.0] * 67)
    return bool((x.mul(0.0283781).add_(x, alpha=1.0 - 0.0283781) == 55.0).all())

# Tests that launch Triton kernels on CPU tensors need the interpreter. On a GPU machine (which compiles
# the kernels) they skip: tests/gpu runs the same checks there on the device.
kernels_on_cpu = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1",
    reason="runs Triton kernels on CPU tensors, which needs TRITON_INTERPRET=1 (set where there is no GPU); "
           "tests/gpu covers the compiled kernels")

from fastload.decode import decode, read_header  # noqa: E402
from fastload.gpu_decode import TorchvisionGpuDecoder  # noqa: E402
from fastload.thread_pool import THREAD_PREFIX  # noqa: E402
from fastload.sample_data import make_image  # noqa: E402


def ctrl_c_default() -> None:
    """A child's preexec_fn for tests that press Ctrl-C (send SIGINT): Python installs its KeyboardInterrupt
    handler only where SIGINT starts at its default, and a test run started in the background of a
    non-interactive shell (``cmd &``, nohup) passes SIGINT on ignored."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def resident_mib() -> float:
    """This process's resident memory in MiB (Linux's /proc/self/statm): what a host-memory leak grows,
    after glibc hands back what its arenas keep free (malloc_trim), so the arena a thread lands on does not
    count."""
    import ctypes
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


@pytest.fixture
def kernel_on_cpu(monkeypatch):
    """Let device="cpu" take the device path (the kernel runs in Triton's interpreter)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the device path on the CPU needs Triton's interpreter; tests/gpu covers it on a GPU")
    from fastload import device as device_stage
    monkeypatch.setattr(device_stage, "KERNEL_DEVICE_TYPES", ("cuda", "cpu"))


def run_dali_graph(mod, images, graph, layout="HWC", seed=1, conditionals=False, batch=None, layouts=False,
                   **pipeline):
    """Every output of ``graph(mod, x)`` over ``images`` fed as one batch by an external source, on DALI
    (``mod`` = nvidia.dali) or fastload.compat.dali, per sample, as arrays; with ``layouts``, each output as
    (its layout, its arrays). ``pipeline``: more arguments of the Pipeline (exec_async, ...)."""
    import numpy as np
    batch = batch or len(images)

    @mod.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=seed, enable_conditionals=conditionals,
                      **pipeline)
    def pipe():
        x = mod.fn.external_source(source=lambda: images, batch=True, layout=layout)
        return graph(mod, x)
    p = pipe()
    p.build()
    outs = p.run()
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    arrays = [[np.array(out.at(i)) for i in range(batch)] for out in outs]
    return [(out.layout(), samples) for out, samples in zip(outs, arrays)] if layouts else arrays


def assert_same_as_dali(graph, images, layout="HWC", atol=0.0):
    """``graph(mod, x)`` over ``images`` gives real DALI's outputs on fastload.compat.dali: the same dtypes
    and shapes, values within ``atol`` (0: equal)."""
    import numpy as np

    import fastload.compat.dali as ours
    theirs = run_dali_graph(import_dali(), images, graph, layout)
    mine = run_dali_graph(ours, images, graph, layout)
    assert len(theirs) == len(mine)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, i, a.dtype, b.dtype, a.shape, b.shape)
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            assert diff.max(initial=0) <= atol, f"output {k} sample {i}: {int((diff > atol).sum())} values differ"


def import_dali():
    """nvidia.dali, or a skip of the calling test where it is not installed: what a test (or a helper) that
    compares with real DALI calls, so that only it skips, and the tests of fastload's DALI layer alone beside
    it (refusals, fastload's own arguments) still run."""
    return pytest.importorskip("nvidia.dali")


@pytest.fixture
def dali():
    """nvidia.dali for a test that runs real DALI; that test skips where DALI is not installed
    (``import_dali``)."""
    return import_dali()


@pytest.fixture
def seed():
    """A fresh seed each run for tests of random inputs, named in their failure messages; FASTLOAD_TEST_SEED
    replays one (it also seeds torch's global generator, which some of those inputs come from)."""
    import random
    value = int(os.environ.get("FASTLOAD_TEST_SEED") or random.randrange(2 ** 31))
    torch.manual_seed(value)
    return value


# tests/data holds other projects' scripts that the tests run (rocAL's audio_unit_test.py, ...): not tests here
collect_ignore = ["data"]

# ../shared/testdata beside the repository (real odd and broken images; never copied into it), or
# wherever FASTLOAD_TESTDATA says; tests that need it skip, saying so, where it is absent.
TESTDATA = Path(os.environ.get("FASTLOAD_TESTDATA", Path(__file__).resolve().parents[2] / "shared" / "testdata"))


class FakeGpuDecoder(TorchvisionGpuDecoder):
    """torchvision's GPU decoder on nvJPEG, behaving so on the CPU: torchvision's CPU decoder, refusing
    progressive JPEGs, and failing the whole batch when any one image fails, as the batched CUDA call does.
    Its probe always succeeds."""

    def __init__(self, device=None, library="nvjpeg"):
        super().__init__("cpu", library=library, probe=lambda device: None)
        self.device = device
        self.calls = []

    def decode_many(self, encoded):
        import torchvision.io
        self.calls.append(len(encoded))
        out = []
        for data in encoded:
            if b"\xff\xc2" in bytes(data[:65536]):
                raise RuntimeError("nvJPEG: progressive JPEG not supported")
            out.append(torch.ops.image.decode_jpeg(data, torchvision.io.ImageReadMode.RGB.value, False))
        return [image.to(torch.uint8) for image in out]


def decode_on_cpu(index: int, path: str, data: bytes) -> torch.Tensor:
    """A whole image decoded by fastload's CPU decoder as (3, H, W) uint8 RGB: what the GPU backends'
    CPU fallback gives, to compare them with."""
    import numpy as np
    decoded = decode(index, path, data, read_header(index, path, data))
    image = decoded.image if decoded.image.mode == "RGB" else decoded.image.convert("RGB")
    return torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)


def write_folder(root: Path, sizes_per_class: list[list[tuple[int, int]]], grayscale_every: int = 0) -> Path:
    """root/class_k/img_i.jpg with the given (width, height) per image."""
    index = 0
    for label, sizes in enumerate(sizes_per_class):
        folder = root / f"class_{label}"
        folder.mkdir(parents=True, exist_ok=True)
        for width, height in sizes:
            gray = bool(grayscale_every) and index % grayscale_every == grayscale_every - 1
            make_image(index, width, height, grayscale=gray).save(folder / f"img_{index:03d}.jpg", quality=90)
            index += 1
    return root


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> Path:
    """3 classes, 23 images of odd sizes (one grayscale in five, one large enough for DCT scaling)."""
    sizes = [[(97, 71), (64, 64), (131, 67), (50, 93), (301, 203), (75, 75), (88, 120), (61, 47)],
             [(120, 90), (77, 101), (45, 45), (99, 66), (70, 52), (65, 90), (110, 83)],
             [(90, 120), (81, 53), (64, 48), (57, 77), (160, 100), (73, 59), (100, 75), (49, 81)]]
    return write_folder(tmp_path_factory.mktemp("folder"), sizes, grayscale_every=5)


@pytest.fixture(scope="session")
def small_folder(tmp_path_factory) -> Path:
    """3 classes, 12 images of odd sizes up to 64x64 (one grayscale in five), for the device path on the CPU:
    its fused kernel runs in Triton's interpreter row by source row and tap by tap, about a second for a
    64x48 image and half a minute for ``image_folder``'s 301x203 one (measured on 2 busy cores)."""
    sizes = [[(61, 47), (40, 40), (33, 50), (64, 48)],
             [(57, 43), (48, 48), (29, 37), (50, 36)],
             [(45, 60), (64, 41), (38, 31), (52, 52)]]
    return write_folder(tmp_path_factory.mktemp("small_folder"), sizes, grayscale_every=5)


@pytest.fixture(scope="session")
def numbered_list(image_folder, tmp_path_factory) -> Path:
    """A file list over ``image_folder`` whose labels are the files' numbers (to see which file went where)."""
    files = sorted(p for p in image_folder.rglob("*") if p.is_file())
    path = tmp_path_factory.mktemp("list") / "list.txt"
    path.write_text("".join(f"{file} {number}\n" for number, file in enumerate(files)))
    return path


@pytest.fixture
def quiet_iterators():
    """Silence the warnings and logs both DALI and fastload's DALI layer give about iterator use (``size``
    without ``reader_name``, resets before an epoch's end): tests comparing the two use it for each test
    (``pytestmark = pytest.mark.usefixtures("quiet_iterators")``)."""
    import logging
    import warnings
    logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    logging.disable(logging.NOTSET)


@pytest.fixture(autouse=True)
def no_thread_survives():
    """Every test must leave no fastload thread running. A thread still inside a call it cannot leave (close()
    gave up on it after its bound and warned, as it may for a decode or a batch's augmentation on two busy
    cores) is given until that call returns, at most 60 s -- a margin, not a measured bound; one that never
    stops fails the test. tests/test_thread_pool.py times close()'s bound itself. A full collection (which
    stops the threads of a loader left in a reference cycle) runs only when a thread is still there: with
    torch and DALI loaded it takes a third of a second, a third of the suite's time if run after every test."""
    yield
    if not any(t.name.startswith(THREAD_PREFIX) for t in threading.enumerate()):
        return
    import gc
    gc.collect()
    deadline = time.monotonic() + 60
    for thread in [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX) and t.is_alive()]
    assert not alive, f"fastload threads still running: {alive}"
