// RgnnModel: what an rgnn job's `model.name` names. A model is a layer file and its ops: the layer
// (layers/*.h), and beside it a model that says which ops the layers need, how they are made from the
// settings, and the rules of the job that only this model has. The RGNN executors (full graph and
// sampled), the graph planner and `tessel validate` reach a model only through the registry
// (model_registry.h).
//
// Ownership: models are immutable and live for the process. Thread safety: const methods, any thread.
// Failure: Build returns kernel and allocation errors; Check returns the problems it finds.
#pragma once

#include <tessel/ops/op.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "core/model_keys.h"
#include "core/status.h"
#include "workers/kernel_set.h"
#include "workers/params/parameter_store.h"
#include "workers/rgnn/graph_view.h"
#include "workers/rgnn/layers/classifier.h"
#include "workers/rgnn/layers/layer.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {

// What a model is built for, beyond the settings.
struct ModelShape {
  int64_t input_dim = 0;  // features, or nodes for one-hot input
  int64_t classes = 0;
  int32_t workers = 1;
  bool full_graph = true;
};

// A model's layers, as the executor runs them: layer l + 1 reads layer l's output (after a ReLU when
// `relu_between`), and the classifier, when there is one, reads the last layer's.
struct ModelLayers {
  std::vector<std::unique_ptr<RgnnLayer>> layers;
  std::unique_ptr<Classifier> classifier;
  bool relu_between = true;
};

// A rule of the job broken: the key to blame ("model.heads"; `or_key` instead when the job set only that
// one) and what is wrong.
struct SettingProblem {
  std::string key, or_key;
  std::string message;
};

// The problems of a model without RGCN's weight decompositions when the job asks for one.
inline std::vector<SettingProblem> DecompositionProblems(const RgnnSettings& s, std::string_view model) {
  std::vector<SettingProblem> problems;
  for (const auto& [key, value] : {std::pair<const char*, int32_t>{"model.num_bases", s.num_bases},
                                   std::pair<const char*, int32_t>{"model.num_blocks", s.num_blocks}}) {
    if (value > 0) {
      problems.push_back(
          {key, "", StrCat(key, " decomposes RGCN's relation weights; model.name = \"", model, "\" has none")});
    }
  }
  return problems;
}

class RgnnModel {
 public:
  virtual ~RgnnModel() = default;
  virtual std::string_view name() const = 0;
  // The job keys this model alone has (core/model_keys.h), declared in its own file; registering the model
  // makes them keys of the job schema, and its layers read them from RgnnSettings::options.
  virtual std::vector<const ModelKey*> Keys() const { return {}; }
  // The job's rules that only this model has, for the widths of `shape` (input_dim 0: not known yet, as in
  // `tessel validate`); the graph planner reports them with the key's origin, exit 2. And notes for the
  // plan's log ("block-diagonal weights on layer 1").
  virtual std::vector<SettingProblem> Check(const RgnnSettings& settings, const ModelShape& shape) const = 0;
  virtual std::vector<std::string> Notes(const RgnnSettings&, const ModelShape&) const { return {}; }
  // Every op its layers (and classifier) need, forward and backward.
  virtual std::vector<const tessel_op_decl*> Ops(const RgnnSettings& settings, const ModelShape& shape) const = 0;
  // The layers over `graph` (which gives the relation and node-type counts), their parameters declared in
  // `params` (not yet allocated).
  virtual Result<ModelLayers> Build(const RgnnSettings& settings, const ModelShape& shape, const GraphView& graph,
                                    KernelSet& kernels, ParameterStore& params) const = 0;
  // Whether the layers read the per-relation (source, destination) pair layout instead of the segments.
  virtual bool ReadsRelationPairs(const RgnnSettings&) const { return false; }
  // Whether the layers read the segment layout's dedge_pair (the pair of each edge: 4 bytes an edge).
  virtual bool ReadsEdgePairs(const RgnnSettings&) const { return true; }
  // Whether a layer keeps about one [pairs, out] buffer (projections, per-edge scores), for the planner's
  // memory model; RGCN's fused kernels keep none.
  virtual bool KeepsPairBuffers(const RgnnSettings&) const { return true; }
  // Whether each layer's output and parameter gradients are sums over its input rows, so that a full-graph
  // worker may run a layer one block of input rows at a time (train.halo = "streamed"; RgnnLayer::BackwardAdd).
  virtual bool StreamsHalo(const RgnnSettings&) const { return false; }
};

}  // namespace tessel::workers
