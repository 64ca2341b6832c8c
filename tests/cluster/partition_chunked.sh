#!/usr/bin/env bash
# The distributed partitioner (`mpirun -np P tessel partition --input DIR`, chunked_partition.h) over a
# graph in DGL's chunked format written by numpy alone (chunked_graph.py): three node types, five edge
# types in NumPy and CSV chunks, features, labels, masks, duplicate edges and self-loops.
# 1. The reference is the one-process path: `tessel import chunked` then `tessel partition GRAPH`. For the
#    same assignment (range and random, 1 to 3 parts) every rank count (1, 2, 3) writes the same part
#    files, field by field (compare_parts.py, h5py), and the same partition.json but for the input's
#    path and hash. cluster_partitions holds such part files to training from the graph itself.
# 2. PT-Scotch on 1, 2 and 3 ranks: every constraint within 1.05, the cut below the random one's and
#    within 15% of METIS's on the same graph; the stream method within 1.05 and below random; RGCN trains
#    from PT-Scotch's parts on 3 workers.
#    `tessel generate graph --chunked` on 3 ranks writes the graph 1 rank writes; partitioned, it trains.
# 3. Bad input, each on 2 ranks: chunk sizes that disagree with metadata.json (per chunk and per type), an
#    id out of range, a chunk a rank cannot open, a NaN feature, a method or part count that cannot be, a predicted peak
#    above --memory-budget, an --out that is not an earlier output: each exits with its code, names the file (and the rank), and leaves nothing.
source "$(dirname "$0")/../lib.sh"
export TESSEL  # scripts/tessel-mpirun runs it
python=$TESSEL_SOURCE_DIR/build/bench-venv/bin/python
if ! [ -x "$python" ] || ! "$python" -c "import numpy, h5py" 2>/dev/null; then
  [ "${TESSEL_REQUIRE_DATA:-0}" = 1 ] && fail "build/bench-venv has no numpy and h5py (bench/peers/setup.sh)"
  skip "build/bench-venv has no numpy and h5py: run bench/peers/setup.sh"
fi
w=$TESSEL_WORK
"$python" tests/cluster/chunked_graph.py "$w/g" 2 > /dev/null || fail "chunked_graph.py failed"
"$TESSEL" import chunked "$w/g" --add-inverse --add-self-loop --out "$w/graph.h5" > /dev/null ||
  fail "tessel import chunked failed"

dist() {  # dist RANKS ARGS...: the distributed partitioner over $w/g with the derived relations
  local ranks=$1; shift
  mpirun "${MPIRUN_FLAGS[@]}" -np "$ranks" "$TESSEL" partition --input "$w/g" --add-inverse --add-self-loop "$@"
}
compare() { "$python" tests/cluster/compare_parts.py "$@"; }

# 1. The same parts as the one-process path.
for method in range random; do
  for parts in 1 2 3; do
    "$TESSEL" partition "$w/graph.h5" --parts $parts --method $method --seed 5 --out "$w/ref-$method-$parts" \
      > /dev/null || fail "tessel partition GRAPH --method $method --parts $parts failed"
    for ranks in 1 2 3; do
      out=$w/d-$method-$parts-$ranks
      dist $ranks --parts $parts --method $method --seed 5 --out "$out" > "$out.log" 2>&1 ||
        { cat "$out.log"; fail "$ranks ranks, --method $method --parts $parts failed"; }
      compare "$w/ref-$method-$parts" "$out" > /dev/null ||
        fail "$ranks ranks, $method into $parts parts: not the one-process path's parts"
    done
  done
done
echo "range and random, 1..3 parts: 1, 2 and 3 ranks write the one-process path's part files"

# Per-type totals only, no derived relations.
"$python" tests/cluster/chunked_graph.py "$w/g1" 1 > /dev/null || fail "chunked_graph.py (scale 1) failed"
"$TESSEL" import chunked "$w/g1" --out "$w/g1.h5" > /dev/null || fail "tessel import chunked g1 failed"
"$TESSEL" partition "$w/g1.h5" --parts 3 --method range --out "$w/ref-g1" > /dev/null || fail "partition g1 failed"
mpirun "${MPIRUN_FLAGS[@]}" -np 2 "$TESSEL" partition --input "$w/g1" --parts 3 --method range --out "$w/d-g1" \
  > "$w/d-g1.log" 2>&1 || { cat "$w/d-g1.log"; fail "2 ranks over g1 failed"; }
compare "$w/ref-g1" "$w/d-g1" > /dev/null || fail "g1 (per-type totals, no derived relations) differs"

# 2. PT-Scotch: balance, cut, and training from its parts.
"$TESSEL" partition "$w/graph.h5" --parts 3 --out "$w/metis-3" > /dev/null || fail "METIS partition failed"
for ranks in 1 2 3; do
  dist $ranks --parts 3 --out "$w/pt-$ranks" > "$w/pt-$ranks.log" 2>&1 ||
    { cat "$w/pt-$ranks.log"; fail "PT-Scotch on $ranks ranks failed"; }
  "$python" - "$w/pt-$ranks/partition.json" "$w/metis-3/partition.json" "$ranks" <<'PY' || fail "PT-Scotch on $ranks ranks: quality"
import json, sys
pt, metis = (json.load(open(p)) for p in sys.argv[1:3])
assert pt["method"] == "ptscotch" and pt["parts"] == 3, pt["method"]
assert max(pt["imbalance"]) <= 1.05, dict(zip(pt["constraints"], pt["imbalance"]))
assert pt["constraints"] == ["train", "edges", "nodes"], pt["constraints"]
assert pt["edge_cut"] < pt["random_edge_cut"], (pt["edge_cut"], pt["random_edge_cut"])
assert pt["edge_cut"] <= 1.15 * metis["edge_cut"], (pt["edge_cut"], metis["edge_cut"])
print(f"PT-Scotch on {sys.argv[3]} ranks: cut {pt['edge_cut']} (METIS {metis['edge_cut']}, random "
      f"{pt['random_edge_cut']}), imbalance {max(pt['imbalance']):.3f}")
PY
done
# The example names partition.method = "metis"; parts cut another way train from a job that leaves it out.
grep -v '^method = "metis"' jobs/examples/rgcn-synthetic.toml > "$w/rgcn.toml"
dist 2 --parts 3 --method stream --out "$w/stream" > "$w/stream.log" 2>&1 || { cat "$w/stream.log"; fail "stream failed"; }
"$python" - "$w/stream/partition.json" "$w/metis-3/partition.json" <<'PY' || fail "stream: quality"
import json, sys
st, metis = (json.load(open(p)) for p in sys.argv[1:3])
assert st["method"] == "stream" and max(st["imbalance"]) <= 1.05, dict(zip(st["constraints"], st["imbalance"]))
assert st["edge_cut"] < st["random_edge_cut"], (st["edge_cut"], st["random_edge_cut"])
print(f"stream on 2 ranks: cut {st['edge_cut']} (METIS {metis['edge_cut']}, random {st['random_edge_cut']}), "
      f"imbalance {max(st['imbalance']):.3f}")
PY
"$TESSEL_SOURCE_DIR/scripts/tessel-mpirun" -np 4 "$w/rgcn.toml" --set data.format=partitions \
  --set data.graph= --set data.partitions="$w/pt-2" --set resources.workers=3 --set train.epochs=3 \
  --set metrics.port_base=0 --set job.device=cpu --set job.output_dir="$w/train" > "$w/train.log" 2>&1 ||
  { cat "$w/train.log"; fail "training from PT-Scotch's parts failed"; }
"$python" -c "
import json, math, sys
s = json.load(open(sys.argv[1]))
assert s['workers'] == 3 and len(s['epoch_loss']) == 3 and all(math.isfinite(x) for x in s['epoch_loss']), s['epoch_loss']
print('RGCN from PT-Scotch parts, 3 workers: losses', s['epoch_loss'])" "$w/train/summary.json" ||
  fail "training from PT-Scotch's parts gave no losses"

# `tessel generate graph --chunked` under mpirun: 3 ranks write the graph 1 rank writes (each its chunks),
# and the distributed partitioner takes it; an existing --out is refused.
for ranks in 1 3; do
  mpirun "${MPIRUN_FLAGS[@]}" -np $ranks "$TESSEL" generate graph --chunked --nodes 4000 --feature-dim 8 \
    --out "$w/gen-$ranks" > "$w/gen-$ranks.log" 2>&1 || { cat "$w/gen-$ranks.log"; fail "generate --chunked on $ranks ranks failed"; }
  [ "$(ls "$w/gen-$ranks/edges" | wc -l)" = $((6 * ranks)) ] || fail "generate --chunked on $ranks ranks: not 6 x $ranks edge chunks"
  "$TESSEL" import chunked "$w/gen-$ranks" --out "$w/gen-$ranks.h5" > /dev/null || fail "importing gen-$ranks failed"
done
"$python" - "$w/gen-1.h5" "$w/gen-3.h5" <<'PY' || fail "generate --chunked: 1 and 3 ranks wrote different graphs"
import sys, h5py
def arrays(path):
    out = {}
    with h5py.File(path) as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()].tobytes()) if isinstance(o, h5py.Dataset) else None)
    return out
a, b = arrays(sys.argv[1]), arrays(sys.argv[2])
assert a.keys() == b.keys() and all(a[k] == b[k] for k in a), sorted(k for k in a if a[k] != b.get(k))
print(f"generate --chunked: 1 and 3 ranks write the same graph ({len(a)} arrays)")
PY
mpirun "${MPIRUN_FLAGS[@]}" -np 2 "$TESSEL" partition --input "$w/gen-3" --add-inverse --add-self-loop --parts 2 \
  --out "$w/gen-parts" > "$w/gen-parts.log" 2>&1 || { cat "$w/gen-parts.log"; fail "partitioning the generated graph failed"; }
rc=0
mpirun "${MPIRUN_FLAGS[@]}" -np 2 "$TESSEL" generate graph --chunked --nodes 400 --out "$w/gen-3" > "$w/gen-again.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "exists and is not an empty directory" "$w/gen-again.log" || { cat "$w/gen-again.log"; fail "generate --chunked over an existing graph: exit $rc"; }
[ -f "$w/gen-3/metadata.json" ] || fail "generate --chunked over an existing graph touched it"

# 3. Bad input: a code, the file or the rank, and nothing left behind.
expect_refusal() {  # expect_refusal NAME CODE PATTERN ARGS...: 2 ranks refuse, naming PATTERN
  local name=$1 code=$2 pattern=$3; shift 3
  local rc=0
  mpirun "${MPIRUN_FLAGS[@]}" -np 2 "$TESSEL" partition "$@" > "$w/$name.log" 2>&1 || rc=$?
  [ "$rc" = "$code" ] || { cat "$w/$name.log"; fail "$name: exit $rc, expected $code"; }
  grep -q -- "$pattern" "$w/$name.log" || { cat "$w/$name.log"; fail "$name: no '$pattern' in the error"; }
  [ ! -e "$w/bad-out" ] || fail "$name: left $w/bad-out behind"
  ! ls -a "$w" | grep -q "^\.bad-out\|bad-out\..*tmp" || { ls -a "$w"; fail "$name: left a temporary directory"; }
  echo "$name: exit $code, $(grep -m1 'error' "$w/$name.log" | cut -c1-150)"
}
cp -r "$w/g" "$w/short"  # one CSV chunk loses its last edge: per-chunk counts disagree
sed -i '$ d' "$w/short/edges/paper-cites-paper-1.csv"
expect_refusal chunk-size 3 "paper-cites-paper-1.csv: .* edges, but .*metadata.json" --input "$w/short" --parts 2 \
  --out "$w/bad-out"
cp -r "$w/g1" "$w/short1"  # per-type totals only: the sum disagrees
sed -i '$ d' "$w/short1/edges/author-in-venue-2.csv"
expect_refusal type-total 3 "metadata.json: edge type 'author:in:venue': its chunks hold 299 edges" \
  --input "$w/short1" --parts 2 --out "$w/bad-out"
cp -r "$w/g" "$w/range"
echo "0,999999" >> "$w/range/edges/paper-cites-paper-0.csv"
expect_refusal id-range 3 "paper-cites-paper-0.csv:.*destination id 999999 is out of range" --input "$w/range" \
  --parts 2 --out "$w/bad-out"
cp -r "$w/g" "$w/lost"  # read by rank 1 alone (the second of paper's feature chunks)
rm "$w/lost/node_data/paper-feat-1.npy"
expect_refusal unreadable 3 "rank [01]: .*paper-feat-1.npy: cannot open" --input "$w/lost" --parts 2 \
  --out "$w/bad-out"
cp -r "$w/g" "$w/nan"  # a feature that is NaN: found while the features stream, after the parts' files exist
"$python" -c "import numpy as np, sys; a = np.load(sys.argv[1]); a[1, 2] = np.nan; np.save(sys.argv[1], a)" \
  "$w/nan/node_data/paper-feat-1.npy" || fail "cannot plant a NaN"
expect_refusal nan-feature 3 "node_data.paper.feat: node paper:.* column 2 is NaN; node features must be finite" \
  --input "$w/nan" --parts 3 --out "$w/bad-out"
expect_refusal metis-method 2 "does not partition a chunked graph" --input "$w/g" --parts 2 --method metis \
  --out "$w/bad-out"
expect_refusal too-many-parts 2 "into 99999 parts" --input "$w/g" --parts 99999 --out "$w/bad-out"
expect_refusal memory-budget 2 "rank [01]: this rank would need about .* MB .*above --memory-budget 1 MB" \
  --input "$w/g" --parts 2 --memory-budget 1000000 --out "$w/bad-out"
mkdir -p "$w/keep" && echo precious > "$w/keep/notes.txt"
expect_refusal foreign-out 2 "refusing to replace it" --input "$w/g" --parts 2 --out "$w/keep"
[ "$(cat "$w/keep/notes.txt")" = precious ] || fail "foreign-out: the directory was touched"
pass "distributed partitioning: the one-process path's parts, PT-Scotch within balance, bad input refused"
