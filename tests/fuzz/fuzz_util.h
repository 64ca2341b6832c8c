// What the libFuzzer targets of tests/fuzz share: their scratch files and the --write-seeds flag.
// Each target is one translation unit; everything here is inline. Thread safety: libFuzzer's one thread.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace tessel::fuzz {

// Every ScratchPath handed out, removed when the process exits.
inline std::vector<std::string>& ScratchPaths() {
  static std::vector<std::string>* paths = [] {
    auto* v = new std::vector<std::string>();  // never freed: the exit handler reads it
    std::atexit([] {
      for (const std::string& p : ScratchPaths()) std::remove(p.c_str());
    });
    return v;
  }();
  return *paths;
}

// A file of this process under $TMPDIR, "TARGET-PID-NAME" (NAME with its extension), reused by every run
// of the target and removed when the process exits.
inline std::string ScratchPath(const std::string& target, const std::string& name) {
  const std::string path =
      (std::filesystem::temp_directory_path() / (target + "-" + std::to_string(::getpid()) + "-" + name)).string();
  std::vector<std::string>& paths = ScratchPaths();
  if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
  return path;
}

// Called from LLVMFuzzerInitialize: `TARGET_fuzz --write-seeds=DIR` calls write(DIR) and exits 0
// (tests/fuzz/README.md says how each corpus was made).
inline void WriteSeedsIfAsked(int argc, char** argv, void (*write)(const std::string& dir)) {
  constexpr const char kFlag[] = "--write-seeds=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kFlag, sizeof(kFlag) - 1) == 0) {
      write(argv[i] + sizeof(kFlag) - 1);
      std::exit(0);
    }
  }
}

}  // namespace tessel::fuzz
