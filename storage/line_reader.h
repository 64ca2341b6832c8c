// Reading text inputs line by line: plain files, gzip files (detected by their magic bytes, not their
// name), and tar archives, plain or gzipped (detected by the ustar header), whose members are read in
// sorted member-name order.
//
// Ownership: a ByteStream or LineReader owns its file descriptor and zlib state.
// Thread safety: one object per thread. Failure: a missing file, corrupt or truncated gzip data, or a
// malformed archive is kBadData naming the file; a read error from the OS is kStorage.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessel::storage {

// A forward-only stream of bytes.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Reads up to `n` bytes into `dst`; 0 means end of stream.
  virtual Result<size_t> Read(char* dst, size_t n) = 0;
};

// Opens `path` as raw bytes, gunzipping when it starts with the gzip magic. Concatenated gzip members
// are read as one stream; a stream that ends before its gzip trailer is kBadData ("truncated").
Result<std::unique_ptr<ByteStream>> OpenByteStream(const std::string& path);

// Splits a ByteStream into lines. The trailing "\n" or "\r\n" is stripped; a last line without a
// newline is still returned.
class LineReader {
 public:
  // `name` is used in error messages (a path, or "archive.tar.gz:member").
  LineReader(std::unique_ptr<ByteStream> stream, std::string name);

  // Sets *line to the next line (valid until the next call) and returns true, or returns false at
  // the end of the input.
  Result<bool> Next(std::string_view* line);
  // 1-based number of the line last returned.
  int64_t line_number() const { return line_number_; }
  const std::string& name() const { return name_; }

 private:
  std::unique_ptr<ByteStream> stream_;
  std::string name_;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
};

struct TextInputOptions {
  // For tar archives: the members to read (exact member name or its base name). Empty means every
  // member whose name ends in .txt or .tsv. Ignored for plain and gzip files.
  std::vector<std::string> members;
};

// Called for each line; `source` is the path, or "path:member" inside an archive. A non-OK return
// stops the walk and is passed through.
using LineVisitor = std::function<Status(const std::string& source, int64_t line_number, std::string_view line)>;

// Visits every line of a plain, gzip or tar(.gz) input. Archive members are buffered in memory so
// that they can be visited in sorted name order.
Status ForEachLine(const std::string& path, const TextInputOptions& options, const LineVisitor& visit);

// "path size=BYTES mtime=SECONDS" for source fingerprints; "path missing" when stat fails.
std::string DescribeSourceFile(const std::string& path);

}  // namespace tessel::storage
