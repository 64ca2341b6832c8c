#!/usr/bin/env bash
# docs/SDK.md, followed literally: every ```sh block of the page, in order, as one script, with the
# page's variables pointing into this test's scratch directory and at this build. That installs Tessel
# into a temporary prefix, copies plugins/example out of the tree, configures it against that prefix
# only, builds it, runs the installed `tessel plugin check` on it, and trains a job with the installed
# tessel that prefers its nn.relu kernels, showing from the log and from tessel_plugin_info that the
# plugin served nn.relu.fwd. Then what the page promises beyond its commands: the check's table lists
# the relu kernels as passed, the plugin exports only tessel_plugin_init, and find_package(Tessel 2.0)
# against the 1.1 SDK fails at configure time.
source "$(dirname "$0")/../lib.sh"
page=$TESSEL_SOURCE_DIR/docs/SDK.md
script=$TESSEL_WORK/walkthrough.sh
awk '/^```sh$/ { inside = 1; next } /^```/ { inside = 0; next } inside' "$page" > "$script"
[ "$(grep -c '' "$script")" -gt 20 ] || fail "found no sh blocks in $page"

export TESSEL_SRC=$TESSEL_SOURCE_DIR
export TESSEL_BUILD
TESSEL_BUILD=$(cd "$(dirname "$TESSEL")/.." && pwd)
export PREFIX=$TESSEL_WORK/prefix WORK=$TESSEL_WORK/work
PORT=$(free_port_base 1) || fail "no free port"
export PORT
log=$TESSEL_WORK/walkthrough.log
if ! bash -euo pipefail "$script" > "$log" 2>&1; then
  tail -40 "$log"
  for f in "$WORK"/run.log "$WORK"/check.log; do [ -f "$f" ] && { echo "== $f"; tail -20 "$f"; }; done
  fail "the walkthrough of docs/SDK.md stopped (its output: $log)"
fi

plugin=$WORK/relu/build/plugins/libtessel_example.so
grep -Eq '^  nn\.relu\.fwd +cpu +f32 +PASS' "$WORK/check.log" || fail "the check did not pass nn.relu.fwd: $(cat "$WORK/check.log")"
grep -Eq '^  nn\.relu\.bwd +cpu +f64 +PASS .* ok ' "$WORK/check.log" || fail "no gradient check of nn.relu.bwd: $(cat "$WORK/check.log")"
grep -q '^PASS' "$WORK/check.log" || fail "the check did not end with PASS"
grep -q 'op nn.relu.fwd (cpu): plugin example (plugins.prefer), not nn' "$WORK/run.log" || fail "the log names no choice"
grep -q 'plugin="example"' "$WORK/metric.txt" || fail "tessel_plugin_info does not name the example: $(cat "$WORK/metric.txt")"
exports=$(nm -D --defined-only "$plugin" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }')
[ "$exports" = tessel_plugin_init ] || fail "the plugin exports more than tessel_plugin_init: $exports"

# An ABI the SDK does not serve: find_package fails at configure time, naming the version it has.
mkdir -p "$TESSEL_WORK/abi2"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(abi2 LANGUAGES CXX)\nfind_package(Tessel 2.0 REQUIRED)\n' \
  > "$TESSEL_WORK/abi2/CMakeLists.txt"
if cmake -S "$TESSEL_WORK/abi2" -B "$TESSEL_WORK/abi2/build" "-DCMAKE_PREFIX_PATH=$PREFIX" > "$TESSEL_WORK/abi2.log" 2>&1; then
  fail "find_package(Tessel 2.0) configured against a 1.1 SDK"
fi
grep -q 'version: 1\.1' "$TESSEL_WORK/abi2.log" || fail "find_package(Tessel 2.0) did not name 1.1: $(cat "$TESSEL_WORK/abi2.log")"
pass "docs/SDK.md followed: installed, built out of tree, checked ($(grep -c ' PASS ' "$WORK/check.log") kernel rows passed), served nn.relu.fwd in a job (log and tessel_plugin_info)"
