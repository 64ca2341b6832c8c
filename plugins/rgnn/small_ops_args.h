// The arguments of rgnn.typed_gate.fwd/.bwd and rgnn.block_diag.fwd/.bwd (<tessel/ops/rgnn.h>), bound
// and checked here once for their CPU and CUDA kernels (small_ops*) and every dtype: the gate
// O, X [N, D], skip [G], node_type [N] (i32) -> Y [N, D] (backward: dY, O, X, skip, node_type -> dO,
// dX [N, D], dskip [G]); the block-diagonal weight blocks [R, B, P, Q] <-> W [R, B*P, B*Q].
// Failure: Bind throws KernelError: invalid-argument for a shape or dtype that does not match; bad-data
// for a node type outside [0, G) (checked where node_type is host memory: on the CPU; the CUDA kernels
// trust it).
#pragma once

#include <cstdint>
#include <string>

#include "index_checks.h"
#include "kernels.h"

namespace tessel::kernels::rgnn {

// Every node_type[i] in [0, g), where node_type is host memory (DataCheck::kFull).
inline void CheckNodeTypes(const KernelArgs& args, const int32_t* node_type, int64_t n, int64_t g) {
  if (args.data_check() == DataCheck::kFull) CheckIndices(node_type, n, g, "node_type");
}

template <typename T>
struct TypedGateFwdArgs {
  int64_t n = kUnbound, d = kUnbound, g = kUnbound;
  const T* o = nullptr;
  const T* x = nullptr;
  const T* skip = nullptr;
  const int32_t* node_type = nullptr;
  T* y = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_gate_fwd; }

  static TypedGateFwdArgs Bind(const KernelArgs& args) {
    TypedGateFwdArgs a;
    a.o = args.In<T>(0, "O", {&a.n, &a.d});
    a.x = args.In<T>(1, "X", {&a.n, &a.d});
    a.skip = args.In<T>(2, "skip", {&a.g});
    a.node_type = args.In<int32_t>(3, "node_type", {&a.n});
    a.y = args.Out<T>(0, "Y", {&a.n, &a.d});
    CheckNodeTypes(args, a.node_type, a.n, a.g);
    return a;
  }
};

template <typename T>
struct TypedGateBwdArgs {
  int64_t n = kUnbound, d = kUnbound, g = kUnbound;
  const T* dy = nullptr;
  const T* o = nullptr;
  const T* x = nullptr;
  const T* skip = nullptr;
  const int32_t* node_type = nullptr;
  T* d_o = nullptr;
  T* dx = nullptr;
  T* dskip = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_typed_gate_bwd; }

  static TypedGateBwdArgs Bind(const KernelArgs& args) {
    TypedGateBwdArgs a;
    a.dy = args.In<T>(0, "dY", {&a.n, &a.d});
    a.o = args.In<T>(1, "O", {&a.n, &a.d});
    a.x = args.In<T>(2, "X", {&a.n, &a.d});
    a.skip = args.In<T>(3, "skip", {&a.g});
    a.node_type = args.In<int32_t>(4, "node_type", {&a.n});
    a.d_o = args.Out<T>(0, "dO", {&a.n, &a.d});
    a.dx = args.Out<T>(1, "dX", {&a.n, &a.d});
    a.dskip = args.Out<T>(2, "dskip", {&a.g});
    CheckNodeTypes(args, a.node_type, a.n, a.g);
    return a;
  }
};

// The shapes of a block-diagonal weight: blocks [R, B, P, Q], W [R, K, D] with K = B*P and D = B*Q.
struct BlockDiagShape {
  int64_t r = kUnbound, b = kUnbound, p = kUnbound, q = kUnbound, k = kUnbound, d = kUnbound;

  // K == B*P and D == B*Q, else an invalid-argument error naming both shapes.
  void Check(const KernelArgs& args) const {
    if (k != b * p || d != b * q) {
      Fail(TESSEL_STATUS_INVALID_ARGUMENT,
           std::string(args.op().name) + ": W has shape [" + std::to_string(r) + ", " + std::to_string(k) + ", " +
               std::to_string(d) + "], but blocks of shape [R, B, P, Q] = [" + std::to_string(r) + ", " +
               std::to_string(b) + ", " + std::to_string(p) + ", " + std::to_string(q) + "] need [R, B*P, B*Q] = [" +
               std::to_string(r) + ", " + std::to_string(b * p) + ", " + std::to_string(b * q) + "]");
    }
  }
};

template <typename T>
struct BlockDiagFwdArgs {
  BlockDiagShape shape;
  const T* blocks = nullptr;
  T* w = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_block_diag_fwd; }

  static BlockDiagFwdArgs Bind(const KernelArgs& args) {
    BlockDiagFwdArgs a;
    BlockDiagShape& s = a.shape;
    a.blocks = args.In<T>(0, "blocks", {&s.r, &s.b, &s.p, &s.q});
    a.w = args.Out<T>(0, "W", {&s.r, &s.k, &s.d});
    s.Check(args);
    return a;
  }
};

template <typename T>
struct BlockDiagBwdArgs {
  BlockDiagShape shape;
  const T* dw = nullptr;
  T* dblocks = nullptr;

  static const tessel_op_decl& Decl() { return tessel_op_rgnn_block_diag_bwd; }

  static BlockDiagBwdArgs Bind(const KernelArgs& args) {
    BlockDiagBwdArgs a;
    BlockDiagShape& s = a.shape;
    a.dw = args.In<T>(0, "dW", {&s.r, &s.k, &s.d});
    a.dblocks = args.Out<T>(0, "dblocks", {&s.r, &s.b, &s.p, &s.q});
    s.Check(args);
    return a;
  }
};

}  // namespace tessel::kernels::rgnn
