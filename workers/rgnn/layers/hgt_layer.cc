#include "workers/rgnn/layers/hgt_layer.h"

#include <tessel/ops/nn.h>
#include <tessel/ops/rgnn.h>

#include <tuple>
#include <utility>

namespace tessel::workers {
namespace {

Tensor Rows(const Tensor& t, int64_t begin, int64_t end) {
  return Tensor::Borrow(static_cast<char*>(t.raw()) + begin * t.dim(1) * static_cast<int64_t>(DTypeSize(t.dtype())),
                        t.dtype(), {end - begin, t.dim(1)}, t.device());
}

// Matrix `type` of a [T, K, D] parameter, as [K, D].
Tensor Slice(const Tensor& w, int64_t type) {
  return Tensor::Borrow(
      static_cast<char*>(w.raw()) + type * w.dim(1) * w.dim(2) * static_cast<int64_t>(DTypeSize(w.dtype())), w.dtype(),
      {w.dim(1), w.dim(2)}, w.device());
}

// A [T, K, D] table as [T * K, D], the rows nn.embedding reads.
Tensor Flat(const Tensor& w) { return Tensor::Borrow(w.raw(), w.dtype(), {w.dim(0) * w.dim(1), w.dim(2)}, w.device()); }

tessel_gemm_params Gemm(int ta, int tb, double beta) { return {sizeof(tessel_gemm_params), ta, tb, 1.0, beta}; }

}  // namespace

HgtLayer::HgtLayer(const Shape& shape, const GraphView& graph, const KernelSet& kernels, ParameterStore& params,
                   std::shared_ptr<Scratch> scratch)
    : shape_(shape), k_(kernels), params_(params), scratch_(std::move(scratch)) {
  const Decay decay = shape.index == 0 ? Decay::kL2 : Decay::kNone;
  const std::string prefix = StrCat("layer", shape.index, ".");
  const int64_t T = graph.node_types, R = graph.relations, K = shape.in_dim, D = shape.out_dim;
  const int64_t H = shape.heads, d = D / H;
  key_ = AddLinear(params, prefix + "k", T, K, D, decay);
  query_ = AddLinear(params, prefix + "q", T, K, D, decay);
  value_ = AddLinear(params, prefix + "v", T, K, D, decay);
  out_ = AddLinear(params, prefix + "out", T, D, D, decay);
  if (shape.skip()) skip_ = params.Add({prefix + "skip", {T}, ParamInit::kOnes, decay});
  att_ = params.Add({prefix + "rel_att", {R, H, d, d}, ParamInit::kWeight, decay});
  msg_ = params.Add({prefix + "rel_msg", {R, H, d, d}, ParamInit::kWeight, decay});
  prior_ = params.Add({prefix + "rel_prior", {R, H}, ParamInit::kOnes, decay});
}

HgtLayer::Linear HgtLayer::AddLinear(ParameterStore& params, const std::string& name, int64_t types, int64_t in,
                                     int64_t out, Decay decay) const {
  Linear linear;
  linear.w = params.Add({name, {types, in, out}, ParamInit::kWeight, decay});
  if (shape_.bias) linear.b = params.Add({name + "_bias", {types, out}, ParamInit::kBias, decay, /*fan_in=*/in});
  return linear;
}

std::vector<const tessel_op_decl*> HgtLayer::Ops(const Shape& shape) {
  std::vector<const tessel_op_decl*> ops = {&tessel_op_rgnn_hgt_fwd, &tessel_op_rgnn_hgt_bwd, &tessel_op_nn_gelu_fwd,
                                            &tessel_op_nn_gelu_bwd, &tessel_op_nn_gemm};
  if (shape.one_hot) {
    ops.push_back(&tessel_op_nn_embedding_fwd);
    ops.push_back(&tessel_op_nn_embedding_bwd);
  }
  if (shape.skip()) {
    ops.push_back(&tessel_op_rgnn_typed_gate_fwd);
    ops.push_back(&tessel_op_rgnn_typed_gate_bwd);
  }
  return ops;
}

Status HgtLayer::Scratch::Shape(int64_t rows, int64_t owned, int64_t width, DType dtype, Allocator& alloc) {
  for (auto [t, buf, n] : {std::tuple{&a, &a_buf, owned}, std::tuple{&b, &b_buf, owned}, std::tuple{&c, &c_buf, rows},
                           std::tuple{&e, &e_buf, rows}, std::tuple{&k, &k_buf, rows}, std::tuple{&q, &q_buf, owned},
                           std::tuple{&v, &v_buf, rows}}) {
    TESSEL_ASSIGN_OR_RETURN(*t, buf->View({n, width}, dtype, alloc));
  }
  return Status();
}

Status HgtLayer::ShapeScratch() {
  return scratch_->Shape(graph_->rows, graph_->owned, shape_.out_dim, params_.dtype(), *params_.device().allocator);
}

Status HgtLayer::Bind(const GraphView& graph) {
  graph_ = &graph;
  Allocator& alloc = *params_.device().allocator;
  const int64_t M = graph.rows, N = graph.owned, D = shape_.out_dim, H = shape_.heads;
  TESSEL_ASSIGN_OR_RETURN(agg_, agg_buf_.View({N, D}, params_.dtype(), alloc));
  if (shape_.skip()) {
    TESSEL_ASSIGN_OR_RETURN(o_, o_buf_.View({N, D}, params_.dtype(), alloc));
  }
  TESSEL_RETURN_IF_ERROR(ShapeScratch());  // grows the shared buffers to this layer's size
  TESSEL_ASSIGN_OR_RETURN(row_max_, row_max_buf_.View({N, H}, params_.dtype(), alloc));
  TESSEL_ASSIGN_OR_RETURN(row_sum_, row_sum_buf_.View({N, H}, params_.dtype(), alloc));
  if (shape_.one_hot) {
    // A row's entry in the per-type tables [T * nodes, D]: type * nodes + global id. Built on the host.
    TESSEL_ASSIGN_OR_RETURN(Tensor types, ToHost(graph.row_type, params_.device()));
    TESSEL_ASSIGN_OR_RETURN(Tensor ids, ToHost(graph.row_id, params_.device()));
    TESSEL_ASSIGN_OR_RETURN(Tensor host, Tensor::Empty(DType::kI64, {M}));
    for (int64_t i = 0; i < M; ++i) {
      host.data<int64_t>()[i] = static_cast<int64_t>(types.data<int32_t>()[i]) * shape_.in_dim + ids.data<int64_t>()[i];
    }
    TESSEL_ASSIGN_OR_RETURN(one_hot_ids_, one_hot_ids_buf_.View({M}, DType::kI64, alloc));
    TESSEL_RETURN_IF_ERROR(CopyMemory(one_hot_ids_.raw(), one_hot_ids_.device(), host.raw(), Device::kCpu,
                                      host.nbytes(), params_.device().stream));
  }
  if (shape_.bias) {
    TESSEL_ASSIGN_OR_RETURN(ones_, ones_buf_.View({M, 1}, params_.dtype(), alloc));
    // Filled when it grows only (the buffer is reallocated then): sampled training binds every batch.
    if (M > ones_rows_) {
      TESSEL_ASSIGN_OR_RETURN(Tensor ones, Tensor::Empty(params_.dtype(), {M, 1}));
      for (int64_t i = 0; i < M; ++i) {
        if (ones.dtype() == DType::kF64) {
          ones.data<double>()[i] = 1.0;
        } else {
          ones.data<float>()[i] = 1.0f;
        }
      }
      TESSEL_RETURN_IF_ERROR(
          CopyMemory(ones_.raw(), ones_.device(), ones.raw(), Device::kCpu, ones.nbytes(), params_.device().stream));
      ones_rows_ = M;
    }
  }
  return Status();
}

Status HgtLayer::TypedLinear(Source source, const Tensor& x, Linear linear, int64_t rows, Tensor& y) {
  const Tensor& w = params_.value(linear.w);
  if (shape_.one_hot && source == Source::kLayerInput) {
    Tensor ids = Tensor::Borrow(one_hot_ids_.raw(), DType::kI64, {rows}, one_hot_ids_.device());
    Tensor table = Flat(w), ys = Rows(y, 0, rows);
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_embedding_fwd, {&table, &ids}, {&ys}));
  }
  for (const TypeRun& run : graph_->type_runs) {
    if (run.begin >= rows) break;
    Tensor ys = Rows(y, run.begin, run.end);
    if (!(shape_.one_hot && source == Source::kLayerInput)) {
      Tensor xs = Rows(x, run.begin, run.end), ws = Slice(w, run.type);
      TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&xs, &ws}, {&ys}, Gemm(0, 0, 0.0)));
    }
    if (linear.b == kNoBias) continue;
    // ys += ones [n, 1] @ b[type] [1, out].
    Tensor ones = Rows(ones_, run.begin, run.end), bs = Rows(params_.value(linear.b), run.type, run.type + 1);
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&ones, &bs}, {&ys}, Gemm(0, 0, 1.0)));
  }
  return Status();
}

Status HgtLayer::TypedLinearBackward(Source source, const Tensor& x, Linear linear, int64_t rows, const Tensor& dy,
                                     Tensor* dx, int64_t accumulated_rows) {
  if (linear.b != kNoBias) {
    // db[type] = ones^T dy over the type's ranges.
    Tensor& db = params_.grad(linear.b);
    TESSEL_RETURN_IF_ERROR(ZeroMemory(db.raw(), db.device(), db.nbytes(), params_.device().stream));
    for (const TypeRun& run : graph_->type_runs) {
      if (run.begin >= rows) break;
      Tensor ones = Rows(ones_, run.begin, run.end), dys = Rows(dy, run.begin, run.end);
      Tensor dbs = Rows(db, run.type, run.type + 1);
      TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&ones, &dys}, {&dbs}, Gemm(1, 0, 1.0)));
    }
  }
  Tensor& dw = params_.grad(linear.w);
  if (shape_.one_hot && source == Source::kLayerInput) {
    Tensor ids = Tensor::Borrow(one_hot_ids_.raw(), DType::kI64, {rows}, one_hot_ids_.device());
    Tensor table = Flat(dw), dys = Rows(dy, 0, rows);
    return k_.Call(tessel_op_nn_embedding_bwd, {&dys, &ids}, {&table});
  }
  const Tensor& w = params_.value(linear.w);
  TESSEL_RETURN_IF_ERROR(ZeroMemory(dw.raw(), dw.device(), dw.nbytes(), params_.device().stream));
  for (const TypeRun& run : graph_->type_runs) {
    if (run.begin >= rows) break;
    Tensor xs = Rows(x, run.begin, run.end), dys = Rows(dy, run.begin, run.end);
    Tensor dws = Slice(dw, run.type), ws = Slice(w, run.type);
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&xs, &dys}, {&dws}, Gemm(1, 0, 1.0)));
    if (dx == nullptr) continue;
    Tensor dxs = Rows(*dx, run.begin, run.end);
    // Type ranges never straddle the owned rows' end, so a range is either all accumulated or all fresh.
    const double beta = run.begin < accumulated_rows ? 1.0 : 0.0;
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gemm, {&dys, &ws}, {&dxs}, Gemm(0, 1, beta)));
  }
  return Status();
}

Status HgtLayer::KeysQueriesValues(const Tensor& x) {
  const int64_t M = graph_->rows, N = graph_->owned;
  TESSEL_RETURN_IF_ERROR(TypedLinear(Source::kLayerInput, x, key_, M, scratch_->k));
  TESSEL_RETURN_IF_ERROR(TypedLinear(Source::kLayerInput, x, query_, N, scratch_->q));
  return TypedLinear(Source::kLayerInput, x, value_, M, scratch_->v);
}

Status HgtLayer::Forward(const Tensor& x, Tensor& out) {
  TESSEL_RETURN_IF_ERROR(ShapeScratch());
  const int64_t N = graph_->owned;
  TESSEL_RETURN_IF_ERROR(KeysQueriesValues(x));
  const SegmentLayout& g = graph_->segments;
  std::vector<const Tensor*> in = {&scratch_->k,         &scratch_->q,         &scratch_->v,
                                   &params_.value(att_), &params_.value(msg_), &params_.value(prior_)};
  g.AppendDst(in);
  in.push_back(&g.dedge_pair);
  g.AppendSrc(in);
  const tessel_hgt_params p{sizeof(tessel_hgt_params), shape_.heads, shape_.reordering == Reordering::kOn ? 1 : 0};
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_rgnn_hgt_fwd, in, {&agg_, &row_max_, &row_sum_}, p));
  Tensor gelu = Rows(scratch_->c, 0, N);
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gelu_fwd, {&agg_}, {&gelu}));
  if (!shape_.skip()) return TypedLinear(Source::kDense, gelu, out_, N, out);
  TESSEL_RETURN_IF_ERROR(TypedLinear(Source::kDense, gelu, out_, N, o_));
  Tensor x_owned = Rows(x, 0, N), types = Tensor::Borrow(graph_->row_type.raw(), DType::kI32, {N}, x.device());
  return k_.Call(tessel_op_rgnn_typed_gate_fwd, {&o_, &x_owned, &params_.value(skip_), &types}, {&out});
}

Status HgtLayer::Backward(Tensor& dout, const Tensor& x, Tensor* dx) {
  TESSEL_RETURN_IF_ERROR(ShapeScratch());
  const int64_t M = graph_->rows, N = graph_->owned;
  // The scratch as this pass's gradients (Scratch says which is which when).
  Scratch& s = *scratch_;
  Tensor d_o = s.a, d_agg = s.a, d_skip_x = s.b, d_gelu = s.b, d_queries = s.b, gelu = Rows(s.c, 0, N), d_keys = s.c,
         d_values = s.e;
  Tensor* d_out = &dout;
  if (shape_.skip()) {
    // The skip path's share of the input gradient goes straight into dx's owned rows (or nowhere).
    Tensor x_owned = Rows(x, 0, N), types = Tensor::Borrow(graph_->row_type.raw(), DType::kI32, {N}, x.device());
    Tensor dx_owned = dx != nullptr ? Rows(*dx, 0, N) : d_skip_x;
    TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_rgnn_typed_gate_bwd, {&dout, &o_, &x_owned, &params_.value(skip_), &types},
                                   {&d_o, &dx_owned, &params_.grad(skip_)}));
    d_out = &d_o;
  }
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gelu_fwd, {&agg_}, {&gelu}));  // recomputed, not kept
  TESSEL_RETURN_IF_ERROR(TypedLinearBackward(Source::kDense, gelu, out_, N, *d_out, &d_gelu, /*accumulated_rows=*/0));
  TESSEL_RETURN_IF_ERROR(k_.Call(tessel_op_nn_gelu_bwd, {&d_gelu, &agg_}, {&d_agg}));
  TESSEL_RETURN_IF_ERROR(KeysQueriesValues(x));  // recomputed, not kept
  const SegmentLayout& g = graph_->segments;
  std::vector<const Tensor*> in = {
      &d_agg, &s.k,      &s.q,     &s.v, &params_.value(att_), &params_.value(msg_), &params_.value(prior_),
      &agg_,  &row_max_, &row_sum_};
  g.AppendDst(in);
  in.push_back(&g.dedge_pair);
  g.AppendSrc(in);
  const tessel_hgt_params p{sizeof(tessel_hgt_params), shape_.heads, shape_.reordering == Reordering::kOn ? 1 : 0};
  TESSEL_RETURN_IF_ERROR(
      k_.Call(tessel_op_rgnn_hgt_bwd, in,
              {&d_keys, &d_queries, &d_values, &params_.grad(att_), &params_.grad(msg_), &params_.grad(prior_)}, p));
  // dx = dK Wk^T + dV Wv^T (every row) + dQ Wq^T (owned rows) [+ the skip share, already in dx].
  const int64_t skip_rows = shape_.skip() && dx != nullptr ? N : 0;
  TESSEL_RETURN_IF_ERROR(TypedLinearBackward(Source::kLayerInput, x, key_, M, d_keys, dx, skip_rows));
  TESSEL_RETURN_IF_ERROR(TypedLinearBackward(Source::kLayerInput, x, value_, M, d_values, dx, M));
  return TypedLinearBackward(Source::kLayerInput, x, query_, N, d_queries, dx, M);
}

std::vector<HgtLayer::Shape> HgtLayer::Shapes(const RgnnSettings& settings, const ModelShape& model) {
  std::vector<Shape> shapes;
  for (int l = 0; l < settings.layers; ++l) {
    Shape s;
    s.index = l;
    s.in_dim = l == 0 ? model.input_dim : settings.hidden;
    s.out_dim = settings.hidden;
    s.heads = settings.heads;
    s.one_hot = l == 0 && settings.input == ModelInput::kOneHot;
    s.bias = kHgtBias.Of<bool>(settings.options);
    s.reordering = settings.reordering;
    shapes.push_back(s);
  }
  return shapes;
}

namespace {

class Hgt final : public RgnnModel {
 public:
  std::string_view name() const override { return "hgt"; }
  std::vector<const ModelKey*> Keys() const override { return {&kHgtBias}; }

  std::vector<SettingProblem> Check(const RgnnSettings& s, const ModelShape&) const override {
    std::vector<SettingProblem> problems = DecompositionProblems(s, name());
    if (s.hidden % s.heads != 0) {
      problems.push_back({"model.heads", "model.hidden",
                          StrCat("model.hidden = ", s.hidden, " is not divisible by model.heads = ", s.heads,
                                 ": \"hgt\" splits the hidden width across the heads")});
    }
    return problems;
  }

  std::vector<const tessel_op_decl*> Ops(const RgnnSettings& s, const ModelShape& model) const override {
    std::vector<const tessel_op_decl*> ops;
    for (const HgtLayer::Shape& shape : HgtLayer::Shapes(s, model)) {
      for (const tessel_op_decl* op : HgtLayer::Ops(shape)) ops.push_back(op);
    }
    for (const tessel_op_decl* op : Classifier::Ops()) ops.push_back(op);
    return ops;
  }

  Result<ModelLayers> Build(const RgnnSettings& s, const ModelShape& model, const GraphView& graph, KernelSet& kernels,
                            ParameterStore& params) const override {
    ModelLayers out;
    auto scratch = std::make_shared<HgtLayer::Scratch>();  // one set for all the layers
    for (const HgtLayer::Shape& shape : HgtLayer::Shapes(s, model)) {
      out.layers.push_back(std::make_unique<HgtLayer>(shape, graph, kernels, params, scratch));
    }
    out.classifier = std::make_unique<Classifier>(s.hidden, model.classes, kernels, params);
    out.relu_between = false;
    return out;
  }
};

}  // namespace

const RgnnModel& HgtModel() {
  static const Hgt model;
  return model;
}

}  // namespace tessel::workers
