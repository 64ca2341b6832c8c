// The job-file reference: jobs/README.md must list exactly the keys of the `tessel` binary, each with the
// type, default, allowed values and one-line doc its row declares. Those are the field table's
// (jobs/schema.cc) and the keys the built-in models declare for themselves (core/model_keys.h), which is
// why this test links the model registry (workers/rgnn/model_registry.h), as `tessel` does. And every
// example job file, which may use those keys (hgt-aifb.toml: model.bias), parses and validates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "jobs/spec.h"
#include "tests/unit/test_data.h"
#include "workers/rgnn/model_registry.h"

namespace tessel::jobs {
namespace {

// The README row of one key, exactly as the reference table spells it.
std::string ReadmeRow(const FieldInfo& f) {
  const std::string def = f.default_value == "required" ? "**required**" : "`" + f.default_value + "`";
  return "| `" + f.key + "` | " + f.type + " | " + def + " | " + (f.allowed.empty() ? "any" : f.allowed) + " | " +
         f.doc + " |";
}

// The reference tables as they should read, section by section, for pasting into jobs/README.md.
std::string ExpectedTables() {
  std::string out, section;
  for (const FieldInfo& f : DescribeFields()) {
    const std::string this_section = f.key.substr(0, f.key.rfind('.'));
    if (this_section != section) {
      section = this_section;
      out +=
          "\n### [" + section + "]\n\n| key | type | default | allowed | meaning |\n| --- | --- | --- | --- | --- |\n";
    }
    out += ReadmeRow(f) + "\n";
  }
  return out;
}

TEST(JobsReadme, DocumentsEveryKeyOfTheFieldTable) {
  ASSERT_FALSE(workers::RgnnModelNames().empty());
  bool has_model_keys = false;
  for (const FieldInfo& f : DescribeFields()) has_model_keys = has_model_keys || f.key == "model.bias";
  ASSERT_TRUE(has_model_keys) << "HGT's own key model.bias is not in the schema: the built-in models' keys were "
                                 "not registered before the schema was read";
  const std::string path = std::string(TESSEL_SOURCE_DIR) + "/jobs/README.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::map<std::string, std::string> rows;  // key -> row
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("| `")) continue;
    const size_t end = line.find('`', 3);
    if (end != std::string::npos) rows[line.substr(3, end - 3)] = line;
  }
  bool drifted = false;
  std::set<std::string> keys;
  for (const FieldInfo& f : DescribeFields()) {
    keys.insert(f.key);
    const auto it = rows.find(f.key);
    if (it == rows.end()) {
      ADD_FAILURE() << "jobs/README.md does not document '" << f.key << "'; add:\n" << ReadmeRow(f);
      drifted = true;
    } else if (it->second != ReadmeRow(f)) {
      ADD_FAILURE() << "jobs/README.md's row for '" << f.key
                    << "' differs from the field table:\n  README: " << it->second << "\n  table:  " << ReadmeRow(f);
      drifted = true;
    }
  }
  for (const auto& [key, row] : rows) {
    if (key == "version" || keys.contains(key)) continue;
    ADD_FAILURE() << "jobs/README.md documents '" << key << "', which is not in the field table: " << row;
    drifted = true;
  }
  if (drifted) std::cerr << "The reference tables should read:\n" << ExpectedTables();
}

// DESIGN.md: every example under jobs/examples/ is validated in CI. Found at test time, so a new
// example is covered without touching this test. Paths in the examples are relative to the repository
// root, so the data-path check runs from there, where the shared data is present.
TEST(Examples, EveryExampleParsesAndValidates) {
  const std::filesystem::path dir = std::filesystem::path(TESSEL_SOURCE_DIR) / "jobs" / "examples";
  std::vector<std::filesystem::path> examples;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".toml") examples.push_back(entry.path());
  }
  ASSERT_GE(examples.size(), 2u) << "no job files under " << dir;
  const std::string aifb = test_data::DataDir() + "/aifb";
  const bool have_data = std::filesystem::exists(aifb);
  const std::filesystem::path old_cwd = std::filesystem::current_path();
  std::filesystem::current_path(TESSEL_SOURCE_DIR);
  for (const auto& path : examples) {
    SCOPED_TRACE(path.string());
    Result<JobSpec> r = LoadJobFile(path.string(), {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (have_data) {
      EXPECT_TRUE(ValidateDataPaths(*r).ok()) << ValidateDataPaths(*r).ToString();
    }
    // Overrides work on every example as they do on the small jobs above.
    EXPECT_TRUE(LoadJobFile(path.string(), {"job.seed=3", "train.epochs=1"}).ok());
  }
  std::filesystem::current_path(old_cwd);
  if (!have_data) TESSEL_MISSING_DATA("the examples parse, but their data paths were not checked: no " << aifb);
}

}  // namespace
}  // namespace tessel::jobs
