// The shared datasets (../shared/data) as the unit tests see them, and what a test does when one is
// missing: it skips, naming the path, or with TESSEL_REQUIRE_DATA=1 in the environment (CI, which always
// has the data) it fails. The shell tests follow the same rule (tests/lib.sh, missing_data).
// Thread safety: call from the test's main thread (getenv).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace tessel::test_data {

// The datasets' directory: TESSEL_DATA_DIR from the environment when it is set (as the shell tests take
// it), else the one the build was configured with (the TESSEL_DATA_DIR compile definition that
// tessel_add_test sets; CTest passes the same value in the environment).
inline std::string DataDir() {
  const char* from_env = std::getenv("TESSEL_DATA_DIR");
  return from_env != nullptr && *from_env != '\0' ? std::string(from_env) : std::string(TESSEL_DATA_DIR);
}

// True when TESSEL_REQUIRE_DATA=1: a missing dataset is then a failure, not a skip.
inline bool DataRequired() {
  const char* v = std::getenv("TESSEL_REQUIRE_DATA");
  return v != nullptr && std::string_view(v) == "1";
}

}  // namespace tessel::test_data

// TESSEL_MISSING_DATA(message << ...): ends the current test for lack of data, as a skip (GTEST_SKIP) or,
// under TESSEL_REQUIRE_DATA=1, a failure (FAIL). Like both, it returns from the function it is used in, so
// use it in the TEST body itself (or in a void helper whose caller then stops).
#define TESSEL_MISSING_DATA(message)                                              \
  do {                                                                            \
    if (::tessel::test_data::DataRequired()) {                                    \
      FAIL() << message << " (TESSEL_REQUIRE_DATA=1: missing data is a failure)"; \
    } else {                                                                      \
      GTEST_SKIP() << message;                                                    \
    }                                                                             \
  } while (0)

// TESSEL_NEED_DATA_FILE(path): TESSEL_MISSING_DATA naming `path` when it does not exist.
#define TESSEL_NEED_DATA_FILE(path)                                  \
  do {                                                               \
    const std::string tessel_needed_data_path = (path);              \
    if (!std::filesystem::exists(tessel_needed_data_path)) {         \
      TESSEL_MISSING_DATA("no data at " << tessel_needed_data_path); \
    }                                                                \
  } while (0)
