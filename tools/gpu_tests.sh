#!/usr/bin/env bash
# GPU tests, in two halves (the device machine has no MLIR; see tools/README.md):
#   here:        bash tools/gpu_tests.sh compile   -> .gpucache/ (CUDA artifacts)
#   device run:  bash tools/gpu_tests.sh run       (carry .gpucache)
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=(tests/test_spec_examples.py tests/runtime/test_cuda_native.py)
export ZYNML_TEST_CACHE_DIR="$PWD/.gpucache"
case "${1:-}" in
  compile)
    mkdir -p .gpucache
    ZYNML_GPU_COMPILE_ONLY=1 python3 -m pytest -q -k "cuda or gpu or native" "${TESTS[@]}" ;;
  run)
    python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null
    python3 -m pytest -q -rfE -k "cuda or gpu or native" "${TESTS[@]}" "${@:2}" ;;
  *) echo "usage: tools/gpu_tests.sh compile|run [pytest args]" >&2; exit 2 ;;
esac
