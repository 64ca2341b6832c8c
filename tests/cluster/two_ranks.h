// The harness of the 2-rank MPI checks of tests/cluster (*_check.cc): MPI up, rank 0 runs `sender`, rank
// 1 `receiver`, and every rank exits with the worst result, so mpirun's status is the check's.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <string>

#include "workers/comm/mpi_comm.h"

namespace tessel::testing {

inline int Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "FAIL rank %d: %s\n", rank, what.c_str());
  return 1;
}

inline int RunTwoRanks(int argc, char** argv, int (*sender)(), int (*receiver)()) {
  auto session = workers::MpiSession::Init(&argc, &argv);
  if (!session.ok()) return Fail(-1, session.status().ToString());
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) return Fail(rank, "run with mpirun -np 2");
  const int rc = rank == 0 ? sender() : receiver();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

}  // namespace tessel::testing
