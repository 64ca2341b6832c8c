// Tests for storage/line_reader.cc: plain, compressed and tar(.gz) inputs, line splitting and error paths.
#include "storage/line_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

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
  // Cut in the data, in the trailer (where libarchive gives no reason: "truncated or corrupt"), just after
  // the header and inside it.
  for (size_t keep : {bytes.size() / 2, bytes.size() - 4, size_t{12}, size_t{5}}) {
    WriteText(dir.File("t.gz"), bytes.substr(0, keep));
    auto lines = ReadAll(dir.File("t.gz"));
    ASSERT_FALSE(lines.ok()) << "kept " << keep;
    EXPECT_EQ(lines.status().code(), Code::kBadData);
    EXPECT_THAT(lines.status().message(), HasSubstr(dir.File("t.gz") + ": truncated ")) << "kept " << keep;
    EXPECT_THAT(lines.status().message(), HasSubstr("gzip data")) << "kept " << keep;
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
  EXPECT_EQ(lines.status().code(), Code::kBadData);
  EXPECT_THAT(lines.status().message(), HasSubstr(dir_.File("bad.tar") + ": corrupt tar header ("));
}

// libarchive does not recognise an archive whose first header is bad: it must not be read as text.
TEST_F(TarTest, CorruptFirstHeaderIsBadDataNotText) {
  if (!have_tar_) GTEST_SKIP() << "no tar command on this machine";
  const std::string bytes = testing::ReadBytes(dir_.File("a.tar"));
  std::string bad_sum = bytes;
  bad_sum[3] ^= 0x11;  // the first header's name
  std::string bad_size = bytes;
  bad_size.replace(124, 11, "0000000x000");  // not octal; the checksum is made to match again
  bad_size.replace(148, 8, 8, ' ');
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += static_cast<unsigned char>(bad_size[i]);
  char field[8];
  std::snprintf(field, sizeof field, "%06o", sum);
  bad_size.replace(148, 7, field, 7);
  for (const auto& [name, data] : {std::pair{"bad-sum.tar", bad_sum}, std::pair{"bad-size.tar", bad_size}}) {
    WriteText(dir_.File(name), data);
    auto lines = ReadAll(dir_.File(name));
    ASSERT_FALSE(lines.ok()) << name << " read as " << lines->size() << " lines";
    EXPECT_EQ(lines.status().code(), Code::kBadData);
    EXPECT_THAT(lines.status().message(), HasSubstr(dir_.File(name) + ": corrupt tar header"));
  }
}

TEST_F(TarTest, TruncatedTarGzIsBadData) {
  if (!have_tar_) GTEST_SKIP() << "no tar command on this machine";
  const std::string bytes = testing::ReadBytes(dir_.File("a.tar.gz"));
  WriteText(dir_.File("cut.tar.gz"), bytes.substr(0, bytes.size() / 2));
  auto lines = ReadAll(dir_.File("cut.tar.gz"));
  ASSERT_FALSE(lines.ok());
  EXPECT_EQ(lines.status().code(), Code::kBadData);
  EXPECT_THAT(lines.status().message(), HasSubstr(dir_.File("cut.tar.gz") + ": truncated gzip data"));
}

TEST_F(TarTest, XzAndBzip2AreReadToo) {
  if (!have_tar_) GTEST_SKIP() << "no tar command on this machine";
  const std::string cmd =
      "cd '" + dir_.File("src") + "' && tar -cJf ../a.tar.xz train.txt && bzip2 -c train.txt > ../t.bz2";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "no xz or bzip2 command on this machine";
  auto xz = ReadAll(dir_.File("a.tar.xz"));
  ASSERT_TRUE(xz.ok()) << xz.status().ToString();
  EXPECT_THAT(*xz, ElementsAre(Line{dir_.File("a.tar.xz") + ":train.txt", 1, "t1"},
                               Line{dir_.File("a.tar.xz") + ":train.txt", 2, "t2"}));
  auto bz2 = ReadAll(dir_.File("t.bz2"));
  ASSERT_TRUE(bz2.ok()) << bz2.status().ToString();
  EXPECT_THAT(*bz2, ElementsAre(Line{dir_.File("t.bz2"), 1, "t1"}, Line{dir_.File("t.bz2"), 2, "t2"}));
}

TEST_F(TarTest, SparseMemberHolesReadAsZeros) {
  if (!have_tar_) GTEST_SKIP() << "no tar command on this machine";
  {
    std::ofstream f(dir_.File("src/sparse.txt"), std::ios::binary);
    f << "a\n";
    f.seekp(200000);
    f << "\nb\n";
  }
  ::truncate(dir_.File("src/sparse.txt").c_str(), 300000);  // and a hole at the end
  const std::string cmd = "cd '" + dir_.File("src") + "' && tar -S -cf ../gnu-sparse.tar sparse.txt && " +
                          "tar -S --format=pax -cf ../pax-sparse.tar sparse.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (const char* name : {"gnu-sparse.tar", "pax-sparse.tar"}) {
    auto lines = ReadAll(dir_.File(name));
    ASSERT_TRUE(lines.ok()) << name << ": " << lines.status().ToString();
    const std::string source = dir_.File(name) + ":sparse.txt";
    EXPECT_THAT(*lines, ElementsAre(Line{source, 1, "a"}, Line{source, 2, std::string(199998, '\0')},
                                    Line{source, 3, "b"}, Line{source, 4, std::string(300000 - 200003, '\0')}))
        << name;
  }
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
