#!/usr/bin/env bash
# Installs what is missing (the build's dependencies, and torch + PyG in build/bench-venv for the
# reference trainers), builds, and runs every test: the whole CTest suite (unit, integration and
# mpirun cluster tests), then the unit tests again under AddressSanitizer + UBSan (label "sanitize"),
# then each libFuzzer target of tests/fuzz for TESSEL_FUZZ_SECONDS (default 60) seconds.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$TESSEL_ROOT"

# The free space at each phase, in the log: a CI run once failed mid-build with "No space left on device".
# The whole run needs about 10 GB: torch's wheels 5.5 GB, two builds 4 GB, ccache up to 2 GB.
disk() { df -h --output=avail,target "$TESSEL_ROOT" "${TMPDIR:-/tmp}" | sed 1d | sort -u | sed "s/^/[disk] $1: free /"; }
disk "before setup"
"$TESSEL_ROOT/scripts/setup-deps.sh"
# torch + PyG in build/bench-venv, for the parity test with the reference trainers (rgnn_parity).
"$TESSEL_ROOT/bench/peers/setup.sh" --peers
tessel_build

# Under TESSEL_REQUIRE_ALL=1 (.ci/run sets it) a skipped test fails the run unless tests/skips.allow
# allows it here (scripts/check-skips.py): a skip CI never sees is a test that never runs.
check_skips() {
  [ "${TESSEL_REQUIRE_ALL:-0}" = 1 ] || return 0
  python3 "$TESSEL_ROOT/scripts/check-skips.py" "$@"
}

disk "after the build"
echo "== ctest (all labels)"
(cd "$TESSEL_BUILD" && ctest --output-on-failure --no-tests=error --timeout 900 -j "$(tessel_jobs)" -LE sanitize \
   --output-junit ctest-junit.xml)
check_skips "$TESSEL_ROOT/tests/skips.allow" "$TESSEL_BUILD/ctest-junit.xml"

disk "after the suite"
echo "== ctest -L sanitize (ASan + UBSan build of the unit tests)"
asan="$TESSEL_ROOT/build-asan"
# Configure every time (cheap with an existing cache): the flags are forced, so a build-asan cache that
# was configured without the sanitizers (or as a Release/CUDA build) cannot pass for a sanitizer run.
cmake -S "$TESSEL_ROOT" -B "$asan" -DCMAKE_BUILD_TYPE=Debug -DTESSEL_SANITIZE=ON -DTESSEL_CUDA=OFF
cmake --build "$asan" --parallel "$(tessel_jobs)"
(cd "$asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure --no-tests=error --timeout 900 -j "$(tessel_jobs)" -L sanitize --output-junit ctest-junit.xml)
check_skips --cuda-off "$TESSEL_ROOT/tests/skips.allow" "$asan/ctest-junit.xml"

disk "after the sanitizer run"
echo "== fuzzers (libFuzzer, ${TESSEL_FUZZ_SECONDS:-60} s each)"
"$TESSEL_ROOT/tests/fuzz/run.sh"
