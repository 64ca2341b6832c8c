// Creating files and directories so that nothing another user plants can redirect a write.
//
// Every file Tessel creates goes through this header: a new file is opened O_CREAT | O_EXCL | O_NOFOLLOW
// (a name that already exists, a symbolic link included, is refused, never truncated or followed); a file
// that replaces an earlier one is written under a fresh temporary name beside it and renamed into place,
// and a destination that is a symbolic link is refused rather than replaced. The directories these files go
// into are made private: created with mode 0700, and when they already exist, checked to be directories
// owned by this user that neither the group nor others can write.
//
// Thread safety: every function may be called from any thread. Failure: a kStorage Status (exit 6) whose
// message names the path and the cause in the user's words; nothing is left behind on a failed write.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "core/file_descriptor.h"
#include "core/status.h"

namespace tessel {

// Creates `dir` and any missing parents (each new one with mode 0700), or checks the one that is there: a
// directory (a symbolic link to one is followed: a user's /scratch may be a link), owned by the effective
// user, not writable by group or others. `what` names the setting or role in messages ("spill.dir").
Status EnsurePrivateDirectory(const std::string& dir, std::string_view what);

// Opens a new file for writing: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC plus `extra_flags`
// (e.g. O_RDWR in place of O_WRONLY is not needed: pass O_RDWR and it replaces O_WRONLY). The caller owns
// the descriptor. An existing name is refused, naming what is there ("a symbolic link to /etc/passwd").
Result<FileDescriptor> CreateNewFile(const std::string& path, mode_t mode = 0644, int extra_flags = 0);

// A name beside `path` that no other process or thread of this host uses at the same time:
// "PATH.tmp-PID-N". Callers create it with CreateNewFile (or H5F_ACC_EXCL) and rename it over `path`.
std::string TemporaryPathFor(const std::string& path);

// Refuses to replace `path` when it is a symbolic link (rename would replace the link, but a planted link
// means someone else can write here, and a later reader would follow it). OK when `path` is absent or a
// regular file or directory.
Status CheckNotSymlink(const std::string& path);

// Whether a replaced file is fsynced before the rename. kSynced survives a crash of the host; kVolatile is
// for a file rewritten every second whose only reader is live (the status file's beats): on ext4 an fsync
// commits the journal, which first writes out every other file's dirty data (a checkpoint being saved),
// and so could block its writer for seconds.
enum class Durability { kSynced, kVolatile };

// Writes `contents` to a new temporary beside `path`, fsyncs it (kSynced) and renames it over `path`.
// `path` may exist (it is replaced whole; a reader sees the old contents or the new, never a mix) unless
// it is a symbolic link.
Status WriteFileAtomically(const std::string& path, std::string_view contents, mode_t mode = 0644,
                           Durability durability = Durability::kSynced);

// Renders errno for a failed create of `path`, naming a symbolic link's target or an existing entry's kind
// when errno is EEXIST or ELOOP.
std::string DescribeCreateFailure(const std::string& path, int err);

}  // namespace tessel
