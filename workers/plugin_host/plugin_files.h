// Where plugins are found, and whether a plugin file is safe to load.
// Thread safety: all functions may be called from any thread. Failure: PluginError naming the path.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tessel::workers {

// The identity of a file (device and inode), so the same plugin is not loaded twice under two names.
struct FileId {
  unsigned long long device = 0;
  unsigned long long inode = 0;
  bool operator==(const FileId&) const = default;
};

struct SafePluginFile {
  std::string canonical_path;  // symlinks resolved; always absolute
  FileId id;
};

// Refuses a path that does not exist, is not a regular file, is world-writable, or lies in a
// world-writable directory (the directory of the path as given and of its resolved target): anyone
// could swap the code Tessel is about to run. Then refuses a file that is not a whole ELF shared object
// for this host (CheckElfFile), which dlopen would crash on. A window remains between this check and dlopen; it is
// closed by keeping plugin directories unwritable, which is what the check enforces.
Result<SafePluginFile> CheckPluginFile(const std::string& path);

// The default plugin directories, in search order: <dir of the executable>/../plugins (the build
// tree puts bin/tessel and plugins/ side by side), then <dir of the executable>/../lib/tessel/plugins
// (the install layout). Only directories that exist are returned.
std::vector<std::string> DefaultPluginDirs();

// Every file named libtessel_*.so directly in `dir`, sorted by name. Fails when `dir` is not a
// readable directory.
Result<std::vector<std::string>> FindPluginFiles(const std::string& dir);

}  // namespace tessel::workers
