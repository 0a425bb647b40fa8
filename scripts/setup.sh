#!/usr/bin/env bash
# Make a virtual environment with torch, torchvision and fastload (idempotent).
#
#   bash scripts/setup.sh           runtime dependencies only: what `pip install torch-fastload` brings
#   bash scripts/setup.sh --test    plus the test extras (pytest, real DALI, lightning, moto, ...)
#
# VENV (default .venv) names the environment; TORCH and TORCHVISION (default 2.15.0 and 0.29.2, the newest
# pair CI tests; CI also makes VENV=.venv-oldest TORCH=2.11.0 TORCHVISION=0.26.0) choose the torch it holds;
# WITH adds requirements installed beside them (CI's oldest: "numpy<2.4", see .ci/run).
# fastload itself requires only torch>=2.11 and torchvision>=0.26: these pins are this environment's, not
# the library's. Every install must succeed, and `pip check` must pass, or this script fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH=${TORCH:-2.15.0}
TORCHVISION=${TORCHVISION:-0.29.2}
WITH=${WITH:-}
extras=""
for arg in "$@"; do
    case "$arg" in
        --test) extras="[test]" ;;
        *) echo "setup.sh: unknown argument $arg (known: --test)" >&2; exit 2 ;;
    esac
done

inputs=$(cat setup.py pyproject.toml scripts/setup.sh fastload/_jpeg.c fastload/_normalize.c \
    fastload/compat/dali/_native*.c | sha1sum | cut -c1-12)
stamp="$VENV/.fastload-setup-$inputs-torch$TORCH${extras:+-test}-$(echo "$WITH" | sha1sum | cut -c1-6)"
if [ -f "$stamp" ]; then
    exit 0
fi
# pip's notices about this machine's index settings are noise; anything else it says is shown
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; }; return "${PIPESTATUS[0]}"; }

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
quiet "$VENV/bin/pip" install --quiet --upgrade "pip>=23" "setuptools>=64" wheel
# shellcheck disable=SC2086 -- WITH is a list of requirements
quiet "$VENV/bin/pip" install --quiet "torch==$TORCH" "torchvision==$TORCHVISION" $WITH
# --no-build-isolation: the C extensions build against this environment (no second torch in a build env);
# the torch and WITH requirements again, so that no extra's requirement moves them
# shellcheck disable=SC2086
quiet "$VENV/bin/pip" install --quiet --no-build-isolation -e ".$extras" "torch==$TORCH" "torchvision==$TORCHVISION" $WITH
"$VENV/bin/pip" check
# Fail here, not in the first test, if the environment is not usable.
"$VENV/bin/python" -c "
import torch, torchvision, fastload
assert torch.__version__.split('+')[0] == '$TORCH', torch.__version__
from fastload import DataLoader, ImageFolder
print(f'setup: $VENV: torch {torch.__version__}, torchvision {torchvision.__version__}, fastload {fastload.__version__}')"
rm -f "$VENV"/.fastload-setup-*
touch "$stamp"
