#!/usr/bin/env bash
# Three hosts on one machine (tests/cluster/netns/hosts.sh: network namespaces on a bridge, Open MPI over
# TCP only, launched through a namespace-entering agent). On them:
# - RGCN full-graph (also from part files, data.format = "partitions", and from parts the 3 hosts generated
#   and cut themselves: generate --chunked, partition --input), RGCN sampled (remote feature rows
#   over the network) and a 3-stage GPT pipeline give
#   bit for bit the losses of the same ranks on one host (shared memory), and every rank ran where it was
#   placed (summary.json's rank_hosts);
# - `tessel smoke` passes on every rank and prints its table; a host whose spill disk is full, and a
#   plugin that fails its check, turn that host's rows to FAIL with a non-zero exit.
# Skipped (exit 77) where network namespaces cannot be made (not root).
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/netns/hosts.sh"
netns_up

same_losses() {  # same_losses LABEL KEY: $TESSEL_WORK/LABEL/{one,three}/summary.json agree exactly on KEY
  python3 - "$TESSEL_WORK/$1" "$1" "$2" <<'PY'
import json, sys
w, label, key = sys.argv[1:4]
one, three = (json.load(open(f"{w}/{d}/summary.json")) for d in ("one", "three"))
hosts = three["rank_hosts"]
want = {"0": "tsl-h0", "1": "tsl-h0", "2": "tsl-h1", "3": "tsl-h2"}
assert hosts == want, f"{label}: ranks ran on {hosts}, expected {want}"
assert len(set(one["rank_hosts"].values())) == 1, f"{label}: the one-host run ran on {one['rank_hosts']}"
a, b = one[key], three[key]
assert len(a) == len(b) and len(a) > 0, f"{label}: {len(a)} {key} on one host, {len(b)} on three"
diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
assert not diff, f"{label}: {key}[{diff[0]}] is {b[diff[0]]!r} on 3 hosts, {a[diff[0]]!r} on one host"
print(f"PASS {label}: {len(a)} {key} values bit for bit equal on 3 hosts (TCP) and on one host "
      f"(last {b[-1]!r}); ranks on {sorted(set(hosts.values()))}")
PY
}

run_both() {  # run_both LABEL JOB SETS...: -np 4 on one host and on the 3 hosts (ranks 0-1 on tsl-h0)
  local label=$1 job=$2; shift 2
  mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np 4 "$TESSEL" run "$job" "$@" \
    --set job.output_dir="$TESSEL_WORK/$label/one" > "$TESSEL_WORK/$label.one.log" 2>&1 ||
    { tail "$TESSEL_WORK/$label.one.log"; fail "$label on one host"; }
  netns_mpirun 2 1 1 -- --enable-recovery "$TESSEL" run "$job" "$@" --set job.output_dir="$TESSEL_WORK/$label/three" \
    > "$TESSEL_WORK/$label.three.log" 2>&1 || { tail "$TESSEL_WORK/$label.three.log"; fail "$label on 3 hosts"; }
}

graph=(--set data.graph="$TESSEL_WORK/graph.h5" --set metrics.port_base=0 --set job.seed=7 --set resources.workers=3)
run_both rgcn-full jobs/examples/rgcn-synthetic.toml "${graph[@]}" --set train.epochs=20
same_losses rgcn-full epoch_loss
# The same training from part files on the shared filesystem (data.format = "partitions"): each worker on
# its own host reads its part-K.h5; the losses are those the coordinator's own cut gave above.
"$TESSEL" partition "$TESSEL_WORK/graph.h5" --parts 3 --out "$TESSEL_WORK/parts" > /dev/null ||
  fail "tessel partition of the cluster's graph failed"
run_both rgcn-parts jobs/examples/rgcn-synthetic.toml "${graph[@]}" --set train.epochs=20 --set data.format=partitions \
  --set data.graph= --set data.partitions="$TESSEL_WORK/parts"
same_losses rgcn-parts epoch_loss
python3 -c "import json, sys; a, b = (json.load(open(p))['epoch_loss'] for p in sys.argv[1:]); assert a == b, (a, b)" \
  "$TESSEL_WORK/rgcn-full/one/summary.json" "$TESSEL_WORK/rgcn-parts/three/summary.json" ||
  fail "training from part files on 3 hosts differs from the coordinator's cut"
echo "PASS rgcn-parts: part files on 3 hosts train as the coordinator's own cut, bit for bit"
# No host holds the whole graph: the 3 hosts write a chunked graph (each its chunks), cut it (each reads its
# share and writes its part, on the shared filesystem) and train from the parts: the losses of one host
# training from the imported graph with the same (range) cut.
netns_mpirun 1 1 1 -- "$TESSEL" generate graph --chunked --nodes 3000 --feature-dim 16 --out "$TESSEL_WORK/chunked" \
  > "$TESSEL_WORK/chunked.log" 2>&1 || { cat "$TESSEL_WORK/chunked.log"; fail "generate --chunked on 3 hosts"; }
netns_mpirun 1 1 1 -- "$TESSEL" partition --input "$TESSEL_WORK/chunked" --add-inverse --add-self-loop --parts 3 \
  --method range --out "$TESSEL_WORK/dparts" > "$TESSEL_WORK/dparts.log" 2>&1 ||
  { cat "$TESSEL_WORK/dparts.log"; fail "partition --input on 3 hosts"; }
"$TESSEL" import chunked "$TESSEL_WORK/chunked" --add-inverse --add-self-loop --out "$TESSEL_WORK/chunked.h5" \
  > /dev/null || fail "importing the 3 hosts' chunked graph"
chunked=(--set metrics.port_base=0 --set job.seed=7 --set resources.workers=3 --set train.epochs=10
         --set partition.method=range)
mpirun "${MPIRUN_FLAGS[@]}" --enable-recovery -np 4 "$TESSEL" run jobs/examples/rgcn-synthetic.toml "${chunked[@]}" \
  --set data.format=graph --set data.graph="$TESSEL_WORK/chunked.h5" --set job.output_dir="$TESSEL_WORK/dist/one" \
  > "$TESSEL_WORK/dist.one.log" 2>&1 || { tail "$TESSEL_WORK/dist.one.log"; fail "the chunked graph on one host"; }
netns_mpirun 2 1 1 -- --enable-recovery "$TESSEL" run jobs/examples/rgcn-synthetic.toml "${chunked[@]}" \
  --set data.format=partitions --set data.graph= --set data.partitions="$TESSEL_WORK/dparts" \
  --set job.output_dir="$TESSEL_WORK/dist/three" > "$TESSEL_WORK/dist.three.log" 2>&1 ||
  { tail "$TESSEL_WORK/dist.three.log"; fail "training from the 3 hosts' parts"; }
same_losses dist epoch_loss
run_both rgcn-sampled jobs/examples/rgcn-synthetic.toml "${graph[@]}" --set train.mode='"sampled"' \
  --set train.epochs=3 --set train.batch_size=256 --set train.fanouts=[5,5] --set train.eval_fanouts=[10,10]
same_losses rgcn-sampled epoch_loss
# Sampled from the part files on the shared filesystem: each host's worker samples from its own part's
# in-edges and asks the other hosts' workers for their nodes' neighbours (structure partitioned); the
# losses are those of the replicated structure above, bit for bit.
run_both rgcn-sampled-parts jobs/examples/rgcn-synthetic.toml "${graph[@]}" --set train.mode='"sampled"' \
  --set train.epochs=3 --set train.batch_size=256 --set train.fanouts=[5,5] --set train.eval_fanouts=[10,10] \
  --set data.format=partitions --set data.graph= --set data.partitions="$TESSEL_WORK/parts"
same_losses rgcn-sampled-parts epoch_loss
python3 -c "import json, sys; a, b = (json.load(open(p)) for p in sys.argv[1:]); assert a['epoch_loss'] == b['epoch_loss'], (a['epoch_loss'], b['epoch_loss']); assert b['structure'] == 'partitioned', b['structure']" \
  "$TESSEL_WORK/rgcn-sampled/one/summary.json" "$TESSEL_WORK/rgcn-sampled-parts/three/summary.json" ||
  fail "sampled training from part files on 3 hosts differs from the replicated structure"
echo "PASS rgcn-sampled-parts: partitioned structure on 3 hosts samples as the replicated one, bit for bit"
run_both gpt-pipeline jobs/examples/gpt-demo.toml --set metrics.port_base=0 --set job.seed=3 \
  --set resources.workers=3 --set pipeline.stages=3 --set model.layers=3 --set model.hidden=64 --set model.heads=2 \
  --set model.context=32 --set train.batch_size=8 --set pipeline.microbatches=4 --set train.steps=6 \
  --set train.warmup_steps=2 --set train.val_every=3 --set train.val_batches=2 --set data.generated_bytes=65536
same_losses gpt-pipeline step_loss

# `tessel smoke` on the 3 hosts (4 ranks: two on tsl-h0), each host's spill directory its own 64 MB tmpfs.
# Speed is not judged here (the suite shares 2 cores): wide limits but the spill disk's free space.
smoke_limits=(--min-spill-free-mb 16 --min-spill-mbs 1 --max-latency-us 1e5 --min-bandwidth-mbs 1 --max-allreduce-ms 1e4
              --timeout 20)
# Here the limits come from the job's [smoke] keys (the other runs give them as flags).
netns_mpirun 2 1 1 -- "$TESSEL" smoke jobs/examples/gpt-demo.toml --set spill.dir="$TESSEL_NETNS_SPILL" \
  --set smoke.min_spill_free_mb=16 --set smoke.min_spill_mb_s=1 --set smoke.max_latency_us=1e5 \
  --set smoke.min_bandwidth_mb_s=1 --set smoke.max_allreduce_ms=1e4 --set smoke.timeout_seconds=20 \
  --json "$TESSEL_WORK/smoke.json" > "$TESSEL_WORK/smoke.log" 2>&1 ||
  { cat "$TESSEL_WORK/smoke.log"; fail "tessel smoke failed on the healthy 3-host cluster"; }
sed -n '/^tessel smoke:/,/ranks pass$/p' "$TESSEL_WORK/smoke.log"
python3 - "$TESSEL_WORK/smoke.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rows = s["ranks"]
assert [r["host"] for r in rows] == ["tsl-h0", "tsl-h0", "tsl-h1", "tsl-h2"], [r["host"] for r in rows]
assert not s["failures"], s["failures"]
for r in rows:
    sp = r["spill"]
    assert 0 < sp["free_bytes"] <= 64 << 20, f"rank {r['rank']}: spill free {sp['free_bytes']}, not its own 64 MB tmpfs"
    assert sp["probe_bytes"] > 0 and sp["write_bytes_per_second"] > 0 and sp["read_bytes_per_second"] > 0, sp
    assert r["plugins"]["checked"] >= 4 and not r["plugins"]["errors"], r["plugins"]
    if r["rank"] > 0:
        assert r["latency_seconds"] > 0 and r["bandwidth_bytes_per_second"] > 0, r
        assert r["same_host"] == (r["host"] == "tsl-h0"), r
    assert r["allreduce_seconds"] > 0, r
PY
grep -q "^PASS: 4 of 4 ranks pass" "$TESSEL_WORK/smoke.log" || fail "tessel smoke did not print its verdict"
grep -q "spill free >= 16 MB and >= 1 MB/s" "$TESSEL_WORK/smoke.log" || fail "tessel smoke did not take the job's [smoke] limits"
pass "tessel smoke: 4 ranks on 3 hosts pass (table above)"

# A host whose spill disk is full (a 1 MB tmpfs on tsl-h1): that host's row FAILs, exit 6 (storage).
set +e
TESSEL_NETNS_SPILL_MB_tsl_h1=1 netns_mpirun 2 1 1 -- "$TESSEL" smoke --spill-dir "$TESSEL_NETNS_SPILL" \
  "${smoke_limits[@]}" > "$TESSEL_WORK/smoke-full.log" 2>&1
rc=$?
set -e
grep -E "^(rank|[0-9] )" "$TESSEL_WORK/smoke-full.log"; grep "^FAIL" "$TESSEL_WORK/smoke-full.log" || true
[ "$rc" -eq 6 ] || { cat "$TESSEL_WORK/smoke-full.log"; fail "a full spill disk on tsl-h1: exit $rc, expected 6"; }
grep -Eq "^2 +tsl-h1 .*FAIL$" "$TESSEL_WORK/smoke-full.log" || fail "tsl-h1's row is not FAIL"
[ "$(grep -Ec ' PASS$' "$TESSEL_WORK/smoke-full.log")" -eq 3 ] || fail "the other hosts' rows are not PASS"
grep -Eq "^FAIL rank 2 \(tsl-h1\) spill: $TESSEL_NETNS_SPILL: .* MB free < 16 MB" "$TESSEL_WORK/smoke-full.log" ||
  fail "no FAIL line naming rank 2, tsl-h1 and its spill directory"
pass "a full spill disk on tsl-h1: its row FAILs, the others PASS, exit 6"

# A plugin that fails its check (built for ABI 2.x): every row FAILs, exit 4 (plugin).
bad=${TESSEL_TEST_PLUGINS:?set by CTest: the folder of the test plugins}/libtest_plugin_wrong_abi_major.so
set +e
netns_mpirun 1 1 1 -- "$TESSEL" smoke --spill-dir "$TESSEL_NETNS_SPILL" --plugin "$bad" "${smoke_limits[@]}" \
  > "$TESSEL_WORK/smoke-plugin.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 4 ] || { cat "$TESSEL_WORK/smoke-plugin.log"; fail "a plugin failing its check: exit $rc, expected 4"; }
[ "$(grep -Ec ' FAIL$' "$TESSEL_WORK/smoke-plugin.log")" -eq 3 ] || { cat "$TESSEL_WORK/smoke-plugin.log"; fail "not every row FAILs"; }
grep -Eq "^FAIL rank 1 \(tsl-h1\) plugins: .*libtest_plugin_wrong_abi_major.so.*ABI" "$TESSEL_WORK/smoke-plugin.log" ||
  { cat "$TESSEL_WORK/smoke-plugin.log"; fail "no FAIL line naming the plugin and its ABI"; }
pass "a plugin built for another ABI: every row FAILs, exit 4"
