#!/usr/bin/env bash
# The demo: installs what is missing, builds, and trains RGCN on a generated heterogeneous graph with
# 2 workers under mpirun (plus the coordinator: 3 ranks). Needs no dataset.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$TESSEL_ROOT"

"$TESSEL_ROOT/scripts/setup-deps.sh"
# Only what the demo runs: the tessel binary and the two CPU plugins its job loads (nn, rgnn), in a
# build of its own without CUDA (build-demo/), where scripts/test.sh builds everything (the tests,
# benchmarks and CUDA kernels) in build/. At -O1: on a fresh clone of a 2-core VM with an empty ccache
# the build took 131 s at -O1 against 160 to 176 s at -O3 (the same hour, the same machine), and the
# demo trains in 1.3 s against 1.2 s, to the same losses.
demo_build=${TESSEL_DEMO_BUILD:-$TESSEL_ROOT/build-demo}
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S "$TESSEL_ROOT" -B "$demo_build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DTESSEL_CUDA=OFF > /dev/null
cmake --build "$demo_build" --parallel "$(tessel_jobs)" --target tessel tessel_nn tessel_rgnn
export TESSEL=$demo_build/bin/tessel

job=jobs/examples/rgcn-synthetic.toml
out=runs/demo
rm -rf "$out"
echo "demo: mpirun -np 3 tessel run $job  (1 coordinator + 2 workers)"

"$TESSEL_ROOT/scripts/tessel-mpirun" -np 3 "$job" --set job.output_dir="$out" "$@"
python3 - "$out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
chance = 1.0 / max(1, s["graph"]["classes"])
print(f"demo: {s['workers']} workers, {len(s['epoch_loss'])} epochs, final loss {s['epoch_loss'][-1]:.4f}")
print(f"demo: final test accuracy {s['test_accuracy']:.4f} (chance {chance:.2f}) in {s['wall_seconds']:.1f} s")
sys.exit(0 if s["test_accuracy"] > 2 * chance else 1)
PY
