// gather.rows on CPU: the host's pool copies runs of rows straight from the table into Y (row_gather.h).
// Each chunk checks its own ids before it copies a row, so a bad id is found without a serial pass
// over the ids; the message then names the first bad position (the serial check runs only on failure).
// Arguments: gather_args.h.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "gather_args.h"
#include "index_checks.h"
#include "row_gather.h"

namespace tessel::kernels::gather {
namespace {

// Output bytes per task: large enough that waking a thread pays off, small enough to spread the rows.
constexpr int64_t kChunkBytes = int64_t{256} << 10;

struct GatherRowsCpu {
  template <typename T>
  static void Run(const KernelArgs& args, const GatherRowsArgs<T>& a) {
    const int64_t n = a.n, m = a.m, row_bytes = a.RowBytes();
    const int64_t* ids = a.ids;
    const Stores stores = ChooseStores(a.y, row_bytes, m);
    const auto* src = reinterpret_cast<const char*>(a.table);
    auto* dst = reinterpret_cast<char*>(a.y);
    std::atomic<bool> bad_id{false};
    args.ParallelFor(m, std::max<int64_t>(1, kChunkBytes / std::max<int64_t>(1, row_bytes)),
                     [&](int64_t begin, int64_t end) {
                       if (!IdsInRange(ids, begin, end, n)) {
                         bad_id.store(true, std::memory_order_relaxed);
                         return;
                       }
                       GatherRows(src, row_bytes, ids, begin, end, dst, stores);
                     });
    if (bad_id.load()) CheckIndices(ids, m, n, "ids");
  }
};

}  // namespace

TESSEL_DEFINE_KERNEL(GatherRowsCpu, GatherRowsArgs, TESSEL_DEVICE_CPU)

}  // namespace tessel::kernels::gather
