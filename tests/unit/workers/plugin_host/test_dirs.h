// Paths of the plugins the loader tests use, and a private temporary directory.
#pragma once

#include <string>

namespace tessel::workers::testing {

std::string NnPlugin();                              // build/plugins/libtessel_nn.so
std::string RgnnPlugin();                            // build/plugins/libtessel_rgnn.so
std::string GatherPlugin();                          // build/plugins/libtessel_gather.so
std::string LlmPlugin();                             // build/plugins/libtessel_llm.so
std::string ExamplePlugin();                         // build/example-plugin/libtessel_example.so
std::string TestPlugin(const std::string& variant);  // e.g. "wrong_abi_major" -> .../libtest_plugin_wrong_abi_major.so

// A fresh directory (mode 0700) under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // Copies `file` into the directory under `name` and returns the new path.
  std::string Copy(const std::string& file, const std::string& name) const;

 private:
  std::string path_;
};

}  // namespace tessel::workers::testing
