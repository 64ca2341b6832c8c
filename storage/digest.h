// Digest: the 64-bit digest behind a partition's graph identity (storage/partition_manifest.h
// GraphHash, and the chunked input's hash of the distributed partitioner). Not cryptographic: it tells
// one graph from another, it does not resist a forger.
// Thread safety: a plain value.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace tessel::storage {

// Eight bytes at a time, each word multiplied into the state and the state rotated (the mixing of
// MurmurHash3's 64-bit finaliser): one pass at memory speed over the features, which dominate.
class Digest {
 public:
  void Int(int64_t v) { Word(static_cast<uint64_t>(v)); }
  void Str(const std::string& s) {
    Int(static_cast<int64_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  template <typename T>
  void Array(const std::vector<T>& v) {
    Int(static_cast<int64_t>(v.size()));
    Bytes(v.data(), v.size() * sizeof(T));
  }
  std::string Hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(Value()));
    return buf;
  }
  uint64_t Value() const {
    uint64_t h = state_;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
  }
  // A stream of bytes fed in pieces digests as one call when every piece but the last is a multiple of 8.
  void Bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      Word(w);
    }
    if (i < n) {
      uint64_t w = 0;
      std::memcpy(&w, p + i, n - i);
      Word(w ^ (uint64_t{n - i} << 56));
    }
  }

 private:
  void Word(uint64_t w) {
    state_ ^= w * 0x87c37b91114253d5ULL;
    state_ = std::rotl(state_, 31) * 0x4cf5ad432745937fULL + 0x52dce729ULL;
  }
  uint64_t state_ = 0x9e3779b97f4a7c15ULL;
};

}  // namespace tessel::storage
