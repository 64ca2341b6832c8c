#!/usr/bin/env bash
# bench/run.sh FAMILY [--quick] [--json FILE] [--wait-idle S] [selection]: runs one benchmark family,
# prints its tables and writes its JSON rows (DESIGN.md "Benchmarks"; bench/README.md).
#
#   rgnn           Tessel's full-graph RGCN, RGAT and HGT training: forward, backward + optimizer and epoch
#                  time, peak memory, fraction_of_limit (Hector's method: 1 and 2 layers, sizes 32/64/128,
#                  AIFB, FB15k-237 and a synthetic graph of 5.2 M edges; plus compact / reorder ablations)
#   peers-rgnn     the same against PyG, DGL and a compact PyTorch reference (ratio = Tessel / best peer)
#   gather         gather.rows (libtessel_gather.so) on random rows of a 2 GiB table, 128 B to 2 KiB rows,
#                  against a stream copy and a naive memcpy loop measured in the same run; on a GPU also
#                  pinned host-to-device bandwidth and the zero-copy and staged gathers
#   sampled        sampled mini-batch RGCN on jobs/examples/rgcn-sampled-synthetic.toml (2.4M nodes, 26.4M
#                  edges, 128 features mapped from the graph file): seeds per second and the share of the
#                  epoch spent waiting on feature rows, 1 and 2 workers, prefetch on and off
#   peers-sampled  the same model, fanouts, batch size and threads with DGL's NeighborSampler +
#                  RelGraphConv and PyG's NeighborLoader + RGCNConv (where it runs), ratio to the best
#   llm            Tessel's GPT-2 on tiny Shakespeare (gpt-shakespeare.toml, 4 blocks, width 256): step time,
#                  tokens/s, GFLOP/s against the sgemm limit measured in the same run, 1, 2 and 3 stages;
#                  the stage planner's predicted per-stage times against the measured ones (12 blocks);
#                  per saved-activation policy (keep, recompute): step time, tokens/s and resident
#                  activation bytes, on that model and on a 12-block width-768 one (>= 1 GB kept a step)
#   peers-llm      the same model, checkpoint, tokens and threads in PyTorch (bench/peers/gpt_peer.py), with
#                  and without torch.compile, side by side with Tessel; ratio = Tessel / best PyTorch
#   spill          the spill store (storage/spill_store.h): write (until fsync) and read (after the page cache
#                  is dropped) of 2 GiB in 8 and 64 MiB slots, checksum off and on, against raw O_DIRECT
#                  writes and reads of the same bytes in the same directory; ratio = spill / raw
#   graph          building graphs in process, on one thread: storage::ImportRdf on AIFB against zlib
#                  decompressing the same .nt.gz, and storage::GenerateGraph at 1M nodes against writing
#                  as many bytes of fresh memory; targets 2 s and 60 s (the bounds the unit tests asserted)
#   accuracy       AIFB test accuracy over 10 seeds (3 with --quick), mean +- std: Tessel against the reference
#                  trainers (bench/peers/rgnn_reference.py: RGCN as the R-GCN paper's code, HGT as PyG's
#                  HGTConv) and PyG's layers, the same hyperparameters (the example jobs'), per case:
#                  RGCN with 0 and 30 bases, RGAT, HGT (bench/accuracy/accuracy_bench.py)
#   metrics        the cost of monitoring: step time with the exporter on (scraped every second) against off,
#                  interleaved runs, medians, on the RGCN AIFB job, the sampled synthetic job (1/8 of its nodes)
#                  and the GPT demo job; target at most 1% (bench/metrics/metrics_bench.py)
#   partition      the distributed partitioner (mpirun tessel partition --input): PT-Scotch's and the stream
#                  method's cut and balance against METIS on FB15k-237 and a 21M-edge graph; time and each
#                  rank's peak RSS at 10M and 30M edges (--full: 100M) on 1, 2, 4 and 8 ranks, beside the
#                  graph's in-memory size; per-rank memory of cutting and of training from the parts, and a
#                  capped run against the coordinator path (--sections memory); a table, JSON and an SVG
#                  (bench/partition/partition_bench.py)
#   peers-partition  DGL's partition_graph (METIS, one machine, the same threads) beside Tessel's METIS,
#                  PT-Scotch and stream cuts on FB15k-237 and a 10M-edge graph (partition_bench.py peers)
#
#   --quick            5 timed epochs instead of 20, shorter caps and limit measurements (gather: a 512 MiB
#                      table, 64 MiB batches, 5 repetitions)
#   --json FILE        where to write the rows (default build/bench/results/FAMILY.json)
#   --wait-idle S      before each measurement (gather: each row size), wait up to S seconds for the cores
#                      to be idle (< 10% busy)
#   --models LIST      subset of rgcn,rgat,hgt (default all)
#   --cases LIST       subset of aifb,fb15k,synthetic,scale (default all; scale: Tessel alone on 1M nodes)
#   --sizes LIST       subset of 32,64,128: input features = hidden width (default all)
#   --layers LIST      subset of 1,2 (default both)
#   --peers LIST       subset of pyg,dgl,torch (peers-rgnn; torch = the compact RGCN reference; default all)
#   --peer-deadline S  wall-clock cap of one peer run in the matrix (default 60, 40 with --quick)
#   --budget-minutes M no peer run starts once the family has run M minutes (default 70, 30 with --quick)
#   gather only:
#   --threads N        threads of the pool (default: the machine's cores, nproc)
#   --table-mib N      table size (default 2048; 512 with --quick)
#   --out-mib N        bytes of rows per gather call (default 256; 64 with --quick)
#   --rows LIST        row sizes in bytes (default 128,256,512,1024,2048)
#   --pages P          huge, 4k or both (default both: the table with and without transparent huge pages)
#   --reps N           repetitions, medians reported (default 7; 5 with --quick; spill: 5, 3 with --quick;
#                      graph: 5 imports and 3 generations, 3 and 1 with --quick)
#   llm only:
#   --sections LIST    subset of stages,planner,policies (default all)
#   --policies LIST    spill.policy values of the policy rows (default keep,offload,recompute,auto)
#   --policy-models L  subset of small,large (default both; small with --quick)
#   spill only (with --reps):
#   --dir DIR          the directory measured (default /tmp/tessel-UID/spill, the [spill] dir default)
#   --total-mib N      bytes per case (default 2048; 512 with --quick)
#   --slot-mib LIST    slot sizes in MiB (default 8,64)
#   --checksum C       off, on or both (default both)
#   graph only (with --reps and --wait-idle):
#   --data-dir DIR     the shared datasets (default: the build's TESSEL_DATA_DIR, ../shared/data); AIFB
#                      missing there is a row with status "missing" and exit 1
#
# It builds only the binaries it runs (rgnn families: tessel, tessel-bench-limits and the plugins tessel_nn
# and tessel_rgnn; gather: tessel-bench-gather and libtessel_gather.so; spill: tessel-bench-spill; graph:
# tessel-bench-graph) in an existing build directory, and for the rgnn families sets up build/bench-venv
# (and build/bench-venv-dgl when DGL is a selected peer) from PyPI (bench/peers/setup.sh).
# Exit: 0 every measurement ran, 1 one failed (the table and JSON say which), 2 usage or setup error.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD="$ROOT/build"

usage() {
  sed -n '2,/^set -euo/{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

family=""
args=()
gather_args=()
llm_extra=()
partition_args=()
spill_args=()
graph_args=()
rgnn_only=""
wait_idle=0
peers="pyg,dgl,torch"
while (( $# )); do
  case "$1" in
    --quick) args+=(--quick) ;;
    --models|--cases|--sizes|--layers|--peers|--peer-deadline|--budget-minutes)
      [[ $# -ge 2 ]] || { echo "run.sh: $1 needs a value" >&2; exit 2; }
      rgnn_only=$1
      [[ "$1" == --peers ]] && peers=$2
      args+=("$1" "$2")
      shift ;;
    --wait-idle)
      [[ $# -ge 2 ]] || { echo "run.sh: --wait-idle needs SECONDS" >&2; exit 2; }
      args+=(--wait-idle "$2")
      wait_idle=$2
      shift ;;
    --threads|--table-mib|--out-mib|--rows|--pages|--reps)
      [[ $# -ge 2 ]] || { echo "run.sh: $1 needs a value" >&2; exit 2; }
      gather_args+=("$1" "$2")
      shift ;;
    --sections|--policies|--policy-models)
      [[ $# -ge 2 ]] || { echo "run.sh: $1 needs a value" >&2; exit 2; }
      llm_extra+=("$1" "$2")
      shift ;;
    --dir|--total-mib|--slot-mib|--checksum)
      [[ $# -ge 2 ]] || { echo "run.sh: $1 needs a value" >&2; exit 2; }
      spill_args+=("$1" "$2")
      shift ;;
    --data-dir)
      [[ $# -ge 2 ]] || { echo "run.sh: $1 needs a value" >&2; exit 2; }
      graph_args+=("$1" "$2")
      shift ;;
    --json)
      [[ $# -ge 2 ]] || { echo "run.sh: --json needs a FILE" >&2; exit 2; }
      # The harness runs from another directory: make the path absolute now.
      json=$2
      [[ "$json" = /* ]] || json="$PWD/$json"
      args+=(--json "$json")
      shift ;;
    --full) partition_args+=(--full) ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *)
      [[ -z "$family" ]] || { echo "run.sh: one FAMILY at a time (got $family and $1)" >&2; exit 2; }
      family=$1 ;;
  esac
  shift
done

case "$family" in
  rgnn|peers-rgnn) ;;
  gather) ;;
  sampled|peers-sampled) ;;
  llm|peers-llm) ;;
  spill) ;;
  graph) ;;
  accuracy) ;;
  metrics) ;;
  partition|peers-partition) ;;
  "") usage >&2; exit 2 ;;
  *) echo "run.sh: unknown family '$family'" >&2; usage >&2; exit 2 ;;
esac

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  echo "run.sh: no build directory at $BUILD: run scripts/test.sh or scripts/demo.sh first" >&2
  exit 2
fi
if [[ "$family" == spill || "$family" == graph ]]; then
  # --reps is shared with gather; the other gather options are not the spill or graph family's.
  for ((i = 0; i < ${#gather_args[@]}; i += 2)); do
    if [[ "${gather_args[i]}" != --reps ]]; then
      echo "run.sh: ${gather_args[i]} is an option of the gather family" >&2
      exit 2
    fi
    if [[ "$family" == spill ]]; then
      spill_args+=("${gather_args[i]}" "${gather_args[i + 1]}")
    else
      graph_args+=("${gather_args[i]}" "${gather_args[i + 1]}")
    fi
  done
  gather_args=()
fi
if [[ "$family" != gather && ${#gather_args[@]} -gt 0 ]]; then
  echo "run.sh: ${gather_args[0]} is an option of the gather family" >&2
  exit 2
fi
if [[ "$family" != spill && ${#spill_args[@]} -gt 0 ]]; then
  echo "run.sh: ${spill_args[0]} is an option of the spill family" >&2
  exit 2
fi
if [[ "$family" != graph && ${#graph_args[@]} -gt 0 ]]; then
  echo "run.sh: ${graph_args[0]} is an option of the graph family" >&2
  exit 2
fi
if [[ ( "$family" == spill || "$family" == graph ) && -n "$rgnn_only" ]]; then
  echo "run.sh: $rgnn_only is an option of the rgnn families" >&2
  exit 2
fi
if [[ "$family" == gather && -n "$rgnn_only" ]]; then
  echo "run.sh: $rgnn_only is an option of the rgnn families" >&2
  exit 2
fi

if [[ "$family" == gather ]]; then
  echo "[bench] cmake --build build --target tessel-bench-gather tessel_gather" >&2
  if ! cmake --build "$BUILD" --target tessel-bench-gather tessel_gather --parallel 2 >"$BUILD/bench-build.log" 2>&1; then
    tail -n 30 "$BUILD/bench-build.log" >&2
    echo "run.sh: the build failed (full log: build/bench-build.log)" >&2
    exit 2
  fi
  commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]] && commit="$commit+dirty"
  gather_cmd=("$BUILD/bin/tessel-bench-gather" --threads "$(nproc)" --json "${json:-$BUILD/bench/results/gather.json}"
              --commit "$commit" --wait-idle "${wait_idle%.*}")
  for a in "${args[@]}"; do
    [[ "$a" == --quick ]] && gather_cmd+=(--quick)
  done
  echo "[bench] ${gather_cmd[*]} ${gather_args[*]}" >&2
  exec "${gather_cmd[@]}" "${gather_args[@]}"
fi
if [[ "$family" == spill ]]; then
  echo "[bench] cmake --build build --target tessel-bench-spill" >&2
  if ! cmake --build "$BUILD" --target tessel-bench-spill --parallel 2 >"$BUILD/bench-build.log" 2>&1; then
    tail -n 30 "$BUILD/bench-build.log" >&2
    echo "run.sh: the build failed (full log: build/bench-build.log)" >&2
    exit 2
  fi
  commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]] && commit="$commit+dirty"
  spill_cmd=("$BUILD/bin/tessel-bench-spill" --json "${json:-$BUILD/bench/results/spill.json}" --commit "$commit")
  for a in "${args[@]}"; do
    [[ "$a" == --quick ]] && spill_cmd+=(--quick)
  done
  echo "[bench] ${spill_cmd[*]} ${spill_args[*]}" >&2
  exec "${spill_cmd[@]}" "${spill_args[@]}"
fi
if [[ "$family" == graph ]]; then
  echo "[bench] cmake --build build --target tessel-bench-graph" >&2
  if ! cmake --build "$BUILD" --target tessel-bench-graph --parallel 2 >"$BUILD/bench-build.log" 2>&1; then
    tail -n 30 "$BUILD/bench-build.log" >&2
    echo "run.sh: the build failed (full log: build/bench-build.log)" >&2
    exit 2
  fi
  commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]] && commit="$commit+dirty"
  graph_cmd=("$BUILD/bin/tessel-bench-graph" --json "${json:-$BUILD/bench/results/graph.json}" --commit "$commit"
             --wait-idle "${wait_idle%.*}")
  for a in "${args[@]}"; do
    [[ "$a" == --quick ]] && graph_cmd+=(--quick)
  done
  echo "[bench] ${graph_cmd[*]} ${graph_args[*]}" >&2
  exec "${graph_cmd[@]}" "${graph_args[@]}"
fi
if [[ "$family" == sampled || "$family" == peers-sampled ]]; then
  echo "[bench] cmake --build build --target tessel tessel_gather" >&2
  if ! cmake --build "$BUILD" --target tessel tessel_gather tessel_nn tessel_rgnn --parallel 2 >"$BUILD/bench-build.log" 2>&1; then
    tail -n 30 "$BUILD/bench-build.log" >&2
    echo "run.sh: the build failed (full log: build/bench-build.log)" >&2
    exit 2
  fi
  setup=()
  [[ "$family" == peers-sampled ]] && setup=(--peers --dgl)
  "$ROOT/bench/peers/setup.sh" "${setup[@]}" || { echo "run.sh: bench/peers/setup.sh failed" >&2; exit 2; }
  sampled_args=("$family")
  for a in "${args[@]}"; do [[ "$a" == --quick ]] && sampled_args+=(--quick); done
  [[ -n "${json:-}" ]] && sampled_args+=(--json "$json")
  exec "$BUILD/bench-venv/bin/python" "$ROOT/bench/sampled/sampled_bench.py" "${sampled_args[@]}"
fi
if [[ "$family" == accuracy ]]; then
  if [[ -n "$rgnn_only" || ${#llm_extra[@]} -gt 0 ]]; then
    echo "run.sh: the accuracy family takes --quick and --json only" >&2
    exit 2
  fi
  echo "[bench] cmake --build build --target tessel tessel_nn tessel_rgnn rgnn_parity_export" >&2
  if ! cmake --build "$BUILD" --target tessel tessel_nn tessel_rgnn rgnn_parity_export --parallel 2 \
      >"$BUILD/bench-build.log" 2>&1; then
    tail -n 30 "$BUILD/bench-build.log" >&2
    echo "run.sh: the build failed (full log: build/bench-build.log)" >&2
    exit 2
  fi
  "$ROOT/bench/peers/setup.sh" --peers || { echo "run.sh: bench/peers/setup.sh --peers failed" >&2; exit 2; }
  acc_args=()
  for a in "${args[@]}"; do [[ "$a" == --quick ]] && acc_args+=(--quick); done
  [[ -n "${json:-}" ]] && acc_args+=(--json "$json")
  exec "$BUILD/bench-venv/bin/python" "$ROOT/bench/accuracy/accuracy_bench.py" "${acc_args[@]}"
fi
if [[ "$family" == partition || "$family" == peers-partition ]]; then
  echo "[bench] cmake --build build --target tessel" >&2
  if ! cmake --build "$BUILD" --target tessel --parallel 2 >"$BUILD/bench-build.log" 2>&1; then
    tail -n 30 "$BUILD/bench-build.log" >&2
    echo "run.sh: the build failed (full log: build/bench-build.log)" >&2
    exit 2
  fi
  setup=()
  [[ "$family" == peers-partition ]] && setup=(--dgl) && partition_args+=(--sections peers)
  "$ROOT/bench/peers/setup.sh" "${setup[@]}" || { echo "run.sh: bench/peers/setup.sh failed" >&2; exit 2; }
  for ((i = 0; i < ${#args[@]}; i++)); do  # --quick, and --sizes and --cases with their values
    case "${args[i]}" in
      --quick) partition_args+=(--quick) ;;
      --sizes|--cases) partition_args+=("${args[i]}" "${args[i + 1]}") ;;
    esac
  done
  [[ -n "${json:-}" ]] && partition_args+=(--json "$json")
  partition_args+=("${llm_extra[@]}")  # --sections
  exec "$BUILD/bench-venv/bin/python" "$ROOT/bench/partition/partition_bench.py" "${partition_args[@]}"
fi
if [[ "$family" == metrics ]]; then
  if [[ -n "$rgnn_only" || ${#llm_extra[@]} -gt 0 ]]; then
    echo "run.sh: the metrics family takes --quick and --json only" >&2
    exit 2
  fi
  echo "[bench] cmake --build build --target tessel tessel_nn tessel_rgnn tessel_llm tessel-bench-metrics-cost" >&2
  if ! cmake --build "$BUILD" --target tessel tessel_nn tessel_rgnn tessel_llm tessel-bench-metrics-cost --parallel 2 \
      >"$BUILD/bench-build.log" 2>&1; then
    tail -n 30 "$BUILD/bench-build.log" >&2
    echo "run.sh: the build failed (full log: build/bench-build.log)" >&2
    exit 2
  fi
  metrics_args=()
  for a in "${args[@]}"; do [[ "$a" == --quick ]] && metrics_args+=(--quick); done
  [[ -n "${json:-}" ]] && metrics_args+=(--json "$json")
  exec python3 "$ROOT/bench/metrics/metrics_bench.py" "${metrics_args[@]}"
fi
if [[ "$family" == llm || "$family" == peers-llm ]]; then
  echo "[bench] cmake --build build --target tessel tessel-bench-limits tessel_nn tessel_llm" >&2
  if ! cmake --build "$BUILD" --target tessel tessel-bench-limits tessel_nn tessel_llm --parallel 2 \
      >"$BUILD/bench-build.log" 2>&1; then
    tail -n 30 "$BUILD/bench-build.log" >&2
    echo "run.sh: the build failed (full log: build/bench-build.log)" >&2
    exit 2
  fi
  "$ROOT/bench/peers/setup.sh" --peers || { echo "run.sh: bench/peers/setup.sh --peers failed" >&2; exit 2; }
  llm_args=("$family")
  for a in "${args[@]}"; do [[ "$a" == --quick ]] && llm_args+=(--quick); done
  [[ -n "${json:-}" ]] && llm_args+=(--json "$json")
  llm_args+=(${llm_extra[@]+"${llm_extra[@]}"})
  exec "$BUILD/bench-venv/bin/python" "$ROOT/bench/llm/llm_bench.py" "${llm_args[@]}"
fi
# The plugins too: `tessel run` loads its kernels from build/plugins (without them every run exits 4).
echo "[bench] cmake --build build --target tessel tessel-bench-limits tessel_nn tessel_rgnn" >&2
if ! cmake --build "$BUILD" --target tessel tessel-bench-limits tessel_nn tessel_rgnn --parallel 2 \
    >"$BUILD/bench-build.log" 2>&1; then
  tail -n 30 "$BUILD/bench-build.log" >&2
  echo "run.sh: the build failed (full log: build/bench-build.log)" >&2
  exit 2
fi

setup=()
if [[ "$family" == peers-* ]]; then
  setup+=(--peers)
  [[ ",$peers," == *,dgl,* ]] && setup+=(--dgl)
fi
if ! "$ROOT/bench/peers/setup.sh" "${setup[@]}"; then
  echo "run.sh: bench/peers/setup.sh ${setup[*]} failed" >&2
  exit 2
fi

exec "$BUILD/bench-venv/bin/python" "$ROOT/bench/peers/harness.py" "$family" "${args[@]}"
