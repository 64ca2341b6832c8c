#!/usr/bin/env bash
# RGCN on AIFB with the paper's setup (jobs/examples/rgcn-aifb.toml: 2 layers, hidden 16, 50 epochs, Adam
# 0.01, no bases, l2 0)
# reaches >= 90% test accuracy for one seed, in the embedded one-process run.
source "$(dirname "$0")/../lib.sh"
need_aifb
"$TESSEL" run jobs/examples/rgcn-aifb.toml --set job.seed=0 --set job.output_dir="$TESSEL_WORK/run" \
  --set data.graph="$TESSEL_WORK/aifb.h5" --set metrics.port_base=0 \
  --set data.triples="$TESSEL_DATA_DIR/aifb/aifb_stripped.nt.gz" \
  --set data.train_labels="$TESSEL_DATA_DIR/aifb/trainingSet.tsv" --set data.test_labels="$TESSEL_DATA_DIR/aifb/testSet.tsv"
acc=$(json "$TESSEL_WORK/run/summary.json" 's["test_accuracy"]')
echo "AIFB test accuracy (seed 0, -np 1): $acc"
python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.90 else 1)" || fail "test accuracy $acc < 0.90"
pass "AIFB accuracy $acc"
