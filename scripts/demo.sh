#!/usr/bin/env bash
# The demo: installs what is missing, builds, and trains RGCN on a generated heterogeneous graph with
# 2 workers under mpirun (plus the coordinator: 3 ranks). Needs no dataset.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$TESSEL_ROOT"

"$TESSEL_ROOT/scripts/setup-deps.sh"
tessel_build

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
