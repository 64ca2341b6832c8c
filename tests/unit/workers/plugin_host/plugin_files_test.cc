// Finding plugin files, and the permission checks done before anything is loaded.
#include "workers/plugin_host/plugin_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "test_dirs.h"

namespace tessel::workers {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

TEST(PluginFiles, FindsOnlyLibtesselSharedObjectsSortedByName) {
  TempDir dir;
  for (const char* name :
       {"libtessel_b.so", "libtessel_a.so", "libtessel_.so", "libfoo.so", "libtessel_c.so.1", "README.md"}) {
    dir.Copy(testing::ExamplePlugin(), name);
  }
  Result<std::vector<std::string>> files = FindPluginFiles(dir.path());
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(*files, (std::vector<std::string>{dir.path() + "/libtessel_a.so", dir.path() + "/libtessel_b.so"}));
}

TEST(PluginFiles, MissingDirectoryIsAPluginError) {
  Result<std::vector<std::string>> files = FindPluginFiles("/nonexistent/dir");
  EXPECT_EQ(files.status().code(), Code::kPlugin);
}

TEST(PluginFiles, CheckResolvesSymlinksAndChecksTheTargetsDirectoryToo) {
  TempDir real, links;
  const std::string target = real.Copy(testing::ExamplePlugin(), "libtessel_example.so");
  const std::string link = links.path() + "/libtessel_link.so";
  std::filesystem::create_symlink(target, link);
  Result<SafePluginFile> ok = CheckPluginFile(link);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->canonical_path, std::filesystem::canonical(target).string());
  ASSERT_EQ(chmod(real.path().c_str(), 0777), 0);
  Result<SafePluginFile> refused = CheckPluginFile(link);
  EXPECT_EQ(refused.status().code(), Code::kPlugin);
  EXPECT_THAT(refused.status().message(), HasSubstr("world-writable"));
}

TEST(PluginFiles, DirectoryIsNotAPluginFile) {
  TempDir dir;
  Result<SafePluginFile> st = CheckPluginFile(dir.path());
  EXPECT_THAT(st.status().message(), HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace tessel::workers
