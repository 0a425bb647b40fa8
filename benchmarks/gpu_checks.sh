#!/usr/bin/env bash
# Every GPU check and measurement in one prepared run that fits one call of the device tool
# (at most 9 minutes on the lent 16-core H200; its python3 holds torch, torchvision, triton, pillow and
# tqdm; no package index is reachable: wheels it lacks -- nvidia-nvimgcodec-cu12/-cu13, nvidia-nvjpeg,
# google-crc32c -- travel in $WHEELS, default .whl/, an ignored folder named in the tool's `carry`).
#
#   bash benchmarks/gpu_checks.sh                   # every step, in this order
#   bash benchmarks/gpu_checks.sh tests loader      # only these
#   GPU_CHECKS_DRY=1 bash benchmarks/gpu_checks.sh  # every step, tiny, on the CPU: a check of the script
#
# Steps (each with its own `timeout`, all within TOTAL seconds: a step that would start with less than
# 20 s left is skipped, saying so):
#   tests     pytest tests/gpu
#   ceilings  decode-only on in-memory bytes: torchvision batched, nvImageCodec hardware, hybrid, mixed
#   loader    bench_gpu.py at 16 threads: the device path with decoder="auto" and on every decoder, and
#             torch DataLoader + v2 with 16 workers: BATCHES (30) x 256 = 7,680 timed images each, after
#             5 warm-up batches, from a folder of IMAGES (6,000) ImageNet-like JPEGs
#   scaling   bench_scaling.py --device cuda: images/s at 1, 4, 16 threads beside torch's workers (2,000
#             images, one timed epoch), and the GIL-held time per image
#   train     examples/train_resnet50.py at 4 cores: ResNet-50 and ResNet-18, synthetic / fastload / torch
#   serve     bench_serve.py with the model on the GPU (fastload serve against per-request PIL)
# Each step writes $OUT/<step>.log and, where its script has one, $OUT/<step>.json as soon as it ends, so a
# call cut short still brings back the finished steps; $OUT/summary.txt (printed last) is the table.
# The exit status says whether any step failed. Knobs: IMAGES, BATCHES, STEPS, ARCHS, TOTAL, WHEELS.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
DRY=${GPU_CHECKS_DRY:-0}
START=$(date +%s)
TOTAL=${TOTAL:-520}  # seconds for the whole run: the device tool's 600 s call, less its start and transfers
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# setup.py installs kernels/ as fastload.kernels; from the checkout a link stands in (ignored by git).
[ -d fastload/kernels ] || ln -sfn ../kernels fastload/kernels
if [ "$DRY" = 1 ]; then  # the same steps, tiny, on the CPU (fastload's kernel in Triton's interpreter)
    export TRITON_INTERPRET=1
    DEVICE=cpu IMAGES=${IMAGES:-12} BATCHES=${BATCHES:-1} STEPS=${STEPS:-1} ARCHS=${ARCHS:-resnet18}
    BATCH=4 SIZE=32 WORKERS=1 WARMUP=1 THREADS=1 CORES=1 REQUESTS=4 CONCURRENCY=1 CLASSES=2 SCALING_IMAGES=8
else
    DEVICE=cuda IMAGES=${IMAGES:-6000} BATCHES=${BATCHES:-30} STEPS=${STEPS:-20} ARCHS=${ARCHS:-resnet50 resnet18}
    BATCH=256 SIZE=224 WORKERS=16 WARMUP=5 THREADS=1,4,16 CORES=4 REQUESTS=256 CONCURRENCY=1,8,32 CLASSES=100
    SCALING_IMAGES=2000
fi
DATA=${DATA:-/tmp/fastload-bench-imagenet-$IMAGES}
WHEELS=${WHEELS:-.whl}
DECODERS=${DECODERS:-torchvision,nvimgcodec,nvimgcodec-hw,nvimgcodec-hybrid}
STEPS_TO_RUN=("$@")
[ ${#STEPS_TO_RUN[@]} -gt 0 ] || STEPS_TO_RUN=(tests ceilings loader scaling train serve)
failed=0
: > "$OUT/steps.tsv"

left() { echo $((TOTAL - ($(date +%s) - START))); }

run() {  # run STEP LIMIT COMMAND...: run with `timeout` (LIMIT or the time left), append to $OUT/STEP.log
    local step=$1 limit=$2; shift 2
    local log="$OUT/$step.log" remaining command="${*//$'\n'/ }"; remaining=$(left)
    if [ "$remaining" -lt 20 ]; then
        echo "== SKIPPED (${remaining}s left of ${TOTAL}s): $*" | tee -a "$log"
        printf '%s\tskipped\t0\t%s\n' "$step" "$command" >> "$OUT/steps.tsv"; failed=1; return
    fi
    [ "$limit" -lt $((remaining - 5)) ] || limit=$((remaining - 5))
    echo "== $command (limit ${limit}s)" | tee -a "$log"
    local began lines; began=$(date +%s); lines=$(wc -l < "$log")
    timeout "$limit" "$@" >> "$log" 2>&1
    local status=$? took=$(($(date +%s) - began))
    tail -n +$((lines + 1)) "$log" | tail -15
    local what=ok
    [ "$status" = 0 ] || { what="failed($status)"; [ "$status" = 124 ] && what="timeout(${limit}s)"; failed=1; }
    echo "== $what in ${took}s: $command" | tee -a "$log"
    printf '%s\t%s\t%s\t%s\n' "$step" "$what" "$took" "$command" >> "$OUT/steps.tsv"
}

data() {  # the ImageNet-like folder, written by all cores once ($DATA.done: complete)
    [ -f "$DATA.done" ] || run data 120 $PY -c "from fastload.sample_data import make_sample_folder as m
m('$DATA', num_images=$IMAGES, num_classes=$CLASSES, processes=True); open('$DATA.done', 'w').close()"
}

{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv 2>&1 | head -3; nproc
  $PY -c "import sys, torch, torchvision, triton; print(sys.version.split()[0], torch.__version__,
torchvision.__version__, triton.__version__, torch.version.cuda, torch.cuda.is_available())"
  # carried wheels: nvImageCodec for this torch's CUDA major version (and libnvjpeg), google-crc32c
  if [ "$DRY" != 1 ] && ls "$WHEELS"/*.whl > /dev/null 2>&1; then  # the dry run leaves its environment alone
      cuda=$($PY -c "import torch; print((torch.version.cuda or '0').split('.')[0])")
      wanted=""
      for wheel in "$WHEELS"/*.whl; do
          case $(basename "$wheel") in
          *_cu1[0-9]-*) [[ $(basename "$wheel") == *_cu${cuda}-* ]] && wanted="$wanted $wheel" ;;
          nvidia_nvjpeg-*) [ "$cuda" -ge 13 ] && wanted="$wanted $wheel" ;;  # nvJPEG for CUDA 13 has no -cu13
          *) wanted="$wanted $wheel" ;;
          esac
      done
      # shellcheck disable=SC2086
      $PY -m pip install -q --no-index --find-links "$WHEELS" --no-deps $wanted \
          && echo "installed:$wanted" || echo "the wheels in $WHEELS did not install:$wanted"
  fi
  # nvImageCodec's nvJPEG extension opens libnvjpeg.so.N by name: where a wheel put it, the loader must look
  nvjpeg_dir=$($PY -c "import glob, os, site
hits = [h for base in site.getsitepackages() for h in glob.glob(os.path.join(base, 'nvidia', '**', 'libnvjpeg.so*'),
                                                                   recursive=True)]
print(os.path.dirname(hits[0]) if hits else '')" 2>/dev/null)
  [ -z "$nvjpeg_dir" ] || { export LD_LIBRARY_PATH="$nvjpeg_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                            echo "libnvjpeg: $nvjpeg_dir"; }
  # fastload itself, without its requirements (the machine has them, or the carried wheels did)
  if [ "$DRY" = 1 ]; then
      echo "dry run: fastload runs from the checkout"
  elif $PY -m pip install -q --no-index --no-deps --no-build-isolation -e . > /tmp/fastload-install.log 2>&1; then
      echo "fastload installed (editable, C extensions built)"
  else
      echo "fastload not installed, running from the checkout:"; tail -3 /tmp/fastload-install.log
      $PY setup.py build_ext --inplace > /tmp/build_ext.log 2>&1 && echo "C extensions built in place"
  fi
  $PY -c "from fastload import gpu_decode as g; import torch
d = 'cuda' if torch.cuda.is_available() else 'cpu'
for make in (*g.GPU_BACKENDS, *g.NAMED_BACKENDS.values()):
    b = make(d); print(f'{b.description}: {b.unavailable() or \"decodes here\"}')"
} > "$OUT/machine.log" 2>&1
cat "$OUT/machine.log"

BENCH_GPU=(benchmarks/bench_gpu.py "$DATA" --images "$IMAGES" --batch-size "$BATCH" --size "$SIZE"
           --warmup "$WARMUP" --batches "$BATCHES" --device "$DEVICE")
for step in "${STEPS_TO_RUN[@]}"; do
    case $step in
    tests) run tests 150 $PY -m pytest -q -p no:cacheprovider -rs --durations=10 -o faulthandler_timeout=90 \
               tests/gpu ;;
    ceilings)
        data
        ceilings="decode-only"
        for d in ${DECODERS//,/ }; do [ "$DRY" = 1 ] || ceilings="$ceilings,decode-only:$d"; done
        run ceilings 90 $PY "${BENCH_GPU[@]}" --workers "$WORKERS" --loaders "$ceilings" --json "$OUT/ceilings.json" ;;
    loader)
        data
        loaders="fastload GPU decode"
        for d in ${DECODERS//,/ }; do [ "$DRY" = 1 ] || loaders="$loaders,fastload GPU decode:$d"; done
        run loader 170 $PY "${BENCH_GPU[@]}" --workers "$WORKERS" --loaders "$loaders,torch + v2" \
            --json "$OUT/loader.json" ;;
    scaling)  # on its own generated sample of SCALING_IMAGES (torch at 1 worker reads it at ~150 images/s)
        run scaling 100 $PY benchmarks/bench_scaling.py --images "$SCALING_IMAGES" --device "$DEVICE" \
            --threads "$THREADS" --epochs 1 --seconds 5 --json "$OUT/scaling.json" ;;
    train)
        data
        for arch in $ARCHS; do
            for mode in "--synthetic" "--loader fastload" "--loader torch"; do
                # shellcheck disable=SC2086
                run train 60 $PY examples/train_resnet50.py --data "$DATA" --arch "$arch" --cpus "$CORES" $mode \
                    --batch-size "$BATCH" --image-size "$SIZE" --steps "$STEPS" --warmup "$WARMUP"
            done
        done ;;
    serve)
        run serve 100 $PY benchmarks/bench_serve.py --device "$DEVICE" --model "${ARCHS%% *}" --requests "$REQUESTS" \
            --concurrency "$CONCURRENCY" --max-batch 32 --json "$OUT/serve.json" ;;
    *) echo "unknown step: $step (tests ceilings loader scaling train serve)"; failed=1 ;;
    esac
done

$PY benchmarks/bench_gpu.py --summary "$OUT" > "$OUT/summary.txt" 2>&1 || failed=1
cat "$OUT/summary.txt"
exit $failed
