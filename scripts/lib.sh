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

# The mpirun flags, defined here only: scripts/tessel-mpirun uses tessel_mpirun_flags, and the shell tests
# (tests/lib.sh, MPIRUN_FLAGS) tessel_mpirun_base_flags.
#
# tessel_mpirun_base_flags: what any mpirun of Tessel on one machine needs, printed on one line.
#   --oversubscribe: more ranks than cores (a coordinator and its workers on a laptop or a 2-core VM);
#   --bind-to none: Open MPI binds each rank to one core by default, which would put a worker's
#     threads_per_worker threads on that one core;
#   --mca btl_vader_single_copy_mechanism none: containers that forbid process_vm_readv;
#   --allow-run-as-root: as root.
tessel_mpirun_base_flags() {
  local flags=(--oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
  echo "${flags[@]}"
}

# tessel_mpirun_flags: the base flags plus --enable-recovery, which lets the survivors of a dead rank keep
# running so the coordinator can report which rank died (without it Open MPI tears the job down itself,
# exit 137). Tests that check that teardown use the base flags alone.
#   --mca odls_base_sigkill_timeout 0: when the coordinator aborts the job, Open MPI kills what is left
#     at once instead of a second after a SIGTERM: a hung rank takes no SIGTERM, and Tessel's ranks save
#     their state on SIGUSR1 (README "Stopping a run"), not on the SIGTERM of a teardown. A stopped
#     worker then ends the job within the heartbeat timeout plus about half a second.
tessel_mpirun_flags() {
  echo --enable-recovery --mca odls_base_sigkill_timeout 0 "$(tessel_mpirun_base_flags)"
}
