#!/usr/bin/env bash
# Every GPU check and measurement of issue 19, in steps that each fit one call of the device tool
# (the lent 16-core H100/H200: its python3 holds torch, torchvision, triton, pillow and tqdm; no
# package index is reachable, so fastload runs from the checkout through PYTHONPATH).
#
#   bash benchmarks/gpu_checks.sh                      # every step: tests kernels loader train
#   bash benchmarks/gpu_checks.sh tests kernels        # only these, in this order
#
# Steps: tests (tests/gpu), kernels (bench_kernels.py), loader (bench_gpu.py), train
# (examples/train_resnet50.py at 4 cores: ResNet-50 and ResNet-18, synthetic / fastload / torch), and,
# only when named, serve (bench_serve.py with the model on the GPU and the process pinned to 2 cores, as
# issue 17's serving target is stated: fastload serve against per-request PIL + the same model).
# Each step writes one log, $OUT/<step>.txt (the device tool brings back at most 8 files), and a
# step that fails or outruns its time limit does not stop the next. The exit status says whether
# any failed. Knobs: IMAGES (the generated folder's size), BATCHES, STEPS, ARCHS, STEP_LIMIT (seconds).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# setup.py installs kernels/ as fastload.kernels; from the checkout a link stands in (ignored by git).
[ -d fastload/kernels ] || ln -sfn ../kernels fastload/kernels
# Packages the machine lacks (google-crc32c) travel as wheels in .whl/ (the device tool's README).
if ls .whl/*.whl > /dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH="$PYTHONPATH:/tmp/site" || echo "the wheels in .whl/ did not install" | tee -a "$OUT/machine.txt"
fi
IMAGES=${IMAGES:-20000}
DATA=${DATA:-/tmp/fastload-bench-imagenet-$IMAGES}
BATCHES=${BATCHES:-60}
STEPS=${STEPS:-60}
STEP_LIMIT=${STEP_LIMIT:-300}
ARCHS=${ARCHS:-resnet50 resnet18}
STEPS_TO_RUN=("$@")
[ ${#STEPS_TO_RUN[@]} -gt 0 ] || STEPS_TO_RUN=(tests kernels loader train)
failed=0

run() {  # run LOG COMMAND...: append the command and its output to LOG, remember a failure
    local log=$1; shift
    echo "== $*" | tee -a "$log"
    timeout "$STEP_LIMIT" "$@" 2>&1 | tee -a "$log"
    local status=${PIPESTATUS[0]}
    [ "$status" = 0 ] || { echo "== FAILED ($status): $*" | tee -a "$log"; failed=1; }
}

data() {  # the ImageNet-like folder, written by all cores once
    timeout "$STEP_LIMIT" $PY -c "from fastload.sample_data import make_sample_folder as m
m('$DATA', num_images=$IMAGES, num_classes=100, processes=True)" || { echo "== FAILED: the sample folder"; failed=1; }
}

{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv; nproc
  $PY -c "import sys, torch, torchvision, triton; print(sys.version.split()[0], torch.__version__,
torchvision.__version__, triton.__version__, torch.version.cuda, torch.cuda.get_device_name())"
  # The C extensions are optional (Pillow decodes without them); build them for this Python if it can.
  $PY setup.py build_ext --inplace > /tmp/build_ext.log 2>&1 && echo "C extensions built" \
      || { echo "C extensions not built:"; tail -3 /tmp/build_ext.log; }
} >> "$OUT/machine.txt" 2>&1

for step in "${STEPS_TO_RUN[@]}"; do
    log="$OUT/$step.txt"
    case $step in
    tests) run "$log" $PY -m pytest -q -p no:cacheprovider -rs --durations=10 -o faulthandler_timeout=90 tests/gpu ;;
    kernels)
        run "$log" $PY benchmarks/bench_kernels.py --batch 256 --size 224
        run "$log" $PY benchmarks/gpu_kernel_diff.py ;;
    loader)
        { time data; } >> "$log" 2>&1
        run "$log" $PY benchmarks/bench_gpu.py "$DATA" --images "$IMAGES" --workers 16 --batches "$BATCHES" \
            --json "$OUT/bench_gpu.json" ;;
    train)
        data >> "$log" 2>&1
        for arch in $ARCHS; do
            for mode in "--synthetic" "--loader fastload" "--loader torch"; do
                # shellcheck disable=SC2086
                run "$log" $PY examples/train_resnet50.py --data "$DATA" --arch "$arch" --cpus 4 $mode \
                    --steps "$STEPS" --warmup 10
            done
        done ;;
    serve)
        cores=$($PY -c "import os; print(','.join(map(str, sorted(os.sched_getaffinity(0))[:2])))")
        run "$log" env OMP_NUM_THREADS=2 taskset -c "$cores" $PY benchmarks/bench_serve.py --device cuda \
            --model resnet50 --requests 512 --concurrency 1,8,32 --max-batch 32 --json "$OUT/bench_serve.json" ;;
    *) echo "unknown step: $step (tests, kernels, loader, train, serve)"; failed=1 ;;
    esac
done
grep -h "images/s\|reaches\|ms/step\|passed\|failed" "$OUT"/*.txt | tail -40
exit $failed
