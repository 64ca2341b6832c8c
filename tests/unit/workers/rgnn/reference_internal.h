// Internals of the RGNN reference (reference_model.h): a dense double matrix, the few helpers the three
// models share, and one entry point per model (reference_rgcn.cc, reference_rgat.cc, reference_hgt.cc).
// Only the reference's own .cc files include this.
// Ownership: values only. Thread safety: pure functions. Failure: std::invalid_argument, as in
// reference_model.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/workers/rgnn/reference_types.h"

namespace tessel::testing::internal {

// A dense row-major rows x cols matrix of doubles, zero-initialised.
struct Mat {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<double> a;

  Mat() = default;
  Mat(int64_t r, int64_t c) : rows(r), cols(c), a(static_cast<size_t>(r * c), 0.0) {}
  double& operator()(int64_t i, int64_t j) { return a[static_cast<size_t>(i * cols + j)]; }
  double operator()(int64_t i, int64_t j) const { return a[static_cast<size_t>(i * cols + j)]; }
};

Mat MatMul(const Mat& x, const Mat& y);    // x y
Mat MatMulTN(const Mat& x, const Mat& y);  // x^T y
Mat MatMulNT(const Mat& x, const Mat& y);  // x y^T
void AddInPlace(const Mat& x, Mat* y);     // y += x

// Throws std::invalid_argument with `what` unless `ok`.
void Require(bool ok, const std::string& what);

// The parameter `name`, which must exist.
const RefTensor& Param(const RefParams& params, const std::string& name);
RefTensor& Param(RefParams* params, const std::string& name);
// A zero tensor of `shape`.
RefTensor Zeros(std::vector<int64_t> shape);

// Matrix `index` of the stack a tensor of shape [..., rows, cols] holds (its last two dimensions).
Mat Slice(const RefTensor& t, int64_t index);
// Adds m to matrix `index` of the stack.
void AddToSlice(const Mat& m, int64_t index, RefTensor* t);

// X0: the features [N, F], or I_N for one-hot input.
Mat InputMatrix(const RefGraph& graph);
int64_t InputWidth(const RefGraph& graph);
int32_t NodeType(const RefGraph& graph, int64_t node);
// in_edges[i] = the indices (into graph.edges, in order) of every edge into i, over all relations.
std::vector<std::vector<size_t>> InEdges(const RefGraph& graph);

// Widths d_0 .. d_L of RGCN and RGAT: d_0 = F or N, then H, and d_L = C.
std::vector<int64_t> LayerWidths(const RefGraph& graph, const RefConfig& config);
std::string LayerName(int32_t layer, const std::string& what);  // "layer{l}.{what}"

struct LossResult {
  double loss = 0;
  int64_t correct = 0;
  int64_t count = 0;
};
// Mean softmax cross-entropy over the labelled train nodes; dlogits (when not null) gets d loss / d logits.
LossResult CrossEntropy(const RefGraph& graph, const Mat& logits, Mat* dlogits);

struct ModelResult {
  Mat logits;
  LossResult loss;
};

// Each model adds its parameters (zero-filled) to *params.
void AddRgcnShapes(const RefGraph& graph, const RefConfig& config, RefParams* params);
void AddRgatShapes(const RefGraph& graph, const RefConfig& config, RefParams* params);
void AddHgtShapes(const RefGraph& graph, const RefConfig& config, RefParams* params);

// Forward and loss; when grads is not null (zero-filled, as RefParamShapes makes it), also the backward,
// accumulated into *grads.
ModelResult RunRgcn(const RefGraph& graph, const RefConfig& config, const RefParams& params, RefParams* grads);
ModelResult RunRgat(const RefGraph& graph, const RefConfig& config, const RefParams& params, RefParams* grads);
ModelResult RunHgt(const RefGraph& graph, const RefConfig& config, const RefParams& params, RefParams* grads);

}  // namespace tessel::testing::internal
