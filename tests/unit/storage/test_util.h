// Helpers shared by the storage tests: a scratch directory per test and small file utilities.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "storage/graph.h"

namespace tessel::storage::testing {

// A fresh directory under the build tree, removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(TESSEL_BINARY_DIR) / "test-scratch" /
            (std::string(info->test_suite_name()) + "." + info->name() + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }
  // Names of the entries in the directory, sorted.
  std::vector<std::string> List() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A small valid two-type graph with features, labels and masks, for round trips and corruption.
inline HeteroGraph SmallGraph() {
  HeteroGraph g;
  g.name = "small";
  g.num_classes = 3;
  g.class_names = {"a", "b", "c"};
  g.source_fingerprint = "test";
  NodeType paper;
  paper.name = "paper";
  paper.count = 5;
  paper.feature_dim = 2;
  paper.features = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  paper.labels = {0, 1, 2, -1, 1};
  paper.train_mask = {1, 1, 0, 0, 0};
  paper.val_mask = {0, 0, 1, 0, 0};
  paper.test_mask = {0, 0, 0, 0, 1};
  NodeType author;
  author.name = "author";
  author.count = 3;
  g.node_types = {paper, author};
  Relation writes;
  writes.name = "writes";
  writes.src_type = 1;
  writes.dst_type = 0;
  writes.src = {0, 1, 2, 2};
  writes.dst = {0, 1, 3, 4};
  Relation inv = writes;
  inv.name = "writes^-1";
  inv.kind = RelationKind::kInverse;
  std::swap(inv.src, inv.dst);
  std::swap(inv.src_type, inv.dst_type);
  Relation self;
  self.name = "self_loop";
  self.kind = RelationKind::kSelfLoop;
  self.src = {0, 1, 2, 3, 4};
  self.dst = self.src;
  g.relations = {writes, inv, self};
  return g;
}

}  // namespace tessel::storage::testing
