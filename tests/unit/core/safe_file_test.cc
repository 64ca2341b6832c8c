#include "core/safe_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class SafeFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessel-safe-file-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    victim_ = root_ + "/victim.txt";
    std::ofstream(victim_) << "precious\n";
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string Victim() const {
    std::ifstream in(victim_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string root_, victim_;
};

TEST_F(SafeFileTest, CreateNewFileRefusesASymlinkAndLeavesItsTargetAlone) {
  const std::string path = root_ + "/planted";
  ASSERT_EQ(::symlink(victim_.c_str(), path.c_str()), 0);
  auto fd = CreateNewFile(path);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), Code::kStorage);
  EXPECT_THAT(fd.status().message(), HasSubstr(path));
  EXPECT_THAT(fd.status().message(), HasSubstr("a symbolic link to " + victim_));
  EXPECT_EQ(Victim(), "precious\n");
}

TEST_F(SafeFileTest, CreateNewFileRefusesADanglingSymlink) {
  const std::string path = root_ + "/dangling";
  const std::string target = root_ + "/not-yet";
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  EXPECT_FALSE(CreateNewFile(path).ok());
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(SafeFileTest, CreateNewFileRefusesAnExistingFile) {
  auto fd = CreateNewFile(victim_);
  ASSERT_FALSE(fd.ok());
  EXPECT_THAT(fd.status().message(), HasSubstr("a file of 9 bytes"));
  EXPECT_EQ(Victim(), "precious\n");
}

TEST_F(SafeFileTest, CreateNewFileMakesAFileWithTheMode) {
  const std::string path = root_ + "/new";
  auto fd = CreateNewFile(path, 0600);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(SafeFileTest, WriteFileAtomicallyReplacesAFileButRefusesALink) {
  const std::string path = root_ + "/summary.json";
  ASSERT_TRUE(WriteFileAtomically(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "two").ok());
  std::ifstream in(path);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "two");
  const std::string link = root_ + "/latest";
  ASSERT_EQ(::symlink(victim_.c_str(), link.c_str()), 0);
  Status st = WriteFileAtomically(link, "step-9\n");
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_THAT(st.message(), HasSubstr(link));
  EXPECT_EQ(Victim(), "precious\n");
  // No temporary is left beside it.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(root_))
    entries += e.path().filename().string().find(".tmp-") != std::string::npos;
  EXPECT_EQ(entries, 0);
}

TEST_F(SafeFileTest, TemporaryNamesDiffer) { EXPECT_NE(TemporaryPathFor("/x/y"), TemporaryPathFor("/x/y")); }

TEST_F(SafeFileTest, EnsurePrivateDirectoryCreatesEachNewLevel0700) {
  const std::string dir = root_ + "/a/b/c";
  ASSERT_TRUE(EnsurePrivateDirectory(dir, "spill.dir").ok());
  for (const std::string& d : {root_ + "/a", root_ + "/a/b", dir}) {
    struct stat st {};
    ASSERT_EQ(::stat(d.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
  }
  EXPECT_TRUE(EnsurePrivateDirectory(dir, "spill.dir").ok());  // and accepts it again
}

TEST_F(SafeFileTest, EnsurePrivateDirectoryRefusesAGroupOrWorldWritableOne) {
  const std::string dir = root_ + "/shared";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 01777), 0);
  Status st = EnsurePrivateDirectory(dir, "spill.dir");
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_THAT(st.message(), HasSubstr("spill.dir"));
  EXPECT_THAT(st.message(), HasSubstr("every user"));
  ASSERT_EQ(::chmod(dir.c_str(), 0770), 0);
  EXPECT_THAT(EnsurePrivateDirectory(dir, "spill.dir").message(), HasSubstr("its group"));
}

TEST_F(SafeFileTest, EnsurePrivateDirectoryRefusesAFile) {
  Status st = EnsurePrivateDirectory(victim_, "checkpoint.dir");
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_THAT(st.message(), HasSubstr("not a directory"));
}

TEST_F(SafeFileTest, EnsurePrivateDirectoryRefusesAnotherUsersDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";  // CI runs as root
  const std::string dir = root_ + "/theirs";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), 12345, 12345), 0);
  Status st = EnsurePrivateDirectory(dir, "spill.dir");
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_THAT(st.message(), HasSubstr("belongs to user id 12345"));
}

TEST_F(SafeFileTest, EnsurePrivateDirectoryNamesAnOverlongPath) {
  Status st = EnsurePrivateDirectory(root_ + "/" + std::string(5000, 'x'), "checkpoint.dir");
  EXPECT_EQ(st.code(), Code::kStorage);
  EXPECT_THAT(st.message(), HasSubstr("5"));
  EXPECT_THAT(st.message(), HasSubstr("characters"));
}

}  // namespace
}  // namespace tessel
