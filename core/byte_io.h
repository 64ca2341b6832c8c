// ByteWriter / ByteReader: the little binary encodings Tessel sends between ranks (partitions, protocol
// messages). Values are copied in host byte order (every rank of a job runs the same build).
// ByteReader never reads out of bounds: the first failure is kept (ok() turns false, error() says what
// and where) and every later read returns zeros, so a decoder reads straight through and checks once.
// Thread safety: values; one thread at a time.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/logging.h"

namespace tessel {

class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Append(&v, sizeof(T));
  }
  template <typename T>
  void PutVector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put<uint64_t>(v.size());
    Append(v.data(), v.size() * sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    Append(s.data(), s.size());
  }
  std::vector<uint8_t> Take() { return std::move(out_); }

 private:
  // resize + memcpy rather than insert: GCC 12 flags insert of small ranges (-Wstringop-overflow).
  void Append(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out_.size();
    out_.resize(at + n);
    std::memcpy(out_.data() + at, p, n);
  }
  std::vector<uint8_t> out_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t remaining() const { return size_ - pos_; }
  bool done() const { return pos_ == size_; }
  void Fail(std::string message) {
    if (ok()) error_ = std::move(message);
  }

  template <typename T>
  T Get(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    T v{};
    if (!ok()) return v;
    if (remaining() < sizeof(T)) {
      Fail(StrCat("truncated reading ", what, " at byte ", pos_));
      return v;
    }
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> GetVector(const char* what) {
    const uint64_t count = Get<uint64_t>(what);
    std::vector<T> v;
    if (!ok()) return v;
    if (count > remaining() / sizeof(T)) {
      Fail(StrCat(what, ": length ", count, " exceeds the ", remaining(), " bytes left"));
      return v;
    }
    v.resize(count);
    if (count > 0) std::memcpy(v.data(), data_ + pos_, count * sizeof(T));
    pos_ += count * sizeof(T);
    return v;
  }
  std::string GetString(const char* what) {
    const uint64_t len = Get<uint64_t>(what);
    if (!ok()) return {};
    if (len > remaining()) {
      Fail(StrCat(what, ": length ", len, " exceeds the ", remaining(), " bytes left"));
      return {};
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace tessel
