// Binary files as the llm.c and safetensors readers and writers use them: a regular file opened for
// reading at offsets, and a file written whole under a temporary name, flushed and renamed into place.
// Failure: kStorage naming the path for I/O (open, read, write, fsync, rename); kBadData for a file that
// is not a regular file or ends early. Thread safety: one owner each.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/file_descriptor.h"
#include "core/status.h"

namespace tessel::storage {

// An open file and its size. A file that is not a regular file (a directory) is kBadData.
struct OpenFile {
  std::unique_ptr<FileDescriptor> fd;
  int64_t size = 0;
};
Result<OpenFile> OpenForReading(const std::string& path);

// Reads exactly `bytes` at `offset`. A short file (it shrank since fstat) is kBadData, a failed read kStorage.
Status ReadAt(const OpenFile& file, void* dst, int64_t bytes, int64_t offset, const std::string& path);

// A file written whole: Open creates a fresh PATH.tmp-PID-N (core/safe_file.h; a link at PATH is refused),
// Write appends, Commit flushes it to disk and renames it over PATH. Destroyed uncommitted, it removes the
// temporary.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  Status Open();
  Status Write(const void* data, int64_t bytes);
  Status Commit();

 private:
  std::string path_;
  std::string temp_;
  std::unique_ptr<FileDescriptor> fd_;
  int64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace tessel::storage
