"""Coverage-guided fuzzing of fastload's byte-level parsers with atheris (libFuzzer for Python).

    .venv/bin/python benchmarks/fuzz_parsers.py tar --seconds 60 --lines   # or tfrecord, jpeg, all
    .venv/bin/python benchmarks/fuzz_parsers.py jpeg --runs 20000 -- -max_len=4096   # libFuzzer flags after --

Targets, each checking the parser's documented contract on every input (anything else is a finding: libFuzzer
stops, writes the input to ``--artifacts`` and exits non-zero):

* ``tar``: ``tarshards.build_index`` on the bytes as a local file and as a stream -- never raises, the two
  agree, every recorded range lies in the file (or is the one member its end cuts) -- and
  ``tarshards.parse_label`` on every small member it kept (an int64 or ValueError).
* ``tfrecord``: ``tfrecords.build_index`` likewise (file and stream agree, ranges in the file, labels int64),
  and ``parse_example`` / ``unframe`` on the bytes and on each record's data: a result or ValueError.
* ``jpeg``: the C extension ``fastload._jpeg``: ``header`` (the header probe that gives the image size;
  ValueError for what libjpeg rejects), ``count_scans``, ``decode`` of the whole image and of a region at a
  DCT scale -- only under a pixel cap (``MAX_PIXELS``), as the loader decodes -- and ``load_sample`` (the
  loader's one native call: read, header limits, crop, decode, resample) on the bytes as a file.

The extension is not built with libFuzzer's instrumentation (that needs clang; setup.py builds it with the
system compiler), so for ``jpeg`` the guidance is what the Python side sees: each outcome (libjpeg's message,
the header's facts bucketed) reaches its own instrumented branch in ``_outcome``. ``--asan`` then builds a
copy of the extension with gcc's AddressSanitizer and replays every input (seeds and finds) through it, so
an out-of-bounds read or write in our C code is a finding even where it would not crash.

Seeds come from tests/data/fuzz/<target>/ (benchmarks/fuzz_corpus.py writes them). New inputs libFuzzer finds
go to a scratch folder; afterwards the smallest few (``--keep``, at most ``MAX_KEPT_BYTES`` each) are added to
the corpus unless ``--no-corpus-update``.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "data", "fuzz")
TARGETS = ("tar", "tfrecord", "jpeg")
MAX_PIXELS = 1 << 20  # the jpeg target decodes images up to this many pixels (the loader's cap is larger)
MAX_SCANS = 100  # decode.MAX_SCANS: progressive JPEGs with more scans are refused before decoding
MAX_KEPT_BYTES = 4096
INT64 = (-(1 << 63), (1 << 63) - 1)


def fuzz_tar(data: bytes) -> None:
    from fastload import tarshards
    local = tarshards.build_index(_as_file(data))
    streamed = tarshards.build_index(None, io.BytesIO(data))
    if local != streamed:
        raise AssertionError(f"the index of a file and of a stream differ:\n{local}\n{streamed}")
    if not tarshards.is_whole_index(local):
        raise AssertionError(f"a malformed index: {local}")
    cut = {position for position, reason in local["problems"] if "cut short" in reason}
    for position, (_, members, texts) in enumerate(local["samples"]):
        for offset, size in members.values():
            if offset + size > len(data) and position not in cut:
                raise AssertionError(f"a member past the end not marked cut: {local}")
        for extension, text in texts.items():
            try:
                label = tarshards.parse_label(extension, text)
            except ValueError:
                continue
            if not INT64[0] <= label <= INT64[1]:
                raise AssertionError(f"a label outside int64: {label}")


def fuzz_tfrecord(data: bytes) -> None:
    from fastload import tfrecords
    names = (tfrecords.IMAGE_FEATURE, tfrecords.LABEL_FEATURE, "image/filename")
    local = tfrecords.build_index(_as_file(data), None, *names)
    streamed = tfrecords.build_index(None, io.BytesIO(data), *names)
    if local != streamed:
        raise AssertionError(f"the index of a file and of a stream differ:\n{local}\n{streamed}")
    if not tfrecords.is_whole_index(local, list(names)):
        raise AssertionError(f"a malformed index: {local}")
    for offset, size, label, problem, _ in (r if len(r) == 5 else (*r, None) for r in local["records"]):
        if offset + size > len(data) or not INT64[0] <= label <= INT64[1] or (problem is not None and label != -1):
            raise AssertionError(f"a record out of the file or a bad label: {local}")
        if problem is None:
            tfrecords.parse_example(tfrecords.unframe(data[offset:offset + size]))
    for parse in (tfrecords.parse_example, tfrecords.unframe):
        try:
            parse(data)
        except ValueError:
            pass


def fuzz_jpeg(data: bytes) -> None:
    from fastload import _jpeg
    scans = _jpeg.count_scans(data, MAX_SCANS)
    if not 0 <= scans <= MAX_SCANS + 1:
        raise AssertionError(f"count_scans gave {scans}")
    try:
        width, height, components, color_space, progressive = _jpeg.header(data)
    except ValueError as error:
        _outcome(str(error))
        return
    _outcome(f"{components} {color_space} {progressive} {min(width, 99)} {min(height, 99)}")
    if width < 1 or height < 1 or width * height > MAX_PIXELS or (progressive and scans > MAX_SCANS):
        _load_sample(data)  # the loader's call refuses it by its own limits
        return
    scale = 1 + (data[-1] % 16 if data else 0)
    out = bytearray(width * height * 3 * ((scale + 7) // 8) ** 2 + 16)
    for region in ((0, 0, width, height), (width // 3, height // 2, max(1, width // 2), max(1, height // 3))):
        try:
            result = _jpeg.decode(data, out, scale, *region)
        except (ValueError, NotImplementedError, MemoryError) as error:
            _outcome(str(error))
            continue
        if isinstance(result, int):
            if result <= len(out):
                raise AssertionError(f"decode asked for {result} bytes with {len(out)} given")
            continue
        w, h, channels, warnings, _ = result
        if not (0 < w <= width * scale and 0 < h <= height * scale and channels in (1, 3) and warnings >= 0):
            raise AssertionError(f"decode gave {result} for a {width}x{height} image at scale {scale}/8")
    _load_sample(data)


_SETTINGS = []  # load_sample's, as the loader makes them (native_sample.load_settings): made once


def _load_sample(data: bytes) -> None:
    """The loader's one native call on the input as a file: RandomResizedCrop(16) and a flip, uint8, DCT
    scaling, the MAX_PIXELS cap; done (a tuple), handed back (the bytes), or None (unreadable) -- never
    anything else, and no exception."""
    from fastload import native_sample
    from fastload import transforms as T
    if not _SETTINGS:
        plan = T.compile_plan(T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.ToImage()]))
        _SETTINGS.append(native_sample.load_settings(plan, native_sample.UINT8_ROWS, MAX_PIXELS, True))
    if _SETTINGS[0] is None:  # an extension without load_sample
        return
    out = bytearray(16 * 16 * 3)
    result = native_sample.load(_as_file(data), (1, 2, 3, 0), _SETTINGS[0], out, 0)
    if not (result is None or isinstance(result, (bytes, tuple))):
        raise AssertionError(f"load_sample gave {result!r}")


_FILE = None


def _as_file(data: bytes) -> str:
    """The input as a local file (one memory-backed file, rewritten per input): its path."""
    global _FILE
    if _FILE is None:
        _FILE = os.memfd_create("fuzz-input")
    os.ftruncate(_FILE, 0)
    os.pwrite(_FILE, data, 0)
    return f"/proc/self/fd/{_FILE}"


def _make_outcome(count: int = 128):
    """A function with one branch per bucket of its argument's hash: instrumented, so each new outcome of the
    uninstrumented C code (libjpeg's message, the header's facts) is new coverage libFuzzer keeps inputs for."""
    lines = ["def _outcome(text):", f"    bucket = zlib.crc32(text.encode('utf-8', 'replace')) % {count}"]
    lines += [f"    {'if' if n == 0 else 'elif'} bucket == {n}:\n        return {n}" for n in range(count)]
    scope = {"zlib": __import__("zlib")}
    exec("\n".join(lines), scope)
    return scope["_outcome"]


_outcome = _make_outcome()


def child(target: str, libfuzzer_args: list[str]) -> None:
    """Run libFuzzer in this process (it exits when done)."""
    import atheris
    global _outcome
    if os.environ.get("FASTLOAD_FUZZ_JPEG"):  # --asan: the sanitized copy of the extension, under its name,
        import importlib.util  # before any module of fastload's imports the extension

        import fastload
        spec = importlib.util.spec_from_file_location("fastload._jpeg", os.environ["FASTLOAD_FUZZ_JPEG"])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["fastload._jpeg"] = fastload._jpeg = module
    import fastload.errors  # noqa: F401  (imported uninstrumented: only the parsers are)
    import fastload.order  # noqa: F401
    import fastload.shardcache  # noqa: F401
    import fastload.sources  # noqa: F401
    if target == "jpeg":
        import fastload.native_sample  # noqa: F401
        import fastload.transforms  # noqa: F401
    with atheris.instrument_imports(include=["fastload.tarshards", "fastload.tfrecords", "fastload.shardfiles"]):
        from fastload import shardfiles, tarshards, tfrecords  # noqa: F401
    _outcome = atheris.instrument_func(_outcome)
    one = {"tar": fuzz_tar, "tfrecord": fuzz_tfrecord, "jpeg": fuzz_jpeg}[target]
    atheris.Setup([sys.argv[0], *libfuzzer_args], atheris.instrument_func(one))
    atheris.Fuzz()


def _asan_build(folder: str) -> tuple[str, str] | None:
    """fastload/_jpeg.c built with gcc's AddressSanitizer into ``folder``: (the module's path, the runtime to
    preload), or None where gcc or its libasan is missing."""
    compiler = shutil.which("gcc")
    if compiler is None:
        return None
    runtime = subprocess.run([compiler, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(runtime) or not os.path.exists(runtime):
        return None
    module = os.path.join(folder, "_jpeg_asan" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address",
                    "-ffp-contract=off", f"-I{sysconfig.get_paths()['include']}", "-I" + os.path.join(ROOT, "fastload"),
                    os.path.join(ROOT, "fastload", "_jpeg.c"), "-ljpeg", "-o", module], check=True)
    return module, runtime


def _asan_replay(scratch: str, env: dict, folders: list[str], artifacts: str) -> subprocess.CompletedProcess:
    """Every input of ``folders`` (the seeds and what the guided run found) run once through an AddressSanitizer
    build of the extension: gcc's runtime, preloaded, takes libFuzzer's coverage hooks, so the sanitized build
    is replayed rather than fuzzed."""
    built = _asan_build(scratch)
    if built is None:
        print("--asan: gcc or its libasan is missing; no sanitized replay", file=sys.stderr)
        return subprocess.CompletedProcess([], 0, "", "")
    env = dict(env, FASTLOAD_FUZZ_JPEG=built[0], LD_PRELOAD=built[1],
               ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1")
    command = [sys.executable, os.path.abspath(__file__), "--child", "jpeg", "--",
               f"-artifact_prefix={os.path.join(artifacts, 'asan-')}", "-timeout=10", "-runs=0", *folders]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    executed = re.findall(r"#(\d+)\s+(?:INITED|DONE)", done.stdout + done.stderr)
    print(f"jpeg: AddressSanitizer replay of {sum(len(os.listdir(f)) for f in folders)} inputs "
          f"({executed[-1] if executed else '?'} executed): exit {done.returncode}", file=sys.stderr)
    if done.returncode:
        sys.stderr.write((done.stdout + done.stderr)[-4000:])
    return done


def run(target: str, seconds: float | None, runs: int | None, artifacts: str, keep: int, update: bool,
        asan: bool, lines: bool, extra: list[str]) -> int:
    """Fuzz ``target`` in a child process; report executions, coverage and findings; keep a few new inputs."""
    seeds = os.path.join(CORPUS, target)
    os.makedirs(artifacts, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{target}-") as scratch:
        new = os.path.join(scratch, "new")
        os.makedirs(new)
        flags = [f"-artifact_prefix={os.path.join(artifacts, '')}", "-timeout=10", "-rss_limit_mb=3072",
                 "-print_final_stats=1", *extra]
        if seconds is not None:
            flags.append(f"-max_total_time={max(1, int(seconds))}")
        if runs is not None:
            flags.append(f"-runs={runs}")
        command = [sys.executable, os.path.abspath(__file__), "--child", target, "--", *flags, new, seeds]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        log = done.stdout + done.stderr
        sys.stderr.write(log[-4000:] if done.returncode else "")
        final = re.findall(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)", log)
        executions, coverage, features = final[-1] if final else ("?", "?", "?")
        found = sorted(path for kind in ("crash", "timeout", "oom", "leak")
                       for path in glob.glob(os.path.join(artifacts, f"{kind}-*")))
        if asan and target == "jpeg" and done.returncode == 0:
            done = _asan_replay(scratch, env, [new, seeds], artifacts)
        if lines and target in PARSERS:
            sys.path.insert(0, ROOT)
            replay(target, [new, seeds])
        kept = _keep(target, new, seeds, keep) if update and done.returncode == 0 else []
        print(f"{target}: {executions} executions, cov {coverage} edges, ft {features} features, exit "
              f"{done.returncode}, findings: {found or 'none'}, corpus +{len(kept)}", file=sys.stderr)
        print(f"{target}: done", file=sys.stderr)
        return done.returncode


def _keep(target: str, new: str, seeds: str, keep: int) -> list[str]:
    """Up to ``keep`` new inputs of at most MAX_KEPT_BYTES copied into the corpus, named by hash: smallest first,
    each kept where it reaches parser lines the corpus did not (tar, tfrecord); for jpeg, whose C code has no
    lines to trace here, spread over their sizes (libFuzzer wrote each for new coverage)."""
    candidates = [p for _, p in sorted((os.path.getsize(p), p) for p in glob.glob(os.path.join(new, "*"))
                                       if 16 <= os.path.getsize(p) <= MAX_KEPT_BYTES)]
    if target in PARSERS:
        sys.path.insert(0, ROOT)
        covered, chosen = _reached(target, glob.glob(os.path.join(seeds, "*"))), []
        for path in candidates:
            more = _reached(target, [path]) - covered
            if more and len(chosen) < keep:
                chosen.append(path)
                covered |= more
    else:
        chosen = [candidates[round(i * (len(candidates) - 1) / max(1, keep - 1))] for i in range(keep)] \
            if len(candidates) > keep else candidates
    kept = []
    for path in dict.fromkeys(chosen):
        with open(path, "rb") as file:
            data = file.read()
        destination = os.path.join(seeds, "found-" + hashlib.sha1(data).hexdigest()[:16])
        if not os.path.exists(destination):
            with open(destination, "wb") as out:
                out.write(data)
            kept.append(destination)
    return kept


PARSERS = {  # the functions each target is for, whose line coverage --replay reports
    "tar": ("tarshards", ["split_key", "_text", "_number", "parse_header", "parse_pax", "members", "build_index",
                          "is_whole_index", "parse_label"]),
    "tfrecord": ("tfrecords", ["masked_crc", "unframe", "varint", "proto_fields", "_message", "varints", "_floats",
                               "_feature", "parse_example", "build_index", "is_whole_index", "_label_and_problem",
                               "_names"]),
}


def _parser_lines(target: str) -> tuple[str, set[int]]:
    """(module file, executable lines of the target's parser functions)."""
    import importlib
    import inspect
    import trace
    name, functions = PARSERS[target]
    module = importlib.import_module(f"fastload.{name}")
    executable = set(trace._find_executable_linenos(module.__file__))
    lines = set()
    for function in functions:
        source, first = inspect.getsourcelines(getattr(module, function))
        lines |= executable & set(range(first, first + len(source)))
    return module.__file__, lines


def _reached(target: str, paths: list[str]) -> set[int]:
    """The parser lines (``_parser_lines``) that running these inputs through the target reaches, traced by the
    standard library's ``trace``."""
    import trace
    one = {"tar": fuzz_tar, "tfrecord": fuzz_tfrecord, "jpeg": fuzz_jpeg}[target]
    tracer = trace.Trace(count=1, trace=0)
    for path in paths:
        with open(path, "rb") as file:
            tracer.runfunc(one, file.read())
    module, lines = _parser_lines(target)
    return {line for (file, line) in tracer.results().counts if file == module} & lines


def replay(target: str, folders: list[str] | None = None) -> None:
    """Every input of the target's corpus (or ``folders``) run once through it: the share of the parser
    functions' lines reached (libFuzzer's edge count is of its own kind: bytecode branches)."""
    inputs = sorted(p for folder in folders or [os.path.join(CORPUS, target)] for p in glob.glob(f"{folder}/*"))
    if target not in PARSERS:
        print(f"{target}: {len(inputs)} inputs (C code: no line coverage here)", file=sys.stderr)
        return
    hit, (_, lines) = _reached(target, inputs), _parser_lines(target)
    print(f"{target}: {len(inputs)} inputs reach {len(hit)} of {len(lines)} lines of fastload/"
          f"{PARSERS[target][0]}.py's parsers; not reached: {sorted(lines - hit)}", file=sys.stderr)


def main() -> int:
    arguments = sys.argv[1:]
    extra = arguments[arguments.index("--") + 1:] if "--" in arguments else []
    arguments = arguments[:arguments.index("--")] if "--" in arguments else arguments
    if arguments[:1] == ["--child"]:
        child(arguments[1], extra)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=[*TARGETS, "all"])
    parser.add_argument("--seconds", type=float, default=None, help="time per target (libFuzzer -max_total_time)")
    parser.add_argument("--runs", type=int, default=None, help="inputs per target (libFuzzer -runs)")
    parser.add_argument("--artifacts", default=os.path.join(tempfile.gettempdir(), "fastload-fuzz"),
                        help="where inputs that fail are written")
    parser.add_argument("--keep", type=int, default=5, help="new inputs added to the corpus per target")
    parser.add_argument("--no-corpus-update", dest="update", action="store_false")
    parser.add_argument("--asan", action="store_true", help="jpeg: replay every input through an AddressSanitizer "
                                                             "build of the extension")
    parser.add_argument("--lines", action="store_true", help="after the run, the parser lines its inputs reach")
    parser.add_argument("--replay", action="store_true", help="only run the corpus once, reporting line coverage")
    options = parser.parse_args(arguments)
    targets = TARGETS if options.target == "all" else (options.target,)
    if options.replay:
        sys.path.insert(0, ROOT)
        for target in targets:
            replay(target)
        return 0
    if options.seconds is None and options.runs is None:
        parser.error("give --seconds or --runs: a run is bounded")
    codes = [run(target, options.seconds, options.runs, options.artifacts, options.keep, options.update,
                 options.asan, options.lines, extra) for target in targets]
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
