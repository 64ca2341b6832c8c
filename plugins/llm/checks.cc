#include <cmath>
#include <string>

#include "kernels.h"

namespace tessel::kernels::llm {

void CheckPositions(const KernelArgs& args, int64_t s, int64_t p) {
  if (s > p) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, std::string(args.op().name) + ": S = " + std::to_string(s) +
                                             " positions, but wpe has rows for P = " + std::to_string(p));
  }
}

void CheckTokens(const KernelArgs& args, const int32_t* tokens, int64_t b, int64_t s, int64_t v) {
  for (int64_t i = 0; i < b * s; ++i) {
    if (tokens[i] < 0 || tokens[i] >= v) {
      Fail(TESSEL_STATUS_BAD_DATA, std::string(args.op().name) + ": tokens[" + std::to_string(i / s) + ", " +
                                       std::to_string(i % s) + "] = " + std::to_string(tokens[i]) +
                                       " is out of range [0, " + std::to_string(v) + ")");
    }
  }
}

double CheckedLayernormEps(const KernelArgs& args) {
  const double eps = args.Params<tessel_layernorm_params>().eps;
  if (!(eps >= 0) || !std::isfinite(eps)) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         std::string(args.op().name) + ": eps must be finite and >= 0, is " + std::to_string(eps));
  }
  return eps;
}

AttentionShape CheckedAttentionShape(const KernelArgs& args, const tessel_tensor& qkv, const tessel_tensor& y) {
  const std::string op = args.op().name;
  if (qkv.ndim != 3 || y.ndim != 3) Fail(TESSEL_STATUS_INVALID_ARGUMENT, op + ": qkv and Y must be 3-D");
  AttentionShape s;
  s.b = qkv.shape[0];
  s.s = qkv.shape[1];
  s.q = qkv.shape[2];
  s.c = y.shape[2];
  s.h = args.Params<tessel_attention_params>().heads;
  if (s.h < 1) Fail(TESSEL_STATUS_INVALID_ARGUMENT, op + ": heads must be >= 1, is " + std::to_string(s.h));
  if (s.c < s.h || s.c % s.h != 0) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         op + ": C = " + std::to_string(s.c) + " is not a positive multiple of heads = " + std::to_string(s.h));
  }
  if (s.q != 3 * s.c) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT,
         op + ": qkv is [B, S, Q] with Q = " + std::to_string(s.q) + ", expected 3C = " + std::to_string(3 * s.c));
  }
  s.hs = s.c / s.h;
  return s;
}

}  // namespace tessel::kernels::llm
