#!/usr/bin/env bash
# Issue 32, acceptance 3: a symbolic link planted at every name Tessel creates in the spill, checkpoint and
# output directories, the names taken from an strace of a real run (tests/integration/planted_links.py):
# each run is refused with exit 6 naming the link, and nothing outside is written. Needs root for
# unshare --pid (a PID namespace makes the pid in the names the same in every run; CI has it).
source "$(dirname "$0")/../lib.sh"
command -v strace >/dev/null || fail "strace is missing (scripts/setup-deps.sh installs it)"
unshare --pid --fork --mount-proc true 2>/dev/null || skip "cannot make a PID namespace (needs root)"
python3 tests/integration/planted_links.py "$TESSEL" "$TESSEL_WORK/links" || fail "a planted link was not refused (above)"
pass "every name Tessel creates in the spill, checkpoint and output directories refuses a planted link"
