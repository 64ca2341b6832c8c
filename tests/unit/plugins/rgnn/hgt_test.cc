// rgnn.hgt.fwd and rgnn.hgt.bwd (the attention core of HGT) against the formula written out per edge in
// double, in float and double, with one and two heads, reorder on and off, with and without compaction,
// over several blocks, runs and tiles; the backward against finite differences; the same bits for any
// number of threads; and refusal of corrupt layouts, bad params and bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "segment_layout_util.h"
#include "tessel/ops/rgnn.h"

namespace tessel::kernel_test {
namespace {

// The inputs of one call, in double (cast to the dtype of the test).
struct HgtData {
  int64_t h = 1, dh = 1, f = 1;
  std::vector<double> k, q, v, att, msg, prior;
};

HgtData RandomData(const SegmentGraph& g, int64_t h, int64_t dh, uint64_t seed, double spread = 1.0) {
  HgtData d;
  d.h = h;
  d.dh = dh;
  d.f = h * dh;
  d.k = RandomValues<double>(g.m * d.f, seed, -spread, spread);
  d.q = RandomValues<double>(g.n * d.f, seed + 1, -spread, spread);
  d.v = RandomValues<double>(g.m * d.f, seed + 2);
  d.att = RandomValues<double>(g.r * h * dh * dh, seed + 3, -spread, spread);
  d.msg = RandomValues<double>(g.r * h * dh * dh, seed + 4);
  d.prior = RandomValues<double>(g.r * h, seed + 5, 0.5, 1.5);
  return d;
}

struct FwdOut {
  std::vector<double> agg, row_max, row_sum;
};

struct BwdOut {
  std::vector<double> dk, dq, dv, datt, dmsg, dprior;
};

// The forward from the raw edge list: score per edge and head, softmax per destination over all its
// edges (every relation), Agg[i]_h = sum_e alpha (V[src]_h msg[r,h]).
FwdOut NaiveForward(const SegmentGraph& g, const HgtData& d) {
  const int64_t h = d.h, dh = d.dh, f = d.f;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  const auto mat = [&](const std::vector<double>& w, int64_t r, int64_t c, int64_t a, int64_t b) {
    return w[static_cast<size_t>(((r * h + c) * dh + a) * dh + b)];
  };
  std::vector<std::vector<double>> score(g.edges.size(), std::vector<double>(static_cast<size_t>(h)));
  FwdOut out;
  out.row_max.assign(static_cast<size_t>(g.n * h), -std::numeric_limits<double>::infinity());
  out.row_sum.assign(static_cast<size_t>(g.n * h), 0.0);
  out.agg.assign(static_cast<size_t>(g.n * f), 0.0);
  for (size_t e = 0; e < g.edges.size(); ++e) {
    const RawEdge& x = g.edges[e];
    for (int64_t c = 0; c < h; ++c) {
      double s = 0;
      for (int64_t a = 0; a < dh; ++a) {
        for (int64_t b = 0; b < dh; ++b) {
          s += d.k[x.src * f + c * dh + a] * mat(d.att, x.rel, c, a, b) * d.q[x.dst * f + c * dh + b];
        }
      }
      score[e][c] = s * d.prior[x.rel * h + c] * scale;
      double& mx = out.row_max[x.dst * h + c];
      mx = std::max(mx, score[e][c]);
    }
  }
  for (size_t e = 0; e < g.edges.size(); ++e) {
    const RawEdge& x = g.edges[e];
    for (int64_t c = 0; c < h; ++c) out.row_sum[x.dst * h + c] += std::exp(score[e][c] - out.row_max[x.dst * h + c]);
  }
  for (size_t e = 0; e < g.edges.size(); ++e) {
    const RawEdge& x = g.edges[e];
    for (int64_t c = 0; c < h; ++c) {
      const double alpha = std::exp(score[e][c] - out.row_max[x.dst * h + c]) / out.row_sum[x.dst * h + c];
      for (int64_t b = 0; b < dh; ++b) {
        double vm = 0;
        for (int64_t a = 0; a < dh; ++a) vm += d.v[x.src * f + c * dh + a] * mat(d.msg, x.rel, c, a, b);
        out.agg[x.dst * f + c * dh + b] += alpha * vm;
      }
    }
  }
  for (double& mx : out.row_max) {
    if (std::isinf(mx)) mx = 0;  // a row without edges
  }
  return out;
}

tessel_hgt_params Params(int64_t heads, bool reorder) {
  return tessel_hgt_params{sizeof(tessel_hgt_params), static_cast<int32_t>(heads), reorder ? 1 : 0};
}

// The feature and weight tensors of a call.
struct Features {
  Tensor k, q, v, att, msg, prior;
};

template <typename T>
Features ToFeatures(const SegmentGraph& g, const HgtData& d) {
  Features t;
  t.k = MakeTensor<T>({g.m, d.f}, Cast<T>(d.k));
  t.q = MakeTensor<T>({g.n, d.f}, Cast<T>(d.q));
  t.v = MakeTensor<T>({g.m, d.f}, Cast<T>(d.v));
  t.att = MakeTensor<T>({g.r, d.h, d.dh, d.dh}, Cast<T>(d.att));
  t.msg = MakeTensor<T>({g.r, d.h, d.dh, d.dh}, Cast<T>(d.msg));
  t.prior = MakeTensor<T>({g.r, d.h}, Cast<T>(d.prior));
  return t;
}

// The inputs after the op's leading tensors: DST layout, dedge_pair, SRC layout.
std::vector<const Tensor*> Inputs(std::initializer_list<const Tensor*> first, const SegmentTensors& st) {
  std::vector<const Tensor*> in(first);
  Append(in, st.dst);
  in.push_back(&st.dedge_pair);
  Append(in, st.src);
  return in;
}

std::vector<const Tensor*> FwdInputs(const Features& x, const SegmentTensors& st) {
  return Inputs({&x.k, &x.q, &x.v, &x.att, &x.msg, &x.prior}, st);
}

template <typename T>
std::vector<double> ToDouble(const Tensor& t) {
  const std::vector<T> v = ToVector<T>(t);
  return std::vector<double>(v.begin(), v.end());
}

// Runs the forward in T (outputs prefilled with garbage: the kernel overwrites them).
template <typename T>
FwdOut RunForward(const SegmentGraph& g, const HgtData& d, bool reorder, ThreadPool* pool) {
  const SegmentTensors st = ToSegmentTensors<T>(g);
  const Features x = ToFeatures<T>(g, d);
  Tensor agg = Filled<T>({g.n, d.f}, T(7)), row_max = Filled<T>({g.n, d.h}, T(7)),
         row_sum = Filled<T>({g.n, d.h}, T(7));
  CallCpuWith("rgnn.hgt.fwd", FwdInputs(x, st), {&agg, &row_max, &row_sum}, Params(d.h, reorder), pool);
  return FwdOut{ToDouble<T>(agg), ToDouble<T>(row_max), ToDouble<T>(row_sum)};
}

// Runs the backward in T from dAgg and the forward's outputs `fwd` (in T's values).
template <typename T>
BwdOut RunBackward(const SegmentGraph& g, const HgtData& d, const std::vector<double>& dagg, const FwdOut& fwd,
                   bool reorder, ThreadPool* pool) {
  const SegmentTensors st = ToSegmentTensors<T>(g);
  const Features x = ToFeatures<T>(g, d);
  const Tensor tdagg = MakeTensor<T>({g.n, d.f}, Cast<T>(dagg)), agg = MakeTensor<T>({g.n, d.f}, Cast<T>(fwd.agg)),
               row_max = MakeTensor<T>({g.n, d.h}, Cast<T>(fwd.row_max)),
               row_sum = MakeTensor<T>({g.n, d.h}, Cast<T>(fwd.row_sum));
  Tensor dk = Filled<T>({g.m, d.f}, T(7)), dq = Filled<T>({g.n, d.f}, T(7)), dv = Filled<T>({g.m, d.f}, T(7)),
         datt = Filled<T>({g.r, d.h, d.dh, d.dh}, T(7)), dmsg = Filled<T>({g.r, d.h, d.dh, d.dh}, T(7)),
         dprior = Filled<T>({g.r, d.h}, T(7));
  CallCpuWith("rgnn.hgt.bwd",
              Inputs({&tdagg, &x.k, &x.q, &x.v, &x.att, &x.msg, &x.prior, &agg, &row_max, &row_sum}, st),
              {&dk, &dq, &dv, &datt, &dmsg, &dprior}, Params(d.h, reorder), pool);
  return BwdOut{ToDouble<T>(dk),   ToDouble<T>(dq),   ToDouble<T>(dv),
                ToDouble<T>(datt), ToDouble<T>(dmsg), ToDouble<T>(dprior)};
}

void ExpectForwardNear(const FwdOut& got, const FwdOut& want, double tol, const std::string& what) {
  ExpectNear(got.agg, want.agg, tol, "Agg, " + what);
  ExpectNear(got.row_max, want.row_max, tol, "row_max, " + what);
  ExpectNear(got.row_sum, want.row_sum, tol, "row_sum, " + what);
}

void ExpectBackwardNear(const BwdOut& got, const BwdOut& want, double tol, const std::string& what) {
  ExpectNear(got.dk, want.dk, tol, "dK, " + what);
  ExpectNear(got.dq, want.dq, tol, "dQ, " + what);
  ExpectNear(got.dv, want.dv, tol, "dV, " + what);
  ExpectNear(got.datt, want.datt, tol, "datt, " + what);
  ExpectNear(got.dmsg, want.dmsg, tol, "dmsg, " + what);
  ExpectNear(got.dprior, want.dprior, tol, "dprior, " + what);
}

// dK, dQ, dV, datt, dmsg, dprior of L = Dot(Agg, G) by central differences of the double forward.
BwdOut NumericBackward(const SegmentGraph& g, HgtData d, const std::vector<double>& gagg, bool reorder) {
  const SegmentTensors st = ToSegmentTensors<double>(g);
  const auto objective = [&] {
    const Features x = ToFeatures<double>(g, d);
    Tensor agg = Filled<double>({g.n, d.f}, 0.0), row_max = Filled<double>({g.n, d.h}, 0.0),
           row_sum = Filled<double>({g.n, d.h}, 0.0);
    CallCpuWith("rgnn.hgt.fwd", FwdInputs(x, st), {&agg, &row_max, &row_sum}, Params(d.h, reorder), nullptr);
    return Dot(agg, gagg);
  };
  BwdOut out;
  out.dk = NumericGrad(d.k, objective);
  out.dq = NumericGrad(d.q, objective);
  out.dv = NumericGrad(d.v, objective);
  out.datt = NumericGrad(d.att, objective);
  out.dmsg = NumericGrad(d.msg, objective);
  out.dprior = NumericGrad(d.prior, objective);
  return out;
}

std::string Describe(const SegmentOptions& o, int64_t h, int64_t dh, bool reorder) {
  return "blocks " + std::to_string(o.dst_block_rows) + "/" + std::to_string(o.src_block_rows) +
         (o.compact ? "" : " per edge") + ", heads " + std::to_string(h) + " x " + std::to_string(dh) +
         (reorder ? ", reorder" : ", materialised");
}

// Block sizes from one row per block (many blocks, short runs) to one block holding everything, with and
// without compaction.
const SegmentOptions kLayouts[] = {{1, 1, true},  {3, 4, true},  {1000, 1000, true},
                                   {1, 1, false}, {3, 4, false}, {1000, 1000, false}};
// (heads, head width)
const std::pair<int64_t, int64_t> kHeads[] = {{1, 3}, {2, 2}, {2, 4}};

template <typename T>
class HgtTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(HgtTest, FloatTypes);

TYPED_TEST(HgtTest, ForwardMatchesPerEdgeFormula) {
  using T = TypeParam;
  ThreadPool pool(3);
  for (const SegmentOptions& options : kLayouts) {
    // Destination n-1 has no edge, relation 1 none; parallel edges of one and of several relations.
    const SegmentGraph g = RandomSegmentGraph(14, 9, 4, 60, 8, 1, options);
    for (const auto& [h, dh] : kHeads) {
      const HgtData d = RandomData(g, h, dh, 10 * h + dh);
      const FwdOut want = NaiveForward(g, d);
      for (bool reorder : {true, false}) {
        const FwdOut got = RunForward<T>(g, d, reorder, &pool);
        ExpectForwardNear(got, want, Tolerance<T>(), Describe(options, h, dh, reorder));
        // The empty destination: Agg 0, max and sum 0.
        for (int64_t c = 0; c < d.f; ++c) EXPECT_EQ(got.agg[(g.n - 1) * d.f + c], 0.0);
        EXPECT_EQ(got.row_max[(g.n - 1) * h], 0.0);
        EXPECT_EQ(got.row_sum[(g.n - 1) * h], 0.0);
      }
    }
  }
}

TYPED_TEST(HgtTest, ForwardKeepsLargeLogitsFinite) {
  // Logits of several hundred: exp would overflow without the running max (float from 88 on).
  using T = TypeParam;
  ThreadPool pool(2);
  for (const SegmentOptions& options : {SegmentOptions{3, 4, true}, SegmentOptions{3, 4, false}}) {
    const SegmentGraph g = RandomSegmentGraph(14, 9, 4, 80, 8, 2, options);
    const HgtData d = RandomData(g, 2, 3, 5, /*spread=*/12.0);
    const FwdOut want = NaiveForward(g, d);
    double largest = 0;
    for (double mx : want.row_max) largest = std::max(largest, mx);
    ASSERT_GT(largest, 100.0);
    for (bool reorder : {true, false}) {
      // A float logit of a few hundred carries an absolute error of ~1e-4.
      const double tol = std::is_same_v<T, float> ? 2e-3 : 1e-10;
      ExpectForwardNear(RunForward<T>(g, d, reorder, &pool), want, tol, Describe(options, 2, 3, reorder));
    }
  }
}

TYPED_TEST(HgtTest, ForwardTilesLongRuns) {
  // One block on each side holding runs of several hundred segments and pairs (tiles of 128), and
  // without compaction runs of one destination's edges split across tiles.
  using T = TypeParam;
  ThreadPool pool(2);
  for (bool compact : {true, false}) {
    const SegmentGraph g = RandomSegmentGraph(200, 400, 2, 1000, 200, 3, {1000, 1000, compact});
    ASSERT_GT(g.drun_seg[1] - g.drun_seg[0], 2 * 128);
    ASSERT_GT(g.srun_pair[1] - g.srun_pair[0], 128);
    const HgtData d = RandomData(g, 2, 2, 4);
    const FwdOut want = NaiveForward(g, d);
    for (bool reorder : {true, false}) {
      ExpectForwardNear(RunForward<T>(g, d, reorder, &pool), want, Tolerance<T>(),
                        Describe({1000, 1000, compact}, 2, 2, reorder));
    }
  }
}

TYPED_TEST(HgtTest, GraphWithoutEdgesGivesZeros) {
  // Every destination is empty: Agg, row_max, row_sum and every gradient are 0 (overwritten).
  using T = TypeParam;
  ThreadPool pool(2);
  const SegmentGraph g = BuildSegmentGraph(5, 4, 3, {}, {2, 2, true});
  const HgtData d = RandomData(g, 2, 2, 3);
  for (bool reorder : {true, false}) {
    const FwdOut fwd = RunForward<T>(g, d, reorder, &pool);
    const BwdOut bwd = RunBackward<T>(g, d, RandomValues<double>(g.n * d.f, 4), fwd, reorder, &pool);
    for (const std::vector<double>* v :
         {&fwd.agg, &fwd.row_max, &fwd.row_sum, &bwd.dk, &bwd.dq, &bwd.dv, &bwd.datt, &bwd.dmsg, &bwd.dprior}) {
      EXPECT_EQ(*v, std::vector<double>(v->size(), 0.0)) << (reorder ? "reorder" : "materialised");
    }
  }
}

TEST(HgtGradient, BackwardIsTheDerivativeOfForward) {
  ThreadPool pool(2);
  for (const SegmentOptions& options : {SegmentOptions{2, 3, true}, SegmentOptions{2, 3, false},
                                        SegmentOptions{1000, 1000, true}, SegmentOptions{1, 1, false}}) {
    const SegmentGraph g = RandomSegmentGraph(8, 6, 3, 20, 6, 3, options);
    for (const auto& [h, dh] : {std::pair<int64_t, int64_t>{1, 3}, std::pair<int64_t, int64_t>{2, 2}}) {
      const HgtData d = RandomData(g, h, dh, 7 * h + dh);
      const auto gagg = RandomValues<double>(g.n * d.f, 99);
      for (bool reorder : {true, false}) {
        const FwdOut fwd = RunForward<double>(g, d, reorder, &pool);
        const BwdOut got = RunBackward<double>(g, d, gagg, fwd, reorder, &pool);
        ExpectBackwardNear(got, NumericBackward(g, d, gagg, reorder), kGradTol, Describe(options, h, dh, reorder));
      }
    }
  }
}

TEST(HgtGradient, BackwardTilesLongRuns) {
  ThreadPool pool(2);
  for (bool compact : {true, false}) {
    const SegmentGraph g = RandomSegmentGraph(200, 250, 2, 600, 200, 5, {1000, 1000, compact});
    ASSERT_GT(g.drun_seg[1] - g.drun_seg[0], 128);
    ASSERT_GT(g.srun_pair[1] - g.srun_pair[0], 128);
    const HgtData d = RandomData(g, 2, 2, 8);
    const auto gagg = RandomValues<double>(g.n * d.f, 98);
    const FwdOut fwd = RunForward<double>(g, d, true, &pool);
    const BwdOut got = RunBackward<double>(g, d, gagg, fwd, true, &pool);
    ExpectBackwardNear(got, NumericBackward(g, d, gagg, true), kGradTol, Describe({1000, 1000, compact}, 2, 2, true));
  }
}

TEST(HgtGradient, FloatBackwardMatchesDouble) {
  ThreadPool pool(3);
  for (const SegmentOptions& options : {SegmentOptions{3, 4, true}, SegmentOptions{3, 4, false}}) {
    const SegmentGraph g = RandomSegmentGraph(14, 9, 4, 60, 8, 6, options);
    for (const auto& [h, dh] : kHeads) {
      const HgtData d = RandomData(g, h, dh, 3 * h + dh);
      const auto gagg = RandomValues<double>(g.n * d.f, 97);
      for (bool reorder : {true, false}) {
        const BwdOut want = RunBackward<double>(g, d, gagg, RunForward<double>(g, d, reorder, &pool), reorder, &pool);
        const BwdOut got = RunBackward<float>(g, d, gagg, RunForward<float>(g, d, reorder, &pool), reorder, &pool);
        ExpectBackwardNear(got, want, 1e-4, Describe(options, h, dh, reorder));
      }
    }
  }
}

TYPED_TEST(HgtTest, SameBitsWithAnyNumberOfThreads) {
  using T = TypeParam;
  // 14 dst blocks (8 gradient groups), 15 src blocks.
  const SegmentGraph g = RandomSegmentGraph(60, 40, 6, 400, 50, 9, {3, 4, true});
  ASSERT_GT(PoolChunks(static_cast<int64_t>(g.dblk_row.size()) - 1, 1, 4), 4);
  const HgtData d = RandomData(g, 2, 4, 1);
  const auto gagg = RandomValues<double>(g.n * d.f, 2);
  for (bool reorder : {true, false}) {
    std::vector<std::vector<double>> outs;
    for (int threads : {1, 2, 4}) {
      ThreadPool pool(threads);
      const FwdOut fwd = RunForward<T>(g, d, reorder, &pool);
      const BwdOut bwd = RunBackward<T>(g, d, gagg, fwd, reorder, &pool);
      std::vector<double> all;
      for (const std::vector<double>* v :
           {&fwd.agg, &fwd.row_max, &fwd.row_sum, &bwd.dk, &bwd.dq, &bwd.dv, &bwd.datt, &bwd.dmsg, &bwd.dprior}) {
        all.insert(all.end(), v->begin(), v->end());
      }
      outs.push_back(all);
    }
    EXPECT_EQ(outs[0], outs[1]) << (reorder ? "reorder" : "materialised");
    EXPECT_EQ(outs[0], outs[2]) << (reorder ? "reorder" : "materialised");
  }
}

// ---------------------------------------------------------------------------------------------------
// Refusals

class HgtChecks : public ::testing::Test {
 protected:
  HgtChecks() : g_(RandomSegmentGraph(10, 7, 3, 30, 8, 2, {3, 4, true})), d_(RandomData(g_, 2, 2, 1)) {}

  Status Forward(const SegmentTensors& st, const Features& x, const tessel_hgt_params& p) {
    Tensor agg = Filled<double>({g_.n, d_.f}, 0.0), row_max = Filled<double>({g_.n, d_.h}, 0.0),
           row_sum = Filled<double>({g_.n, d_.h}, 0.0);
    return TryCallCpu("rgnn.hgt.fwd", FwdInputs(x, st), {&agg, &row_max, &row_sum}, nullptr, &p, sizeof(p));
  }

  // The backward with its outputs, optionally one of them replaced by `swap` (index, tensor).
  Status Backward(const SegmentTensors& st, const Features& x, const tessel_hgt_params& p, int swap_index = -1,
                  Tensor* swap = nullptr) {
    const Tensor dagg = Filled<double>({g_.n, d_.f}, 1.0), agg = Filled<double>({g_.n, d_.f}, 1.0),
                 row_max = Filled<double>({g_.n, d_.h}, 0.0), row_sum = Filled<double>({g_.n, d_.h}, 1.0);
    Tensor dk = Filled<double>({g_.m, d_.f}, 0.0), dq = Filled<double>({g_.n, d_.f}, 0.0),
           dv = Filled<double>({g_.m, d_.f}, 0.0), datt = Filled<double>({g_.r, d_.h, d_.dh, d_.dh}, 0.0),
           dmsg = Filled<double>({g_.r, d_.h, d_.dh, d_.dh}, 0.0), dprior = Filled<double>({g_.r, d_.h}, 0.0);
    std::vector<Tensor*> outs = {&dk, &dq, &dv, &datt, &dmsg, &dprior};
    if (swap != nullptr) outs[static_cast<size_t>(swap_index)] = swap;
    return TryCallCpu("rgnn.hgt.bwd",
                      Inputs({&dagg, &x.k, &x.q, &x.v, &x.att, &x.msg, &x.prior, &agg, &row_max, &row_sum}, st), outs,
                      nullptr, &p, sizeof(p));
  }

  SegmentGraph g_;
  HgtData d_;
};

TEST_F(HgtChecks, CorruptLayoutsAreBadDataNamingTheArray) {
  const Features x = ToFeatures<double>(g_, d_);
  for (bool reorder : {true, false}) {
    const tessel_hgt_params p = Params(2, reorder);
    {
      SegmentTensors st = ToSegmentTensors<double>(g_);
      st.dst[6].data<int32_t>()[3] = static_cast<int32_t>(g_.m);  // a source row past the input
      for (const Status& bad : {Forward(st, x, p), Backward(st, x, p)}) {
        EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
        EXPECT_NE(bad.message().find("dedge_src[3]"), std::string::npos) << bad.ToString();
      }
    }
    {
      SegmentTensors st = ToSegmentTensors<double>(g_);
      st.dedge_pair.data<int32_t>()[2] = static_cast<int32_t>(g_.num_pairs());  // a pair that does not exist
      for (const Status& bad : {Forward(st, x, p), Backward(st, x, p)}) {
        EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
        EXPECT_NE(bad.message().find("dedge_pair[2]"), std::string::npos) << bad.ToString();
      }
    }
    {
      SegmentTensors st = ToSegmentTensors<double>(g_);
      st.src[6].data<int32_t>()[0] = static_cast<int32_t>(g_.num_segs());  // an edge in no segment
      for (const Status& bad : {Forward(st, x, p), Backward(st, x, p)}) {
        EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
        EXPECT_NE(bad.message().find("sedge_seg[0]"), std::string::npos) << bad.ToString();
      }
    }
    {
      SegmentTensors st = ToSegmentTensors<double>(g_);
      st.src[4].data<int32_t>()[0] = static_cast<int32_t>(g_.m);  // a pair's source outside its block
      const Status bad = Backward(st, x, p);
      EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
    }
    {
      SegmentTensors st = ToSegmentTensors<double>(g_);
      st.dst[2].data<int32_t>()[0] = static_cast<int32_t>(g_.r);  // a relation that does not exist
      const Status bad = Forward(st, x, p);
      EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
      EXPECT_NE(bad.message().find("relation"), std::string::npos) << bad.ToString();
    }
  }
}

TEST_F(HgtChecks, BadParamsAndShapesAreUsageErrors) {
  const SegmentTensors st = ToSegmentTensors<double>(g_);
  const Features x = ToFeatures<double>(g_, d_);
  const auto usage = [](const Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), Code::kUsage) << what << ": " << s.ToString();
  };
  // The good call first, so that each refusal below is the change it makes.
  ASSERT_TRUE(Forward(st, x, Params(2, true)).ok());
  ASSERT_TRUE(Backward(st, x, Params(2, true)).ok());
  // heads < 1, heads other than att's H (2), reorder neither 0 nor 1.
  for (const tessel_hgt_params& p : {Params(0, true), Params(-1, false), Params(1, true), Params(4, false),
                                     tessel_hgt_params{sizeof(tessel_hgt_params), 2, 2}}) {
    const std::string what = "heads " + std::to_string(p.heads) + ", reorder " + std::to_string(p.reorder);
    usage(Forward(st, x, p), "fwd " + what);
    usage(Backward(st, x, p), "bwd " + what);
  }
  {
    // F = 6 is not heads (2) x Dh (2): the schema does not tie F to H and Dh, the kernel does.
    Features wide = ToFeatures<double>(g_, d_);
    wide.k = Filled<double>({g_.m, 6}, 1.0);
    wide.q = Filled<double>({g_.n, 6}, 1.0);
    wide.v = Filled<double>({g_.m, 6}, 1.0);
    Tensor agg = Filled<double>({g_.n, 6}, 0.0), row_max = Filled<double>({g_.n, 2}, 0.0),
           row_sum = Filled<double>({g_.n, 2}, 0.0);
    const tessel_hgt_params p = Params(2, true);
    const Status bad =
        TryCallCpu("rgnn.hgt.fwd", FwdInputs(wide, st), {&agg, &row_max, &row_sum}, nullptr, &p, sizeof(p));
    usage(bad, "F != H * Dh");
    EXPECT_NE(bad.message().find("F = 6"), std::string::npos) << bad.ToString();
    // With heads 3 (att [R, 3, 2, 2]) the same F = 6 is right.
    wide.att = Filled<double>({g_.r, 3, 2, 2}, 0.5);
    wide.msg = Filled<double>({g_.r, 3, 2, 2}, 0.5);
    wide.prior = Filled<double>({g_.r, 3}, 1.0);
    Tensor row_max3 = Filled<double>({g_.n, 3}, 0.0), row_sum3 = Filled<double>({g_.n, 3}, 0.0);
    const tessel_hgt_params p3 = Params(3, true);
    const Status good =
        TryCallCpu("rgnn.hgt.fwd", FwdInputs(wide, st), {&agg, &row_max3, &row_sum3}, nullptr, &p3, sizeof(p3));
    EXPECT_TRUE(good.ok()) << good.ToString();
  }
}

TEST_F(HgtChecks, ShapesAgainstTheSchemaAreRefused) {
  // Shapes that contradict the schema's dimensions (and a missing parameter struct) are refused by the
  // host's schema check before the kernel runs, as a caller bug (kInternal); the kernel's own checks of
  // the same shapes would say kUsage. Either way the call fails, naming the tensor.
  const SegmentTensors st = ToSegmentTensors<double>(g_);
  const auto refused = [](const Status& s, const std::string& name) {
    EXPECT_TRUE(s.code() == Code::kUsage || s.code() == Code::kInternal) << s.ToString();
    EXPECT_NE(s.message().find(name), std::string::npos) << s.ToString();
  };
  {
    Features x = ToFeatures<double>(g_, d_);
    Tensor agg = Filled<double>({g_.n, d_.f}, 0.0), row_max = Filled<double>({g_.n, d_.h}, 0.0),
           row_sum = Filled<double>({g_.n, d_.h}, 0.0);
    refused(TryCallCpu("rgnn.hgt.fwd", FwdInputs(x, st), {&agg, &row_max, &row_sum}, nullptr), "parameter struct");
  }
  const tessel_hgt_params p = Params(2, true);
  const std::pair<const char*, std::function<void(Features&)>> bad_inputs[] = {
      {"'att'",
       [&](Features& x) {
         x.att = Filled<double>({g_.r, 2, 2, 3}, 1.0);
       }},  // not square
      {"'msg'",
       [&](Features& x) {
         x.msg = Filled<double>({g_.r + 1, 2, 2, 2}, 1.0);
       }},
      {"'prior'",
       [&](Features& x) {
         x.prior = Filled<double>({g_.r, 1}, 1.0);
       }},
      {"'Agg'",
       [&](Features& x) {
         x.q = Filled<double>({g_.n + 1, d_.f}, 1.0);
       }},  // Q rows are Agg's
  };
  for (const auto& [name, change] : bad_inputs) {
    Features x = ToFeatures<double>(g_, d_);
    change(x);
    refused(Forward(st, x, p), name);
  }
  const Features x = ToFeatures<double>(g_, d_);
  Tensor dprior = Filled<double>({g_.r, 1}, 0.0);
  refused(Backward(st, x, p, 5, &dprior), "'dprior'");
  Tensor dk = Filled<double>({g_.m + 1, d_.f}, 0.0);
  refused(Backward(st, x, p, 0, &dk), "'dK'");
  {
    // The SRC side has one more edge than the DST side (in its last pair).
    SegmentTensors more = ToSegmentTensors<double>(g_);
    std::vector<int32_t> seg = g_.sedge_seg;
    seg.push_back(seg.back());
    more.src[6] = MakeTensor<int32_t>({g_.num_edges() + 1}, seg);
    std::vector<int64_t> pair_edge = g_.pair_edge;
    pair_edge.back() += 1;
    more.src[5] = MakeTensor<int64_t>({static_cast<int64_t>(pair_edge.size())}, pair_edge);
    refused(Forward(more, x, p), "sedge_seg");
  }
}

}  // namespace
}  // namespace tessel::kernel_test
