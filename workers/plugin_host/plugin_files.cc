#include "workers/plugin_host/plugin_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "core/logging.h"
#include "workers/plugin_host/elf_check.h"

namespace tessel::workers {
namespace {

namespace fs = std::filesystem;

Status CheckDirectory(const fs::path& dir, const std::string& plugin) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0)
    return PluginError(StrCat("plugin ", plugin, ": cannot stat its directory ", dir.string()));
  if ((st.st_mode & S_IWOTH) != 0) {
    return PluginError(StrCat("refusing plugin ", plugin, ": its directory ", dir.string(),
                              " is world-writable (chmod o-w it, or move the plugin)"));
  }
  return Status::Ok();
}

fs::path ParentOf(const fs::path& path) {
  fs::path parent = path.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

}  // namespace

Result<SafePluginFile> CheckPluginFile(const std::string& path) {
  std::error_code ec;
  const fs::path given(path);
  const fs::path canonical = fs::canonical(given, ec);
  if (ec) return PluginError(StrCat("cannot load plugin ", path, ": ", ec.message()));
  struct stat st {};
  if (stat(canonical.c_str(), &st) != 0) return PluginError(StrCat("cannot load plugin ", path, ": cannot stat it"));
  if (!S_ISREG(st.st_mode)) return PluginError(StrCat("cannot load plugin ", path, ": not a regular file"));
  if ((st.st_mode & S_IWOTH) != 0) {
    return PluginError(StrCat("refusing plugin ", path, ": the file is world-writable (chmod o-w it)"));
  }
  TESSEL_RETURN_IF_ERROR(CheckDirectory(ParentOf(fs::absolute(given, ec)), path));
  TESSEL_RETURN_IF_ERROR(CheckDirectory(ParentOf(canonical), path));
  TESSEL_RETURN_IF_ERROR(CheckElfFile(canonical.string()));
  return SafePluginFile{canonical.string(),
                        FileId{static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino)}};
}

std::vector<std::string> DefaultPluginDirs() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const fs::path prefix = exe.parent_path().parent_path();
  std::vector<std::string> dirs;
  for (const fs::path& dir : {prefix / "plugins", prefix / "lib" / "tessel" / "plugins"}) {
    if (fs::is_directory(dir, ec)) dirs.push_back(dir.lexically_normal().string());
  }
  return dirs;
}

Result<std::vector<std::string>> FindPluginFiles(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return PluginError(StrCat("plugin directory ", dir, " does not exist or is not a directory"));
  std::vector<std::string> files;
  fs::directory_iterator it(dir, ec);
  if (ec) return PluginError(StrCat("cannot list plugin directory ", dir, ": ", ec.message()));
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "libtessel_", kSuffix = ".so";
    if (name.size() > kPrefix.size() + kSuffix.size() && name.starts_with(kPrefix) && name.ends_with(kSuffix)) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace tessel::workers
