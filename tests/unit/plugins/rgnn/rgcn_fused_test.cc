// rgnn.rgcn.* and rgnn.rgcn_embed.* against the R-GCN formula written out per edge, in float and double,
// with and without compaction, over several blocks, runs and tiles; their backward against finite
// differences; and refusal of a corrupt layout.
#include <gtest/gtest.h>

#include "segment_layout_util.h"

namespace tessel::kernel_test {
namespace {

template <typename T>
class RgcnFusedTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RgcnFusedTest, FloatTypes);

// H[i] = sum over edges (j -> i, r) of 1/|N_r(i)| X[j] W[r], edge by edge from the raw list.
std::vector<double> NaiveForward(const SegmentGraph& g, const std::vector<double>& x, int64_t k,
                                 const std::vector<double>& w, int64_t d) {
  std::map<std::pair<int32_t, int64_t>, int64_t> degree;
  for (const RawEdge& e : g.edges) ++degree[{e.rel, e.dst}];
  std::vector<double> h(static_cast<size_t>(g.n * d), 0.0);
  for (const RawEdge& e : g.edges) {
    const double norm = 1.0 / static_cast<double>(degree[{e.rel, e.dst}]);
    for (int64_t c = 0; c < d; ++c) {
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += x[e.src * k + j] * w[(e.rel * k + j) * d + c];
      h[e.dst * d + c] += norm * sum;
    }
  }
  return h;
}

std::vector<const Tensor*> Inputs(std::initializer_list<const Tensor*> first, const std::vector<Tensor>& layout) {
  std::vector<const Tensor*> in(first);
  Append(in, layout);
  return in;
}

// Block sizes from one row per block (many blocks, short runs) to one block holding everything.
const SegmentOptions kLayouts[] = {{1, 1, true}, {3, 4, true}, {1000, 1000, true}, {3, 4, false}};

TYPED_TEST(RgcnFusedTest, ForwardMatchesPerEdgeFormula) {
  using T = TypeParam;
  ThreadPool pool(3);
  for (const SegmentOptions& options : kLayouts) {
    const SegmentGraph g = RandomSegmentGraph(14, 9, 5, 60, 8, 1, options);
    const int64_t k = 5, d = 3;
    const auto x = RandomValues<double>(g.m * k, 2), w = RandomValues<double>(g.r * k * d, 3);
    SegmentTensors st = ToSegmentTensors<T>(g);
    Tensor tx = MakeTensor<T>({g.m, k}, Cast<T>(x)), tw = MakeTensor<T>({g.r, k, d}, Cast<T>(w));
    Tensor th = Filled<T>({g.n, d}, T(7));
    CallCpu("rgnn.rgcn.fwd", Inputs({&tx, &tw, &st.seg_norm}, st.dst), {&th}, &pool);
    ExpectNear(ToVector<T>(th), NaiveForward(g, x, k, w, d), Tolerance<T>(),
               "H, blocks " + std::to_string(options.dst_block_rows) + (options.compact ? "" : " per edge"));
  }
}

TYPED_TEST(RgcnFusedTest, ForwardTilesLongRuns) {
  // One relation, 400 destinations in one block: a run of 400 segments spans 4 tiles of 128.
  using T = TypeParam;
  std::vector<RawEdge> edges;
  for (int64_t i = 0; i < 400; ++i) {
    edges.push_back({(i * 7) % 300, i, 0});
    edges.push_back({(i * 11 + 3) % 300, i, 0});
  }
  const SegmentGraph g = BuildSegmentGraph(300, 400, 1, edges, {1000, 1000, true});
  ASSERT_GT(g.num_segs(), 3 * 128);
  const int64_t k = 6, d = 4;
  const auto x = RandomValues<double>(g.m * k, 2), w = RandomValues<double>(g.r * k * d, 3);
  SegmentTensors st = ToSegmentTensors<T>(g);
  Tensor tx = MakeTensor<T>({g.m, k}, Cast<T>(x)), tw = MakeTensor<T>({g.r, k, d}, Cast<T>(w));
  Tensor th = Filled<T>({g.n, d}, T(7));
  CallCpu("rgnn.rgcn.fwd", Inputs({&tx, &tw, &st.seg_norm}, st.dst), {&th}, nullptr);
  ExpectNear(ToVector<T>(th), NaiveForward(g, x, k, w, d), Tolerance<T>(), "H");
}

TYPED_TEST(RgcnFusedTest, BackwardMatchesPerEdgeFormula) {
  using T = TypeParam;
  ThreadPool pool(3);
  for (const SegmentOptions& options : kLayouts) {
    const SegmentGraph g = RandomSegmentGraph(14, 9, 5, 60, 8, 4, options);
    const int64_t k = 4, d = 3;
    const auto x = RandomValues<double>(g.m * k, 5), w = RandomValues<double>(g.r * k * d, 6),
               dh = RandomValues<double>(g.n * d, 7);
    std::map<std::pair<int32_t, int64_t>, int64_t> degree;
    for (const RawEdge& e : g.edges) ++degree[{e.rel, e.dst}];
    std::vector<double> dx(static_cast<size_t>(g.m * k), 0.0), dw(static_cast<size_t>(g.r * k * d), 0.0);
    for (const RawEdge& e : g.edges) {
      const double norm = 1.0 / static_cast<double>(degree[{e.rel, e.dst}]);
      for (int64_t j = 0; j < k; ++j) {
        for (int64_t c = 0; c < d; ++c) {
          dw[(e.rel * k + j) * d + c] += norm * x[e.src * k + j] * dh[e.dst * d + c];
          dx[e.src * k + j] += norm * dh[e.dst * d + c] * w[(e.rel * k + j) * d + c];
        }
      }
    }
    SegmentTensors st = ToSegmentTensors<T>(g);
    Tensor tdh = MakeTensor<T>({g.n, d}, Cast<T>(dh)), tx = MakeTensor<T>({g.m, k}, Cast<T>(x)),
           tw = MakeTensor<T>({g.r, k, d}, Cast<T>(w));
    // Garbage in the outputs: the kernel overwrites dX and dW, the empty relation's dW included.
    Tensor tdx = Filled<T>({g.m, k}, T(7)), tdw = Filled<T>({g.r, k, d}, T(7));
    CallCpu("rgnn.rgcn.bwd", Inputs({&tdh, &tx, &tw, &st.seg_norm, &st.seg_dst}, st.src), {&tdx, &tdw}, &pool);
    const std::string what = "blocks " + std::to_string(options.src_block_rows) + (options.compact ? "" : " per edge");
    ExpectNear(ToVector<T>(tdw), dw, Tolerance<T>(), "dW, " + what);
    ExpectNear(ToVector<T>(tdx), dx, Tolerance<T>(), "dX, " + what);
    // dX with 0 rows is skipped, and dW comes out the same.
    Tensor skipped = Filled<T>({0, k}, T(0)), tdw2 = Filled<T>({g.r, k, d}, T(7));
    CallCpu("rgnn.rgcn.bwd", Inputs({&tdh, &tx, &tw, &st.seg_norm, &st.seg_dst}, st.src), {&skipped, &tdw2}, &pool);
    EXPECT_EQ(ToVector<T>(tdw2), ToVector<T>(tdw)) << what;
  }
}

TYPED_TEST(RgcnFusedTest, SameBitsWithAnyNumberOfThreads) {
  using T = TypeParam;
  const SegmentGraph g = RandomSegmentGraph(60, 40, 6, 400, 50, 9, {3, 4, true});
  const int64_t k = 8, d = 8;
  SegmentTensors st = ToSegmentTensors<T>(g);
  Tensor tx = MakeTensor<T>({g.m, k}, RandomValues<T>(g.m * k, 1)),
         tw = MakeTensor<T>({g.r, k, d}, RandomValues<T>(g.r * k * d, 2));
  Tensor tdh = MakeTensor<T>({g.n, d}, RandomValues<T>(g.n * d, 3));
  std::vector<std::vector<T>> outs;
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    Tensor th = Filled<T>({g.n, d}, T(0)), tdx = Filled<T>({g.m, k}, T(0)), tdw = Filled<T>({g.r, k, d}, T(0));
    CallCpu("rgnn.rgcn.fwd", Inputs({&tx, &tw, &st.seg_norm}, st.dst), {&th}, &pool);
    CallCpu("rgnn.rgcn.bwd", Inputs({&tdh, &tx, &tw, &st.seg_norm, &st.seg_dst}, st.src), {&tdx, &tdw}, &pool);
    std::vector<T> all = ToVector<T>(th);
    for (const Tensor* t : {&tdx, &tdw}) {
      const std::vector<T> v = ToVector<T>(*t);
      all.insert(all.end(), v.begin(), v.end());
    }
    outs.push_back(all);
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

TYPED_TEST(RgcnFusedTest, OneHotMatchesFeaturesWithTheIdentity) {
  // A one-hot input is the identity feature matrix: rgcn_embed must equal rgcn on I (rows permuted by
  // row_id), forward and backward.
  using T = TypeParam;
  ThreadPool pool(2);
  for (const SegmentOptions& options : kLayouts) {
    const SegmentGraph g = RandomSegmentGraph(10, 7, 4, 40, 8, 11, options);
    const int64_t v = g.m + 3, d = 3;
    std::vector<int64_t> row_id(static_cast<size_t>(g.m));
    for (int64_t i = 0; i < g.m; ++i) row_id[i] = (i * 3 + 2) % v;  // distinct (gcd(3, 13) = 1)
    std::vector<double> eye(static_cast<size_t>(g.m * v), 0.0);
    for (int64_t i = 0; i < g.m; ++i) eye[i * v + row_id[i]] = 1.0;
    const auto w = RandomValues<double>(g.r * v * d, 1), dh = RandomValues<double>(g.n * d, 2);
    SegmentTensors st = ToSegmentTensors<T>(g);
    Tensor tw = MakeTensor<T>({g.r, v, d}, Cast<T>(w)), trow = MakeTensor<int64_t>({g.m}, row_id);
    Tensor teye = MakeTensor<T>({g.m, v}, Cast<T>(eye)), tdh = MakeTensor<T>({g.n, d}, Cast<T>(dh));
    Tensor h_embed = Filled<T>({g.n, d}, T(5)), h_eye = Filled<T>({g.n, d}, T(5));
    CallCpu("rgnn.rgcn_embed.fwd", Inputs({&tw, &trow, &st.seg_norm}, st.dst), {&h_embed}, &pool);
    CallCpu("rgnn.rgcn.fwd", Inputs({&teye, &tw, &st.seg_norm}, st.dst), {&h_eye}, &pool);
    ExpectNear(ToVector<T>(h_embed), ToVector<T>(h_eye), Tolerance<T>(), "H");
    Tensor dw_embed = Filled<T>({g.r, v, d}, T(5)), dw_eye = Filled<T>({g.r, v, d}, T(5)),
           no_dx = Filled<T>({0, v}, T(0));
    CallCpu("rgnn.rgcn_embed.bwd", Inputs({&tdh, &trow, &st.seg_norm, &st.seg_dst}, st.src), {&dw_embed}, &pool);
    CallCpu("rgnn.rgcn.bwd", Inputs({&tdh, &teye, &tw, &st.seg_norm, &st.seg_dst}, st.src), {&no_dx, &dw_eye}, &pool);
    ExpectNear(ToVector<T>(dw_embed), ToVector<T>(dw_eye), Tolerance<T>(), "dW");
    // bwd_rows: row u is pair u's gradient; added into rows (r, row_id[src]) it is the dense gradient
    // (pairs share a row only without compaction, where every edge is its own pair).
    Tensor rows = Filled<T>({g.num_pairs(), d}, T(5));
    CallCpu("rgnn.rgcn_embed.bwd_rows", Inputs({&tdh, &st.seg_norm, &st.seg_dst}, st.src), {&rows}, &pool);
    const std::vector<T> got = ToVector<T>(rows);
    std::vector<double> scattered(static_cast<size_t>(g.r * v * d), 0.0);
    for (int64_t q = 0; q + 1 < static_cast<int64_t>(g.srun_pair.size()); ++q) {
      for (int64_t u = g.srun_pair[q]; u < g.srun_pair[q + 1]; ++u) {
        const int64_t row = g.srun_rel[q] * v + row_id[g.pair_src[u]];
        for (int64_t c = 0; c < d; ++c) scattered[row * d + c] += got[u * d + c];
      }
    }
    ExpectNear(ToVector<T>(dw_embed), scattered, Tolerance<T>(), "dRows scattered");
    // A dRows of the wrong height is refused (by the host's schema check, before the kernel runs).
    Tensor short_rows = Filled<T>({g.num_pairs() - 1, d}, T(0));
    const Status bad =
        TryCallCpu("rgnn.rgcn_embed.bwd_rows", Inputs({&tdh, &st.seg_norm, &st.seg_dst}, st.src), {&short_rows}, &pool);
    EXPECT_EQ(bad.code(), Code::kInternal) << bad.ToString();
    EXPECT_NE(bad.message().find("dRows"), std::string::npos) << bad.ToString();
  }
}

TEST(RgcnFusedGradient, BackwardIsTheDerivativeOfForward) {
  const SegmentGraph g = RandomSegmentGraph(8, 6, 3, 20, 6, 3, {2, 3, true});
  const int64_t k = 3, d = 2;
  auto x = RandomValues<double>(g.m * k, 1), w = RandomValues<double>(g.r * k * d, 2);
  const auto gh = RandomValues<double>(g.n * d, 3);
  SegmentTensors st = ToSegmentTensors<double>(g);
  auto objective = [&] {
    Tensor tx = MakeTensor<double>({g.m, k}, x), tw = MakeTensor<double>({g.r, k, d}, w),
           th = Filled<double>({g.n, d}, 0.0);
    CallCpu("rgnn.rgcn.fwd", Inputs({&tx, &tw, &st.seg_norm}, st.dst), {&th}, nullptr);
    return Dot(th, gh);
  };
  Tensor tgh = MakeTensor<double>({g.n, d}, gh), tx = MakeTensor<double>({g.m, k}, x),
         tw = MakeTensor<double>({g.r, k, d}, w);
  Tensor tdx = Filled<double>({g.m, k}, 0.0), tdw = Filled<double>({g.r, k, d}, 0.0);
  CallCpu("rgnn.rgcn.bwd", Inputs({&tgh, &tx, &tw, &st.seg_norm, &st.seg_dst}, st.src), {&tdx, &tdw}, nullptr);
  ExpectNear(ToVector<double>(tdx), NumericGrad(x, objective), kGradTol, "dX");
  ExpectNear(ToVector<double>(tdw), NumericGrad(w, objective), kGradTol, "dW");
}

TEST(RgcnFusedGradient, EmbedBackwardIsTheDerivativeOfForward) {
  const SegmentGraph g = RandomSegmentGraph(8, 6, 3, 20, 6, 5, {2, 3, true});
  const int64_t v = g.m, d = 2;
  std::vector<int64_t> row_id(static_cast<size_t>(g.m));
  for (int64_t i = 0; i < g.m; ++i) row_id[i] = (i * 3 + 1) % v;  // a permutation (gcd(3, 8) = 1)
  Tensor trow = MakeTensor<int64_t>({g.m}, row_id);
  auto w = RandomValues<double>(g.r * v * d, 1);
  const auto gh = RandomValues<double>(g.n * d, 2);
  SegmentTensors st = ToSegmentTensors<double>(g);
  auto objective = [&] {
    Tensor tw = MakeTensor<double>({g.r, v, d}, w), th = Filled<double>({g.n, d}, 0.0);
    CallCpu("rgnn.rgcn_embed.fwd", Inputs({&tw, &trow, &st.seg_norm}, st.dst), {&th}, nullptr);
    return Dot(th, gh);
  };
  Tensor tgh = MakeTensor<double>({g.n, d}, gh), tdw = Filled<double>({g.r, v, d}, 0.0);
  CallCpu("rgnn.rgcn_embed.bwd", Inputs({&tgh, &trow, &st.seg_norm, &st.seg_dst}, st.src), {&tdw}, nullptr);
  ExpectNear(ToVector<double>(tdw), NumericGrad(w, objective), kGradTol, "dW");
}

TEST(RgcnFusedChecks, CorruptLayoutsAreBadDataNamingTheArray) {
  const SegmentGraph g = RandomSegmentGraph(10, 7, 3, 30, 8, 2, {3, 4, true});
  const int64_t k = 2, d = 2;
  Tensor tx = Filled<double>({g.m, k}, 1.0), tw = Filled<double>({g.r, k, d}, 1.0), th = Filled<double>({g.n, d}, 0.0);
  {
    SegmentTensors st = ToSegmentTensors<double>(g);
    st.dst[6].data<int32_t>()[3] = static_cast<int32_t>(g.m);  // a source row past the input
    const Status bad = TryCallCpu("rgnn.rgcn.fwd", Inputs({&tx, &tw, &st.seg_norm}, st.dst), {&th}, nullptr);
    EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
    EXPECT_NE(bad.message().find("dedge_src[3]"), std::string::npos) << bad.ToString();
  }
  {
    SegmentTensors st = ToSegmentTensors<double>(g);
    st.dst[2].data<int32_t>()[0] = static_cast<int32_t>(g.r);  // a relation that does not exist
    const Status bad = TryCallCpu("rgnn.rgcn.fwd", Inputs({&tx, &tw, &st.seg_norm}, st.dst), {&th}, nullptr);
    EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
  }
  {
    SegmentTensors st = ToSegmentTensors<double>(g);
    st.dst[5].data<int64_t>()[1] = st.dst[5].data<int64_t>()[0];  // an empty segment
    const Status bad = TryCallCpu("rgnn.rgcn.fwd", Inputs({&tx, &tw, &st.seg_norm}, st.dst), {&th}, nullptr);
    EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
  }
  {
    SegmentTensors st = ToSegmentTensors<double>(g);
    st.src[6].data<int32_t>()[0] = static_cast<int32_t>(g.num_segs());  // an edge in no segment
    Tensor tdh = Filled<double>({g.n, d}, 1.0), tdx = Filled<double>({g.m, k}, 0.0),
           tdw = Filled<double>({g.r, k, d}, 0.0);
    const Status bad =
        TryCallCpu("rgnn.rgcn.bwd", Inputs({&tdh, &tx, &tw, &st.seg_norm, &st.seg_dst}, st.src), {&tdx, &tdw}, nullptr);
    EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
    EXPECT_NE(bad.message().find("sedge_seg[0]"), std::string::npos) << bad.ToString();
  }
}

}  // namespace
}  // namespace tessel::kernel_test
