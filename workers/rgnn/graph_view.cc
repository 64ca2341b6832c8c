#include "workers/rgnn/graph_view.h"

#include <array>
#include <type_traits>

namespace tessel::workers {

std::vector<TypeRun> TypeRunsOf(const std::vector<int32_t>& types, int64_t owned) {
  std::vector<TypeRun> runs;
  for (int64_t i = 0; i < static_cast<int64_t>(types.size()); ++i) {
    const int32_t t = types[static_cast<size_t>(i)];
    // A new range at a type change, and at the owned rows' end (so no range straddles it).
    if (i == 0 || i == owned || t != runs.back().type) {
      runs.push_back({t, i, i + 1});
    } else {
      runs.back().end = i + 1;
    }
  }
  return runs;
}

namespace {

// Every tensor of a layout, declared once for the copies to the device and the byte counts.
template <typename L>
auto TensorsOf(L& l) -> decltype(auto) {
  if constexpr (std::is_same_v<std::remove_const_t<L>, SegmentLayout>) {
    return std::array{&l.dblk_row,  &l.dblk_run,   &l.drun_rel,  &l.drun_seg, &l.seg_dst,  &l.seg_edge,
                      &l.dedge_src, &l.dedge_pair, &l.sblk_row,  &l.sblk_run, &l.srun_rel, &l.srun_pair,
                      &l.pair_src,  &l.pair_edge,  &l.sedge_seg, &l.seg_norm};
  } else {
    return std::array{&l.uniq_ptr, &l.uniq_src, &l.uniq_edge_ptr, &l.edge_uniq,
                      &l.dst,      &l.dst_ptr,  &l.dst_edges,     &l.norm};
  }
}

}  // namespace

int64_t GraphViewBytes(const GraphView& view) {
  auto bytes = static_cast<int64_t>(view.row_type.nbytes() + view.row_id.nbytes());
  for (const Tensor* t : TensorsOf(view.segments)) bytes += static_cast<int64_t>(t->nbytes());
  for (const Tensor* t : TensorsOf(view.pairs)) bytes += static_cast<int64_t>(t->nbytes());
  return bytes;
}

Status MoveToDevice(Tensor& t, const DeviceContext& device) {
  if (device.device == Device::kCpu || t.raw() == nullptr) return Status();
  TESSEL_ASSIGN_OR_RETURN(Tensor d, Tensor::Empty(t.dtype(), t.shape(), *device.allocator));
  TESSEL_RETURN_IF_ERROR(CopyMemory(d.raw(), device.device, t.raw(), Device::kCpu, t.nbytes(), device.stream));
  t = d;
  return Status();
}

Status MoveToDevice(SegmentLayout& l, const DeviceContext& device) {
  for (Tensor* t : TensorsOf(l)) {
    TESSEL_RETURN_IF_ERROR(MoveToDevice(*t, device));
  }
  return Status();
}

Status MoveToDevice(RelationLayout& l, const DeviceContext& device) {
  for (Tensor* t : TensorsOf(l)) {
    TESSEL_RETURN_IF_ERROR(MoveToDevice(*t, device));
  }
  return Status();
}

}  // namespace tessel::workers
