// The segment layout of <tessel/ops/rgnn.h> for the fused-kernel tests: the random graphs of
// workers/plugin_host/random_graph.h (built independently of the host's builder and of the kernels), as
// tensors.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "../kernel_test_util.h"
#include "workers/plugin_host/random_graph.h"

namespace tessel::kernel_test {

using workers::BuildSegmentGraph;
using workers::RandomSegmentGraph;
using workers::RawEdge;
using workers::SegmentGraph;
using workers::SegmentOptions;

// The layout as tensors, ready to append to a kernel call.
struct SegmentTensors {
  std::vector<Tensor> dst;  // the 7 DST tensors, in schema order
  std::vector<Tensor> src;  // the 7 SRC tensors
  Tensor dedge_pair;        // i32[E]
  Tensor seg_norm;          // T[S]
  Tensor seg_dst;           // i32[S] (the same as dst[4])
};

template <typename T>
SegmentTensors ToSegmentTensors(const SegmentGraph& g) {
  SegmentTensors t;
  const auto i64 = [](const std::vector<int64_t>& v) {
    return MakeTensor<int64_t>({static_cast<int64_t>(v.size())}, v);
  };
  const auto i32 = [](const std::vector<int32_t>& v) {
    return MakeTensor<int32_t>({static_cast<int64_t>(v.size())}, v);
  };
  t.dst = {i64(g.dblk_row), i64(g.dblk_run), i32(g.drun_rel), i64(g.drun_seg),
           i32(g.seg_dst),  i64(g.seg_edge), i32(g.dedge_src)};
  t.src = {i64(g.sblk_row), i64(g.sblk_run),  i32(g.srun_rel), i64(g.srun_pair),
           i32(g.pair_src), i64(g.pair_edge), i32(g.sedge_seg)};
  t.dedge_pair = i32(g.dedge_pair);
  t.seg_norm = MakeTensor<T>({g.num_segs()}, Cast<T>(g.seg_norm));
  t.seg_dst = t.dst[4];
  return t;
}

// Appends pointers to `tensors` to a call's input list.
void Append(std::vector<const Tensor*>& inputs, const std::vector<Tensor>& tensors);

}  // namespace tessel::kernel_test
