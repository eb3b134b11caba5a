#!/usr/bin/env bash
# GPU tests, in two halves (the device machine has no MLIR; see tools/README.md):
#   here:        bash tools/gpu_tests.sh compile   -> .gpucache/ (CUDA artifacts)
#   device run:  bash tools/gpu_tests.sh run       (carry .gpucache)
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=(tests/test_spec_examples.py tests/runtime/test_cuda_native.py)
export ZYNML_TEST_CACHE_DIR="$PWD/.gpucache"
export ZYNML_TEST_IREE_GPU=1  # also IREE's CUDA target (needs iree-base-runtime there:
                              # carry its cp312 wheel in .whl/, see tools/README.md)
case "${1:-}" in
  compile)
    mkdir -p .gpucache
    ZYNML_GPU_COMPILE_ONLY=1 python3 -m pytest -q -k "cuda or gpu or native or iree" "${TESTS[@]}" ;;
  run)
    python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null
    if ls .whl/iree_base_runtime-*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-deps --no-index --target /tmp/iree-site .whl/iree_base_runtime-*.whl
      export PYTHONPATH=/tmp/iree-site${PYTHONPATH:+:$PYTHONPATH}
    fi
    python3 -m pytest -q -rfE -k "cuda or gpu or native or iree" "${TESTS[@]}" "${@:2}" ;;
  *) echo "usage: tools/gpu_tests.sh compile|run [pytest args]" >&2; exit 2 ;;
esac
