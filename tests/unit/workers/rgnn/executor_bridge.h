// What the executor tests and the parity exporter need to hand Tessel's state to the double-precision
// reference (reference_model.h): the graph as the reference sees it, its configuration, a float tensor as a
// reference tensor, and a parameter's gradient as a dense tensor.
// Ownership: values. Thread safety: pure functions. Failure: none (the inputs are the tests' own).
#pragma once

#include "core/tensor.h"
#include "storage/graph.h"
#include "tests/unit/workers/rgnn/reference_types.h"
#include "workers/params/parameter_store.h"
#include "workers/rgnn/rgnn_settings.h"

namespace tessel::workers {

// The graph with global ids and the relations of the file (which already hold the inverse and self-loop
// relations); one_hot drops the features (X0 = I_N).
::tessel::testing::RefGraph ToRefGraph(const storage::HeteroGraph& g, bool one_hot);

// A host f32 tensor, widened to double.
::tessel::testing::RefTensor ToRef(const Tensor& t);

// The reference's configuration of an RGNN executor's settings.
::tessel::testing::RefConfig RefConfigOf(const RgnnSettings& s);

// Parameter i's gradient as a dense host tensor shaped like its value (a row gradient scattered to its rows).
Tensor DenseGradient(const ParameterStore& params, size_t i);

}  // namespace tessel::workers
