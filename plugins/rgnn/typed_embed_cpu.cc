// rgnn.typed_embed.fwd/.bwd on CPU: the typed linear of a one-hot (featureless) input is a row lookup.
#include <algorithm>
#include <vector>

#include "index_checks.h"
#include "kernels.h"

namespace tessel::kernels::rgnn {
namespace {

constexpr int64_t kCopyBlockRows = 1024;

template <typename T>
void TypedEmbedFwd(const KernelArgs& args) {
  int64_t r = kUnbound, v = kUnbound, d = kUnbound, u = kUnbound, m = kUnbound;
  const T* w = args.In<T>(0, "W", {&r, &v, &d});
  int64_t r1 = r + 1;
  const int64_t* uniq_ptr = args.In<int64_t>(1, "uniq_ptr", {&r1});
  const int64_t* uniq_src = args.In<int64_t>(2, "uniq_src", {&u});
  const int64_t* row_id = args.In<int64_t>(3, "row_id", {&m});
  T* y = args.Out<T>(0, "Y", {&u, &d});
  CheckOffsets(uniq_ptr, r, u, "uniq_ptr");
  CheckIndices(uniq_src, u, m, "uniq_src");
  CheckIndices(row_id, m, v, "row_id");

  const std::vector<RowBlock> blocks = RelationBlocks(uniq_ptr, r, kCopyBlockRows);
  args.ParallelFor(static_cast<int64_t>(blocks.size()), 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const T* w_r = w + blocks[b].relation * v * d;
      for (int64_t i = blocks[b].begin; i < blocks[b].end; ++i)
        std::copy_n(w_r + row_id[uniq_src[i]] * d, d, y + i * d);
    }
  });
}

// One relation per task: dW[r] has one writer, so even a row_id that is not injective sums correctly.
template <typename T>
void TypedEmbedBwd(const KernelArgs& args) {
  int64_t u = kUnbound, d = kUnbound, m = kUnbound, v = kUnbound;
  const T* dy = args.In<T>(0, "dY", {&u, &d});
  int64_t r1 = kUnbound;
  const int64_t* uniq_ptr = args.In<int64_t>(1, "uniq_ptr", {&r1});
  int64_t r = r1 - 1;
  if (r < 0) Fail(TESSEL_STATUS_INVALID_ARGUMENT, "input 'uniq_ptr' must have at least one element");
  const int64_t* uniq_src = args.In<int64_t>(2, "uniq_src", {&u});
  const int64_t* row_id = args.In<int64_t>(3, "row_id", {&m});
  T* dw = args.Out<T>(0, "dW", {&r, &v, &d});
  CheckOffsets(uniq_ptr, r, u, "uniq_ptr");
  CheckIndices(uniq_src, u, m, "uniq_src");
  CheckIndices(row_id, m, v, "row_id");

  args.ParallelFor(r, 1, [&](int64_t r0, int64_t r1_end) {
    for (int64_t rel = r0; rel < r1_end; ++rel) {
      T* dw_r = dw + rel * v * d;
      std::fill_n(dw_r, v * d, T(0));
      for (int64_t i = uniq_ptr[rel]; i < uniq_ptr[rel + 1]; ++i) {
        T* out = dw_r + row_id[uniq_src[i]] * d;
        const T* in = dy + i * d;
        for (int64_t c = 0; c < d; ++c) out[c] += in[c];
      }
    }
  });
}

struct TypedEmbedFwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_embed_fwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    TypedEmbedFwd<T>(args);
  }
};

struct TypedEmbedBwdCpu {
  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_embed_bwd; }
  template <typename T>
  static void Run(const KernelArgs& args) {
    TypedEmbedBwd<T>(args);
  }
};

}  // namespace

TESSEL_DEFINE_UNBOUND_KERNEL(TypedEmbedFwdCpu, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_UNBOUND_KERNEL(TypedEmbedBwdCpu, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn
