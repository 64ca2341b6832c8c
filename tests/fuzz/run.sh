#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz in build-fuzz/ (clang, ASan + UBSan) and runs each one for
# TESSEL_FUZZ_SECONDS (default 60) seconds, two at a time, on a copy of its seed corpus (the corpus in
# the repository is never changed). Prints a table, writes build-fuzz/fuzz_results.json, and exits 1
# when a target crashed, leaked, timed out or ran out of memory, naming it and the input that did it.
#
#   tests/fuzz/run.sh [TARGET...]        # TARGET: job ntriples graph_file llmc protocol http_head (default: all)
#
# Environment: TESSEL_FUZZ_SECONDS (per target), TESSEL_FUZZ_PARALLEL (targets at once, default 2),
# TESSEL_FUZZ_BUILD (the build folder, default build-fuzz).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
cd "$TESSEL_ROOT"

seconds=${TESSEL_FUZZ_SECONDS:-60}
parallel=${TESSEL_FUZZ_PARALLEL:-2}
build=${TESSEL_FUZZ_BUILD:-$TESSEL_ROOT/build-fuzz}
all_targets=(job ntriples graph_file llmc protocol http_head)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [ -d "tests/fuzz/corpus/$t" ] || { echo "run.sh: no fuzz target '$t' (targets: ${all_targets[*]})" >&2; exit 2; }
done

started=$SECONDS
echo "== building the fuzzers in $build (clang, libFuzzer, ASan + UBSan)"
# Configured every time (cheap with a cache): the flags are forced, so a cache configured otherwise is fixed.
mkdir -p "$build"
cmake -S "$TESSEL_ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DTESSEL_CUDA=OFF -DTESSEL_SANITIZE=ON -DTESSEL_FUZZ=ON >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --target tessel_fuzzers --parallel "$(tessel_jobs)"
build_seconds=$((SECONDS - started))

runs="$build/fuzz-runs"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# One target: its scratch corpus, artifacts and temporary files under $runs/TARGET; its output in log.txt.
fuzz_one() {
  local t=$1 dir="$runs/$1"
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/tmp"
  cp tests/fuzz/corpus/"$t"/* "$dir/corpus/"
  ls "$dir/corpus" | wc -l >"$dir/seeds"
  local rc=0 t0=$SECONDS
  TMPDIR="$dir/tmp" "$build/fuzz/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$dir/log.txt" 2>&1 || rc=$?
  echo "$rc" >"$dir/rc"
  echo $((SECONDS - t0)) >"$dir/seconds"
}

echo "== fuzzing ${targets[*]}: $seconds s each, $parallel at a time"
fuzz_started=$SECONDS
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

failed=0
rows=()
printf '\n%-12s %8s %12s %12s  %s\n' target seconds executions new_units result
for t in "${targets[@]}"; do
  dir="$runs/$t"
  rc=$(cat "$dir/rc")
  log="$dir/log.txt"
  # libFuzzer's own count (stat::number_of_executed_units, printed on exit and on a crash); else "Done N runs".
  execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
  [ -n "$execs" ] || execs=0
  took=$(cat "$dir/seconds")
  new_units=$(($(ls "$dir/corpus" | wc -l) - $(cat "$dir/seeds")))
  artifact=$(ls "$dir/artifacts" | head -1)
  if [ "$rc" -eq 0 ] && [ -z "$artifact" ]; then
    result=ok
  else
    failed=1
    case "$artifact" in
      crash-*) result=crash ;;
      leak-*) result=leak ;;
      timeout-*) result=timeout ;;
      oom-*) result=oom ;;
      slow-unit-*) result=slow ;;
      *) result="failed (exit $rc)" ;;
    esac
  fi
  printf '%-12s %8s %12s %12s  %s\n' "$t" "$took" "$execs" "$new_units" "$result"
  artifact_json=null
  [ -n "$artifact" ] && artifact_json="\"$dir/artifacts/$artifact\""
  rows+=("    {\"target\": \"$t\", \"seconds\": $took, \"executions\": $execs, \"new_units\": $new_units, \"result\": \"$result\", \"exit_code\": $rc, \"artifact\": $artifact_json, \"log\": \"$log\"}")
done
total_seconds=$((SECONDS - started))
printf '\nbuild %d s, fuzzing %d s, total %d s\n' "$build_seconds" $((SECONDS - fuzz_started)) "$total_seconds"

{
  echo "{"
  echo "  \"seconds_per_target\": $seconds,"
  echo "  \"build_seconds\": $build_seconds,"
  echo "  \"total_seconds\": $total_seconds,"
  echo "  \"targets\": ["
  for i in "${!rows[@]}"; do
    sep=,
    [ "$i" -eq $((${#rows[@]} - 1)) ] && sep=
    echo "${rows[$i]}$sep"
  done
  echo "  ]"
  echo "}"
} >"$build/fuzz_results.json"
echo "results: $build/fuzz_results.json"

if [ "$failed" -ne 0 ]; then
  for t in "${targets[@]}"; do
    dir="$runs/$t"
    artifact=$(ls "$dir/artifacts" | head -1)
    [ "$(cat "$dir/rc")" -eq 0 ] && [ -z "$artifact" ] && continue
    echo
    input="(none written)"
    [ -n "$artifact" ] && input="$dir/artifacts/$artifact"
    echo "FAIL: $t: input $input; from $dir/log.txt:"
    # From the first report line (the target's own check, a sanitizer or libFuzzer) on; else the end.
    first=$(grep -n -m1 -E '^[a-z_]+_fuzz: |^==[0-9]+==ERROR|runtime error:|ERROR: libFuzzer' "$dir/log.txt" | cut -d: -f1)
    if [ -n "$first" ]; then tail -n "+$first" "$dir/log.txt" | head -80; else tail -40 "$dir/log.txt"; fi
    echo "reproduce: $build/fuzz/${t}_fuzz $input  (tests/fuzz/README.md: when a target fails)"
  done
  exit 1
fi
