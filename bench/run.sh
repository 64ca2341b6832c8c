#!/usr/bin/env bash
# bench/run.sh FAMILY [--quick] [--json FILE] [--wait-idle S]: runs one benchmark family, prints its
# table and writes its JSON rows (DESIGN.md "Benchmarks"; bench/README.md).
#
#   rgnn           Tessel's full-graph RGCN epoch time on AIFB and FB15k-237, with fraction_of_limit
#   peers-rgnn     the same against PyTorch Geometric's RGCNConv and FastRGCNConv (ratio = Tessel / best)
#   gather, spill, llm, partition, peers-llm: not implemented yet (exit 2)
#
#   --quick        5 timed epochs instead of 20 and shorter limit measurements
#   --json FILE    where to write the rows (default build/bench/results/FAMILY.json)
#   --wait-idle S  before each measurement, wait up to S seconds for the cores to be idle (< 10% busy)
#
# It builds only the two binaries it runs (cmake --build build --target tessel tessel-bench-limits) in an
# existing build directory, and sets up build/bench-venv from PyPI (bench/peers/setup.sh).
# Exit: 0 every measurement ran, 1 one failed (the table and JSON say which), 2 usage or setup error.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD="$ROOT/build"

usage() {
  sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

family=""
args=()
while (( $# )); do
  case "$1" in
    --quick) args+=(--quick) ;;
    --wait-idle)
      [[ $# -ge 2 ]] || { echo "run.sh: --wait-idle needs SECONDS" >&2; exit 2; }
      args+=(--wait-idle "$2")
      shift ;;
    --json)
      [[ $# -ge 2 ]] || { echo "run.sh: --json needs a FILE" >&2; exit 2; }
      # The harness runs from another directory: make the path absolute now.
      json=$2
      [[ "$json" = /* ]] || json="$PWD/$json"
      args+=(--json "$json")
      shift ;;
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
  gather|spill|llm|partition|peers-llm)
    echo "family $family is not implemented yet" >&2
    exit 2 ;;
  "") usage >&2; exit 2 ;;
  *) echo "run.sh: unknown family '$family'" >&2; usage >&2; exit 2 ;;
esac

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  echo "run.sh: no build directory at $BUILD: run scripts/test.sh or scripts/demo.sh first" >&2
  exit 2
fi
echo "[bench] cmake --build build --target tessel tessel-bench-limits" >&2
if ! cmake --build "$BUILD" --target tessel tessel-bench-limits --parallel 2 >"$BUILD/bench-build.log" 2>&1; then
  tail -n 30 "$BUILD/bench-build.log" >&2
  echo "run.sh: the build failed (full log: build/bench-build.log)" >&2
  exit 2
fi

if [[ "$family" == peers-* ]]; then
  "$ROOT/bench/peers/setup.sh" --peers
else
  "$ROOT/bench/peers/setup.sh"
fi

exec "$BUILD/bench-venv/bin/python" "$ROOT/bench/peers/harness.py" "$family" "${args[@]}"
