#include "test_dirs.h"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <vector>

namespace tessel::workers::testing {

namespace fs = std::filesystem;

std::string NnPlugin() { return std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_nn.so"; }
std::string RgnnPlugin() { return std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_rgnn.so"; }
std::string GatherPlugin() { return std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_gather.so"; }
std::string LlmPlugin() { return std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_llm.so"; }
std::string ExamplePlugin() { return std::string(TESSEL_BINARY_DIR) + "/example-plugin/libtessel_example.so"; }
std::string TestPlugin(const std::string& variant) {
  return std::string(TEST_PLUGIN_DIR) + "/libtest_plugin_" + variant + ".so";
}

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "tessel-plugin-test-XXXXXX").string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buffer.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::permissions(path_, fs::perms::owner_all, ec);
  fs::remove_all(path_, ec);
}

std::string TempDir::Copy(const std::string& file, const std::string& name) const {
  const fs::path target = fs::path(path_) / name;
  fs::copy_file(file, target, fs::copy_options::overwrite_existing);
  return target.string();
}

}  // namespace tessel::workers::testing
