#!/usr/bin/env bash
# capped.sh MB CMD...: runs CMD in a memory cgroup of its own, capped at MB resident (v1 memory.limit_in_bytes
# with swap counted, or v2 memory.max with no swap): under mpirun, one cgroup per rank, so each rank has the
# cap to itself. Past it the kernel kills the rank (OOM), as a machine of that size would. Needs root.
set -euo pipefail
mb=$1; shift
bytes=$((mb * 1024 * 1024))
name=tessel-cap-${OMPI_COMM_WORLD_RANK:-0}-$$
if [ -d /sys/fs/cgroup/memory ]; then
  dir=/sys/fs/cgroup/memory/$name
  mkdir -p "$dir"
  echo "$bytes" > "$dir/memory.limit_in_bytes"
  echo "$bytes" > "$dir/memory.memsw.limit_in_bytes" 2>/dev/null || true
else
  dir=/sys/fs/cgroup/$name
  mkdir -p "$dir"
  echo "$bytes" > "$dir/memory.max"
  echo 0 > "$dir/memory.swap.max" 2>/dev/null || true
fi
echo $$ > "$dir/cgroup.procs"
exec "$@"
