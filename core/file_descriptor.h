// FileDescriptor: one owned POSIX file descriptor, closed when the object goes (or earlier with Close,
// which reports close()'s error: NFS and some full-disk cases surface only there).
//
//   FileDescriptor fd(::open(path, O_RDONLY | O_CLOEXEC));
//   if (fd.get() < 0) return StorageError(...);
//
// Thread safety: one owner. Movable: the moved-from object holds nothing.
#pragma once

#include <unistd.h>

namespace tessel {

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  ~FileDescriptor() { Reset(-1); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  int get() const { return fd_; }
  // Closes the one held (ignoring close()'s result) and takes `fd`.
  void Reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Gives up ownership without closing.
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes now; returns close()'s result (0 when nothing is held).
  int Close() {
    const int rc = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

}  // namespace tessel
