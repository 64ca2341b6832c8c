#!/usr/bin/env bash
# The distributed feature path of sampled training, across 3 ranks: rows fetched through the feature
# stores (mapped and pinned) and the batched MPI exchange equal the rows read directly from the graph
# file, for random batches; an out-of-range node id is a clean error naming the rank, and the other
# ranks are not left waiting (tests/cluster/feature_fetch_check.cc).
source "$(dirname "$0")/../lib.sh"
CHECK=${TESSEL_FEATURE_FETCH_CHECK:?the tessel-feature-fetch-check binary}
"$TESSEL" generate graph --out "$TESSEL_WORK/g.h5" --nodes 5000 --feature-dim 24 --seed 3 > /dev/null
mpirun "${MPIRUN_FLAGS[@]}" -np 3 "$CHECK" "$TESSEL_WORK/g.h5" | tee "$TESSEL_WORK/out"
[ "$(grep -c "equal to the file" "$TESSEL_WORK/out")" -eq 3 ] || fail "not every rank reported its check"
pass "feature rows fetched across 3 ranks equal the graph file's"
