#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (the lent H100/H200, say). Two ways:
#
#   scripts/device-check.sh            builds the kernels-only configuration for sm_90 there (core, plugins,
#                                      kernel tests and micro-benchmarks; no MPI, HDF5 or prometheus-cpp
#                                      needed, but GoogleTest, Google Benchmark and OpenBLAS are), runs the
#                                      kernel tests, the CUDA-vs-CPU cross-checks among them, then the
#                                      kernel micro-benchmarks.
#   scripts/device-check.sh --bundle   runs what scripts/device-bundle.sh packed on the build machine into
#                                      build-bundle-pack/ (carry it): the full `tessel` with its libraries, so
#                                      the GPU machine needs none of them. Runs the kernel tests (CUDA
#                                      against CPU for every op), the micro-benchmarks, then each model's
#                                      AIFB example on the CPU and with device = "cuda" and compares the
#                                      per-epoch losses (1e-4 relative), and the GPT of
#                                      gpt-shakespeare.toml for 30 steps the same way (1e-3, tokens/s of
#                                      each), and the conformance run of `tessel plugin check` on
#                                      every plugin, CUDA kernels included, and the GPT checks of
#                                      issue 17 (bench/gpu/gpt_check.py, see below). --bench also runs
#                                      bench/gpu/compare.py (Tessel against PyG on the GPU), passing it
#                                      the arguments after --bench.
#
# Results land in $OUT (when set) or build-device/out.
#
# On the GPU machine no test may skip (TESSEL_REQUIRE_GPU=1, scripts/check-skips.py): a skipped test there
# is a GPU path that did not run, and fails the check.
set -euo pipefail
export TESSEL_REQUIRE_GPU=1
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
bench=0
[ "${2:-}" = --bench ] && bench=1
export PATH="$PATH:/usr/local/cuda/bin"

if [ "$mode" != --bundle ]; then
  build=${TESSEL_DEVICE_BUILD:-$root/build-device}
  out=${OUT:-$build/out}
  mkdir -p "$out"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt" || echo "no nvidia-smi"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSEL_KERNELS_ONLY=ON -DCMAKE_CUDA_ARCHITECTURES=90
  cmake --build "$build" --parallel "$(nproc)"
  (cd "$build" && ctest --output-on-failure -L unit --output-junit ctest-junit.xml 2>&1 | tee "$out/ctest.txt")
  python3 "$root/scripts/check-skips.py" "$root/tests/skips.allow" "$build/ctest-junit.xml" | tee -a "$out/ctest.txt"
  for b in "$build"/bench/*_bench; do
    [ -x "$b" ] || continue
    "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
         --benchmark_out="$out/$(basename "$b").json" --benchmark_out_format=json | tee -a "$out/bench.txt"
  done
  exit 0
fi

# --bundle: the paths compiled into the binaries are the build machine's (/work/main, /work/shared/data).
bundle=$root/build-bundle
[ -d "$bundle/lib" ] || [ ! -f "$root/build-bundle-pack/bundle.tar.xz" ] || tar -C "$root" -xJf "$root/build-bundle-pack/bundle.tar.xz"
[ -d "$bundle/lib" ] || { echo "device-check: $bundle is missing; run scripts/device-bundle.sh and carry build-bundle" >&2; exit 2; }
out=${OUT:-$bundle/out}
mkdir -p "$out" /work
[ "$root" = /work/main ] || [ -e /work/main ] || ln -s "$root" /work/main
[ -e "$root/build" ] || ln -s "$bundle/build" "$root/build"
for shared in /work/shared "$(dirname "$root")/shared"; do
  mkdir -p "$shared"
  [ -e "$shared/data" ] || ln -s "$bundle/data" "$shared/data"
done
nccl=$(find /usr /opt -name 'libnccl.so.2' 2>/dev/null | head -1 || true)
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${nccl:+$(dirname "$nccl")}:${LD_LIBRARY_PATH:-}"
export OMPI_MCA_mca_base_component_path="$bundle/lib/openmpi3" OMPI_MCA_ess_singleton_isolated=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt" || true
# TESSEL_DEVICE_CMD: run that command in this environment instead of the checks (profiling, one-off runs).
if [ -n "${TESSEL_DEVICE_CMD:-}" ]; then
  cd "$root"
  eval "$TESSEL_DEVICE_CMD"
  exit $?
fi

status=0
logs=$out/logs  # one archive at the end: the lent machine returns few files
mkdir -p "$logs"
: >"$out/tests.txt"
for t in "$root"/build/tests/unit/*/*_test "$root"/build/tests/unit/*/*/*_test; do
  [ -x "$t" ] || continue
  echo "== $(basename "$t")" | tee -a "$out/tests.txt"
  if ! "$t" --gtest_color=no >"$logs/$(basename "$t").log" 2>&1; then status=1; fi
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|^\[  SKIPPED \]' "$logs/$(basename "$t").log" \
    | sort | uniq -c | tee -a "$out/tests.txt" || true
  grep -E 'Failure|error:' "$logs/$(basename "$t").log" | head -20 | tee -a "$out/tests.txt" || true
  # TESSEL_REQUIRE_GPU=1: a skipped test is a GPU path that did not run.
  if grep -q '^\[  SKIPPED \]' "$logs/$(basename "$t").log"; then
    echo "FAIL: $(basename "$t") skipped tests on the GPU machine (TESSEL_REQUIRE_GPU=1)" | tee -a "$out/tests.txt"
    status=1
  fi
done

for b in "$root"/build/bench/*_bench; do
  [ -x "$b" ] || continue
  "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_min_time=0.2 \
       --benchmark_out="$out/$(basename "$b").json" --benchmark_out_format=json >"$logs/kernels-bench.txt" 2>&1 || status=1
done

# Each model's AIFB example, one process, on the CPU and on the GPU: the per-epoch losses must agree.
cd "$root"
for model in rgcn rgat hgt; do
  for dev in cpu cuda; do
    dir=runs/device-check/$model-$dev
    rm -rf "$dir"
    /usr/bin/time -v build/bin/tessel run "jobs/examples/$model-aifb.toml" --set "job.device=$dev" \
      --set "job.output_dir=$dir" --set resources.workers=1 --set resources.threads_per_worker=8 \
      >"$logs/aifb-$model-$dev.log" 2>&1 || { status=1; tail -20 "$logs/aifb-$model-$dev.log"; }
  done
done
python3 - "$out" <<'EOF' || status=1
import json, sys
out = sys.argv[1]
rows, bad = [], 0
for model in ("rgcn", "rgat", "hgt"):
    try:
        cpu = json.load(open(f"runs/device-check/{model}-cpu/summary.json"))
        gpu = json.load(open(f"runs/device-check/{model}-cuda/summary.json"))
    except OSError as e:
        print(f"{model}: no summary ({e})"); bad += 1; continue
    worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(cpu["epoch_loss"], gpu["epoch_loss"]))
    same = len(cpu["epoch_loss"]) == len(gpu["epoch_loss"]) and worst <= 1e-4
    bad += not same
    med = lambda s: sorted(s["epoch_seconds"])[len(s["epoch_seconds"]) // 2] * 1e3
    rows.append(dict(model=model, epochs=len(gpu["epoch_loss"]), worst_rel=worst, ok=same,
                     cpu_test=cpu["test_accuracy"], cuda_test=gpu["test_accuracy"],
                     cpu_epoch_ms=med(cpu), cuda_epoch_ms=med(gpu)))
print(f"{'model':6} {'epochs':>6} {'worst rel':>10} {'ok':>3} {'cpu acc':>8} {'cuda acc':>8} {'cpu ms':>8} {'cuda ms':>8}")
for r in rows:
    print(f"{r['model']:6} {r['epochs']:6d} {r['worst_rel']:10.2e} {'yes' if r['ok'] else 'NO':>3} "
          f"{r['cpu_test']:8.3f} {r['cuda_test']:8.3f} {r['cpu_epoch_ms']:8.2f} {r['cuda_epoch_ms']:8.2f}")
json.dump(rows, open(f"{out}/aifb-cuda-vs-cpu.json", "w"), indent=1)
sys.exit(1 if bad else 0)
EOF

# The conformance run of `tessel plugin check` on the GPU (issue 21): every CUDA kernel of every built-in
# plugin, and the example's CUDA ReLU, against the CPU reference on random shapes, with guard bytes on the
# device, a second call for determinism (a note, not a failure, on CUDA) and its time against the built-in
# CUDA kernel. Tables in conformance-*.txt.
for p in build/plugins/libtessel_*.so build/example-plugin/libtessel_example.so; do
  [ -f "$p" ] || continue
  name=$(basename "$p" .so)
  build/bin/tessel plugin check "$p" >"$out/conformance-$name.txt" 2>&1 || { status=1; grep -E 'FAIL|error' "$out/conformance-$name.txt" | head -20; }
  grep -E '^  [0-9]+ passed' "$out/conformance-$name.txt" | sed "s/^/$name: /"
done

# Monitoring on the GPU (issue 20): a CUDA job's exporter serves NVML's memory and utilisation of its GPU
# (tessel_gpu_*) and the CUDA kernels' times from their events (tessel_kernel_seconds_total{device="cuda"}).
dir=runs/device-check/metrics-cuda
rm -rf "$dir"
build/bin/tessel run jobs/examples/rgcn-aifb.toml --set job.device=cuda --set "job.output_dir=$dir" \
  --set resources.workers=1 --set train.epochs=2000 --set metrics.port_base=9470 >"$logs/metrics-cuda.log" 2>&1 &
metrics_pid=$!
python3 - "$out/metrics-cuda.txt" <<'EOF' || { status=1; tail -5 "$logs/metrics-cuda.log"; }
import re, sys, time, urllib.request
text, deadline = "", time.time() + 90
while time.time() < deadline:
    time.sleep(1)
    try:
        text = urllib.request.urlopen("http://127.0.0.1:9470/metrics", timeout=2).read().decode()
    except OSError:
        continue
    if re.search(r'^tessel_gpu_memory_used_bytes', text, re.M) and \
       re.search(r'^tessel_kernel_seconds_total\{[^}]*device="cuda"', text, re.M):
        break
lines = [l for l in text.splitlines() if l.startswith(("tessel_gpu_", "tessel_kernel_seconds_total"))]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
print("\n".join(l for l in lines if "tessel_gpu_" in l or 'device="cuda"' in l))
ok = any(l.startswith("tessel_gpu_memory_used_bytes") for l in lines) and any('device="cuda"' in l for l in lines)
print("metrics on the GPU:", "ok" if ok else "MISSING tessel_gpu_* or CUDA kernel times")
sys.exit(0 if ok else 1)
EOF
kill "$metrics_pid" 2>/dev/null; wait "$metrics_pid" 2>/dev/null || true

# Sampled training from a part file on the GPU (issue 34): a generated graph cut into one part, the structure
# partitioned and the rows read from the part, against the replicated structure from the graph file on the
# GPU (the same batches: bit for bit) and against the CPU (1e-4 relative).
pg=runs/device-check/parts-graph.h5
rm -rf "$pg" runs/device-check/parts1
{ build/bin/tessel generate graph --out "$pg" --nodes 20000 --feature-dim 32 &&
  build/bin/tessel partition "$pg" --parts 1 --out runs/device-check/parts1; } >"$logs/parts-setup.log" 2>&1 ||
  { status=1; tail -5 "$logs/parts-setup.log"; }
for how in graph-cuda parts-cuda parts-cpu; do
  dir=runs/device-check/sampled-$how
  rm -rf "$dir"
  src=(--set data.format=partitions --set data.graph= --set data.partitions=runs/device-check/parts1)
  [ "${how%-*}" = graph ] && src=(--set data.format=graph --set "data.graph=$pg")
  build/bin/tessel run jobs/examples/rgcn-synthetic.toml "${src[@]}" --set "job.device=${how#*-}" \
    --set "job.output_dir=$dir" --set resources.workers=1 --set train.mode=sampled --set train.epochs=3 \
    --set metrics.port_base=0 >"$logs/sampled-$how.log" 2>&1 || { status=1; tail -20 "$logs/sampled-$how.log"; }
done
python3 - <<'EOF' || status=1
import json
s = {h: json.load(open(f"runs/device-check/sampled-{h}/summary.json")) for h in ("graph-cuda", "parts-cuda", "parts-cpu")}
same = s["graph-cuda"]["epoch_loss"] == s["parts-cuda"]["epoch_loss"]
worst = max(abs(a - b) / abs(a) for a, b in zip(s["parts-cpu"]["epoch_loss"], s["parts-cuda"]["epoch_loss"]))
ok = same and worst <= 1e-4 and s["parts-cuda"]["structure"] == "partitioned"
print(f"sampled from a part file on the GPU: partitioned vs replicated {'bit for bit' if same else 'DIFFER'}, "
      f"vs CPU worst relative {worst:.2e} ({'ok' if ok else 'NO'})")
raise SystemExit(0 if ok else 1)
EOF

# The GPT of gpt-shakespeare.toml (issue 7's line-1 configuration), 30 steps, one process, on the CPU and on
# the GPU: the per-step losses must agree to 1e-3 relative; tokens per second of each.
for dev in cpu cuda; do
  dir=runs/device-check/gpt-$dev
  rm -rf "$dir"
  build/bin/tessel run jobs/examples/gpt-shakespeare.toml --set "job.device=$dev" --set "job.output_dir=$dir" \
    --set resources.threads_per_worker=8 --set train.steps=30 --set train.warmup_steps=5 --set train.val_every=0 \
    --set train.val_batches=2 >"$logs/gpt-$dev.log" 2>&1 || { status=1; tail -20 "$logs/gpt-$dev.log"; }
done
python3 - "$out" <<'EOF' || status=1
import json, sys
out = sys.argv[1]
try:
    cpu = json.load(open("runs/device-check/gpt-cpu/summary.json"))
    gpu = json.load(open("runs/device-check/gpt-cuda/summary.json"))
except OSError as e:
    print(f"gpt: no summary ({e})"); sys.exit(1)
worst = max(abs(a - b) / abs(a) for a, b in zip(cpu["step_loss"], gpu["step_loss"]))
ok = len(cpu["step_loss"]) == len(gpu["step_loss"]) == 30 and worst <= 1e-3
row = dict(steps=len(gpu["step_loss"]), worst_rel=worst, ok=ok, cpu_tokens_per_second=cpu["tokens_per_second"],
           cuda_tokens_per_second=gpu["tokens_per_second"], device=gpu.get("device"))
print(f"gpt2 L4 C256: 30 steps, worst relative loss difference CUDA vs CPU {worst:.2e} ({'ok' if ok else 'NO'}), "
      f"tokens/s CPU {row['cpu_tokens_per_second']:.0f}, CUDA {row['cuda_tokens_per_second']:.0f}")
json.dump(row, open(f"{out}/gpt-cuda-vs-cpu.json", "w"), indent=1)
sys.exit(0 if ok else 1)
EOF

# The GPT on the GPU as issue 17's GPU lines measure it (bench/gpu/gpt_check.py): the init_from crash's
# diagnosis, 10 back-to-back runs of every policy and init_from against the CPU, GPT-2 124M's shape against
# PyTorch, the planner's GPU calibration, the ROK curve, compute-sanitizer; one table, within
# TESSEL_GPT_CHECK_BUDGET seconds (default 420; TESSEL_GPT_CHECK_SECTIONS picks sections, "none" skips it).
if [ "${TESSEL_GPT_CHECK_SECTIONS:-all}" != none ]; then
  sections=${TESSEL_GPT_CHECK_SECTIONS:-all}
  [ "$sections" = all ] && sections=diagnose,repeat,speed,rok,sampled,sanitize
  PYTHONUNBUFFERED=1 python3 bench/gpu/gpt_check.py --out "$out" --sections "$sections" \
    --budget "${TESSEL_GPT_CHECK_BUDGET:-420}" 2>"$logs/gpt-check.log" | tee "$out/gpt-check.txt" || status=1
fi

if [ "$bench" = 1 ] && [ -f bench/gpu/compare.py ]; then
  PYTHONUNBUFFERED=1 python3 bench/gpu/compare.py --out "$out" "${@:3}" || status=1
fi
tar -C "$out" -czf "$out/logs.tgz" logs && rm -rf "$logs"
cat "$out/tests.txt"
exit $status
