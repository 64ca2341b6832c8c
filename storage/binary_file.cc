#include "storage/binary_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/logging.h"
#include "core/safe_file.h"

namespace tessel::storage {

Result<OpenFile> OpenForReading(const std::string& path) {
  auto fd = std::make_unique<FileDescriptor>(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd->get() < 0) return StorageError(StrCat(path, ": cannot open: ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return StorageError(StrCat(path, ": cannot stat: ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return BadDataError(StrCat(path, ": not a regular file"));
  return OpenFile{std::move(fd), static_cast<int64_t>(st.st_size)};
}

Status ReadAt(const OpenFile& file, void* dst, int64_t bytes, int64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(bytes, int64_t{1} << 30));
    const ssize_t got = ::pread(file.fd->get(), p, want, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return StorageError(StrCat(path, ": read failed at byte ", offset, ": ", std::strerror(errno)));
    }
    if (got == 0) return BadDataError(StrCat(path, ": unexpected end of file at byte ", offset, " (truncated?)"));
    p += got;
    bytes -= got;
    offset += got;
  }
  return Status::Ok();
}

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)), temp_(TemporaryPathFor(path_)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ && fd_->get() >= 0) fd_->Close();
  if (!committed_) ::unlink(temp_.c_str());
}

Status AtomicFileWriter::Open() {
  TESSEL_RETURN_IF_ERROR(CheckNotSymlink(path_));
  Result<FileDescriptor> fd = CreateNewFile(temp_);
  if (!fd.ok()) return StorageError(StrCat(path_, ": cannot create the temporary ", fd.status().message()));
  fd_ = std::make_unique<FileDescriptor>(std::move(fd).value());
  return Status::Ok();
}

Status AtomicFileWriter::Write(const void* data, int64_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(bytes, int64_t{1} << 30));
    const ssize_t put = ::write(fd_->get(), p, want);
    if (put < 0) {
      if (errno == EINTR) continue;
      return StorageError(
          StrCat(path_, ": write to ", temp_, " failed at byte ", written_, ": ", std::strerror(errno)));
    }
    p += put;
    bytes -= put;
    written_ += put;
  }
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (::fsync(fd_->get()) != 0) {
    return StorageError(StrCat(path_, ": cannot flush ", temp_, " to disk: ", std::strerror(errno)));
  }
  if (fd_->Close() != 0) return StorageError(StrCat(path_, ": cannot close ", temp_, ": ", std::strerror(errno)));
  TESSEL_RETURN_IF_ERROR(CheckNotSymlink(path_));
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    return StorageError(StrCat(path_, ": cannot rename ", temp_, " into place: ", std::strerror(errno)));
  }
  committed_ = true;
  return Status::Ok();
}

}  // namespace tessel::storage
