#include "core/safe_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/logging.h"

namespace tessel {
namespace {

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// What is at `path`, in words, for a message about a name that was expected to be free.
std::string DescribeEntry(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "an entry that vanished";
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    if (n < 0) return "a symbolic link";
    target[n] = '\0';
    return StrCat("a symbolic link to ", target);
  }
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISREG(st.st_mode)) return StrCat("a file of ", st.st_size, " bytes");
  return "a special file";
}

// Creates one directory component; EEXIST is fine (checked by the caller).
int MakeOne(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) return 0;
  return errno;
}

}  // namespace

std::string DescribeCreateFailure(const std::string& path, int err) {
  if (err == EEXIST || err == ELOOP) {
    return StrCat(path, ": already exists (", DescribeEntry(path),
                  "); Tessel creates its files only under new names and never writes through a link");
  }
  if (err == ENAMETOOLONG)
    return StrCat(path, ": the path is too long for this file system (", path.size(), " characters)");
  return StrCat(path, ": ", std::strerror(err));
}

Status EnsurePrivateDirectory(const std::string& dir, std::string_view what) {
  if (dir.empty()) return StorageError(StrCat(what, ": the directory is empty"));
  if (dir.size() >= PATH_MAX) {
    return StorageError(
        StrCat(what, ": the directory path is ", dir.size(), " characters, more than this system's ", PATH_MAX - 1));
  }
  // Parents first, each new one 0700; an existing parent is left as it is (/tmp, a home directory).
  for (size_t slash = dir.find('/', 1); slash != std::string::npos; slash = dir.find('/', slash + 1)) {
    if (const int err = MakeOne(dir.substr(0, slash)); err != 0) {
      return StorageError(StrCat(what, ": cannot create ", dir.substr(0, slash), ": ", std::strerror(err)));
    }
  }
  if (const int err = MakeOne(dir); err != 0) {
    return StorageError(StrCat(what, ": cannot create ", dir, ": ", std::strerror(err)));
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return StorageError(StrCat(what, ": cannot examine ", dir, ": ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) return StorageError(StrCat(what, ": ", dir, " is not a directory"));
  if (st.st_uid != ::geteuid()) {
    return StorageError(StrCat(what, ": ", dir, " belongs to user id ", st.st_uid, ", not to this user (", ::geteuid(),
                               "): another user could replace the files Tessel writes there; choose a directory of "
                               "your own"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return StorageError(StrCat(what, ": ", dir, " is writable by ",
                               (st.st_mode & S_IWOTH) != 0 ? "every user" : "its group", " (mode ",
                               ModeText(st.st_mode),
                               "): another user could plant links where Tessel writes; run chmod go-w on it or "
                               "choose a directory of your own"));
  }
  return Status::Ok();
}

Result<FileDescriptor> CreateNewFile(const std::string& path, mode_t mode, int extra_flags) {
  int access = O_WRONLY;
  if ((extra_flags & O_ACCMODE) == O_RDWR) access = O_RDWR;
  const int flags = access | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | (extra_flags & ~O_ACCMODE);
  const int fd = ::open(path.c_str(), flags, mode);
  if (fd < 0) return StorageError(DescribeCreateFailure(path, errno));
  return FileDescriptor(fd);
}

std::string TemporaryPathFor(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return StrCat(path, ".tmp-", ::getpid(), "-", counter.fetch_add(1));
}

Status CheckNotSymlink(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return Status::Ok();
  if (S_ISLNK(st.st_mode)) {
    return StorageError(StrCat(path, " is ", DescribeEntry(path),
                               ": Tessel never replaces or writes through a link it did not make; remove it"));
  }
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view contents, mode_t mode, Durability durability) {
  TESSEL_RETURN_IF_ERROR(CheckNotSymlink(path));
  const std::string tmp = TemporaryPathFor(path);
  TESSEL_ASSIGN_OR_RETURN(FileDescriptor fd, CreateNewFile(tmp, mode));
  const auto fail = [&](const std::string& cause) {
    ::unlink(tmp.c_str());
    return StorageError(StrCat("cannot write ", path, ": ", cause));
  };
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (durability == Durability::kSynced && ::fsync(fd.get()) != 0) return fail(std::strerror(errno));
  if (fd.Close() != 0) return fail(std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return fail(StrCat("rename from ", tmp, ": ", std::strerror(errno)));
  return Status::Ok();
}

}  // namespace tessel
