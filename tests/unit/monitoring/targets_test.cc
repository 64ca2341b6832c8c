#include "monitoring/targets.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace tessel::monitoring {
namespace {

// A strict little JSON parser (RFC 8259 minus number edge cases), enough to prove the file is JSON and to
// read back what it says.
struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject } type = Type::kNull;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}

  // Returns false (with error()) unless the whole text is exactly one JSON value.
  bool Parse(Json& out) {
    if (!Value(out)) return false;
    Space();
    return pos_ == s_.size() || Fail("trailing characters");
  }
  const std::string& error() const { return error_; }

 private:
  bool Fail(const std::string& what) {
    error_ = what + " at offset " + std::to_string(pos_);
    return false;
  }
  void Space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool Literal(const std::string& word) {
    if (s_.compare(pos_, word.size(), word) != 0) return Fail("bad literal");
    pos_ += word.size();
    return true;
  }
  bool String(std::string& out) {
    if (s_[pos_] != '"') return Fail("expected string");
    for (++pos_; pos_ < s_.size(); ++pos_) {
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return Fail("raw control character in string");
      if (c == '\\') {
        if (++pos_ >= s_.size()) break;
        const char e = s_[pos_];
        if (e == 'u') {
          if (pos_ + 4 >= s_.size()) break;
          out += static_cast<char>(std::stoi(s_.substr(pos_ + 1, 4), nullptr, 16));  // ASCII is enough here
          pos_ += 4;
        } else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) {
          const std::map<char, char> unescape{{'b', '\b'}, {'f', '\f'}, {'n', '\n'}, {'r', '\r'}, {'t', '\t'}};
          out += unescape.count(e) ? unescape.at(e) : e;
        } else {
          return Fail("bad escape");
        }
      } else {
        out += c;
      }
    }
    return Fail("unterminated string");
  }
  bool Value(Json& out) {
    Space();
    if (pos_ >= s_.size()) return Fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') {
      out.type = Json::Type::kObject;
      ++pos_;
      Space();
      if (s_[pos_] == '}') return ++pos_, true;
      while (true) {
        Space();
        std::string key;
        if (!String(key)) return false;
        Space();
        if (s_[pos_++] != ':') return Fail("expected ':'");
        if (out.object.count(key)) return Fail("duplicate key " + key);
        if (!Value(out.object[key])) return false;
        Space();
        if (s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (s_[pos_] == '}') return ++pos_, true;
        return Fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      out.type = Json::Type::kArray;
      ++pos_;
      Space();
      if (s_[pos_] == ']') return ++pos_, true;
      while (true) {
        out.array.emplace_back();
        if (!Value(out.array.back())) return false;
        Space();
        if (s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (s_[pos_] == ']') return ++pos_, true;
        return Fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      out.type = Json::Type::kString;
      return String(out.string);
    }
    if (c == 't') return out.type = Json::Type::kBool, Literal("true");
    if (c == 'f') return out.type = Json::Type::kBool, Literal("false");
    if (c == 'n') return out.type = Json::Type::kNull, Literal("null");
    const size_t start = pos_;
    while (pos_ < s_.size() && std::string("+-0123456789.eE").find(s_[pos_]) != std::string::npos) ++pos_;
    if (pos_ == start) return Fail("unexpected character");
    out.type = Json::Type::kNumber;
    return true;
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TargetsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::path(::testing::TempDir()) / ("tessel_targets_" + std::to_string(::getpid()) + "_" +
                                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Parses the file and returns its entries, checking the file_sd shape on the way.
  std::vector<Json> ReadEntries(const std::filesystem::path& path) {
    const std::string text = ReadFile(path);
    Json root;
    JsonParser parser(text);
    EXPECT_TRUE(parser.Parse(root)) << parser.error() << "\n" << text;
    EXPECT_EQ(root.type, Json::Type::kArray) << text;
    for (const Json& entry : root.array) {
      EXPECT_EQ(entry.type, Json::Type::kObject);
      EXPECT_EQ(entry.object.size(), 2u) << "an entry has exactly targets and labels";
      EXPECT_EQ(entry.object.at("targets").type, Json::Type::kArray);
      EXPECT_EQ(entry.object.at("labels").type, Json::Type::kObject);
      for (const auto& [key, label] : entry.object.at("labels").object) {
        EXPECT_EQ(label.type, Json::Type::kString) << "file_sd label values must be strings: " << key;
      }
    }
    return root.array;
  }

  std::filesystem::path dir_;
};

TEST_F(TargetsFileTest, OneEntryPerRankWithLabels) {
  const auto path = dir_ / "sub" / "targets.json";  // the parent directories are created
  const std::vector<Target> targets{
      {"10.0.0.2", 9102, 2, "worker"}, {"10.0.0.1", 9100, 0, "coordinator"}, {"10.0.0.1", 9101, 1, "worker"}};
  ASSERT_TRUE(WriteTargetsFile(path.string(), "demo-run", targets).ok());

  const std::vector<Json> entries = ReadEntries(path);
  ASSERT_EQ(entries.size(), 3u);
  const std::vector<std::string> hosts{"10.0.0.1:9100", "10.0.0.1:9101", "10.0.0.2:9102"};
  const std::vector<std::string> roles{"coordinator", "worker", "worker"};
  for (size_t i = 0; i < entries.size(); ++i) {  // sorted by rank
    const Json& entry = entries[i];
    ASSERT_EQ(entry.object.at("targets").array.size(), 1u);
    EXPECT_EQ(entry.object.at("targets").array[0].string, hosts[i]);
    const auto& labels = entry.object.at("labels").object;
    EXPECT_EQ(labels.size(), 3u);
    EXPECT_EQ(labels.at("job").string, "demo-run");
    EXPECT_EQ(labels.at("rank").string, std::to_string(i));
    EXPECT_EQ(labels.at("role").string, roles[i]);
  }
  // Nothing but the file is left behind.
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path())) {
    EXPECT_EQ(entry.path().filename(), "targets.json");
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST_F(TargetsFileTest, SingleEmbeddedRankMatchesExpectedText) {
  auto text = FormatTargets("solo", {{"127.0.0.1", 9100, 0, "embedded"}});
  ASSERT_TRUE(text.ok());
  // Compare structure-insensitively to whitespace: the writer's indentation is not part of the contract.
  std::string compact;
  bool in_string = false;
  for (char c : *text) {
    if (c == '"') in_string = !in_string;
    if (in_string || (c != ' ' && c != '\n')) compact += c;
  }
  EXPECT_EQ(compact, R"([{"targets":["127.0.0.1:9100"],"labels":{"job":"solo","rank":"0","role":"embedded"}}])");
}

TEST_F(TargetsFileTest, RewriteReplacesTheFileAndEscapesTheJobName) {
  const auto path = dir_ / "targets.json";
  ASSERT_TRUE(WriteTargetsFile(path.string(), "first",
                               {{"127.0.0.1", 9100, 0, "coordinator"}, {"127.0.0.1", 9101, 1, "worker"}})
                  .ok());
  const std::string odd_job = "odd \"job\"\\name\twith\ncontrol";
  ASSERT_TRUE(WriteTargetsFile(path.string(), odd_job, {{"::1", 9100, 0, "embedded"}}).ok());
  const std::vector<Json> entries = ReadEntries(path);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].object.at("labels").object.at("job").string, odd_job);
  EXPECT_EQ(entries[0].object.at("targets").array.at(0).string, "[::1]:9100");
}

TEST_F(TargetsFileTest, NoTargetsIsAnEmptyList) {
  const auto path = dir_ / "targets.json";
  ASSERT_TRUE(WriteTargetsFile(path.string(), "empty", {}).ok());
  EXPECT_TRUE(ReadEntries(path).empty());
}

TEST_F(TargetsFileTest, InvalidTargetsAreUsageErrors) {
  const auto path = (dir_ / "targets.json").string();
  const Target ok{"127.0.0.1", 9100, 0, "coordinator"};
  struct Case {
    std::string job;
    std::vector<Target> targets;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"", {ok}, "job name"},
           {"j", {ok, {"127.0.0.1", 9101, 0, "worker"}}, "rank 0 appears twice"},
           {"j", {{"", 9100, 0, "worker"}}, "empty host"},
           {"j", {{"h", 9100, 0, ""}}, "empty role"},
           {"j", {{"h", 0, 0, "worker"}}, "port 0"},
           {"j", {{"h", 65536, 0, "worker"}}, "port 65536"},
       }) {
    Status status = WriteTargetsFile(path, c.job, c.targets);
    EXPECT_EQ(status.code(), Code::kUsage) << c.message;
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.message();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(TargetsFileTest, UnwritableDirectoryIsAStorageErrorNamingThePath) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions; the blocked-parent case still runs";
  std::filesystem::create_directories(dir_ / "locked");
  ::chmod((dir_ / "locked").c_str(), 0500);
  const auto path = (dir_ / "locked" / "targets.json").string();
  Status status = WriteTargetsFile(path, "j", {{"127.0.0.1", 9100, 0, "worker"}});
  ::chmod((dir_ / "locked").c_str(), 0700);
  EXPECT_EQ(status.code(), Code::kStorage);
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
}

TEST_F(TargetsFileTest, ParentThatIsAFileIsAStorageErrorNamingThePath) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "plain") << "not a directory";
  const auto path = (dir_ / "plain" / "targets.json").string();
  Status status = WriteTargetsFile(path, "j", {{"127.0.0.1", 9100, 0, "worker"}});
  EXPECT_EQ(status.code(), Code::kStorage);
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
}

}  // namespace
}  // namespace tessel::monitoring
