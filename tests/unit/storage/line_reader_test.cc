// Tests for storage/line_reader.cc: plain, gzip and tar(.gz) inputs, line splitting and error paths.
#include "storage/line_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>

#include "tests/unit/storage/test_util.h"

namespace tessel::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::WriteText;

struct Line {
  std::string source;
  int64_t number;
  std::string text;
  bool operator==(const Line& o) const { return source == o.source && number == o.number && text == o.text; }
};
std::ostream& operator<<(std::ostream& os, const Line& l) {
  return os << l.source << ":" << l.number << ":[" << l.text << "]";
}

Result<std::vector<Line>> ReadAll(const std::string& path, TextInputOptions options = {}) {
  std::vector<Line> lines;
  Status st = ForEachLine(path, options, [&](const std::string& source, int64_t n, std::string_view text) {
    lines.push_back({source, n, std::string(text)});
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return lines;
}

void WriteGzip(const std::string& path, const std::string& data, const char* mode = "wb") {
  gzFile f = gzopen(path.c_str(), mode);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, data.data(), static_cast<unsigned>(data.size())), static_cast<int>(data.size()));
  gzclose(f);
}

TEST(LineReader, PlainFileWithCrlfAndNoFinalNewline) {
  ScratchDir dir;
  WriteText(dir.File("a.txt"), "one\r\ntwo\n\nthree");
  auto lines = ReadAll(dir.File("a.txt"));
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  const std::string f = dir.File("a.txt");
  EXPECT_THAT(*lines, ElementsAre(Line{f, 1, "one"}, Line{f, 2, "two"}, Line{f, 3, ""}, Line{f, 4, "three"}));
}

TEST(LineReader, EmptyFileHasNoLines) {
  ScratchDir dir;
  WriteText(dir.File("e.txt"), "");
  auto lines = ReadAll(dir.File("e.txt"));
  ASSERT_TRUE(lines.ok());
  EXPECT_TRUE(lines->empty());
}

TEST(LineReader, LongLinesSpanningBuffersAreWhole) {
  ScratchDir dir;
  const std::string long_line(3 * 1000 * 1000, 'x');
  std::string text;
  for (int i = 0; i < 3; ++i) text += long_line + "\n";
  WriteText(dir.File("long.txt"), text);
  auto lines = ReadAll(dir.File("long.txt"));
  ASSERT_TRUE(lines.ok());
  ASSERT_EQ(lines->size(), 3u);
  for (const auto& l : *lines) EXPECT_EQ(l.text.size(), long_line.size());
}

TEST(LineReader, GzipIsDetectedByMagicNotName) {
  ScratchDir dir;
  WriteGzip(dir.File("data.bin"), "alpha\nbeta\n");
  auto lines = ReadAll(dir.File("data.bin"));
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[1].text, "beta");
}

TEST(LineReader, ConcatenatedGzipMembersReadAsOneStream) {
  ScratchDir dir;
  WriteGzip(dir.File("a.gz"), "first\nsec");
  WriteGzip(dir.File("b.gz"), "ond\nthird\n");
  WriteText(dir.File("ab.gz"), testing::ReadBytes(dir.File("a.gz")) + testing::ReadBytes(dir.File("b.gz")));
  auto lines = ReadAll(dir.File("ab.gz"));
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  ASSERT_EQ(lines->size(), 3u);
  EXPECT_EQ((*lines)[1].text, "second");
}

TEST(LineReader, TruncatedGzipIsBadDataNamingTheFile) {
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "line number " + std::to_string(i) + "\n";
  WriteGzip(dir.File("t.gz"), text);
  const std::string bytes = testing::ReadBytes(dir.File("t.gz"));
  for (size_t keep : {bytes.size() / 2, bytes.size() - 4, size_t{12}}) {
    WriteText(dir.File("t.gz"), bytes.substr(0, keep));
    auto lines = ReadAll(dir.File("t.gz"));
    ASSERT_FALSE(lines.ok()) << "kept " << keep;
    EXPECT_EQ(lines.status().code(), Code::kBadData);
    EXPECT_THAT(lines.status().message(), HasSubstr(dir.File("t.gz") + ": truncated gzip data"));
  }
}

TEST(LineReader, CorruptGzipIsBadData) {
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "row " + std::to_string(i * 7919 % 10007) + "\n";
  WriteGzip(dir.File("c.gz"), text);
  std::string bytes = testing::ReadBytes(dir.File("c.gz"));
  for (size_t i = 40; i < 80; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  WriteText(dir.File("c.gz"), bytes);
  auto lines = ReadAll(dir.File("c.gz"));
  ASSERT_FALSE(lines.ok());
  EXPECT_EQ(lines.status().code(), Code::kBadData);
  EXPECT_THAT(lines.status().message(), HasSubstr(dir.File("c.gz")));
}

TEST(LineReader, MissingFileIsBadData) {
  auto lines = ReadAll("/nonexistent/file.txt");
  ASSERT_FALSE(lines.ok());
  EXPECT_EQ(lines.status().code(), Code::kBadData);
  EXPECT_THAT(lines.status().message(), HasSubstr("/nonexistent/file.txt: cannot open"));
}

class TarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() / "src" / "sub");
    WriteText(dir_.File("src/valid.txt"), "v1\r\nv2\r\n");
    WriteText(dir_.File("src/train.txt"), "t1\nt2");
    WriteText(dir_.File("src/notes.md"), "not read\n");
    WriteText(dir_.File("src/sub/extra.tsv"), "x\n");
    // Members deliberately out of name order; GNU tar with a long name exercises the 'L' records too.
    const std::string long_name = "sub/" + std::string(120, 'n') + ".tsv";
    WriteText(dir_.File("src/" + long_name), "long\n");
    const std::string cmd = "cd '" + dir_.File("src") + "' && tar -cf ../a.tar valid.txt train.txt notes.md " +
                            "sub/extra.tsv " + long_name + " && tar -czf ../a.tar.gz valid.txt train.txt notes.md " +
                            "sub/extra.tsv";
    have_tar_ = std::system(cmd.c_str()) == 0;
  }
  ScratchDir dir_;
  bool have_tar_ = false;
};

TEST_F(TarTest, TarGzMembersAreReadInSortedNameOrder) {
  if (!have_tar_) GTEST_SKIP() << "no tar command on this machine";
  auto lines = ReadAll(dir_.File("a.tar.gz"));
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  const std::string a = dir_.File("a.tar.gz");
  EXPECT_THAT(*lines, ElementsAre(Line{a + ":sub/extra.tsv", 1, "x"}, Line{a + ":train.txt", 1, "t1"},
                                  Line{a + ":train.txt", 2, "t2"}, Line{a + ":valid.txt", 1, "v1"},
                                  Line{a + ":valid.txt", 2, "v2"}));
}

TEST_F(TarTest, PlainTarWithLongNamesIsRead) {
  if (!have_tar_) GTEST_SKIP() << "no tar command on this machine";
  auto lines = ReadAll(dir_.File("a.tar"));
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  ASSERT_EQ(lines->size(), 6u);
  EXPECT_EQ((*lines)[1].source, dir_.File("a.tar") + ":sub/" + std::string(120, 'n') + ".tsv");
  EXPECT_EQ((*lines)[1].text, "long");
}

TEST_F(TarTest, MemberOptionPicksMembersByNameOrBaseName) {
  if (!have_tar_) GTEST_SKIP() << "no tar command on this machine";
  TextInputOptions opts;
  opts.members = {"valid.txt", "extra.tsv", "notes.md"};
  auto lines = ReadAll(dir_.File("a.tar.gz"), opts);
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  std::vector<std::string> texts;
  for (const auto& l : *lines) texts.push_back(l.text);
  EXPECT_THAT(texts, ElementsAre("not read", "x", "v1", "v2"));
}

TEST_F(TarTest, MissingMemberIsBadDataListingMembers) {
  if (!have_tar_) GTEST_SKIP() << "no tar command on this machine";
  TextInputOptions opts;
  opts.members = {"test.txt"};
  auto lines = ReadAll(dir_.File("a.tar.gz"), opts);
  ASSERT_FALSE(lines.ok());
  EXPECT_EQ(lines.status().code(), Code::kBadData);
  EXPECT_THAT(lines.status().message(), HasSubstr("no member 'test.txt'"));
  EXPECT_THAT(lines.status().message(), HasSubstr("train.txt"));
}

TEST_F(TarTest, TruncatedTarIsBadData) {
  if (!have_tar_) GTEST_SKIP() << "no tar command on this machine";
  const std::string bytes = testing::ReadBytes(dir_.File("a.tar"));
  WriteText(dir_.File("cut.tar"), bytes.substr(0, 512 + 100));  // the first member's data is cut short
  auto lines = ReadAll(dir_.File("cut.tar"));
  ASSERT_FALSE(lines.ok());
  EXPECT_EQ(lines.status().code(), Code::kBadData);
  EXPECT_THAT(lines.status().message(), HasSubstr("truncated tar archive"));
}

TEST_F(TarTest, CorruptHeaderChecksumIsBadData) {
  if (!have_tar_) GTEST_SKIP() << "no tar command on this machine";
  std::string bytes = testing::ReadBytes(dir_.File("a.tar"));
  bytes[1024 + 3] ^= 0x11;  // the second header's name; its checksum no longer matches
  WriteText(dir_.File("bad.tar"), bytes);
  auto lines = ReadAll(dir_.File("bad.tar"));
  ASSERT_FALSE(lines.ok());
  EXPECT_THAT(lines.status().message(), HasSubstr("bad checksum"));
}

TEST(LineReader, DescribeSourceFileHasSizeAndMtime) {
  ScratchDir dir;
  WriteText(dir.File("f.txt"), "12345");
  const std::string d = DescribeSourceFile(dir.File("f.txt"));
  EXPECT_THAT(d, HasSubstr("size=5 mtime="));
  EXPECT_THAT(DescribeSourceFile(dir.File("nope")), HasSubstr("missing"));
}

}  // namespace
}  // namespace tessel::storage
