#!/usr/bin/env bash
# The run report plots the run's own numbers (tests/integration/report_values.py): a real run's report (2
# pipeline stages under mpirun) is
# read back, each chart as XML, and every point of the loss, step-time and memory charts, through the
# chart's axis ticks, must be the metrics.csv value of its step and rank.
source "$(dirname "$0")/../lib.sh"
MPIRUN_FLAGS="${MPIRUN_FLAGS[*]}" python3 tests/integration/report_values.py "$TESSEL" "$TESSEL_WORK" || fail "the report does not plot metrics.csv's values (above)"
