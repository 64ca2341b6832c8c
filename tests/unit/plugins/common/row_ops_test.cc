// The row loops (plugins/common/row_ops.h) against plain loops written here, with the summation order the
// header specifies, so equal means the same bits: widths below, at and past the 256-byte column chunk,
// empty items, items longer than the prefetch distance, and the one-hot id map.
#include "row_ops.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace tessel::kernels {
namespace {

template <typename T>
std::vector<T> Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

template <typename T>
class RowOpsTest : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RowOpsTest, Types);

const int64_t kWidths[] = {1, 7, 16, 63, 64, 65, 100, 130};

// Items of 0 to 11 edges: empty items, items shorter and longer than the prefetch distance, and runs of
// items whose prefetches cross item boundaries; the run starts at edge 5 (absolute indices).
std::vector<int64_t> ItemOffsets(int64_t items) {
  std::vector<int64_t> ptr = {5};
  for (int64_t i = 0; i < items; ++i) ptr.push_back(ptr.back() + (i * 7) % 12);
  return ptr;
}

TYPED_TEST(RowOpsTest, GatherSumItemsIsTheScaledColumnSumInEdgeOrder) {
  using T = TypeParam;
  const int64_t rows = 50, items = 9;
  const std::vector<int64_t> ptr = ItemOffsets(items);
  const int64_t edges = ptr.back();
  std::vector<int32_t> idx(static_cast<size_t>(edges));
  for (int64_t e = 0; e < edges; ++e) idx[e] = static_cast<int32_t>((e * 17 + 3) % rows);
  std::vector<int64_t> map(rows);
  for (int64_t r = 0; r < rows; ++r) map[r] = (r * 7 + 1) % rows;  // a permutation
  const std::vector<T> scale = Random<T>(items, 9);
  for (int64_t k : kWidths) {
    const std::vector<T> x = Random<T>(static_cast<size_t>(rows * k), 1);
    for (bool mapped : {false, true}) {
      for (bool scaled : {false, true}) {
        std::vector<T> want(static_cast<size_t>(items * k)), got(static_cast<size_t>(items * k), T(99));
        for (int64_t i = 0; i < items; ++i) {
          for (int64_t c = 0; c < k; ++c) {
            T acc = T(0);
            for (int64_t e = ptr[i]; e < ptr[i + 1]; ++e) acc += x[(mapped ? map[idx[e]] : idx[e]) * k + c];
            want[i * k + c] = (scaled ? scale[i] : T(1)) * acc;
          }
        }
        GatherSumItems(x.data(), k, ptr.data(), items, idx.data(), mapped ? map.data() : nullptr,
                       scaled ? scale.data() : nullptr, got.data());
        EXPECT_EQ(got, want) << "k " << k << (mapped ? ", mapped" : "") << (scaled ? ", scaled" : "");
      }
    }
  }
}

TYPED_TEST(RowOpsTest, GatherSegmentItemsWeighsEachRowBySegment) {
  using T = TypeParam;
  const int64_t rows = 30, segs = 20, items = 9;
  const std::vector<int64_t> ptr = ItemOffsets(items);
  const int64_t edges = ptr.back();
  std::vector<int32_t> seg(static_cast<size_t>(edges)), row_of(segs);
  for (int64_t e = 0; e < edges; ++e) seg[e] = static_cast<int32_t>((e * 13 + 2) % segs);
  for (int64_t s = 0; s < segs; ++s) row_of[s] = static_cast<int32_t>((s * 11 + 5) % rows);
  for (int64_t k : kWidths) {
    const std::vector<T> x = Random<T>(static_cast<size_t>(rows * k), 2), coef = Random<T>(segs, 3);
    std::vector<T> want(static_cast<size_t>(items * k)), got(static_cast<size_t>(items * k), T(99));
    for (int64_t i = 0; i < items; ++i) {
      for (int64_t c = 0; c < k; ++c) {
        T acc = T(0);
        for (int64_t e = ptr[i]; e < ptr[i + 1]; ++e) acc += coef[seg[e]] * x[row_of[seg[e]] * k + c];
        want[i * k + c] = acc;
      }
    }
    GatherSegmentItems(x.data(), k, ptr.data(), items, seg.data(), row_of.data(), coef.data(), got.data());
    EXPECT_EQ(got, want) << "k " << k;
  }
  GatherSegmentItems(static_cast<const T*>(nullptr), 4, ptr.data(), 0, seg.data(), row_of.data(),
                     static_cast<const T*>(nullptr), static_cast<T*>(nullptr));  // no items: touches nothing
}

TYPED_TEST(RowOpsTest, AddAxpyAndDotMatchTheirDefinitions) {
  using T = TypeParam;
  for (int64_t n : {0, 1, 5, 8, 9, 16, 33, 64, 100}) {
    const std::vector<T> x = Random<T>(static_cast<size_t>(n), 4), y0 = Random<T>(static_cast<size_t>(n), 5);
    std::vector<T> y = y0, want = y0;
    AddRow(n, x.data(), y.data());
    for (int64_t c = 0; c < n; ++c) want[c] += x[c];
    EXPECT_EQ(y, want) << "add, n " << n;
    y = y0;
    want = y0;
    AxpyRow(n, T(-1.25), x.data(), y.data());
    for (int64_t c = 0; c < n; ++c) want[c] += T(-1.25) * x[c];
    EXPECT_EQ(y, want) << "axpy, n " << n;
    // Dot: partial sum i mod 8, then the 8 partials added in order.
    T p[8] = {};
    for (int64_t i = 0; i < n; ++i) p[i % 8] += x[i] * y0[i];
    T dot = p[0];
    for (int j = 1; j < 8; ++j) dot += p[j];
    EXPECT_EQ(DotRow(n, x.data(), y0.data()), dot) << "dot, n " << n;
  }
}

}  // namespace
}  // namespace tessel::kernels
