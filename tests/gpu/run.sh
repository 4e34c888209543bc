#!/usr/bin/env bash
# The GPU check in one command, for a machine with an NVIDIA GPU, its driver and the CUDA
# toolkit (plus the Debian packages of scripts/deps). Builds the CUDA parts, runs every test
# labelled gpu, and prints the bandwidth figure (reduce kernel vs cudaMemcpy device to device)
# and the small-allreduce latency. A few minutes on a fresh machine.
#
#   tests/gpu/run.sh                      build in ./build-gpu, report in build-gpu/gpu-report.txt
#   SPARK_GPU_BUILD_DIR=dir               another build folder
#   SPARK_GPU_MIB=256                     buffer size of the bandwidth figure
#   SPARK_GPU_ALLOW_SKIP=1                run even without a GPU (the tests then skip; CI check)
#
# Exit status: 0 when every gpu test passed, 1 on a failure, 77 when there is no GPU (the
# skip code of CTest and automake; one line says so, and nothing is built).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${SPARK_GPU_BUILD_DIR:-build-gpu}
mib=${SPARK_GPU_MIB:-256}
mkdir -p "$build"
report="$build/gpu-report.txt"
: >"$report"
say() { echo "gpu/run.sh: $*" | tee -a "$report"; }

gpu_cc=""
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader \
    | sed 's/^/gpu\/run.sh: gpu: /' | tee -a "$report"
  gpu_cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
elif [[ "${SPARK_GPU_ALLOW_SKIP:-0}" == 1 ]]; then
  say "no GPU found (nvidia-smi -L failed); SPARK_GPU_ALLOW_SKIP=1: building and running anyway, the gpu tests will skip"
else
  say "no GPU found (nvidia-smi -L failed): run this on a machine with an NVIDIA GPU and driver"
  exit 77
fi

if [[ -z "${CUDACXX:-}" && -x /usr/local/cuda/bin/nvcc ]]; then export CUDACXX=/usr/local/cuda/bin/nvcc; fi
if ! command -v "${CUDACXX:-nvcc}" >/dev/null; then
  say "no CUDA toolkit (nvcc): install it under /usr/local/cuda"
  exit 1
fi
say "$("${CUDACXX:-nvcc}" --version | tail -1)"

# The default architectures are sm_90 (H200) and sm_121 (GB10) + PTX; add this GPU's own.
archs="90-real;121-real;121-virtual"
if [[ -n "$gpu_cc" && "$gpu_cc" != 90 && "$gpu_cc" != 121 ]]; then archs="$archs;${gpu_cc}-real"; fi

start=$(date +%s)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARK_ENABLE_CUDA=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=$archs" >"$build/configure.log" 2>&1 \
  || { tail -30 "$build/configure.log"; say "configure failed (log: $build/configure.log)"; exit 1; }
grep -E '^-- sparkrun:' "$build/configure.log" | tee -a "$report" || true
targets=(kernels_unit_tests kernels_gpu_tests gpu_bandwidth)
available=$(cmake --build "$build" --target help 2>/dev/null || true)
for t in kernels_device_comm_tests kernels_gpu_fault_rank sparkrun; do  # when the repo has them
  if grep -qw "$t" <<<"$available"; then targets+=("$t"); fi
done
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >"$build/build.log" 2>&1 \
  || { tail -40 "$build/build.log"; say "build failed (log: $build/build.log)"; exit 1; }
say "built ${targets[*]} in $(( $(date +%s) - start )) s"

# In-process test "ranks" are kernels in one context that wait on each other: load eagerly.
export CUDA_MODULE_LOADING=EAGER
set +e
(cd "$build" && ctest -L gpu --no-tests=error --output-on-failure --timeout 300) >"$build/ctest-gpu.log" 2>&1
status=$?
set -e
[[ $status -eq 0 ]] || status=1
cat "$build/ctest-gpu.log" >>"$report"
grep -E 'Test +#|tests passed|Skipped|Not Run|Failed' "$build/ctest-gpu.log" || true
if grep -q "Skipped" "$build/ctest-gpu.log"; then
  why=$("$build/tests/kernels/kernels_gpu_tests" --gtest_filter='GpuReduce.*' 2>&1 \
    | grep -A1 'Skipped$' | tail -1 || true)
  say "some gpu tests SKIPPED: ${why:-see $build/ctest-gpu.log}"
fi

if [[ -n "$gpu_cc" ]]; then
  say "bandwidth ($mib MiB):"
  "$build/tests/kernels/gpu_bandwidth" "$mib" 2>&1 | tee -a "$report" || status=1
fi
say "done in $(( $(date +%s) - start )) s, status $status; report: $report"
exit $status
