// ParameterStore: a model's trainable tensors, their gradients and the optimizer state, in flat buffers
// on the executor's device. It is what a checkpoint saves, and it is shared by every executor
// (workers/rgnn/ and workers/llm/; the GPT stage sets its own initial values after Allocate, per tensor by
// name, so that they do not depend on the stage split). Parameters are declared by name and shape, then allocated
// and initialised together from the job's seed alone, so every worker and every worker count starts from
// the same values; the gradients of all parameters form one flat buffer, summed across workers with a
// single allreduce.
//
//   ParameterStore params;
//   const size_t w = params.Add({"layer0.weight", {R, K, D}, ParamInit::kWeight, Decay::kL2});
//   TESSEL_RETURN_IF_ERROR(params.Allocate(device, seed, WeightInit::kGlorot));
//   ... kernels write params.grad(w) ...
//   TESSEL_RETURN_IF_ERROR(comm.AllreduceSum(params.flat_grad().data<float>(), params.num_values()));
//   TESSEL_RETURN_IF_ERROR(adam.Step(params, kernel, options));
//
// Ownership: the store owns its buffers; value()/grad() are views into them, valid while it lives.
// Thread safety: one thread. Failure: allocation and copies return Status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/choices.h"
#include "core/status.h"
#include "core/tensor.h"
#include "workers/executor.h"
#include "workers/plugin_host/kernel.h"

namespace tessel::workers {

// What a parameter is, for its initial values. A weight's and a bias's distribution is the model's
// WeightInit (core/choices.h), given to Allocate: a weight's fan-in and fan-out are its last two dims;
// kGlorot draws U(+-sqrt(6 / (fan_in + fan_out))) and zero biases, kTorchLinear U(+-1 / sqrt(fan_in)) for
// both, a bias's fan-in being ParameterSpec::fan_in (the input width of the weight it goes with).
enum class ParamInit {
  kWeight,
  kBias,
  kOnes,
  kZeros,
};
enum class Decay { kNone, kL2 };  // kL2: the optimizer's weight decay applies

struct ParameterSpec {
  std::string name;
  std::vector<int64_t> shape;
  ParamInit init = ParamInit::kWeight;
  Decay decay = Decay::kNone;
  int64_t fan_in = 0;  // kBias: the fan-in of the weight it goes with
  // Empty: a dense gradient shaped like the value. Otherwise a row gradient, for a table whose gradient
  // is zero on most rows (a one-hot layer's weight): the value viewed as [P, shape.back()] rows, row p's
  // gradient is row row_of[p] of a [grad_rows, shape.back()] tensor, or zero when row_of[p] < 0. The rows
  // differ between workers, so a row gradient is for a single worker.
  std::vector<int32_t> row_of = {};
  int64_t grad_rows = 0;
  bool row_gradient() const { return !row_of.empty(); }
};

class ParameterStore {
 public:
  // Declares a parameter; returns its index. Only before Allocate.
  size_t Add(ParameterSpec spec);
  // Allocates values and gradients on `device` and initialises the values on the host from `seed`, in
  // declaration order, weights and biases as `weights` says, then copies them over. Gradients start at zero.
  // Values and gradients are `dtype`: f32, or f64 (an RGNN job's train.precision = "fp64"); the values
  // are drawn in double either way, so an f32 store holds the f64 store's values rounded once.
  Status Allocate(const DeviceContext& device, uint64_t seed, WeightInit weights = WeightInit::kGlorot,
                  DType dtype = DType::kF32);
  DType dtype() const { return flat_value_.dtype(); }

  size_t size() const { return specs_.size(); }
  const ParameterSpec& spec(size_t i) const { return specs_[i]; }
  // The index of parameter `name`, or -1.
  int64_t Find(std::string_view name) const;
  Tensor& value(size_t i) { return values_[i]; }
  const Tensor& value(size_t i) const { return values_[i]; }
  // The gradient: shaped like the value, or [grad_rows, shape.back()] for a row gradient.
  Tensor& grad(size_t i) { return grads_[i]; }
  const Tensor& grad(size_t i) const { return grads_[i]; }
  // A row gradient's row_of, on the device (i32 [P]); empty for a dense one.
  const Tensor& row_of(size_t i) const { return row_of_[i]; }
  bool has_row_gradients() const;
  Tensor& flat_value() { return flat_value_; }
  const Tensor& flat_value() const { return flat_value_; }
  // Every gradient, one after the other: what the workers sum.
  Tensor& flat_grad() { return flat_grad_; }
  const Tensor& flat_grad() const { return flat_grad_; }
  int64_t num_values() const { return total_; }
  int64_t num_grad_values() const { return flat_grad_.numel(); }
  int64_t offset(size_t i) const { return offsets_[i]; }
  const DeviceContext& device() const { return device_; }

  // Saves and restores every value under "param/<name>".
  Status SaveState(StateWriter& out) const;
  Status LoadState(StateReader& in);

 private:
  std::vector<ParameterSpec> specs_;
  std::vector<int64_t> offsets_;
  int64_t total_ = 0;
  DeviceContext device_;
  Tensor flat_value_, flat_grad_;
  std::vector<Tensor> values_, grads_, row_of_;
};

// torch.optim.Adam over a ParameterStore through the optim.adam.step kernel (optim.adam.step_rows for a
// row gradient): one call per parameter, with weight decay on the parameters declared Decay::kL2. The
// moments take the store's dtype.
class AdamOptimizer {
 public:
  struct Hyper {
    double lr, beta1, beta2, eps, weight_decay;  // the job's train.lr, beta1, beta2, eps and l2
  };
  explicit AdamOptimizer(Hyper hyper) : hyper_(hyper) {}
  // Zeroed moments shaped like the store's values, on its device.
  Status Allocate(const ParameterStore& params);
  // One update from the gradients in `params` (already summed over the workers). `adam_rows` may be null
  // when no parameter has a row gradient.
  Status Step(ParameterStore& params, const Kernel& adam, const Kernel* adam_rows, const CallOptions& options);
  int64_t steps() const { return step_; }
  int64_t state_bytes() const { return static_cast<int64_t>(m_.nbytes() + v_.nbytes()); }

  // Saves and restores the moments ("adam/m", "adam/v") and the step count ("adam/step").
  Status SaveState(StateWriter& out) const;
  Status LoadState(StateReader& in);

 private:
  Hyper hyper_;
  DeviceContext device_;
  Tensor m_, v_;
  int64_t step_ = 0;
};

// Helpers shared by SaveState implementations: a device tensor copied to the host, and back.
Result<Tensor> ToHost(const Tensor& t, const DeviceContext& device);
Status FromHost(const Tensor& host, Tensor& t, const DeviceContext& device, std::string_view name);

}  // namespace tessel::workers
