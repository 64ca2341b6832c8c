// RgcnTrainer: full-graph R-GCN training of one partition (Schlichtkrull et al. 2018).
//   h_i^{l+1} = sum_r sum_{j in N_r(i)} 1/|N_r(i)| W_r^l h_j^l   (the self-loop is relation 2R)
// with ReLU between layers and softmax cross-entropy on the labelled training nodes. Every kernel
// comes from a loaded plugin through the KernelRegistry. Workers exchange halo activations at every
// layer, forward and backward, and sum gradients with one allreduce per epoch; Adam then runs
// identically on every worker, so the parameters stay replicated.
// Ownership: the trainer borrows the partition, registry, comm and pool; they must outlive it.
// Thread safety: one thread. Failure: every method returns Status (plugin, comm or shape errors).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "storage/partition.h"
#include "workers/comm/comm.h"
#include "workers/plugin_host/kernel_registry.h"
#include "workers/rgnn/halo.h"
#include "workers/rgnn/layout.h"

namespace tessel::workers {

enum class RgcnInput { kOneHot, kFeatures };

// The ops an RGCN worker needs (forward, backward, loss and optimiser).
const std::vector<std::string>& RgcnOps();

struct RgcnConfig {
  int32_t layers = 2;
  int32_t hidden = 16;
  RgcnInput input = RgcnInput::kOneHot;
  double lr = 0.01;
  double l2 = 5e-4;  // coupled weight decay on the first layer only, as in the R-GCN paper
  uint64_t seed = 0;
};

struct EpochStats {
  double loss = 0;            // mean cross-entropy over all training nodes (all workers)
  double train_accuracy = 0;  // of the forward pass of this epoch, before the update
};

struct EvalStats {
  double train_accuracy = 0;
  double test_accuracy = 0;
  int64_t test_correct = 0;
  int64_t test_total = 0;
  double test_loss = 0;
};

class RgcnTrainer {
 public:
  static Result<std::unique_ptr<RgcnTrainer>> Create(const storage::WorkerPartition& part, const RgcnConfig& config,
                                                     const KernelRegistry& kernels, WorkerComm& comm,
                                                     ThreadPool& pool);
  Result<EpochStats> TrainEpoch();
  Result<EvalStats> Evaluate();

  int64_t num_parameters() const { return total_params_; }
  int64_t halo_bytes_sent() const { return halo_.bytes_sent(); }
  int64_t halo_bytes_received() const { return halo_.bytes_received(); }

 private:
  RgcnTrainer() = default;
  struct Kernels;
  Status InitParameters();
  // Runs every layer; leaves logits in act_[layers-1].
  Status Forward();
  Status Backward();
  Status Loss(const Tensor& mask, double scale, double* loss_sum, int64_t* correct, int64_t* count);

  const storage::WorkerPartition* part_ = nullptr;
  RgcnConfig config_;
  WorkerComm* comm_ = nullptr;
  ThreadPool* pool_ = nullptr;
  std::shared_ptr<Kernels> k_;
  RelationLayout layout_;
  HaloExchange halo_;

  std::vector<int64_t> dims_;  // dims_[l] = input width of layer l; dims_[layers] = classes
  int64_t total_params_ = 0;
  Tensor params_, grads_, adam_m_, adam_v_;  // flat f32, all layers
  std::vector<Tensor> weight_, weight_grad_, m_view_, v_view_;  // per-layer views into the flat buffers
  int64_t step_ = 0;

  Tensor features_;                       // f32[num_rows, F] (feature input only)
  Tensor row_id_;                         // i64[num_rows] original ids (one-hot input)
  Tensor labels_, train_mask_, test_mask_;
  std::vector<Tensor> y_;                 // per layer: f32[U, out]
  std::vector<Tensor> act_;               // per layer: aggregated f32[num_owned, out]
  std::vector<Tensor> hidden_full_;       // per layer < L-1: relu output f32[num_rows, out]
  std::vector<Tensor> dhidden_full_;      // its gradient, same shapes
  Tensor dlogits_;
  Tensor no_dx_;                          // f32[0, F]: the first layer needs no input gradient
};

}  // namespace tessel::workers
