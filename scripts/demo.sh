#!/usr/bin/env bash
# The demo: installs what is missing, builds, and trains RGCN on a generated heterogeneous graph with
# 2 workers under mpirun (plus the coordinator: 3 ranks). Needs no dataset.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$TESSEL_ROOT"

"$TESSEL_ROOT/scripts/setup-deps.sh"
# Only what the demo runs: the tessel binary and the two CPU plugins its job loads (nn, rgnn), in a
# Release build of its own without CUDA (build-demo/): about 2.5 minutes on a fresh clone of this
# 2-core machine with an empty ccache, where scripts/test.sh builds everything (the tests, benchmarks and
# CUDA kernels) in build/.
demo_build=${TESSEL_DEMO_BUILD:-$TESSEL_ROOT/build-demo}
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S "$TESSEL_ROOT" -B "$demo_build" -DCMAKE_BUILD_TYPE=Release -DTESSEL_CUDA=OFF > /dev/null
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
