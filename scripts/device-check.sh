#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (the lent H200, say): builds the kernels-only configuration for sm_90
# (core, plugins, kernel tests and micro-benchmarks; no MPI, HDF5 or prometheus-cpp needed) and runs the
# kernel tests, including the CUDA-vs-CPU cross-device tests that skip where no GPU is present, then the
# kernel micro-benchmarks. Results land in $OUT (when set) or build-device/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSEL_DEVICE_BUILD:-$root/build-device}
out=${OUT:-$build/out}
mkdir -p "$out"
export PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt" || echo "no nvidia-smi"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSEL_KERNELS_ONLY=ON -DCMAKE_CUDA_ARCHITECTURES=90
cmake --build "$build" --parallel "$(nproc)"
(cd "$build" && ctest --output-on-failure -L unit 2>&1 | tee "$out/ctest.txt")
for b in "$build"/bench/kernels/*_bench; do
  [ -x "$b" ] || continue
  "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
       --benchmark_out="$out/$(basename "$b").json" --benchmark_out_format=json | tee -a "$out/bench.txt"
done
