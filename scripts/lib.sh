# Shared by the scripts: the build directory, the CMake configure/build, and mpirun flags.
# Source it; it defines functions only.

TESSEL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TESSEL_BUILD=${TESSEL_BUILD:-$TESSEL_ROOT/build}

tessel_jobs() { nproc 2>/dev/null || echo 2; }

# ccache: share hits between checkouts in different folders (CI builds a fresh clone each time).
export CCACHE_BASEDIR="$TESSEL_ROOT"
export CCACHE_NOHASHDIR=1

# tessel_build [extra cmake args...]: configure (once) and build everything.
tessel_build() {
  export PATH="$PATH:/usr/local/cuda/bin"
  if [ ! -f "$TESSEL_BUILD/CMakeCache.txt" ]; then
    cmake -S "$TESSEL_ROOT" -B "$TESSEL_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
  fi
  cmake --build "$TESSEL_BUILD" --parallel "$(tessel_jobs)"
}

# The flags every Tessel mpirun needs. --enable-recovery lets the survivors of a dead rank keep running
# so the coordinator can report which rank died (without it Open MPI tears the job down itself, exit 137).
tessel_mpirun_flags() {
  # --bind-to none: Open MPI binds each rank to one core by default, which would put a worker's
  # threads_per_worker threads on that one core.
  local flags=(--enable-recovery --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
  echo "${flags[@]}"
}
