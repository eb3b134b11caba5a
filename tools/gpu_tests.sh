#!/usr/bin/env bash
# GPU tests, in two halves (the device machine has no MLIR; see tools/README.md):
#   here:        bash tools/gpu_tests.sh compile    -> .gpucache/ (CUDA artifacts, vmfbs)
#   device run:  bash tools/gpu_tests.sh run        (carry .gpucache, .whl, .gl)
#                bash tools/gpu_tests.sh sanitize   (compute-sanitizer memcheck, racecheck)
# GPU_TESTS="tests/a.py tests/b.py" runs those files instead of the list below.
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=(tests/test_spec_examples.py tests/runtime/test_cuda_native.py tests/autotune/test_tuner.py
       tests/runtime/test_cuda_random_math.py tests/runtime/test_cuda_transformer.py
       tests/runtime/test_cuda_device_scalars.py tests/test_outputs.py tests/test_inplace.py
       tests/test_offset_writes.py
       tests/test_scatter.py tests/test_scatter_modes.py tests/test_checks_cuda.py
       tests/runtime/test_cuda_dynamic.py tests/runtime/test_cuda_inplace_fast.py
       tests/runtime/test_cuda_decode_attention.py tests/kernels/test_fused_cuda.py
       tests/backend/test_cuda_matvec.py tests/backend/test_cuda_row_argreduce.py
       tests/frontend/test_cast_calls_cuda.py tests/backend/test_cuda_matmul_wgmma_batched.py
       tests/backend/test_cuda_matmul_dynamic.py tests/backend/test_cuda_matvec_mma.py
       tests/backend/test_cuda_row_fused_dynamic.py tests/backend/test_cuda_row_fused_warps.py
       tests/backend/test_cuda_attention_dynamic.py
       tests/passes/test_cir_join_stores.py tests/test_nan.py
       tests/backend/test_cuda_transpose.py tests/backend/test_cuda_epilogue.py
       tests/backend/test_cuda_transposed_copies.py tests/backend/test_cuda_tf32.py
       tests/backend/test_cuda_pointwise_split.py tests/backend/test_cuda_pointwise_vector_sums.py
       tests/backend/test_cuda_pointwise_mixed_widths.py
       tests/runtime/test_cuda_device_array.py tests/runtime/test_cuda_body_loops.py
       tests/device_api/test_device_cuda.py tests/kernels/test_kernels_cuda.py
       tests/kernels/test_attention_backward_cuda.py
       tests/test_compute_graph.py
       tests/models/test_gpt_cuda.py tests/models/test_gpt_decode_cuda.py
       tests/models/test_llama_cuda.py
       tests/models/test_data_parallel_cuda.py
       tests/runtime/test_cuda_streams.py)  # last: it crashed the run on 2026-11-26
# tests/models' files stay together: pytest 9.1 did not give a file its folder's
# conftest fixtures when another folder's file came between (2026-11-26, H100)
if [ -n "${GPU_TESTS:-}" ]; then read -r -a TESTS <<<"$GPU_TESTS"; fi
SELECT="cuda or gpu or native or iree"
export ZYNML_TEST_CACHE_DIR="$PWD/.gpucache"
export ZYNML_TEST_IREE_GPU=1  # IREE's CUDA target too (iree-base-runtime's cp312 wheel in .whl/)

device_setup() {
  python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null
  if ls .whl/iree_base_runtime-*.whl >/dev/null 2>&1; then
    [ -d /tmp/iree-site/iree ] || python3 -m pip install -q --no-deps --no-index \
      --target /tmp/iree-site .whl/iree_base_runtime-*.whl
    export PYTHONPATH=/tmp/iree-site${PYTHONPATH:+:$PYTHONPATH}
  fi
  if ls .gl/*.deb >/dev/null 2>&1; then  # the Vulkan loader (device README)
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  fi
  # not grep -q: it may exit before ldconfig is done writing, which then dies of SIGPIPE,
  # and pipefail makes the test false
  if ldconfig -p | grep -F libvulkan.so.1 >/dev/null; then
    export ZYNML_TEST_VULKAN=1
    echo "gpu_tests.sh: Vulkan loader found: IREE's Vulkan target is tested too"
  else
    echo "gpu_tests.sh: no Vulkan loader: IREE's Vulkan target is not tested"
  fi
}

case "${1:-}" in
  compile)
    mkdir -p .gpucache
    ZYNML_TEST_VULKAN=1 ZYNML_GPU_COMPILE_ONLY=1 python3 -m pytest -q -k "$SELECT" "${TESTS[@]}" ;;
  run)
    device_setup
    python3 -m pytest -q -rfE -k "$SELECT" "${TESTS[@]}" "${@:2}" ;;
  sanitize)
    device_setup
    for tool in memcheck racecheck; do
      echo "== compute-sanitizer --tool $tool"
      compute-sanitizer --tool "$tool" --error-exitcode 3 --print-limit 20 \
        python3 -m pytest -q -p no:cacheprovider tests/runtime/test_cuda_native.py \
        -k "not torch" "${@:2}"
    done ;;
  *) echo "usage: tools/gpu_tests.sh compile|run|sanitize [pytest args]" >&2; exit 2 ;;
esac
