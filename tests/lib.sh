# Shared by the shell tests (tests/integration, tests/cluster). Source it.
# Environment (set by CTest; defaults work from a checkout with build/):
#   TESSEL           the tessel binary
#   TESSEL_DATA_DIR  the shared datasets (../shared/data)
#   TESSEL_WORK      a scratch directory for this test
#   TESSEL_REQUIRE_DATA=1  a missing dataset fails the test instead of skipping it (CI sets it: CI always
#                    has ../shared/data, so a missing file there is a broken checkout, not a reason to skip)
set -euo pipefail

# The mpirun flags come from scripts/lib.sh, the one place they are defined (the tests add --enable-recovery
# where they want it; kill_worker.sh also runs without it).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
read -ra MPIRUN_FLAGS <<< "$(tessel_mpirun_base_flags)"

TESSEL_SOURCE_DIR=${TESSEL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
TESSEL=${TESSEL:-$TESSEL_SOURCE_DIR/build/bin/tessel}
TESSEL_DATA_DIR=${TESSEL_DATA_DIR:-$TESSEL_SOURCE_DIR/../shared/data}
TESSEL_WORK=${TESSEL_WORK:-$(mktemp -d)}
rm -rf "$TESSEL_WORK" && mkdir -p "$TESSEL_WORK"
cd "$TESSEL_SOURCE_DIR"

# at_exit CMD: runs CMD when the test exits, however it exits (the last registered first). A test uses it
# instead of its own EXIT trap. After the hooks, a test that passed removes its scratch directory: the
# suite's checkpoints and graphs came to gigabytes left on a CI disk, and a CI run once failed for want of
# space. A failed or skipped test keeps it for reading, and TESSEL_KEEP_WORK=1 keeps every one.
_tessel_exit_hooks=()
at_exit() { _tessel_exit_hooks=("$1" "${_tessel_exit_hooks[@]}"); }
_tessel_on_exit() {
  local rc=$? hook
  for hook in "${_tessel_exit_hooks[@]}"; do eval "$hook" || true; done
  if [ "$rc" -eq 0 ] && [ "${TESSEL_KEEP_WORK:-0}" != 1 ]; then
    cd / && rm -rf "$TESSEL_WORK"
  fi
  return "$rc"
}
trap _tessel_on_exit EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# descendants PID: every process below PID. rank_pid LAUNCHER RANK: world rank RANK's process among the
# descendants of LAUNCHER (an mpirun or scripts/tessel-mpirun), by its OMPI_COMM_WORLD_RANK. The tree holds
# short-lived processes too (tessel-mpirun's polling), which may be gone before their environment is
# read: the scan is repeated for up to 3 s before it gives up (and prints nothing).
descendants() { local kid; for kid in $(pgrep -P "$1"); do echo "$kid"; descendants "$kid"; done; }
rank_pid() {
  local p _
  for _ in $(seq 1 30); do
    for p in $(descendants "$1"); do
      # grep without -q reads to the end: under pipefail, tr killed by SIGPIPE when grep -q stops at the
      # match (an environment over tr's 8 KiB buffer) would make a found rank look absent.
      if { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -x "OMPI_COMM_WORLD_RANK=$2" >/dev/null; then
        echo "$p"
        return
      fi
    done
    sleep 0.1
  done
}
# await_setup LAUNCHER CMD...: polls CMD every 0.05 s until it succeeds (status 0), the process LAUNCHER
# has ended (status 1), or $TESSEL_SETUP_LIMIT_S seconds (600 by default) have passed (status 1). For
# reaching the point where a drill's fault is injected: that is setup, not what a drill times, and with
# both cores busy a job took over 60 s to read and partition a graph before it got there.
await_setup() {
  local launcher=$1; shift
  local deadline=$(( $(date +%s) + ${TESSEL_SETUP_LIMIT_S:-600} ))
  while kill -0 "$launcher" 2>/dev/null && [ "$(date +%s)" -le "$deadline" ]; do
    "$@" && return 0
    sleep 0.05
  done
  "$@"
}
skip() { echo "SKIP: $*"; exit 77; }
pass() { echo "PASS: $*"; }

# expect_exit CODE CMD...: runs CMD, captures stderr in $TESSEL_WORK/stderr, checks the exit code.
expect_exit() {
  local want=$1; shift
  set +e
  "$@" >"$TESSEL_WORK/stdout" 2>"$TESSEL_WORK/stderr"
  local got=$?
  set -e
  if [ "$got" -ne "$want" ]; then
    cat "$TESSEL_WORK/stderr" >&2
    fail "expected exit $want, got $got from: $*"
  fi
}

# expect_exit_within SECONDS CODE CMD...: expect_exit, and CMD must also be done within SECONDS. It runs under
# timeout(1), which stops it at the limit (SIGTERM to CMD's process group, so to mpirun too, which takes its
# ranks down; SIGKILL 5 s later), so a hang or a slow exit fails the test instead of passing late. Its stdin
# is /dev/null (timeout puts CMD in a background process group, where a read from a terminal would stop it).
# Sets $elapsed: CMD's wall time in seconds, one decimal.
expect_exit_within() {
  local limit=$1 want=$2; shift 2
  local t0 got ms
  t0=$(date +%s%N)
  set +e
  timeout --kill-after=5 "$limit" "$@" </dev/null >"$TESSEL_WORK/stdout" 2>"$TESSEL_WORK/stderr"
  got=$?
  set -e
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  elapsed=$((ms / 1000)).$(( (ms % 1000) / 100 ))
  if [ "$ms" -ge $(( limit * 1000 )) ]; then
    cat "$TESSEL_WORK/stderr" >&2
    fail "not done within ${limit}s (stopped after ${elapsed}s, exit $got): $*"
  fi
  if [ "$got" -ne "$want" ]; then
    cat "$TESSEL_WORK/stderr" >&2
    fail "expected exit $want, got $got after ${elapsed}s from: $*"
  fi
}

# expect_stderr REGEX: the last expect_exit's stderr matches REGEX.
expect_stderr() {
  grep -Eq -- "$1" "$TESSEL_WORK/stderr" || { cat "$TESSEL_WORK/stderr" >&2; fail "stderr does not match /$1/"; }
}

# json FILE EXPR: prints a Python expression over the parsed JSON document `s`.
json() { python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print($2)" "$1"; }

# ran_after DIR SINCE FIRST LAST: the run that started at unix time SINCE (date +%s.%N) in run directory DIR
# ran steps FIRST..LAST, each once on every rank, and no other: its rows of DIR/metrics.csv, which a run
# appends step by step. A resume that silently began again at step 1 fails it. Prints "N steps".
ran_after() {
  python3 - "$@" <<'PY' || fail "$1: the run since $2 did not run steps $3..$4 exactly once on every rank"
import csv, sys
d, since, first, last = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ran = {}
for row in csv.DictReader(open(f"{d}/metrics.csv")):
    if float(row["unix_seconds"]) >= since:
        ran.setdefault(row["rank"], []).append(int(row["step"]))
want = list(range(first, last + 1))
bad = {r: s for r, s in ran.items() if sorted(s) != want}
assert ran and not bad, f"ranks ran {bad or ran}, not steps {first}..{last} once each"
print(f"{len(want)} steps")
PY
}

# Missing data is never a pass. A test (or the part of it) that cannot run for lack of a dataset ends with
# missing_data, which skips (exit 77, CTest "skipped") naming what is missing, or fails under
# TESSEL_REQUIRE_DATA=1.
data_required() { [ "${TESSEL_REQUIRE_DATA:-0}" = 1 ]; }
missing_data() {
  data_required && fail "$* (TESSEL_REQUIRE_DATA=1: missing data is a failure)"
  skip "$*"
}
have_aifb() { [ -f "$TESSEL_DATA_DIR/aifb/aifb_stripped.nt.gz" ]; }
need_aifb() { have_aifb || missing_data "no AIFB data at $TESSEL_DATA_DIR/aifb"; }

# free_port_base N: prints a port P such that P .. P+N-1 are free on 127.0.0.1, chosen at random below
# the kernel's ephemeral range (32768.. by default). Ports of that range are unsafe for a listener a test
# starts later: mpirun's daemons and any client take them as source ports (a port in use at the job's
# start), and a connection to a port nobody listens on yet can get that same port as its source and
# connect to itself (a scrape that reads back its own request).
free_port_base() {
  python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
for _ in range(500):
    base = random.randrange(10000, max(10000 + n + 1, low - n), 10)
    held = []
    try:
        for p in range(base, base + n):
            s = socket.socket(); held.append(s); s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        for s in held: s.close()
    print(base)
    sys.exit(0)
sys.exit("no free port range")
PY
}
