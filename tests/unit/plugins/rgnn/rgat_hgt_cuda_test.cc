// rgnn.rgat.*, rgnn.rgat_embed.* and rgnn.hgt.* on CUDA against their CPU kernels, on fresh random inputs, in
// float and double: 1 and several heads, concat and mean, reorder on and off, layouts from one row per block
// (many short runs) to one block holding everything, with and without compaction; widths on either side of a
// warp (32 lanes) and of one register pass of the RGAT aggregation (128 columns); a destination without an
// edge in every random graph; an edgeless graph; and a graph with more items than one chunk of the CUDA
// kernels (65536 rows), so that chunks split relations and the weight gradients accumulate over chunks; hubs
// (items of more edges than one warp takes, split into atomically added units). The
// backward kernels get the saved tensors of the CPU forward, so both devices differentiate the same point.
// Skipped, with the reason, when Tessel was built without CUDA or no GPU is visible.
#include <gtest/gtest.h>
#include <tessel/ops/rgnn.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"
#include "segment_layout_util.h"

namespace tessel::kernel_test {
namespace {

const std::vector<std::string> kOps = {"rgnn.rgat.fwd",       "rgnn.rgat.bwd", "rgnn.rgat_embed.fwd",
                                       "rgnn.rgat_embed.bwd", "rgnn.hgt.fwd",  "rgnn.hgt.bwd"};

// Block sizes from one row per block to one block for the whole graph; compaction on and off.
const SegmentOptions kLayouts[] = {{1, 1, true},       {3, 4, true},  {16, 32, true},
                                   {1000, 1000, true}, {3, 4, false}, {64, 64, false}};

std::string Describe(const SegmentOptions& o) {
  return "blocks " + std::to_string(o.dst_block_rows) + "/" + std::to_string(o.src_block_rows) +
         (o.compact ? "" : " per edge");
}

// The call's inputs: `first`, then the DST layout, dedge_pair and the SRC layout (the fused ops' schema order).
std::vector<Tensor> WithLayout(std::vector<Tensor> first, const SegmentTensors& st) {
  first.insert(first.end(), st.dst.begin(), st.dst.end());
  first.push_back(st.dedge_pair);
  first.insert(first.end(), st.src.begin(), st.src.end());
  return first;
}

// Runs `op` on CPU into `outputs` (to make the saved tensors a backward call needs).
template <typename P>
void RunCpu(const std::string& op, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, const P& params) {
  ThreadPool pool(2);
  std::vector<const Tensor*> in;
  for (const Tensor& t : inputs) in.push_back(&t);
  std::vector<Tensor*> out;
  for (Tensor& t : outputs) out.push_back(&t);
  CallCpuWith(op, in, out, params, &pool);
}

// Distinct row ids scattered over a table of v >= m rows, or (`repeat`) ids shared by several input rows, so
// that the one-hot backward's scatters into dW collide.
std::vector<int64_t> RowIds(int64_t m, int64_t v, bool repeat) {
  std::vector<int64_t> row_id(static_cast<size_t>(m));
  int64_t step = 7;
  while (std::gcd(step, v) != 1) ++step;
  for (int64_t i = 0; i < m; ++i) {
    row_id[static_cast<size_t>(i)] = repeat ? (i * step + 3) % std::max<int64_t>(1, v / 3) : (i * step + 3) % v;
  }
  return row_id;
}

struct RgatConfig {
  int64_t heads = 1, dh = 4;
  bool mean = false, reorder = true;
  bool skip_heads = false;  // concat only: the forward's 'heads' output has 0 rows (Out is the heads)
  int64_t f() const { return heads * dh; }
  int64_t o() const { return mean ? dh : heads * dh; }
  std::string Name() const {
    return "heads " + std::to_string(heads) + "x" + std::to_string(dh) + (mean ? " mean" : " concat") +
           (reorder ? " reorder" : " no-reorder") + (skip_heads ? " no heads output" : "");
  }
};

tessel_rgat_params RgatParams(const RgatConfig& c) {
  tessel_rgat_params p{};
  p.struct_size = sizeof(p);
  p.heads = static_cast<int32_t>(c.heads);
  p.merge = c.mean ? 1 : 0;
  p.reorder = c.reorder ? 1 : 0;
  p.negative_slope = 0.2f;
  return p;
}

// One of each kind: 1 and several heads, concat and mean, reorder on and off, with and without a heads output.
const RgatConfig kRgatConfigs[] = {{1, 4, false, true, false}, {3, 2, false, false, true}, {2, 3, true, true, false},
                                   {3, 4, true, false, false}, {2, 5, false, true, true},  {1, 3, true, false, false}};

tessel_hgt_params HgtParams(int64_t heads, bool reorder) {
  tessel_hgt_params p{};
  p.struct_size = sizeof(p);
  p.heads = static_cast<int32_t>(heads);
  p.reorder = reorder ? 1 : 0;
  return p;
}

template <typename T>
class RgatHgtCudaTest : public ::testing::Test {
 protected:
  void SetUp() override { RequireCudaKernels(kOps); }
  // float: sums in another order (atomics, warp reductions, cuBLAS blocking) and expf/exp of the float
  // runtime against libm; double differs only by rounding.
  static double Tol() { return std::is_same_v<T, float> ? 1e-4 : 1e-10; }

  // The six forward outputs of rgnn.rgat(_embed).fwd, filled with garbage (the kernels overwrite all of it).
  static std::vector<Tensor> RgatOutputs(const SegmentGraph& g, const RgatConfig& c) {
    return {Filled<T>({g.n, c.o()}, T(3)),
            Filled<T>({c.skip_heads ? 0 : g.n, c.f()}, T(3)),
            Filled<T>({g.num_pairs(), c.heads}, T(3)),
            Filled<T>({g.num_segs(), c.heads}, T(3)),
            Filled<T>({g.n, c.heads}, T(3)),
            Filled<T>({g.n, c.heads}, T(3))};
  }

  // The saved tensors of the backward from the CPU forward's outputs: heads (Out when the forward had no
  // heads output), s_src, s_dst, row_max, row_sum.
  static std::vector<Tensor> Saved(const std::vector<Tensor>& fwd, const RgatConfig& c) {
    return {c.skip_heads ? fwd[0] : fwd[1], fwd[2], fwd[3], fwd[4], fwd[5]};
  }

  // rgnn.rgat.fwd, and rgnn.rgat.bwd with dX and with dX skipped, on `g` with input width k.
  static void CompareRgat(const SegmentGraph& g, int64_t k, const RgatConfig& c, uint64_t seed, const std::string& what,
                          double tol = Tol()) {
    SCOPED_TRACE(what + ", K " + std::to_string(k) + ", " + c.Name());
    const SegmentTensors st = ToSegmentTensors<T>(g);
    const tessel_rgat_params p = RgatParams(c);
    const Tensor x = MakeTensor<T>({g.m, k}, RandomValues<T>(g.m * k, seed)),
                 w = MakeTensor<T>({g.r, k, c.f()}, RandomValues<T>(g.r * k * c.f(), seed + 1)),
                 att_src = MakeTensor<T>({g.r, c.heads, c.dh}, RandomValues<T>(g.r * c.f(), seed + 2)),
                 att_dst = MakeTensor<T>({g.r, c.heads, c.dh}, RandomValues<T>(g.r * c.f(), seed + 3)),
                 dout = MakeTensor<T>({g.n, c.o()}, RandomValues<T>(g.n * c.o(), seed + 4));
    const std::vector<Tensor> fwd_in = WithLayout({x, w, att_src, att_dst}, st);
    CompareDevicesWith("rgnn.rgat.fwd", fwd_in, RgatOutputs(g, c), tol, p);
    std::vector<Tensor> fwd = RgatOutputs(g, c);
    RunCpu("rgnn.rgat.fwd", fwd_in, fwd, p);
    std::vector<Tensor> bwd_first = {dout, x, w, att_src, att_dst};
    for (const Tensor& t : Saved(fwd, c)) bwd_first.push_back(t);
    const std::vector<Tensor> bwd_in = WithLayout(bwd_first, st);
    const Tensor dw = Filled<T>({g.r, k, c.f()}, T(3)), datt = Filled<T>({g.r, c.heads, c.dh}, T(3));
    CompareDevicesWith("rgnn.rgat.bwd", bwd_in, {Filled<T>({g.m, k}, T(3)), dw, datt, datt}, tol, p);
    CompareDevicesWith("rgnn.rgat.bwd", bwd_in, {Filled<T>({0, k}, T(0)), dw, datt, datt}, tol, p);
  }

  // rgnn.rgat_embed.fwd and .bwd on `g` with a table of m + 5 rows.
  static void CompareRgatEmbed(const SegmentGraph& g, const RgatConfig& c, bool repeat_ids, uint64_t seed,
                               const std::string& what) {
    SCOPED_TRACE(what + ", " + c.Name() + (repeat_ids ? ", repeated row ids" : ""));
    const SegmentTensors st = ToSegmentTensors<T>(g);
    const tessel_rgat_params p = RgatParams(c);
    const int64_t v = g.m + 5;
    const Tensor rows = MakeTensor<int64_t>({g.m}, RowIds(g.m, v, repeat_ids));
    const Tensor table = MakeTensor<T>({g.r, v, c.f()}, RandomValues<T>(g.r * v * c.f(), seed)),
                 att_src = MakeTensor<T>({g.r, c.heads, c.dh}, RandomValues<T>(g.r * c.f(), seed + 1)),
                 att_dst = MakeTensor<T>({g.r, c.heads, c.dh}, RandomValues<T>(g.r * c.f(), seed + 2)),
                 dout = MakeTensor<T>({g.n, c.o()}, RandomValues<T>(g.n * c.o(), seed + 3));
    const std::vector<Tensor> fwd_in = WithLayout({table, rows, att_src, att_dst}, st);
    CompareDevicesWith("rgnn.rgat_embed.fwd", fwd_in, RgatOutputs(g, c), Tol(), p);
    std::vector<Tensor> fwd = RgatOutputs(g, c);
    RunCpu("rgnn.rgat_embed.fwd", fwd_in, fwd, p);
    std::vector<Tensor> bwd_first = {dout, table, rows, att_src, att_dst};
    for (const Tensor& t : Saved(fwd, c)) bwd_first.push_back(t);
    const Tensor datt = Filled<T>({g.r, c.heads, c.dh}, T(3));
    CompareDevicesWith("rgnn.rgat_embed.bwd", WithLayout(bwd_first, st), {Filled<T>({g.r, v, c.f()}, T(3)), datt, datt},
                       Tol(), p);
  }

  // rgnn.hgt.fwd and .bwd on `g` with `heads` heads of width dh.
  static void CompareHgt(const SegmentGraph& g, int64_t heads, int64_t dh, bool reorder, uint64_t seed,
                         const std::string& what) {
    SCOPED_TRACE(what + ", heads " + std::to_string(heads) + "x" + std::to_string(dh) +
                 (reorder ? " reorder" : " no-reorder"));
    const SegmentTensors st = ToSegmentTensors<T>(g);
    const tessel_hgt_params p = HgtParams(heads, reorder);
    const int64_t f = heads * dh, mats = g.r * heads * dh * dh;
    const Tensor kx = MakeTensor<T>({g.m, f}, RandomValues<T>(g.m * f, seed)),
                 qx = MakeTensor<T>({g.n, f}, RandomValues<T>(g.n * f, seed + 1)),
                 vx = MakeTensor<T>({g.m, f}, RandomValues<T>(g.m * f, seed + 2)),
                 att = MakeTensor<T>({g.r, heads, dh, dh}, RandomValues<T>(mats, seed + 3)),
                 msg = MakeTensor<T>({g.r, heads, dh, dh}, RandomValues<T>(mats, seed + 4)),
                 prior = MakeTensor<T>({g.r, heads}, RandomValues<T>(g.r * heads, seed + 5, 0.5, 1.5)),
                 dagg = MakeTensor<T>({g.n, f}, RandomValues<T>(g.n * f, seed + 6));
    const std::vector<Tensor> fwd_in = WithLayout({kx, qx, vx, att, msg, prior}, st);
    const auto fwd_out = [&] {
      return std::vector<Tensor>{Filled<T>({g.n, f}, T(3)), Filled<T>({g.n, heads}, T(3)),
                                 Filled<T>({g.n, heads}, T(3))};
    };
    CompareDevicesWith("rgnn.hgt.fwd", fwd_in, fwd_out(), Tol(), p);
    std::vector<Tensor> fwd = fwd_out();
    RunCpu("rgnn.hgt.fwd", fwd_in, fwd, p);
    const std::vector<Tensor> bwd_in = WithLayout({dagg, kx, qx, vx, att, msg, prior, fwd[0], fwd[1], fwd[2]}, st);
    const Tensor dmat = Filled<T>({g.r, heads, dh, dh}, T(3));
    CompareDevicesWith("rgnn.hgt.bwd", bwd_in,
                       {Filled<T>({g.m, f}, T(3)), Filled<T>({g.n, f}, T(3)), Filled<T>({g.m, f}, T(3)), dmat, dmat,
                        Filled<T>({g.r, heads}, T(3))},
                       Tol(), p);
  }
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RgatHgtCudaTest, FloatTypes);

TYPED_TEST(RgatHgtCudaTest, RgatOverLayouts) {
  uint64_t seed = 100;
  for (const SegmentOptions& options : kLayouts) {
    const SegmentGraph g = RandomSegmentGraph(300, 200, 9, 3000, 250, 77, options);
    for (const RgatConfig& c : kRgatConfigs) this->CompareRgat(g, 24, c, seed += 5, Describe(options));
  }
}

TYPED_TEST(RgatHgtCudaTest, RgatOverWidths) {
  // K of 1, 33 (lanes past one warp pass), 150 (past the 128 columns a warp holds in registers); Dh past a warp.
  const SegmentOptions options{5, 7, true};
  const SegmentGraph g = RandomSegmentGraph(120, 90, 6, 900, 100, 5, options);
  uint64_t seed = 200;
  for (const int64_t k : {1, 33, 150}) {
    // Float, K = 150: with reorder on, datt = W^T dwa sums 150 products of dwa (itself a sum over the
    // segments, ~10 in size) into results ~0.2, so the float rounding of the two devices' summation orders
    // differs by ~1e-4 absolute (seen in a CPU emulation of the CUDA kernels); double still gets 1e-10.
    const double tol = k == 150 && std::is_same_v<TypeParam, float> ? 5e-4 : this->Tol();
    for (const RgatConfig& c : {RgatConfig{1, 1, false, true, false}, RgatConfig{2, 40, true, false, false},
                                RgatConfig{2, 40, false, true, true}, RgatConfig{3, 7, true, true, false}}) {
      this->CompareRgat(g, k, c, seed += 5, Describe(options), tol);
    }
  }
}

TYPED_TEST(RgatHgtCudaTest, RgatEmbedOverLayouts) {
  uint64_t seed = 300;
  for (const SegmentOptions& options : kLayouts) {
    const SegmentGraph g = RandomSegmentGraph(300, 200, 9, 3000, 250, 78, options);
    for (const RgatConfig& c : kRgatConfigs) {
      this->CompareRgatEmbed(g, c, /*repeat_ids=*/false, seed += 4, Describe(options));
    }
    this->CompareRgatEmbed(g, kRgatConfigs[1], /*repeat_ids=*/true, seed += 4, Describe(options));
    this->CompareRgatEmbed(g, RgatConfig{2, 40, true, true, false}, /*repeat_ids=*/true, seed += 4, Describe(options));
  }
}

TYPED_TEST(RgatHgtCudaTest, HgtOverLayouts) {
  uint64_t seed = 400;
  for (const SegmentOptions& options : kLayouts) {
    const SegmentGraph g = RandomSegmentGraph(300, 200, 9, 3000, 250, 79, options);
    for (const bool reorder : {true, false}) {
      this->CompareHgt(g, 1, 4, reorder, seed += 8, Describe(options));
      this->CompareHgt(g, 3, 2, reorder, seed += 8, Describe(options));
    }
  }
}

TYPED_TEST(RgatHgtCudaTest, HgtOverWidths) {
  // Dh of 1, past a warp (40), and an odd width with several heads.
  const SegmentOptions options{5, 7, true};
  const SegmentGraph g = RandomSegmentGraph(120, 90, 6, 900, 100, 6, options);
  uint64_t seed = 500;
  for (const bool reorder : {true, false}) {
    this->CompareHgt(g, 2, 1, reorder, seed += 8, Describe(options));
    this->CompareHgt(g, 1, 40, reorder, seed += 8, Describe(options));
    this->CompareHgt(g, 3, 5, reorder, seed += 8, Describe(options));
  }
}

TYPED_TEST(RgatHgtCudaTest, MoreItemsThanOneChunk) {
  // ~84000 segments and pairs (every edge its own), more than the 65536 rows of one chunk: relation slices
  // straddle the chunk boundary, and dW, datt, dmsg, dprior accumulate over chunks.
  const SegmentOptions options{64, 64, false};
  const SegmentGraph g = RandomSegmentGraph(5000, 4000, 7, 70000, 4500, 91, options);
  ASSERT_GT(g.num_segs(), 65536);
  ASSERT_GT(g.num_pairs(), 65536);
  this->CompareRgat(g, 3, RgatConfig{2, 2, false, true, false}, 600, Describe(options));
  this->CompareRgat(g, 3, RgatConfig{2, 2, true, false, false}, 610, Describe(options));
  this->CompareRgatEmbed(g, RgatConfig{2, 2, true, true, false}, /*repeat_ids=*/false, 620, Describe(options));
  this->CompareHgt(g, 2, 2, /*reorder=*/true, 630, Describe(options));
  this->CompareHgt(g, 2, 2, /*reorder=*/false, 640, Describe(options));
}

TYPED_TEST(RgatHgtCudaTest, HubsSplitAcrossWarps) {
  // A destination with 1000 incoming edges of one relation (one segment) and a source with 700 outgoing
  // edges of one relation (one pair), both past the CUDA kernels' 256 edges per warp: their sums are split
  // into units added atomically. Plus a light random remainder, so both paths run in one call.
  std::vector<RawEdge> edges;
  for (int64_t j = 0; j < 1000; ++j) edges.push_back({(j * 7) % 1200, 5, 2});
  for (int64_t j = 0; j < 700; ++j) edges.push_back({11, (j * 3) % 900, 0});
  for (int64_t j = 0; j < 2000; ++j) edges.push_back({(j * 13) % 1200, (j * 17) % 900, static_cast<int32_t>(j % 4)});
  // Sums of 1000 edges' 150-wide products, and datt's sums over hundreds of rows that cancel, added in
  // another order than the CPU's: float differs from float by up to ~6e-4 there (seen on an H100); double
  // still agrees to 1e-9, so a wrong term would show.
  const double tol = std::is_same_v<TypeParam, float> ? 2e-3 : 1e-9;
  for (const SegmentOptions& options : {SegmentOptions{16, 32, true}, SegmentOptions{1000, 1000, true}}) {
    const SegmentGraph g = BuildSegmentGraph(1200, 900, 4, edges, options);
    this->CompareRgat(g, 3, RgatConfig{2, 2, false, true, false}, 800, "hubs, " + Describe(options), tol);
    this->CompareRgat(g, 70, RgatConfig{1, 150, false, false, false}, 810, "hubs, " + Describe(options), tol);
    this->CompareRgat(g, 5, RgatConfig{3, 4, true, true, false}, 820, "hubs, " + Describe(options), tol);
  }
  const SegmentGraph g = BuildSegmentGraph(1200, 900, 4, edges, {16, 32, true});
  this->CompareRgatEmbed(g, RgatConfig{2, 2, true, false, false}, /*repeat_ids=*/true, 830, "hubs");
  this->CompareHgt(g, 2, 2, /*reorder=*/true, 840, "hubs");
}

TYPED_TEST(RgatHgtCudaTest, EdgelessGraph) {
  // No segment, no pair: every output comes out zero (over garbage), the statistics 0 and 0.
  const SegmentGraph g = BuildSegmentGraph(6, 4, 3, {}, {2, 2, true});
  ASSERT_EQ(g.num_segs(), 0);
  this->CompareRgat(g, 3, RgatConfig{2, 2, false, true, false}, 700, "no edges");
  this->CompareRgat(g, 3, RgatConfig{2, 2, true, false, false}, 710, "no edges");
  this->CompareRgatEmbed(g, RgatConfig{2, 2, true, true, false}, /*repeat_ids=*/false, 720, "no edges");
  this->CompareHgt(g, 2, 2, /*reorder=*/true, 730, "no edges");
  this->CompareHgt(g, 2, 2, /*reorder=*/false, 740, "no edges");
}

}  // namespace
}  // namespace tessel::kernel_test
