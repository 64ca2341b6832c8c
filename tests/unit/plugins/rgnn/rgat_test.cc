// rgnn.rgat.* and rgnn.rgat_embed.* against the RGAT formulas of workers/rgnn/MODELS.md written out per
// edge in double (LeakyReLU logits, one softmax per destination and head over all its edges, the
// weighted sum), in float and double, with 1 and 3 heads, concat and mean, reorder on and off, with and
// without compaction, over several blocks, runs and tiles; their backward against the per-edge chain
// rule and against finite differences; the one-hot variants against the feature kernels on the
// identity; the same bits with any number of threads; refusal of corrupt layouts and bad parameters.
#include <gtest/gtest.h>
#include <tessel/ops/rgnn.h>

#include <cmath>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "segment_layout_util.h"

namespace tessel::kernel_test {
namespace {

// The LeakyReLU slope as the parameter struct carries it (a float): 0.2f, not 0.2, in double too.
constexpr float kSlopeParam = 0.2f;
constexpr double kSlope = kSlopeParam;

struct Config {
  int64_t heads = 1, dh = 2;
  bool mean = false, reorder = true;
  int64_t f() const { return heads * dh; }
  int64_t o() const { return mean ? dh : heads * dh; }
  std::string Name() const {
    return "heads " + std::to_string(heads) + "x" + std::to_string(dh) + (mean ? " mean" : " concat") +
           (reorder ? " reorder" : " no-reorder");
  }
};

tessel_rgat_params Params(const Config& c) {
  tessel_rgat_params p{};
  p.struct_size = sizeof(p);
  p.heads = static_cast<int32_t>(c.heads);
  p.merge = c.mean ? 1 : 0;
  p.reorder = c.reorder ? 1 : 0;
  p.negative_slope = kSlopeParam;
  return p;
}

std::string LayoutName(const SegmentOptions& o) {
  return "blocks " + std::to_string(o.dst_block_rows) + "/" + std::to_string(o.src_block_rows) +
         (o.compact ? "" : " per edge");
}

// ---------------------------------------------------------------------------------------------------
// The naive model, edge by edge from the raw edge list, in double.

struct Model {
  const SegmentGraph* g = nullptr;
  int64_t k = 0;
  Config c;
  std::vector<double> x, w, att_src, att_dst;  // [M, K], [R, K, F], [R, H, Dh], [R, H, Dh]
};

Model RandomModel(const SegmentGraph& g, int64_t k, const Config& c, uint64_t seed) {
  Model m;
  m.g = &g;
  m.k = k;
  m.c = c;
  m.x = RandomValues<double>(g.m * k, seed);
  m.w = RandomValues<double>(g.r * k * c.f(), seed + 1);
  m.att_src = RandomValues<double>(g.r * c.f(), seed + 2);
  m.att_dst = RandomValues<double>(g.r * c.f(), seed + 3);
  return m;
}

struct NaiveForward {
  std::vector<double> out, heads, row_max, row_sum;  // [N, O], [N, F], [N, H], [N, H]
  std::vector<double> s_src, s_dst, raw, alpha;      // per raw edge and head, [E, H]
  std::vector<std::vector<double>> z_src, z_dst;     // per raw edge: X[src] W[r], X[dst] W[r]
};

// X[v] W[r]
std::vector<double> ZRow(const Model& m, int64_t v, int32_t r) {
  const int64_t f = m.c.f();
  std::vector<double> z(static_cast<size_t>(f), 0.0);
  for (int64_t j = 0; j < m.k; ++j) {
    for (int64_t c = 0; c < f; ++c) z[c] += m.x[v * m.k + j] * m.w[(r * m.k + j) * f + c];
  }
  return z;
}

NaiveForward Forward(const Model& m) {
  const SegmentGraph& g = *m.g;
  const int64_t hn = m.c.heads, dh = m.c.dh, f = m.c.f(), e_n = g.num_edges();
  NaiveForward n;
  n.out.assign(static_cast<size_t>(g.n * m.c.o()), 0.0);
  n.heads.assign(static_cast<size_t>(g.n * f), 0.0);
  n.row_max.assign(static_cast<size_t>(g.n * hn), 0.0);
  n.row_sum.assign(static_cast<size_t>(g.n * hn), 0.0);
  for (auto* v : {&n.s_src, &n.s_dst, &n.raw, &n.alpha}) v->assign(static_cast<size_t>(e_n * hn), 0.0);
  for (int64_t e = 0; e < e_n; ++e) {
    const RawEdge& edge = g.edges[e];
    n.z_src.push_back(ZRow(m, edge.src, edge.rel));
    n.z_dst.push_back(ZRow(m, edge.dst, edge.rel));
    for (int64_t h = 0; h < hn; ++h) {
      double ss = 0, sd = 0;
      for (int64_t q = 0; q < dh; ++q) {
        ss += m.att_src[(edge.rel * hn + h) * dh + q] * n.z_src[e][h * dh + q];
        sd += m.att_dst[(edge.rel * hn + h) * dh + q] * n.z_dst[e][h * dh + q];
      }
      n.s_src[e * hn + h] = ss;
      n.s_dst[e * hn + h] = sd;
      n.raw[e * hn + h] = ss + sd;
    }
  }
  for (int64_t i = 0; i < g.n; ++i) {
    std::vector<int64_t> into;
    for (int64_t e = 0; e < e_n; ++e) {
      if (g.edges[e].dst == i) into.push_back(e);
    }
    if (into.empty()) continue;  // no incoming edge: 0 out, 0 statistics
    for (int64_t h = 0; h < hn; ++h) {
      auto score = [&](int64_t e) {
        const double raw = n.raw[e * hn + h];
        return raw > 0 ? raw : kSlope * raw;
      };
      double mx = score(into[0]);
      for (int64_t e : into) mx = std::max(mx, score(e));
      double sum = 0;
      for (int64_t e : into) sum += std::exp(score(e) - mx);
      n.row_max[i * hn + h] = mx;
      n.row_sum[i * hn + h] = sum;
      for (int64_t e : into) {
        const double alpha = std::exp(score(e) - mx) / sum;
        n.alpha[e * hn + h] = alpha;
        for (int64_t q = 0; q < dh; ++q) n.heads[i * f + h * dh + q] += alpha * n.z_src[e][h * dh + q];
      }
    }
  }
  for (int64_t i = 0; i < g.n; ++i) {
    for (int64_t h = 0; h < hn; ++h) {
      for (int64_t q = 0; q < dh; ++q) {
        const double v = n.heads[i * f + h * dh + q];
        if (m.c.mean) {
          n.out[i * dh + q] += v / static_cast<double>(hn);
        } else {
          n.out[i * f + h * dh + q] = v;
        }
      }
    }
  }
  return n;
}

struct NaiveGrads {
  std::vector<double> dx, dw, datt_src, datt_dst;
};

// The chain rule edge by edge: L = sum(G * Out).
NaiveGrads Backward(const Model& m, const NaiveForward& n, const std::vector<double>& gout) {
  const SegmentGraph& g = *m.g;
  const int64_t hn = m.c.heads, dh = m.c.dh, f = m.c.f(), e_n = g.num_edges();
  std::vector<double> dheads(static_cast<size_t>(g.n * f));
  for (int64_t i = 0; i < g.n; ++i) {
    for (int64_t h = 0; h < hn; ++h) {
      for (int64_t q = 0; q < dh; ++q) {
        dheads[i * f + h * dh + q] = m.c.mean ? gout[i * dh + q] / static_cast<double>(hn) : gout[i * f + h * dh + q];
      }
    }
  }
  std::vector<double> dz(static_cast<size_t>(g.r * g.m * f), 0.0);  // d L / d (X[v] W[r])
  NaiveGrads out;
  out.datt_src.assign(static_cast<size_t>(g.r * f), 0.0);
  out.datt_dst.assign(static_cast<size_t>(g.r * f), 0.0);
  for (int64_t i = 0; i < g.n; ++i) {
    std::vector<int64_t> into;
    for (int64_t e = 0; e < e_n; ++e) {
      if (g.edges[e].dst == i) into.push_back(e);
    }
    for (int64_t h = 0; h < hn; ++h) {
      std::vector<double> dalpha;
      double c = 0;
      for (int64_t e : into) {
        double da = 0;
        for (int64_t q = 0; q < dh; ++q) da += dheads[i * f + h * dh + q] * n.z_src[e][h * dh + q];
        dalpha.push_back(da);
        c += n.alpha[e * hn + h] * da;
      }
      for (size_t t = 0; t < into.size(); ++t) {
        const int64_t e = into[t];
        const RawEdge& edge = g.edges[e];
        const double alpha = n.alpha[e * hn + h], raw = n.raw[e * hn + h];
        const double draw = alpha * (dalpha[t] - c) * (raw > 0 ? 1.0 : kSlope);
        for (int64_t q = 0; q < dh; ++q) {
          const int64_t a = (edge.rel * hn + h) * dh + q, col = h * dh + q;
          dz[(edge.rel * g.m + edge.src) * f + col] += alpha * dheads[i * f + col] + draw * m.att_src[a];
          dz[(edge.rel * g.m + edge.dst) * f + col] += draw * m.att_dst[a];
          out.datt_src[a] += draw * n.z_src[e][col];
          out.datt_dst[a] += draw * n.z_dst[e][col];
        }
      }
    }
  }
  out.dx.assign(static_cast<size_t>(g.m * m.k), 0.0);
  out.dw.assign(static_cast<size_t>(g.r * m.k * f), 0.0);
  for (int64_t r = 0; r < g.r; ++r) {
    for (int64_t v = 0; v < g.m; ++v) {
      for (int64_t j = 0; j < m.k; ++j) {
        for (int64_t c = 0; c < f; ++c) {
          const double d = dz[(r * g.m + v) * f + c];
          out.dx[v * m.k + j] += d * m.w[(r * m.k + j) * f + c];
          out.dw[(r * m.k + j) * f + c] += m.x[v * m.k + j] * d;
        }
      }
    }
  }
  return out;
}

// The naive per-edge logits as the kernel stores them: s_src per pair, s_dst per segment.
std::vector<double> PerPair(const SegmentGraph& g, const std::vector<double>& per_edge, int64_t hn) {
  std::vector<double> out;
  for (int64_t u = 0; u < g.num_pairs(); ++u) {
    const int64_t raw = g.sedge_raw[g.pair_edge[u]];
    for (int64_t h = 0; h < hn; ++h) out.push_back(per_edge[raw * hn + h]);
  }
  return out;
}
std::vector<double> PerSegment(const SegmentGraph& g, const std::vector<double>& per_edge, int64_t hn) {
  std::vector<double> out;
  for (int64_t s = 0; s < g.num_segs(); ++s) {
    const int64_t raw = g.dedge_raw[g.seg_edge[s]];
    for (int64_t h = 0; h < hn; ++h) out.push_back(per_edge[raw * hn + h]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Calling the kernels.

std::vector<const Tensor*> Inputs(std::vector<const Tensor*> first, const SegmentTensors& st) {
  Append(first, st.dst);
  first.push_back(&st.dedge_pair);
  Append(first, st.src);
  return first;
}

// The forward's outputs, filled with garbage before the call (the kernel overwrites them).
struct Fwd {
  Tensor out, heads, s_src, s_dst, row_max, row_sum;
  std::vector<Tensor*> All() { return {&out, &heads, &s_src, &s_dst, &row_max, &row_sum}; }
};

template <typename T>
Fwd FwdOutputs(const SegmentGraph& g, const Config& c, bool skip_heads = false) {
  return Fwd{Filled<T>({g.n, c.o()}, T(7)),
             Filled<T>({skip_heads ? 0 : g.n, c.f()}, T(7)),
             Filled<T>({g.num_pairs(), c.heads}, T(7)),
             Filled<T>({g.num_segs(), c.heads}, T(7)),
             Filled<T>({g.n, c.heads}, T(7)),
             Filled<T>({g.n, c.heads}, T(7))};
}

// The model's tensors in dtype T.
template <typename T>
struct ModelTensors {
  Tensor x, w, att_src, att_dst;
  explicit ModelTensors(const Model& m)
      : x(MakeTensor<T>({m.g->m, m.k}, Cast<T>(m.x))),
        w(MakeTensor<T>({m.g->r, m.k, m.c.f()}, Cast<T>(m.w))),
        att_src(MakeTensor<T>({m.g->r, m.c.heads, m.c.dh}, Cast<T>(m.att_src))),
        att_dst(MakeTensor<T>({m.g->r, m.c.heads, m.c.dh}, Cast<T>(m.att_dst))) {}
};

template <typename T>
Fwd RunForward(const Model& m, const ModelTensors<T>& mt, const SegmentTensors& st, ThreadPool* pool,
               bool skip_heads = false) {
  Fwd f = FwdOutputs<T>(*m.g, m.c, skip_heads);
  CallCpuWith("rgnn.rgat.fwd", Inputs({&mt.x, &mt.w, &mt.att_src, &mt.att_dst}, st), f.All(), Params(m.c), pool);
  return f;
}

struct Bwd {
  Tensor dx, dw, datt_src, datt_dst;
};

// The backward from the forward's saved outputs (for concat without a heads output, Out is the heads).
template <typename T>
Bwd RunBackward(const Model& m, const ModelTensors<T>& mt, const SegmentTensors& st, const Fwd& f, const Tensor& dout,
                ThreadPool* pool, bool skip_dx = false) {
  const SegmentGraph& g = *m.g;
  Bwd b{Filled<T>({skip_dx ? 0 : g.m, m.k}, T(7)), Filled<T>({g.r, m.k, m.c.f()}, T(7)),
        Filled<T>({g.r, m.c.heads, m.c.dh}, T(7)), Filled<T>({g.r, m.c.heads, m.c.dh}, T(7))};
  const Tensor* heads = f.heads.dim(0) == 0 ? &f.out : &f.heads;
  CallCpuWith(
      "rgnn.rgat.bwd",
      Inputs({&dout, &mt.x, &mt.w, &mt.att_src, &mt.att_dst, heads, &f.s_src, &f.s_dst, &f.row_max, &f.row_sum}, st),
      {&b.dx, &b.dw, &b.datt_src, &b.datt_dst}, Params(m.c), pool);
  return b;
}

template <typename T>
class RgatTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RgatTest, FloatTypes);

// Block sizes from one row per block (many blocks, short runs) to one block holding everything, with
// and without compaction.
const SegmentOptions kLayouts[] = {{1, 1, true},  {3, 4, true},  {1000, 1000, true},
                                   {1, 1, false}, {3, 4, false}, {1000, 1000, false}};

std::vector<Config> AllConfigs() {
  std::vector<Config> configs;
  for (int64_t heads : {1, 3}) {
    for (bool mean : {false, true}) {
      for (bool reorder : {true, false}) configs.push_back({heads, heads == 1 ? 4 : 2 + (mean ? 1 : 0), mean, reorder});
    }
  }
  return configs;
}

template <typename T>
void ExpectForward(const SegmentGraph& g, const Model& m, const Fwd& f, const std::string& what) {
  const NaiveForward n = Forward(m);
  const double tol = Tolerance<T>();
  ExpectNear(ToVector<T>(f.out), n.out, tol, "Out, " + what);
  if (f.heads.dim(0) > 0) ExpectNear(ToVector<T>(f.heads), n.heads, tol, "heads, " + what);
  ExpectNear(ToVector<T>(f.s_src), PerPair(g, n.s_src, m.c.heads), tol, "s_src, " + what);
  ExpectNear(ToVector<T>(f.s_dst), PerSegment(g, n.s_dst, m.c.heads), tol, "s_dst, " + what);
  ExpectNear(ToVector<T>(f.row_max), n.row_max, tol, "row_max, " + what);
  ExpectNear(ToVector<T>(f.row_sum), n.row_sum, tol, "row_sum, " + what);
}

TYPED_TEST(RgatTest, ForwardMatchesPerEdgeFormula) {
  using T = TypeParam;
  ThreadPool pool(3);
  int variant = 0;
  for (const SegmentOptions& options : kLayouts) {
    // Destination n-1 has no edge; parallel edges of one relation and of several; relation 1 is empty.
    const SegmentGraph g = RandomSegmentGraph(14, 9, 5, 60, 8, 1, options);
    ASSERT_EQ(g.n, 9);
    for (const Config& c : AllConfigs()) {
      const Model m = RandomModel(g, 5, c, 10);
      const ModelTensors<T> mt(m);
      SegmentTensors st = ToSegmentTensors<T>(g);
      // Concat: every other call without a heads output.
      const bool skip_heads = !c.mean && (variant++ % 2 == 1);
      const Fwd f = RunForward<T>(m, mt, st, &pool, skip_heads);
      ExpectForward<T>(g, m, f, LayoutName(options) + ", " + c.Name());
      if (skip_heads) {
        EXPECT_EQ(f.heads.dim(0), 0);
      }
    }
  }
}

TYPED_TEST(RgatTest, NodeWithoutEdgesGetsZeros) {
  using T = TypeParam;
  // Row 2 has no edge; row 1 has parallel edges only.
  const SegmentGraph g = BuildSegmentGraph(4, 3, 2, {{0, 0, 0}, {3, 0, 1}, {2, 1, 0}, {2, 1, 0}, {2, 1, 1}});
  for (const Config& c : {Config{2, 2, true, true}, Config{2, 2, false, false}}) {
    const Model m = RandomModel(g, 3, c, 4);
    const ModelTensors<T> mt(m);
    SegmentTensors st = ToSegmentTensors<T>(g);
    const Fwd f = RunForward<T>(m, mt, st, nullptr);
    ExpectForward<T>(g, m, f, c.Name());
    const std::vector<T> out = ToVector<T>(f.out), mx = ToVector<T>(f.row_max), sum = ToVector<T>(f.row_sum);
    for (int64_t q = 0; q < c.o(); ++q) EXPECT_EQ(out[2 * c.o() + q], T(0));
    for (int64_t h = 0; h < c.heads; ++h) {
      EXPECT_EQ(mx[2 * c.heads + h], T(0));
      EXPECT_EQ(sum[2 * c.heads + h], T(0));
    }
  }
}

// One relation, 400 destinations and 300 sources in one block: runs of 400 segments and 300 pairs span
// several tiles of 128.
SegmentGraph LongRunGraph(bool compact) {
  std::vector<RawEdge> edges;
  for (int64_t i = 0; i < 400; ++i) {
    edges.push_back({(i * 7) % 300, i, 0});
    edges.push_back({(i * 11 + 3) % 300, i, 0});
    if (i % 3 == 0) edges.push_back({(i * 5 + 1) % 300, i, 1});
  }
  return BuildSegmentGraph(400, 400, 2, edges, {1000, 1000, compact});
}

TYPED_TEST(RgatTest, TilesOfLongRuns) {
  using T = TypeParam;
  ThreadPool pool(2);
  const SegmentGraph g = LongRunGraph(true);
  ASSERT_GT(g.num_segs(), 3 * 128);
  ASSERT_GT(g.num_pairs(), 2 * 128);
  for (const Config& c : {Config{2, 3, true, true}, Config{2, 3, false, false}}) {
    const Model m = RandomModel(g, 6, c, 20);
    const ModelTensors<T> mt(m);
    SegmentTensors st = ToSegmentTensors<T>(g);
    const Fwd f = RunForward<T>(m, mt, st, &pool);
    ExpectForward<T>(g, m, f, c.Name());
    const auto gout = RandomValues<double>(g.n * c.o(), 21);
    const Tensor tg = MakeTensor<T>({g.n, c.o()}, Cast<T>(gout));
    const Bwd b = RunBackward<T>(m, mt, st, f, tg, &pool);
    const NaiveGrads want = Backward(m, Forward(m), gout);
    const double tol = 5 * Tolerance<T>();
    ExpectNear(ToVector<T>(b.dx), want.dx, tol, "dX, " + c.Name());
    ExpectNear(ToVector<T>(b.dw), want.dw, tol, "dW, " + c.Name());
    ExpectNear(ToVector<T>(b.datt_src), want.datt_src, tol, "datt_src, " + c.Name());
    ExpectNear(ToVector<T>(b.datt_dst), want.datt_dst, tol, "datt_dst, " + c.Name());
  }
}

TYPED_TEST(RgatTest, BackwardMatchesPerEdgeChainRule) {
  using T = TypeParam;
  ThreadPool pool(3);
  int variant = 0;
  for (const SegmentOptions& options : kLayouts) {
    const SegmentGraph g = RandomSegmentGraph(14, 9, 5, 60, 8, 4, options);
    for (const Config& c : AllConfigs()) {
      const Model m = RandomModel(g, 4, c, 30);
      const ModelTensors<T> mt(m);
      SegmentTensors st = ToSegmentTensors<T>(g);
      const Fwd f = RunForward<T>(m, mt, st, &pool, !c.mean && (variant++ % 2 == 1));
      const auto gout = RandomValues<double>(g.n * c.o(), 31);
      const Tensor tg = MakeTensor<T>({g.n, c.o()}, Cast<T>(gout));
      const Bwd b = RunBackward<T>(m, mt, st, f, tg, &pool);
      const NaiveGrads want = Backward(m, Forward(m), gout);
      const std::string what = LayoutName(options) + ", " + c.Name();
      const double tol = 5 * Tolerance<T>();
      ExpectNear(ToVector<T>(b.dx), want.dx, tol, "dX, " + what);
      ExpectNear(ToVector<T>(b.dw), want.dw, tol, "dW, " + what);
      ExpectNear(ToVector<T>(b.datt_src), want.datt_src, tol, "datt_src, " + what);
      ExpectNear(ToVector<T>(b.datt_dst), want.datt_dst, tol, "datt_dst, " + what);
      // dX with 0 rows is skipped; the other gradients come out the same.
      const Bwd skipped = RunBackward<T>(m, mt, st, f, tg, &pool, /*skip_dx=*/true);
      EXPECT_EQ(skipped.dx.dim(0), 0);
      EXPECT_EQ(ToVector<T>(skipped.dw), ToVector<T>(b.dw)) << what;
      EXPECT_EQ(ToVector<T>(skipped.datt_src), ToVector<T>(b.datt_src)) << what;
      EXPECT_EQ(ToVector<T>(skipped.datt_dst), ToVector<T>(b.datt_dst)) << what;
    }
  }
}

// Runs forward and backward and returns every output, concatenated.
template <typename T>
std::vector<T> AllOutputs(const Model& m, const SegmentTensors& st, const Tensor& tg, ThreadPool* pool) {
  const ModelTensors<T> mt(m);
  const Fwd f = RunForward<T>(m, mt, st, pool);
  const Bwd b = RunBackward<T>(m, mt, st, f, tg, pool);
  std::vector<T> all;
  for (const Tensor* t :
       {&f.out, &f.heads, &f.s_src, &f.s_dst, &f.row_max, &f.row_sum, &b.dx, &b.dw, &b.datt_src, &b.datt_dst}) {
    const std::vector<T> v = ToVector<T>(*t);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

TYPED_TEST(RgatTest, SameBitsWithAnyNumberOfThreads) {
  using T = TypeParam;
  const SegmentGraph g = RandomSegmentGraph(60, 40, 6, 400, 50, 9, {3, 4, true});
  ASSERT_GT(PoolChunks(static_cast<int64_t>(g.dblk_row.size()) - 1, 1, 4), 4);
  for (const Config& c : {Config{2, 4, true, true}, Config{2, 4, false, false}, Config{1, 8, false, true}}) {
    const Model m = RandomModel(g, 8, c, 40);
    SegmentTensors st = ToSegmentTensors<T>(g);
    const Tensor tg = MakeTensor<T>({g.n, c.o()}, RandomValues<T>(g.n * c.o(), 41));
    std::vector<std::vector<T>> outs;
    for (int threads : {1, 2, 4}) {
      ThreadPool pool(threads);
      outs.push_back(AllOutputs<T>(m, st, tg, &pool));
    }
    EXPECT_EQ(outs[0], outs[1]) << c.Name();
    EXPECT_EQ(outs[0], outs[2]) << c.Name();
  }
}

// ---------------------------------------------------------------------------------------------------
// The one-hot variants.

struct Embed {
  int64_t v = 0;
  std::vector<int64_t> row_id;
  std::vector<double> eye;  // [M, V], row i one-hot at row_id[i]
};

Embed IdentityInput(const SegmentGraph& g, int64_t extra) {
  Embed e;
  e.v = g.m + extra;
  for (int64_t i = 0; i < g.m; ++i) e.row_id.push_back((i * 3 + 2) % e.v);  // distinct when gcd(3, v) = 1
  e.eye.assign(static_cast<size_t>(g.m * e.v), 0.0);
  for (int64_t i = 0; i < g.m; ++i) e.eye[i * e.v + e.row_id[i]] = 1.0;
  return e;
}

template <typename T>
Fwd RunEmbedForward(const SegmentGraph& g, const Config& c, const Tensor& table, const Tensor& row_id,
                    const ModelTensors<T>& mt, const SegmentTensors& st, ThreadPool* pool) {
  Fwd f = FwdOutputs<T>(g, c);
  CallCpuWith("rgnn.rgat_embed.fwd", Inputs({&table, &row_id, &mt.att_src, &mt.att_dst}, st), f.All(), Params(c), pool);
  return f;
}

template <typename T>
Bwd RunEmbedBackward(const SegmentGraph& g, const Config& c, const Tensor& table, const Tensor& row_id,
                     const ModelTensors<T>& mt, const SegmentTensors& st, const Fwd& f, const Tensor& dout,
                     ThreadPool* pool) {
  const int64_t v = table.dim(1);
  Bwd b{Filled<T>({0, v}, T(0)), Filled<T>({g.r, v, c.f()}, T(7)), Filled<T>({g.r, c.heads, c.dh}, T(7)),
        Filled<T>({g.r, c.heads, c.dh}, T(7))};
  CallCpuWith(
      "rgnn.rgat_embed.bwd",
      Inputs({&dout, &table, &row_id, &mt.att_src, &mt.att_dst, &f.heads, &f.s_src, &f.s_dst, &f.row_max, &f.row_sum},
             st),
      {&b.dw, &b.datt_src, &b.datt_dst}, Params(c), pool);
  return b;
}

TYPED_TEST(RgatTest, OneHotMatchesFeaturesWithTheIdentity) {
  // A one-hot input is the identity feature matrix: rgat_embed must equal rgat on I (rows permuted by
  // row_id), forward and backward.
  using T = TypeParam;
  ThreadPool pool(2);
  for (const SegmentOptions& options : kLayouts) {
    const SegmentGraph g = RandomSegmentGraph(10, 7, 4, 40, 8, 11, options);
    const Embed e = IdentityInput(g, 3);  // v = 13
    for (const Config& c : {Config{3, 2, true, true}, Config{3, 2, false, false}, Config{1, 3, true, false}}) {
      Model m = RandomModel(g, e.v, c, 50);
      m.x = e.eye;
      const ModelTensors<T> mt(m);
      const Tensor trow = MakeTensor<int64_t>({g.m}, e.row_id);
      SegmentTensors st = ToSegmentTensors<T>(g);
      const std::string what = LayoutName(options) + ", " + c.Name();
      const Fwd fe = RunEmbedForward<T>(g, c, mt.w, trow, mt, st, &pool);
      const Fwd fx = RunForward<T>(m, mt, st, &pool);
      const double tol = Tolerance<T>();
      ExpectNear(ToVector<T>(fe.out), ToVector<T>(fx.out), tol, "Out, " + what);
      ExpectNear(ToVector<T>(fe.heads), ToVector<T>(fx.heads), tol, "heads, " + what);
      ExpectNear(ToVector<T>(fe.s_src), ToVector<T>(fx.s_src), tol, "s_src, " + what);
      ExpectNear(ToVector<T>(fe.s_dst), ToVector<T>(fx.s_dst), tol, "s_dst, " + what);
      ExpectNear(ToVector<T>(fe.row_max), ToVector<T>(fx.row_max), tol, "row_max, " + what);
      ExpectNear(ToVector<T>(fe.row_sum), ToVector<T>(fx.row_sum), tol, "row_sum, " + what);
      ExpectForward<T>(g, m, fe, "embed, " + what);
      const Tensor tg = MakeTensor<T>({g.n, c.o()}, RandomValues<T>(g.n * c.o(), 51));
      const Bwd be = RunEmbedBackward<T>(g, c, mt.w, trow, mt, st, fe, tg, &pool);
      const Bwd bx = RunBackward<T>(m, mt, st, fx, tg, &pool, /*skip_dx=*/true);
      ExpectNear(ToVector<T>(be.dw), ToVector<T>(bx.dw), 5 * tol, "dW, " + what);
      ExpectNear(ToVector<T>(be.datt_src), ToVector<T>(bx.datt_src), 5 * tol, "datt_src, " + what);
      ExpectNear(ToVector<T>(be.datt_dst), ToVector<T>(bx.datt_dst), 5 * tol, "datt_dst, " + what);
    }
  }
}

TYPED_TEST(RgatTest, OneHotWithSharedTableRows) {
  // Input rows sharing a table row (a row_id that is not injective): the embed kernels add both rows'
  // shares, as the feature kernels on the corresponding (repeated) one-hot rows do.
  using T = TypeParam;
  ThreadPool pool(4);
  const SegmentGraph g = RandomSegmentGraph(12, 8, 3, 50, 10, 13, {2, 3, true});
  const int64_t v = 5;
  std::vector<int64_t> row_id;
  std::vector<double> eye(static_cast<size_t>(g.m * v), 0.0);
  for (int64_t i = 0; i < g.m; ++i) {
    row_id.push_back(i % v);
    eye[i * v + i % v] = 1.0;
  }
  const Config c{2, 2, true, true};
  Model m = RandomModel(g, v, c, 60);
  m.x = eye;
  const ModelTensors<T> mt(m);
  const Tensor trow = MakeTensor<int64_t>({g.m}, row_id);
  SegmentTensors st = ToSegmentTensors<T>(g);
  const Fwd fe = RunEmbedForward<T>(g, c, mt.w, trow, mt, st, &pool);
  ExpectForward<T>(g, m, fe, "embed, shared rows");
  const auto gout = RandomValues<double>(g.n * c.o(), 61);
  const Tensor tg = MakeTensor<T>({g.n, c.o()}, Cast<T>(gout));
  const Bwd be = RunEmbedBackward<T>(g, c, mt.w, trow, mt, st, fe, tg, &pool);
  const NaiveGrads want = Backward(m, Forward(m), gout);
  ExpectNear(ToVector<T>(be.dw), want.dw, 5 * Tolerance<T>(), "dW");
  ExpectNear(ToVector<T>(be.datt_src), want.datt_src, 5 * Tolerance<T>(), "datt_src");
  ExpectNear(ToVector<T>(be.datt_dst), want.datt_dst, 5 * Tolerance<T>(), "datt_dst");
}

TYPED_TEST(RgatTest, OneHotSameBitsWithAnyNumberOfThreads) {
  using T = TypeParam;
  const SegmentGraph g = RandomSegmentGraph(60, 40, 6, 400, 50, 9, {3, 4, true});
  const Embed e = IdentityInput(g, 1);  // v = 61
  const Config c{2, 3, false, true};
  Model m = RandomModel(g, e.v, c, 70);
  const ModelTensors<T> mt(m);
  const Tensor trow = MakeTensor<int64_t>({g.m}, e.row_id);
  SegmentTensors st = ToSegmentTensors<T>(g);
  const Tensor tg = MakeTensor<T>({g.n, c.o()}, RandomValues<T>(g.n * c.o(), 71));
  std::vector<std::vector<T>> outs;
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    const Fwd f = RunEmbedForward<T>(g, c, mt.w, trow, mt, st, &pool);
    const Bwd b = RunEmbedBackward<T>(g, c, mt.w, trow, mt, st, f, tg, &pool);
    std::vector<T> all;
    for (const Tensor* t :
         {&f.out, &f.heads, &f.s_src, &f.s_dst, &f.row_max, &f.row_sum, &b.dw, &b.datt_src, &b.datt_dst}) {
      const std::vector<T> v = ToVector<T>(*t);
      all.insert(all.end(), v.begin(), v.end());
    }
    outs.push_back(all);
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

// ---------------------------------------------------------------------------------------------------
// Finite differences, in double.

TEST(RgatGradient, BackwardIsTheDerivativeOfForward) {
  const Config configs[] = {{3, 2, false, true}, {3, 2, true, false}, {1, 3, true, true}, {2, 2, false, false}};
  const SegmentOptions layouts[] = {{2, 3, true}, {2, 3, false}, {1000, 1000, false}, {1, 2, true}};
  for (int t = 0; t < 4; ++t) {
    const Config& c = configs[t];
    const SegmentGraph g = RandomSegmentGraph(8, 6, 3, 20, 6, 3 + t, layouts[t]);
    Model m = RandomModel(g, 3, c, 80 + t);
    const auto gout = RandomValues<double>(g.n * c.o(), 90 + t);
    SegmentTensors st = ToSegmentTensors<double>(g);
    auto objective = [&] {
      const ModelTensors<double> mt(m);
      const Fwd f = RunForward<double>(m, mt, st, nullptr);
      return Dot(f.out, gout);
    };
    const ModelTensors<double> mt(m);
    const Fwd f = RunForward<double>(m, mt, st, nullptr, /*skip_heads=*/!c.mean);
    const Tensor tg = MakeTensor<double>({g.n, c.o()}, gout);
    const Bwd b = RunBackward<double>(m, mt, st, f, tg, nullptr);
    const std::string what = c.Name() + ", " + LayoutName(layouts[t]);
    ExpectNear(ToVector<double>(b.dx), NumericGrad(m.x, objective), kGradTol, "dX, " + what);
    ExpectNear(ToVector<double>(b.dw), NumericGrad(m.w, objective), kGradTol, "dW, " + what);
    ExpectNear(ToVector<double>(b.datt_src), NumericGrad(m.att_src, objective), kGradTol, "datt_src, " + what);
    ExpectNear(ToVector<double>(b.datt_dst), NumericGrad(m.att_dst, objective), kGradTol, "datt_dst, " + what);
  }
}

TEST(RgatGradient, EmbedBackwardIsTheDerivativeOfForward) {
  const SegmentGraph g = RandomSegmentGraph(8, 6, 3, 20, 6, 5, {2, 3, true});
  const Embed e = IdentityInput(g, 0);  // v = 8, a permutation (gcd(3, 8) = 1)
  for (const Config& c : {Config{2, 2, true, true}, Config{2, 2, false, true}}) {
    Model m = RandomModel(g, e.v, c, 100);
    const Tensor trow = MakeTensor<int64_t>({g.m}, e.row_id);
    const auto gout = RandomValues<double>(g.n * c.o(), 101);
    SegmentTensors st = ToSegmentTensors<double>(g);
    auto objective = [&] {
      const ModelTensors<double> mt(m);
      const Fwd f = RunEmbedForward<double>(g, c, mt.w, trow, mt, st, nullptr);
      return Dot(f.out, gout);
    };
    const ModelTensors<double> mt(m);
    const Fwd f = RunEmbedForward<double>(g, c, mt.w, trow, mt, st, nullptr);
    const Tensor tg = MakeTensor<double>({g.n, c.o()}, gout);
    const Bwd b = RunEmbedBackward<double>(g, c, mt.w, trow, mt, st, f, tg, nullptr);
    ExpectNear(ToVector<double>(b.dw), NumericGrad(m.w, objective), kGradTol, "dW, " + c.Name());
    ExpectNear(ToVector<double>(b.datt_src), NumericGrad(m.att_src, objective), kGradTol, "datt_src, " + c.Name());
    ExpectNear(ToVector<double>(b.datt_dst), NumericGrad(m.att_dst, objective), kGradTol, "datt_dst, " + c.Name());
  }
}

TEST(RgatGradient, FloatBackwardMatchesDouble) {
  const SegmentGraph g = RandomSegmentGraph(30, 20, 4, 150, 25, 7, {3, 4, true});
  for (const Config& c : {Config{3, 4, false, true}, Config{3, 4, true, false}}) {
    const Model m = RandomModel(g, 8, c, 110);
    const Tensor tgd = MakeTensor<double>({g.n, c.o()}, RandomValues<double>(g.n * c.o(), 111));
    const Tensor tgf = MakeTensor<float>({g.n, c.o()}, Cast<float>(ToVector<double>(tgd)));
    const std::vector<double> d = AllOutputs<double>(m, ToSegmentTensors<double>(g), tgd, nullptr);
    const std::vector<float> f = AllOutputs<float>(m, ToSegmentTensors<float>(g), tgf, nullptr);
    ExpectNear(f, d, 1e-4, "float vs double, " + c.Name());
  }
}

// ---------------------------------------------------------------------------------------------------
// Refusals.

struct CheckFixture {
  SegmentGraph g = RandomSegmentGraph(10, 7, 3, 30, 8, 2, {3, 4, true});
  Config c{2, 2, true, true};
  Model m = RandomModel(g, 3, c, 120);
  ModelTensors<double> mt{m};
};

Status TryForward(const CheckFixture& fx, const SegmentTensors& st, const tessel_rgat_params& p, Fwd* f) {
  return TryCallCpu("rgnn.rgat.fwd", Inputs({&fx.mt.x, &fx.mt.w, &fx.mt.att_src, &fx.mt.att_dst}, st), f->All(),
                    nullptr, &p, sizeof(p));
}

TEST(RgatChecks, CorruptLayoutsAreBadDataNamingTheArray) {
  CheckFixture fx;
  const SegmentGraph& g = fx.g;
  auto expect_bad = [&](const SegmentTensors& st, const std::string& name) {
    Fwd f = FwdOutputs<double>(g, fx.c);
    const Status bad = TryForward(fx, st, Params(fx.c), &f);
    EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
    EXPECT_NE(bad.message().find(name), std::string::npos) << name << ": " << bad.ToString();
  };
  {
    SegmentTensors st = ToSegmentTensors<double>(g);
    st.dedge_pair.data<int32_t>()[3] = static_cast<int32_t>(g.num_pairs());  // a pair that does not exist
    expect_bad(st, "dedge_pair[3]");
  }
  {
    SegmentTensors st = ToSegmentTensors<double>(g);
    st.dedge_pair.data<int32_t>()[2] = -1;
    expect_bad(st, "dedge_pair[2]");
  }
  {
    // In range, but the pair of another edge: its source or relation does not match.
    SegmentTensors st = ToSegmentTensors<double>(g);
    int64_t e = 0;
    while (g.pair_src[g.dedge_pair[e]] == g.pair_src[g.dedge_pair[e + 1]]) ++e;
    std::swap(st.dedge_pair.data<int32_t>()[e], st.dedge_pair.data<int32_t>()[e + 1]);
    expect_bad(st, "dedge_pair[" + std::to_string(e) + "]");
  }
  {
    SegmentTensors st = ToSegmentTensors<double>(g);
    st.dst[6].data<int32_t>()[3] = static_cast<int32_t>(g.m);  // a source row past the input
    expect_bad(st, "dedge_src[3]");
  }
  {
    SegmentTensors st = ToSegmentTensors<double>(g);
    st.src[6].data<int32_t>()[0] = static_cast<int32_t>(g.num_segs());  // an edge in no segment
    expect_bad(st, "sedge_seg[0]");
  }
  {
    SegmentTensors st = ToSegmentTensors<double>(g);
    st.src[2].data<int32_t>()[0] = static_cast<int32_t>(g.r);  // a relation that does not exist
    Fwd f = FwdOutputs<double>(g, fx.c);
    const Status bad = TryForward(fx, st, Params(fx.c), &f);
    EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
  }
  {
    // The backward checks its layout too.
    SegmentTensors good = ToSegmentTensors<double>(g);
    const Fwd f = RunForward<double>(fx.m, fx.mt, good, nullptr);
    SegmentTensors st = ToSegmentTensors<double>(g);
    st.dedge_pair.data<int32_t>()[5] = static_cast<int32_t>(g.num_pairs()) + 4;
    Tensor dout = Filled<double>({g.n, fx.c.o()}, 1.0), dx = Filled<double>({g.m, fx.m.k}, 0.0),
           dw = Filled<double>({g.r, fx.m.k, fx.c.f()}, 0.0), da = Filled<double>({g.r, fx.c.heads, fx.c.dh}, 0.0),
           db = Filled<double>({g.r, fx.c.heads, fx.c.dh}, 0.0);
    const tessel_rgat_params p = Params(fx.c);
    const Status bad = TryCallCpu("rgnn.rgat.bwd",
                                  Inputs({&dout, &fx.mt.x, &fx.mt.w, &fx.mt.att_src, &fx.mt.att_dst, &f.heads, &f.s_src,
                                          &f.s_dst, &f.row_max, &f.row_sum},
                                         st),
                                  {&dx, &dw, &da, &db}, nullptr, &p, sizeof(p));
    EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
    EXPECT_NE(bad.message().find("dedge_pair[5]"), std::string::npos) << bad.ToString();
  }
  {
    // A row id past the table.
    const Embed e = IdentityInput(g, 2);
    std::vector<int64_t> ids = e.row_id;
    ids[4] = e.v;
    const Tensor trow = MakeTensor<int64_t>({g.m}, ids), table = Filled<double>({g.r, e.v, fx.c.f()}, 0.5);
    SegmentTensors st = ToSegmentTensors<double>(g);
    Fwd f = FwdOutputs<double>(g, fx.c);
    const tessel_rgat_params p = Params(fx.c);
    const Status bad = TryCallCpu("rgnn.rgat_embed.fwd", Inputs({&table, &trow, &fx.mt.att_src, &fx.mt.att_dst}, st),
                                  f.All(), nullptr, &p, sizeof(p));
    EXPECT_EQ(bad.code(), Code::kBadData) << bad.ToString();
    EXPECT_NE(bad.message().find("row_id[4]"), std::string::npos) << bad.ToString();
  }
}

TEST(RgatChecks, BadParametersAreUsageErrors) {
  CheckFixture fx;  // heads 2, Dh 2, mean: F = 4, O = 2
  const SegmentTensors st = ToSegmentTensors<double>(fx.g);
  auto expect_usage = [&](tessel_rgat_params p, Fwd f, const std::string& name) {
    const Status bad = TryForward(fx, st, p, &f);
    EXPECT_EQ(bad.code(), Code::kUsage) << name << ": " << bad.ToString();
    EXPECT_NE(bad.message().find(name), std::string::npos) << name << ": " << bad.ToString();
  };
  tessel_rgat_params p = Params(fx.c);
  p.heads = 0;
  expect_usage(p, FwdOutputs<double>(fx.g, fx.c), "params.heads must be >= 1");
  p = Params(fx.c);
  p.heads = 3;  // F = 4 is not divisible by 3
  expect_usage(p, FwdOutputs<double>(fx.g, fx.c), "not divisible");
  p = Params(fx.c);
  p.heads = 4;  // divides F, but att has 2 heads
  expect_usage(p, FwdOutputs<double>(fx.g, fx.c), "att_src/att_dst");
  p = Params(fx.c);
  p.merge = 2;
  expect_usage(p, FwdOutputs<double>(fx.g, fx.c), "params.merge");
  p = Params(fx.c);
  p.reorder = 5;
  expect_usage(p, FwdOutputs<double>(fx.g, fx.c), "params.reorder");
  p = Params(fx.c);
  p.negative_slope = std::nanf("");
  expect_usage(p, FwdOutputs<double>(fx.g, fx.c), "params.negative_slope");
  // O must be Dh for mean and F for concat.
  Config concat = fx.c;
  concat.mean = false;
  expect_usage(Params(fx.c), FwdOutputs<double>(fx.g, concat), "expected 2");
  expect_usage(Params(concat), FwdOutputs<double>(fx.g, fx.c), "expected 4");
  // Mean needs the heads output.
  expect_usage(Params(fx.c), FwdOutputs<double>(fx.g, fx.c, /*skip_heads=*/true), "needs the output 'heads'");
}

}  // namespace
}  // namespace tessel::kernel_test
