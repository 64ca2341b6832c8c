// rgnn.typed_embed.fwd/.bwd on CPU: the typed linear of a one-hot (featureless) input is a row lookup.
// Arguments and the index checks: typed_embed_args.h.
#include <algorithm>
#include <vector>

#include "index_checks.h"
#include "typed_embed_args.h"

namespace tessel::kernels::rgnn {
namespace {

constexpr int64_t kCopyBlockRows = 1024;

struct TypedEmbedFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedEmbedFwdArgs<T>& a) {
    const int64_t r = a.r, v = a.v, d = a.d;
    const T* w = a.w;
    const int64_t* uniq_ptr = a.uniq_ptr;
    const int64_t* uniq_src = a.uniq_src;
    const int64_t* row_id = a.row_id;
    T* y = a.y;
    const std::vector<RowBlock> blocks = RelationBlocks(uniq_ptr, r, kCopyBlockRows);
    args.ParallelFor(static_cast<int64_t>(blocks.size()), 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const T* w_r = w + blocks[b].relation * v * d;
        for (int64_t i = blocks[b].begin; i < blocks[b].end; ++i)
          std::copy_n(w_r + row_id[uniq_src[i]] * d, d, y + i * d);
      }
    });
  }
};

// One relation per task: dW[r] has one writer, so even a row_id that is not injective sums correctly.
struct TypedEmbedBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const TypedEmbedBwdArgs<T>& a) {
    const int64_t r = a.r, v = a.v, d = a.d;
    const T* dy = a.dy;
    const int64_t* uniq_ptr = a.uniq_ptr;
    const int64_t* uniq_src = a.uniq_src;
    const int64_t* row_id = a.row_id;
    T* dw = a.dw;
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
};

}  // namespace

TESSEL_DEFINE_KERNEL(TypedEmbedFwdCpu, TypedEmbedFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(TypedEmbedBwdCpu, TypedEmbedBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::rgnn
