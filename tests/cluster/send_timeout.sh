#!/usr/bin/env bash
# A send that times out keeps its buffer until MPI is done with it: the late receiver gets every byte
# (tests/cluster/send_timeout_check.cc), over shared memory on one host.
source "$(dirname "$0")/../lib.sh"
CHECK=${TESSEL_SEND_TIMEOUT_CHECK:?the tessel-send-timeout-check binary}
mpirun "${MPIRUN_FLAGS[@]}" -np 2 "$CHECK" | tee "$TESSEL_WORK/out"
grep -q "both messages arrived whole" "$TESSEL_WORK/out" || fail "rank 1 did not report both messages whole"
grep -q "the first send timed out" "$TESSEL_WORK/out" || fail "rank 0's first send did not time out"
pass "a send that timed out was delivered whole to its late receiver"
