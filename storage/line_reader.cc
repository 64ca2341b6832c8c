#include "storage/line_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/logging.h"

namespace tessel::storage {
namespace {

constexpr size_t kReadChunk = 1 << 18;
constexpr size_t kMaxLine = size_t{64} << 20;
constexpr size_t kTarBlock = 512;

class FileStream : public ByteStream {
 public:
  FileStream(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~FileStream() override { ::close(fd_); }
  FileStream(const FileStream&) = delete;
  FileStream& operator=(const FileStream&) = delete;

  Result<size_t> Read(char* dst, size_t n) override {
    while (true) {
      const ssize_t got = ::read(fd_, dst, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return StorageError(StrCat(path_, ": read failed: ", std::strerror(errno)));
    }
  }

 private:
  int fd_;
  std::string path_;
};

// Inflates a gzip stream (one or more concatenated members; trailing zero padding is tolerated).
class GzipStream : public ByteStream {
 public:
  GzipStream(std::unique_ptr<ByteStream> in, std::string path) : in_(std::move(in)), path_(std::move(path)) {}
  ~GzipStream() override {
    if (initialised_) inflateEnd(&zs_);
  }
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  Status Init() {
    if (inflateInit2(&zs_, 15 + 16) != Z_OK) return InternalError(StrCat(path_, ": cannot initialise zlib"));
    initialised_ = true;
    return Status::Ok();
  }

  Result<size_t> Read(char* dst, size_t n) override {
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    const uInt want = zs_.avail_out;
    while (true) {
      if (done_) return static_cast<size_t>(want - zs_.avail_out);
      if (zs_.avail_in == 0 && !input_eof_) TESSEL_RETURN_IF_ERROR(Fill());
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      const size_t produced = want - zs_.avail_out;
      if (rc == Z_STREAM_END) {
        TESSEL_RETURN_IF_ERROR(AfterMember());
        if (produced > 0) return produced;
        continue;
      }
      if (rc == Z_OK) {
        if (produced > 0) return produced;
        continue;
      }
      if (rc == Z_BUF_ERROR) {
        if (produced > 0) return produced;
        if (input_eof_ && zs_.avail_in == 0) {
          return BadDataError(StrCat(path_, ": truncated gzip data (unexpected end of file)"));
        }
        continue;
      }
      if (rc == Z_MEM_ERROR) return StorageError(StrCat(path_, ": out of memory inflating"));
      return BadDataError(StrCat(path_, ": corrupt gzip data (", zs_.msg ? zs_.msg : zError(rc), ")"));
    }
  }

 private:
  Status Fill() {
    TESSEL_ASSIGN_OR_RETURN(size_t got, in_->Read(in_buf_.data(), in_buf_.size()));
    zs_.next_in = reinterpret_cast<Bytef*>(in_buf_.data());
    zs_.avail_in = static_cast<uInt>(got);
    if (got == 0) input_eof_ = true;
    return Status::Ok();
  }

  // At the end of a member: another member follows, or zero padding, or the end of the file.
  Status AfterMember() {
    if (zs_.avail_in == 0 && !input_eof_) TESSEL_RETURN_IF_ERROR(Fill());
    if (zs_.avail_in == 0) {
      done_ = true;
      return Status::Ok();
    }
    if (zs_.next_in[0] == 0x1f) {
      inflateReset(&zs_);
      return Status::Ok();
    }
    while (zs_.avail_in > 0) {
      for (uInt i = 0; i < zs_.avail_in; ++i) {
        if (zs_.next_in[i] != 0) return BadDataError(StrCat(path_, ": trailing garbage after gzip data"));
      }
      zs_.avail_in = 0;
      TESSEL_RETURN_IF_ERROR(Fill());
    }
    done_ = true;
    return Status::Ok();
  }

  std::unique_ptr<ByteStream> in_;
  std::string path_;
  z_stream zs_{};
  bool initialised_ = false;
  bool input_eof_ = false;
  bool done_ = false;
  std::vector<char> in_buf_ = std::vector<char>(kReadChunk);
};

// Replays already-read bytes, then continues with the rest of the stream.
class PrefixedStream : public ByteStream {
 public:
  PrefixedStream(std::string prefix, std::unique_ptr<ByteStream> rest)
      : prefix_(std::move(prefix)), rest_(std::move(rest)) {}
  Result<size_t> Read(char* dst, size_t n) override {
    if (pos_ < prefix_.size()) {
      const size_t k = std::min(n, prefix_.size() - pos_);
      std::memcpy(dst, prefix_.data() + pos_, k);
      pos_ += k;
      return k;
    }
    return rest_ ? rest_->Read(dst, n) : Result<size_t>(size_t{0});
  }

 private:
  std::string prefix_;
  size_t pos_ = 0;
  std::unique_ptr<ByteStream> rest_;
};

// Reads exactly n bytes unless the stream ends first; returns how many were read.
Result<size_t> ReadFully(ByteStream& s, char* dst, size_t n) {
  size_t total = 0;
  while (total < n) {
    TESSEL_ASSIGN_OR_RETURN(size_t got, s.Read(dst + total, n - total));
    if (got == 0) break;
    total += got;
  }
  return total;
}

// ---- ustar ------------------------------------------------------------------------------------

uint64_t ParseOctal(const char* p, size_t len, bool* ok) {
  // GNU base-256 for sizes of 8 GiB and more.
  if (static_cast<unsigned char>(p[0]) & 0x80) {
    uint64_t v = static_cast<unsigned char>(p[0]) & 0x7f;
    for (size_t i = 1; i < len; ++i) {
      if (v >> 55) *ok = false;
      v = (v << 8) | static_cast<unsigned char>(p[i]);
    }
    return v;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < len && p[i] == ' ') ++i;
  bool any = false;
  for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v >> 60) *ok = false;
    v = v * 8 + static_cast<uint64_t>(p[i] - '0');
    any = true;
  }
  for (; i < len; ++i) {
    if (p[i] != ' ' && p[i] != '\0') *ok = false;
  }
  if (!any) *ok = false;
  return v;
}

bool IsZeroBlock(const char* b) {
  return std::all_of(b, b + kTarBlock, [](char c) { return c == 0; });
}

bool TarChecksumOk(const char* b) {
  bool ok = true;
  const uint64_t stored = ParseOctal(b + 148, 8, &ok);
  if (!ok) return false;
  uint64_t sum_unsigned = 0;
  int64_t sum_signed = 0;  // some old tars summed signed chars
  for (size_t i = 0; i < kTarBlock; ++i) {
    const char c = (i >= 148 && i < 156) ? ' ' : b[i];
    sum_unsigned += static_cast<unsigned char>(c);
    sum_signed += static_cast<signed char>(c);
  }
  return stored == sum_unsigned || static_cast<int64_t>(stored) == sum_signed;
}

bool LooksLikeTar(const char* b) { return std::memcmp(b + 257, "ustar", 5) == 0 && TarChecksumOk(b); }

std::string FieldString(const char* p, size_t len) { return std::string(p, strnlen(p, len)); }

struct TarMember {
  std::string name;
  std::string data;
};

// Reads `size` bytes of member data plus padding; keeps them in *out when out != nullptr.
Status ReadMemberData(ByteStream& s, uint64_t size, std::string* out, const std::string& where) {
  const uint64_t padded = (size + kTarBlock - 1) / kTarBlock * kTarBlock;
  std::vector<char> chunk(kReadChunk);
  uint64_t left = padded;
  if (out != nullptr) {
    try {
      out->reserve(size);
    } catch (const std::bad_alloc&) {
      return StorageError(StrCat(where, ": out of memory buffering ", size, " bytes"));
    }
  }
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    TESSEL_ASSIGN_OR_RETURN(size_t got, ReadFully(s, chunk.data(), want));
    if (got < want) return BadDataError(StrCat(where, ": truncated tar archive (member data ends early)"));
    const uint64_t consumed = padded - left;
    if (out != nullptr && consumed < size) {
      out->append(chunk.data(), static_cast<size_t>(std::min<uint64_t>(got, size - consumed)));
    }
    left -= got;
  }
  return Status::Ok();
}

// The value of `key` in a pax extended header ("LEN key=value\n" records), or "" when absent.
std::string PaxValue(const std::string& records, const std::string& key) {
  size_t pos = 0;
  while (pos < records.size()) {
    const size_t space = records.find(' ', pos);
    if (space == std::string::npos) break;
    const size_t len = std::strtoull(records.c_str() + pos, nullptr, 10);
    if (len == 0 || pos + len > records.size()) break;
    const std::string record = records.substr(space + 1, pos + len - space - 2);  // drop "\n"
    if (record.compare(0, key.size() + 1, key + "=") == 0) return record.substr(key.size() + 1);
    pos += len;
  }
  return "";
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view BaseName(std::string_view s) {
  const size_t slash = s.rfind('/');
  return slash == std::string_view::npos ? s : s.substr(slash + 1);
}

bool Wanted(const std::string& name, const TextInputOptions& options) {
  if (options.members.empty()) return EndsWith(name, ".txt") || EndsWith(name, ".tsv");
  for (const auto& m : options.members) {
    if (name == m || BaseName(name) == m) return true;
  }
  return false;
}

// Reads the wanted regular-file members of a tar stream whose first header is `first`.
Result<std::vector<TarMember>> ReadTar(ByteStream& s, const char* first, const std::string& path,
                                       const TextInputOptions& options, std::vector<std::string>* all_names) {
  std::vector<TarMember> members;
  std::vector<char> block(first, first + kTarBlock);
  std::string long_name;  // from a GNU 'L' or pax header, for the next member
  int64_t long_size = -1;
  bool have_block = true;
  while (true) {
    if (!have_block) {
      TESSEL_ASSIGN_OR_RETURN(size_t got, ReadFully(s, block.data(), kTarBlock));
      if (got == 0) break;  // no end-of-archive blocks; accept
      if (got < kTarBlock) return BadDataError(StrCat(path, ": truncated tar archive (partial header)"));
    }
    have_block = false;
    if (IsZeroBlock(block.data())) break;
    if (!TarChecksumOk(block.data())) return BadDataError(StrCat(path, ": corrupt tar header (bad checksum)"));
    bool ok = true;
    uint64_t size = ParseOctal(block.data() + 124, 12, &ok);
    if (!ok) return BadDataError(StrCat(path, ": corrupt tar header (bad size field)"));
    const char type = block[156];
    std::string name = FieldString(block.data(), 100);
    if (std::memcmp(block.data() + 257, "ustar\0", 6) == 0) {
      const std::string prefix = FieldString(block.data() + 345, 155);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
    if (type == 'L' || type == 'x') {
      std::string data;
      TESSEL_RETURN_IF_ERROR(ReadMemberData(s, size, &data, path));
      if (type == 'L') {
        long_name = FieldString(data.data(), data.size());
      } else {
        if (std::string p = PaxValue(data, "path"); !p.empty()) long_name = p;
        if (std::string sz = PaxValue(data, "size"); !sz.empty()) long_size = std::strtoll(sz.c_str(), nullptr, 10);
      }
      continue;
    }
    if (!long_name.empty()) name = std::exchange(long_name, "");
    if (long_size >= 0) size = static_cast<uint64_t>(std::exchange(long_size, -1));
    const bool regular = type == '0' || type == '\0' || type == '7';
    if (regular) all_names->push_back(name);
    if (regular && Wanted(name, options)) {
      TarMember& m = members.emplace_back();
      m.name = name;
      TESSEL_RETURN_IF_ERROR(ReadMemberData(s, size, &m.data, StrCat(path, ":", name)));
    } else if (type != '1' && type != '2' && type != '3' && type != '4' && type != '5' && type != '6') {
      TESSEL_RETURN_IF_ERROR(ReadMemberData(s, size, nullptr, path));  // files skipped, 'g' headers, ...
    }
  }
  std::sort(members.begin(), members.end(), [](const TarMember& a, const TarMember& b) { return a.name < b.name; });
  return members;
}

Status VisitStream(std::unique_ptr<ByteStream> stream, const std::string& name, const LineVisitor& visit) {
  LineReader reader(std::move(stream), name);
  std::string_view line;
  while (true) {
    TESSEL_ASSIGN_OR_RETURN(bool more, reader.Next(&line));
    if (!more) return Status::Ok();
    TESSEL_RETURN_IF_ERROR(visit(name, reader.line_number(), line));
  }
}

class StringStream : public ByteStream {
 public:
  explicit StringStream(std::string data) : data_(std::move(data)) {}
  Result<size_t> Read(char* dst, size_t n) override {
    const size_t k = std::min(n, data_.size() - pos_);
    std::memcpy(dst, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }

 private:
  std::string data_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::unique_ptr<ByteStream>> OpenByteStream(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return BadDataError(StrCat(path, ": cannot open: ", std::strerror(errno)));
  auto file = std::make_unique<FileStream>(fd, path);
  char magic[2];
  TESSEL_ASSIGN_OR_RETURN(size_t got, ReadFully(*file, magic, 2));
  auto replay = std::make_unique<PrefixedStream>(std::string(magic, got), std::move(file));
  if (got == 2 && static_cast<unsigned char>(magic[0]) == 0x1f && static_cast<unsigned char>(magic[1]) == 0x8b) {
    auto gz = std::make_unique<GzipStream>(std::move(replay), path);
    TESSEL_RETURN_IF_ERROR(gz->Init());
    return std::unique_ptr<ByteStream>(std::move(gz));
  }
  return std::unique_ptr<ByteStream>(std::move(replay));
}

LineReader::LineReader(std::unique_ptr<ByteStream> stream, std::string name)
    : stream_(std::move(stream)), name_(std::move(name)), buf_(kReadChunk) {}

Result<bool> LineReader::Next(std::string_view* line) {
  while (true) {
    const char* start = buf_.data() + begin_;
    const void* nl = std::memchr(start, '\n', end_ - begin_);
    if (nl != nullptr || (eof_ && begin_ < end_)) {
      const char* stop = nl != nullptr ? static_cast<const char*>(nl) : buf_.data() + end_;
      size_t len = static_cast<size_t>(stop - start);
      begin_ += len + (nl != nullptr ? 1 : 0);
      if (len > 0 && start[len - 1] == '\r') --len;
      *line = std::string_view(start, len);
      ++line_number_;
      return true;
    }
    if (eof_) return false;
    // Keep the partial line, make room, read more.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ == buf_.size()) {
      if (buf_.size() >= kMaxLine) {
        return BadDataError(StrCat(name_, ":", line_number_ + 1, ": line longer than ", kMaxLine >> 20, " MiB"));
      }
      buf_.resize(buf_.size() * 2);
    }
    TESSEL_ASSIGN_OR_RETURN(size_t got, stream_->Read(buf_.data() + end_, buf_.size() - end_));
    if (got == 0) eof_ = true;
    end_ += got;
  }
}

Status ForEachLine(const std::string& path, const TextInputOptions& options, const LineVisitor& visit) {
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<ByteStream> stream, OpenByteStream(path));
  std::string head(kTarBlock, '\0');
  TESSEL_ASSIGN_OR_RETURN(size_t got, ReadFully(*stream, head.data(), kTarBlock));
  if (got < kTarBlock || !LooksLikeTar(head.data())) {
    head.resize(got);
    return VisitStream(std::make_unique<PrefixedStream>(std::move(head), std::move(stream)), path, visit);
  }
  std::vector<std::string> all_names;
  TESSEL_ASSIGN_OR_RETURN(std::vector<TarMember> members, ReadTar(*stream, head.data(), path, options, &all_names));
  for (const auto& wanted : options.members) {
    const bool found = std::any_of(members.begin(), members.end(),
                                   [&](const TarMember& m) { return m.name == wanted || BaseName(m.name) == wanted; });
    if (!found) {
      std::string list;
      for (const auto& n : all_names) list += (list.empty() ? "" : ", ") + n;
      return BadDataError(StrCat(path, ": archive has no member '", wanted, "' (members: ", list, ")"));
    }
  }
  if (members.empty()) {
    return BadDataError(StrCat(path, ": archive has no .txt or .tsv member (use --member to pick one)"));
  }
  for (auto& m : members) {
    const std::string name = StrCat(path, ":", m.name);
    TESSEL_RETURN_IF_ERROR(VisitStream(std::make_unique<StringStream>(std::move(m.data)), name, visit));
  }
  return Status::Ok();
}

std::string DescribeSourceFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return StrCat(path, " missing");
  std::string shown = path;
  if (char* real = ::realpath(path.c_str(), nullptr)) {
    shown = real;
    std::free(real);
  }
  return StrCat(shown, " size=", st.st_size, " mtime=", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

}  // namespace tessel::storage
