#include "storage/line_reader.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "core/file_descriptor.h"
#include "core/logging.h"

namespace tessel::storage {
namespace {

constexpr size_t kReadChunk = 1 << 18;
constexpr size_t kMaxLine = size_t{64} << 20;

struct ArchiveFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, ArchiveFree>;

// libarchive's last error on `a` as a Status naming `where`: an OS error while reading (EIO, ...) is
// kStorage; anything the data got wrong is kBadData, "WHERE: truncated gzip data (libarchive's words,
// after N bytes of the file)". `bad_header` says libarchive rejected a tar header (ARCHIVE_RETRY).
Status ArchiveError(archive* a, const std::string& where, bool bad_header = false) {
  const int err = archive_errno(a);
  const std::string detail = archive_error_string(a) != nullptr ? archive_error_string(a) : "";
  if (err == ENOMEM) return StorageError(StrCat(where, ": out of memory reading it (", detail, ")"));
  // libarchive reports what the data got wrong as EILSEQ (its ARCHIVE_ERRNO_FILE_FORMAT), EINVAL or -1.
  if (err > 0 && err != EILSEQ && err != EINVAL) {
    return StorageError(StrCat(where, ": read failed: ", std::strerror(err)));
  }
  // Which layer failed: a compression filter libarchive names, else the tar archive. libarchive gives no
  // reason when a gzip trailer is cut short.
  std::string lower = detail;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool tar = (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_TAR;
  std::string layer = tar ? "tar archive" : "data";
  for (const char* filter : {"gzip", "bzip2", "xz", "zstd"}) {
    if (lower.find(filter) != std::string::npos) layer = StrCat(filter, " data");
  }
  if (detail.empty() && archive_filter_count(a) > 1) layer = StrCat(archive_filter_name(a, 0), " data");
  const std::string what = bad_header                                     ? "corrupt tar header"
                           : lower.find("truncated") != std::string::npos ? "truncated " + layer
                           : detail.empty()                               ? "truncated or corrupt " + layer
                                                                          : "corrupt " + layer;
  const int64_t read = archive_filter_bytes(a, -1);
  const std::string position = read >= 0 ? StrCat("after ", read, " bytes of the file") : "";
  const std::string said = lower == what ? "" : detail;  // "Truncated tar archive" says nothing more
  const std::string why = said.empty() ? position : position.empty() ? said : StrCat(said, ", ", position);
  return BadDataError(why.empty() ? StrCat(where, ": ", what) : StrCat(where, ": ", what, " (", why, ")"));
}

// Splits bytes fed in chunks into lines and visits them. Lines wholly inside a chunk are not copied.
class LineSplitter {
 public:
  LineSplitter(std::string source, const LineVisitor& visit) : source_(std::move(source)), visit_(visit) {}

  Status Feed(std::string_view chunk) {
    while (!chunk.empty()) {
      const size_t nl = chunk.find('\n');
      const std::string_view piece = chunk.substr(0, nl);
      if (partial_.size() + piece.size() > kMaxLine) {
        return BadDataError(StrCat(source_, ":", line_number_ + 1, ": line longer than ", kMaxLine >> 20, " MiB"));
      }
      if (nl == std::string_view::npos) {
        partial_.append(piece);
        return Status::Ok();
      }
      if (partial_.empty()) {
        TESSEL_RETURN_IF_ERROR(Visit(piece));
      } else {
        partial_.append(piece);
        TESSEL_RETURN_IF_ERROR(Visit(partial_));
        partial_.clear();
      }
      chunk.remove_prefix(nl + 1);
    }
    return Status::Ok();
  }

  // The last line, when the input does not end with a newline.
  Status Finish() { return partial_.empty() ? Status::Ok() : Visit(std::exchange(partial_, std::string())); }

 private:
  Status Visit(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return visit_(source_, ++line_number_, line);
  }

  std::string source_;
  const LineVisitor& visit_;
  std::string partial_;
  int64_t line_number_ = 0;
};

// Passes the current entry's data to `take`, block by block, straight from libarchive's buffers; the
// holes of a sparse tar member, trailing ones included, come as zeros.
Status ForEachChunk(archive* a, archive_entry* entry, const std::string& source,
                    const std::function<Status(std::string_view)>& take) {
  static const std::string kZeros(kReadChunk, '\0');
  la_int64_t at = 0;
  auto zeros_until = [&](la_int64_t end) -> Status {
    for (; at < end; at += std::min<la_int64_t>(end - at, kZeros.size())) {
      TESSEL_RETURN_IF_ERROR(take(std::string_view(kZeros.data(), std::min<la_int64_t>(end - at, kZeros.size()))));
    }
    return Status::Ok();
  };
  while (true) {
    const void* block = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    const int rc = archive_read_data_block(a, &block, &size, &offset);
    if (rc == ARCHIVE_EOF) return archive_entry_size_is_set(entry) ? zeros_until(archive_entry_size(entry)) : Status();
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) return ArchiveError(a, source);
    TESSEL_RETURN_IF_ERROR(zeros_until(offset));
    TESSEL_RETURN_IF_ERROR(take(std::string_view(static_cast<const char*>(block), size)));
    at = offset + static_cast<la_int64_t>(size);
  }
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view BaseName(std::string_view s) {
  const size_t slash = s.rfind('/');
  return slash == std::string_view::npos ? s : s.substr(slash + 1);
}

bool Wanted(std::string_view name, const TextInputOptions& options) {
  if (options.members.empty()) return EndsWith(name, ".txt") || EndsWith(name, ".tsv");
  return std::any_of(options.members.begin(), options.members.end(),
                     [&](const std::string& m) { return name == m || BaseName(name) == m; });
}

struct Member {
  std::string name;
  std::string data;
};

// Reads the wanted regular-file members of the tar archive whose first header `entry` is, and visits
// their lines in member-name order.
Status VisitTar(archive* a, archive_entry* entry, const std::string& path, const TextInputOptions& options,
                const LineVisitor& visit) {
  std::vector<Member> members;
  std::vector<std::string> all_names;
  while (true) {
    const char* pathname = archive_entry_pathname(entry);
    const std::string name = pathname != nullptr ? pathname : "";
    const bool regular = archive_entry_filetype(entry) == AE_IFREG && archive_entry_hardlink(entry) == nullptr;
    if (regular) all_names.push_back(name);
    if (regular && Wanted(name, options)) {
      Member& m = members.emplace_back(Member{name, {}});
      const std::string source = StrCat(path, ":", name);
      try {
        m.data.reserve(static_cast<size_t>(std::max<la_int64_t>(archive_entry_size(entry), 0)));
      } catch (const std::exception&) {  // bad_alloc, length_error
        return StorageError(StrCat(source, ": out of memory buffering ", archive_entry_size(entry), " bytes"));
      }
      TESSEL_RETURN_IF_ERROR(ForEachChunk(a, entry, source, [&](std::string_view chunk) {
        m.data.append(chunk);
        return Status::Ok();
      }));
    }
    const int rc = archive_read_next_header(a, &entry);  // skips the data not read
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) return ArchiveError(a, path, /*bad_header=*/rc == ARCHIVE_RETRY);
  }
  for (const std::string& wanted : options.members) {
    const bool found = std::any_of(members.begin(), members.end(),
                                   [&](const Member& m) { return m.name == wanted || BaseName(m.name) == wanted; });
    if (!found) {
      std::string list;
      for (const std::string& n : all_names) list += (list.empty() ? "" : ", ") + n;
      return BadDataError(StrCat(path, ": archive has no member '", wanted, "' (members: ", list, ")"));
    }
  }
  if (members.empty()) {
    return BadDataError(StrCat(path, ": archive has no .txt or .tsv member (use --member to pick one)"));
  }
  std::sort(members.begin(), members.end(), [](const Member& x, const Member& y) { return x.name < y.name; });
  for (Member& m : members) {
    LineSplitter split(StrCat(path, ":", m.name), visit);
    TESSEL_RETURN_IF_ERROR(split.Feed(m.data));
    TESSEL_RETURN_IF_ERROR(split.Finish());
    std::string().swap(m.data);
  }
  return Status::Ok();
}

}  // namespace

Status ForEachLine(const std::string& path, const TextInputOptions& options, const LineVisitor& visit) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return BadDataError(StrCat(path, ": cannot open: ", std::strerror(errno)));
  // libarchive recognises gzip only from a whole gzip header; a file cut off inside it would read as text.
  unsigned char magic[2] = {0, 0};
  const bool gzip_magic = ::pread(fd.get(), magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  ArchivePtr a(archive_read_new());  // destroyed before fd: archive_read_free does not close it
  if (a == nullptr) return StorageError(StrCat(path, ": out of memory (libarchive)"));
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_bzip2(a.get());
  archive_read_support_filter_xz(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_empty(a.get());
  archive_read_support_format_raw(a.get());  // anything that is not a tar archive: the bytes themselves
  if (archive_read_open_fd(a.get(), fd.get(), kReadChunk) != ARCHIVE_OK) return ArchiveError(a.get(), path);
  if (gzip_magic && archive_filter_code(a.get(), 0) != ARCHIVE_FILTER_GZIP) {
    return BadDataError(StrCat(path, ": truncated gzip data (the file ends inside the gzip header)"));
  }
  archive_entry* entry = nullptr;
  const int rc = archive_read_next_header(a.get(), &entry);
  if (rc == ARCHIVE_EOF) return Status::Ok();  // an empty file
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) return ArchiveError(a.get(), path);
  if (archive_format(a.get()) != ARCHIVE_FORMAT_RAW) return VisitTar(a.get(), entry, path, options, visit);
  // libarchive reads an archive whose first tar header it rejects (bad checksum, bad number field) as
  // plain bytes; a ustar magic in a first block that holds NULs means a corrupt archive, not text.
  LineSplitter split(path, visit);
  bool first = true;
  TESSEL_RETURN_IF_ERROR(ForEachChunk(a.get(), entry, path, [&](std::string_view chunk) {
    if (std::exchange(first, false) && chunk.size() >= 512 && chunk.substr(257, 5) == "ustar" &&
        chunk.substr(0, 512).find('\0') != std::string_view::npos) {
      return BadDataError(StrCat(path, ": corrupt tar header (the first one: bad checksum or field)"));
    }
    return split.Feed(chunk);
  }));
  return split.Finish();
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
