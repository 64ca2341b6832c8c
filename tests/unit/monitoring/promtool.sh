#!/bin/sh
# promtool ARGS..., or a skip (exit 77) naming the package when Prometheus is not installed: the
# promtool tests are always registered, and CI's skip check (scripts/check-skips.py) fails the skip.
command -v promtool >/dev/null || { echo "SKIP: promtool is not installed (apt-get install prometheus)"; exit 77; }
exec promtool "$@"
