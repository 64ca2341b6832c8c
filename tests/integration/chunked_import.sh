#!/usr/bin/env bash
# DGL's chunked graph format, written by numpy from DGL's documentation (tests/integration/chunked_import.py,
# no Tessel code), imports with `tessel import chunked` and trains: AIFB written that way is the graph
# `tessel import rdf` builds from the N-Triples (the same nodes, relations and edges, in the same order),
# so RGCN on it reaches the same test accuracy with the same losses, bit for bit; and so it does from the part
# file the distributed partitioner (mpirun tessel partition --input) cuts from that directory.
# Needs build/bench-venv for numpy (bench/peers/setup.sh --peers; scripts/test.sh makes it).
source "$(dirname "$0")/../lib.sh"
need_aifb
python=$TESSEL_SOURCE_DIR/build/bench-venv/bin/python
if ! [ -x "$python" ] || ! "$python" -c "import numpy" 2>/dev/null; then
  [ "${TESSEL_REQUIRE_DATA:-0}" = 1 ] && fail "build/bench-venv has no numpy (bench/peers/setup.sh --peers)"
  skip "build/bench-venv has no numpy: run bench/peers/setup.sh --peers"
fi
aifb=$TESSEL_DATA_DIR/aifb
"$python" tests/integration/chunked_import.py "$aifb/aifb_stripped.nt.gz" "$aifb/trainingSet.tsv" "$aifb/testSet.tsv" \
  "$TESSEL_WORK/aifb-chunked" 3 || fail "chunked_import.py could not write AIFB"
"$TESSEL" import chunked "$TESSEL_WORK/aifb-chunked" --add-inverse --add-self-loop --out "$TESSEL_WORK/chunked.h5" \
  > "$TESSEL_WORK/import.log" || { cat "$TESSEL_WORK/import.log"; fail "tessel import chunked failed"; }
"$TESSEL" import rdf --triples "$aifb/aifb_stripped.nt.gz" --train-labels "$aifb/trainingSet.tsv" \
  --test-labels "$aifb/testSet.tsv" --out "$TESSEL_WORK/rdf.h5" > /dev/null || fail "tessel import rdf failed"

# One process each, the example's settings, each graph file read as it is (data.format = "graph").
for g in chunked rdf; do
  "$TESSEL" run jobs/examples/rgcn-aifb.toml --set job.seed=0 --set job.output_dir="$TESSEL_WORK/run-$g" \
    --set metrics.port_base=0 --set data.format=graph --set data.graph="$TESSEL_WORK/$g.h5" --set data.triples= \
    --set data.train_labels= --set data.test_labels= > "$TESSEL_WORK/run-$g.log" 2>&1 ||
    { cat "$TESSEL_WORK/run-$g.log"; fail "training on $g.h5 failed"; }
done
"$python" - "$TESSEL_WORK/run-chunked/summary.json" "$TESSEL_WORK/run-rdf/summary.json" <<'EOF' || fail "the chunked graph trains differently"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["epoch_loss"] == b["epoch_loss"], (a["epoch_loss"][:3], b["epoch_loss"][:3])
assert a["test_accuracy"] == b["test_accuracy"], (a["test_accuracy"], b["test_accuracy"])
assert a["test_accuracy"] >= 0.9, a["test_accuracy"]
print(f"AIFB from DGL's chunked format: test accuracy {a['test_accuracy']:.4f}, the N-Triples' {b['test_accuracy']:.4f}; "
      f"{len(a['epoch_loss'])} epoch losses bit-identical")
EOF
# The same directory through the distributed partitioner (2 ranks, one part: the whole graph, cut by the
# range baseline) trains from its part file as from the N-Triples' graph: the same losses and accuracy.
export TESSEL
mpirun "${MPIRUN_FLAGS[@]}" -np 2 "$TESSEL" partition --input "$TESSEL_WORK/aifb-chunked" --add-inverse \
  --add-self-loop --parts 1 --method range --out "$TESSEL_WORK/aifb-parts" > "$TESSEL_WORK/parts.log" 2>&1 ||
  { cat "$TESSEL_WORK/parts.log"; fail "tessel partition --input failed on AIFB"; }
grep -v '^method = ' jobs/examples/rgcn-aifb.toml > "$TESSEL_WORK/aifb.toml"
for how in graph partitions; do
  sets=(--set data.format=$how)
  [ $how = graph ] && sets+=(--set data.graph="$TESSEL_WORK/rdf.h5") ||
    sets+=(--set data.graph= --set data.partitions="$TESSEL_WORK/aifb-parts")
  "$TESSEL_SOURCE_DIR/scripts/tessel-mpirun" -np 2 "$TESSEL_WORK/aifb.toml" --set job.seed=0 \
    --set job.output_dir="$TESSEL_WORK/mpi-$how" --set metrics.port_base=0 --set data.triples= \
    --set data.train_labels= --set data.test_labels= "${sets[@]}" > "$TESSEL_WORK/mpi-$how.log" 2>&1 ||
    { cat "$TESSEL_WORK/mpi-$how.log"; fail "training AIFB ($how) under mpirun failed"; }
done
"$python" - "$TESSEL_WORK/mpi-partitions/summary.json" "$TESSEL_WORK/mpi-graph/summary.json" <<'EOF' ||
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["epoch_loss"] == b["epoch_loss"], (a["epoch_loss"][:3], b["epoch_loss"][:3])
assert a["test_accuracy"] == b["test_accuracy"], (a["test_accuracy"], b["test_accuracy"])
print(f"AIFB through mpirun tessel partition --input: test accuracy {a['test_accuracy']:.4f}, the N-Triples' "
      f"{b['test_accuracy']:.4f}; {len(a['epoch_loss'])} epoch losses bit-identical")
EOF
  fail "AIFB from the distributed partitioner trains differently"
pass "AIFB in DGL's chunked format imports and trains as from its N-Triples, directly and through partition --input"
