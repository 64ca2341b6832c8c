#!/usr/bin/env bash
# A message past 2^31 bytes between two real MPI ranks, over shared memory on one host: sent and received
# whole, every byte checked (tests/cluster/big_message_check.cc; issue 34, 64-bit). About 4.3 GB of memory.
source "$(dirname "$0")/../lib.sh"
CHECK=${TESSEL_BIG_MESSAGE_CHECK:?the tessel-big-message-check binary}
mpirun "${MPIRUN_FLAGS[@]}" -np 2 "$CHECK" | tee "$TESSEL_WORK/out"
grep -q "rank 1: received 2147487745 bytes whole" "$TESSEL_WORK/out" || fail "rank 1 did not report the message whole"
grep -q "rank 1 got all of them" "$TESSEL_WORK/out" || fail "rank 0 did not see rank 1's acknowledgement"
pass "one message of 2^31 + 4097 bytes between two MPI ranks, whole"
