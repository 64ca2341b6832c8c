// What the CUDA attention kernels share (attention.cu on CUDA cores, attention_tc.cu on the tensor
// cores): the sizes, the block-to-tile map (blockIdx.x = (b * H + h) * tiles + tile), and the head-size
// limit. Include from .cu files only.
#pragma once

#include <cstdint>
#include <string>

#include "attention_args.h"
#include "cuda_rows.cuh"

namespace tessel::kernels::llm {

// The largest head size C / H the CUDA kernels take (a block holds whole rows of q, k and v).
constexpr int64_t kMaxHeadSize = 128;

// The sizes every kernel needs.
struct Dims {
  int64_t b, s, c, h, hs, q;
};

inline Dims DimsOf(const AttentionShape& a) { return Dims{a.b, a.s, a.c, a.h, a.hs, a.q}; }

// A block's tile and head: blockIdx.x = (bi * h + hi) * tiles + tile.
struct BlockTile {
  int64_t bi, hi, t0;  // t0: the tile's first position
  int count;           // positions in the tile (the last one of a sequence may be partial)
};

template <int kTile>
__device__ inline BlockTile TileOfBlock(const Dims& dm) {
  const int64_t tiles = (dm.s + kTile - 1) / kTile, u = blockIdx.x;
  BlockTile t;
  t.bi = u / (dm.h * tiles);
  t.hi = u / tiles % dm.h;
  t.t0 = u % tiles * kTile;
  t.count = static_cast<int>(dm.s - t.t0 < kTile ? dm.s - t.t0 : kTile);
  return t;
}

// Blocks for one per (b, h, tile).
template <int kTile>
unsigned TileBlocks(const AttentionShape& a) {
  return static_cast<unsigned>(a.b * a.h * ((a.s + kTile - 1) / kTile));
}

// Refuses a head size above kMaxHeadSize (invalid-argument, naming the op).
inline void CheckHeadSize(const KernelArgs& args, int64_t hs) {
  if (hs > kMaxHeadSize) {
    Fail(TESSEL_STATUS_INVALID_ARGUMENT, std::string(args.op().name) + ": head size C / heads = " + std::to_string(hs) +
                                             " is above the CUDA kernels' limit of " + std::to_string(kMaxHeadSize));
  }
}

}  // namespace tessel::kernels::llm
