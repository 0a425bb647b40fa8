#!/usr/bin/env bash
# Every GPU check and measurement that issues 3 and 4 ask for, in one run on a GPU machine
# (the lent 16-core H100/H200: its python3 holds torch, torchvision, triton, pillow and tqdm;
# no package index is reachable, so fastload runs from the checkout through PYTHONPATH).
#
#   bash benchmarks/gpu_checks.sh            # results and logs under $OUT (default: gpu-results/)
#
# Order: correctness first (tests/gpu), then the kernel benchmark, the end-to-end loader
# benchmark, and the training-step ratios at 4 cores. Each step's log is kept; a failing
# step does not stop the others, and the exit status says whether any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
IMAGES=${IMAGES:-20000}
DATA=${DATA:-/tmp/fastload-bench-imagenet-$IMAGES}
failed=0

step() {  # step NAME COMMAND...: run it, log to $OUT/NAME.txt, remember a failure
    local name=$1; shift
    echo "== $name: $*" | tee "$OUT/$name.txt"
    "$@" 2>&1 | tee -a "$OUT/$name.txt"
    local status=${PIPESTATUS[0]}
    [ "$status" = 0 ] || { echo "== $name FAILED ($status)" | tee -a "$OUT/$name.txt"; failed=1; }
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc
  $PY -c "import torch, torchvision, triton; print(torch.__version__, torchvision.__version__, triton.__version__)"
} > "$OUT/machine.txt" 2>&1
# The C extensions are optional (Pillow decodes without them); build them for this Python if it can.
$PY setup.py build_ext --inplace > "$OUT/build_ext.txt" 2>&1 || echo "C extensions not built (see build_ext.txt)"
$PY -c "from fastload.sample_data import make_sample_folder as m; m('$DATA', num_images=$IMAGES, num_classes=100)"

step tests_gpu $PY -m pytest -q -p no:cacheprovider tests/gpu
step bench_kernels $PY benchmarks/bench_kernels.py --batch 256 --size 224
step bench_gpu $PY benchmarks/bench_gpu.py "$DATA" --workers 16 --json "$OUT/bench_gpu.json"
for arch in resnet50 resnet18; do
    for mode in "--synthetic" "--loader fastload" "--loader torch"; do
        step "train_${arch}_${mode##*[- ]}" $PY examples/train_resnet50.py --data "$DATA" --arch "$arch" \
            --cpus 4 $mode --steps 60 --warmup 15
    done
done
grep -h "images/s\|reaches\|ms/step" "$OUT"/*.txt | tail -40
exit $failed
