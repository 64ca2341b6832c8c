// nn.embedding.fwd/.bwd on CPU: a row gather, and its adjoint, a row scatter-add. The backward groups
// the rows of dY by id once (a stable counting sort), then each task owns whole rows of dW and sums
// their contributions in index order: race-free and bit-identical for any number of threads. Arguments
// and the id checks: embedding_args.h.
#include <algorithm>
#include <vector>

#include "embedding_args.h"

namespace tessel::kernels::nn {
namespace {

// Elements (rows x D) per task: big enough to amortise a task, small enough to spread rows.
constexpr int64_t kElementGrain = 1 << 14;

int64_t RowGrain(int64_t d) { return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, d)); }

struct EmbeddingFwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const EmbeddingFwdArgs<T>& a) {
    const int64_t d = a.d;
    const T* w = a.w;
    const int64_t* ids = a.ids;
    T* y = a.y;
    args.ParallelFor(a.m, RowGrain(d), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) std::copy_n(w + ids[i] * d, d, y + i * d);
    });
  }
};

struct EmbeddingBwdCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const EmbeddingBwdArgs<T>& a) {
    const int64_t m = a.m, d = a.d, v = a.v;
    const T* dy = a.dy;
    const int64_t* ids = a.ids;
    T* dw = a.dw;

    // rows_of[start[id] .. start[id + 1]) = the rows m with ids[m] == id, in increasing m.
    std::vector<int64_t> start(static_cast<size_t>(v) + 1, 0);
    for (int64_t i = 0; i < m; ++i) ++start[static_cast<size_t>(ids[i]) + 1];
    for (int64_t id = 0; id < v; ++id) start[id + 1] += start[id];
    std::vector<int64_t> rows_of(static_cast<size_t>(m));
    {
      std::vector<int64_t> next(start.begin(), start.end() - 1);
      for (int64_t i = 0; i < m; ++i) rows_of[static_cast<size_t>(next[static_cast<size_t>(ids[i])]++)] = i;
    }

    args.ParallelFor(v, RowGrain(d), [&](int64_t r0, int64_t r1) {
      for (int64_t id = r0; id < r1; ++id) {
        T* out = dw + id * d;
        std::fill_n(out, d, T(0));
        for (int64_t j = start[id]; j < start[id + 1]; ++j) {
          const T* in = dy + rows_of[j] * d;
          for (int64_t c = 0; c < d; ++c) out[c] += in[c];
        }
      }
    });
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(EmbeddingFwdCpu, EmbeddingFwdArgs, TESSEL_DEVICE_CPU)
TESSEL_DEFINE_KERNEL(EmbeddingBwdCpu, EmbeddingBwdArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::nn
