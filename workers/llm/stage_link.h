// StageLink: a pipeline stage's point-to-point transport. Activations go to the next stage and their
// gradients come back (MPI, polled), and the first and last stage swap their tied-embedding gradients.
// A device tensor travels through a host copy (no CUDA-aware MPI assumed), kept until its send is done.
//
// Ownership: borrows the communicator and the device. Thread safety: one thread. Failure: kRankFailed when
// the peer does not answer within the step timeout (timeouts.step_seconds).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "workers/comm/comm.h"
#include "workers/executor.h"

namespace tessel::workers {

// The message tags of a GPT pipeline.
inline constexpr int kTagForward = 101, kTagBackward = 102, kTagTiedGrad = 103;

class StageLink {
 public:
  StageLink(WorkerComm& comm, const DeviceContext& device, double timeout_seconds)
      : comm_(comm), device_(device), timeout_(timeout_seconds) {}

  // Starts sending f32 tensor `t` to worker `peer`; *handle is for WaitSend.
  Status Send(const Tensor& t, int peer, int tag, int64_t* handle);
  // Receives f32 tensor `t` from worker `peer`; the seconds it waited are added to *waited.
  Status Recv(Tensor& t, int peer, int tag, double* waited);
  Status WaitSend(int64_t handle) { return comm_.WaitSend(handle, timeout_); }
  Status WaitSends() { return comm_.WaitSends(timeout_); }
  double timeout() const { return timeout_; }

 private:
  WorkerComm& comm_;
  DeviceContext device_;
  double timeout_;
  std::map<const void*, std::vector<float>> staging_;  // host copies of device tensors being sent
};

}  // namespace tessel::workers
