#include "llm_test_util.h"

#include <random>

namespace tessel::kernel_test {

std::vector<int32_t> RandomTokens(int64_t n, int32_t v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(v));
  return out;
}

}  // namespace tessel::kernel_test
