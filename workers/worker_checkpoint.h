// The worker's side of checkpoints (DESIGN.md "Checkpoints"): a shard in memory (what the executor saves,
// plus the runtime's step history), written with every other worker's, and the checkpoint directory
// checked before the first step. The coordinator writes the manifest and `latest`.
// Thread safety: one worker thread. Failure: kStorage naming the file, the directory or the tensor.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/logging.h"
#include "core/status.h"
#include "core/tensor.h"
#include "storage/checkpoint_shard.h"
#include "workers/assignment.h"
#include "workers/comm/comm.h"
#include "workers/executor.h"
#include "workers/protocol.h"

namespace tessel::workers {

// A checkpoint shard in memory: what the executor saves, plus the runtime's history.
class ShardState final : public StateWriter, public StateReader {
 public:
  ShardState() = default;
  explicit ShardState(std::vector<storage::NamedTensor> tensors) : tensors_(std::move(tensors)) {}
  Status Write(std::string_view name, const Tensor& tensor) override {
    TESSEL_ASSIGN_OR_RETURN(Tensor copy, Tensor::Empty(tensor.dtype(), tensor.shape()));
    if (tensor.nbytes() > 0) std::memcpy(copy.raw(), tensor.raw(), tensor.nbytes());
    tensors_.push_back({std::string(name), std::move(copy)});
    return Status();
  }
  Result<Tensor> Read(std::string_view name) override {
    for (const storage::NamedTensor& t : tensors_) {
      if (t.name == name) return t.tensor;
    }
    return StorageError(StrCat("the checkpoint has no tensor '", name, "' (written by another kind of job?)"));
  }
  const std::vector<storage::NamedTensor>& tensors() const { return tensors_; }

 private:
  std::vector<storage::NamedTensor> tensors_;
};

// The per-step arrays of summary.json; a checkpoint carries them so a resumed run reports every step.
class StepHistory {
 public:
  void Add(const StepResult& r, double seconds) {
    losses_.push_back(r.loss);
    seconds_.push_back(seconds);
    auto add = [this](const std::string& name, double v) {
      if (!timings_.contains(name)) order_.push_back(name);
      timings_[name].push_back(v);
    };
    if (r.forward_seconds >= 0) add("forward_seconds", r.forward_seconds);
    if (r.backward_seconds >= 0) add("backward_seconds", r.backward_seconds);
    for (const RecordField& f : r.timings) add(f.name, FindNumber(r.timings, f.name).value_or(0));
  }
  void Emit(const std::string& unit, Record& out) const {
    Set(out, unit + "_loss", losses_);
    Set(out, unit + "_seconds", seconds_);
    for (const std::string& name : order_) Set(out, unit + "_" + name, timings_.at(name));
  }
  Status Save(StateWriter& out) const {
    TESSEL_RETURN_IF_ERROR(out.Write("runtime/loss", Borrow(losses_)));
    TESSEL_RETURN_IF_ERROR(out.Write("runtime/seconds", Borrow(seconds_)));
    for (size_t i = 0; i < order_.size(); ++i) {
      TESSEL_RETURN_IF_ERROR(out.Write(StrCat("runtime/timing/", i, "/", order_[i]), Borrow(timings_.at(order_[i]))));
    }
    return Status();
  }
  // Restores the arrays of the first `steps` steps.
  Status Load(StateReader& in, int64_t steps) {
    TESSEL_ASSIGN_OR_RETURN(losses_, Array(in, "runtime/loss", steps));
    TESSEL_ASSIGN_OR_RETURN(seconds_, Array(in, "runtime/seconds", steps));
    auto* shard = dynamic_cast<ShardState*>(&in);
    if (shard == nullptr) return Status();
    for (const storage::NamedTensor& t : shard->tensors()) {
      if (t.name.rfind("runtime/timing/", 0) != 0) continue;
      const size_t slash = t.name.find('/', 15);
      if (slash == std::string::npos) continue;
      const std::string name = t.name.substr(slash + 1);
      TESSEL_ASSIGN_OR_RETURN(timings_[name], Array(in, t.name, steps));
      order_.push_back(name);
    }
    return Status();
  }

 private:
  static Tensor Borrow(const std::vector<double>& v) {
    return Tensor::Borrow(const_cast<double*>(v.data()), DType::kF64, {static_cast<int64_t>(v.size())});
  }
  static Result<std::vector<double>> Array(StateReader& in, const std::string& name, int64_t steps) {
    TESSEL_ASSIGN_OR_RETURN(Tensor t, in.Read(name));
    if (t.dtype() != DType::kF64 || t.numel() != steps) {
      return StorageError(
          StrCat("'", name, "' holds ", t.numel(), " ", DTypeName(t.dtype()), " values, expected ", steps));
    }
    return std::vector<double>(t.data<double>(), t.data<double>() + steps);
  }

  std::vector<double> losses_, seconds_;
  std::map<std::string, std::vector<double>> timings_;
  std::vector<std::string> order_;
};

// Every worker writes its shard of `step`; once all have (a sum over the workers doubles as the barrier and
// gathers the shards' sizes and CRCs), the first worker hands the list to the coordinator (`on_checkpoint`,
// RunHooks'; may be empty).
Status WriteCheckpoint(const WorkerSettings& settings, const Executor& executor, const StepHistory& history,
                       int64_t step, WorkerComm& comm, const std::function<Status(const CheckpointMsg&)>& on_checkpoint,
                       const Logger& log);

// The checkpoint directory, before the first step: created, and a file written into it and removed, so
// that a directory this rank cannot write (a read-only or missing mount on its host) stops the job before
// training rather than at the first checkpoint, with every step since lost. Nothing when checkpoints are off.
Status CheckCheckpointDir(const WorkerSettings& settings, int rank);

}  // namespace tessel::workers
