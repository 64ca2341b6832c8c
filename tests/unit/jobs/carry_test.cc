// jobs/carry.h: a worker struct's fields carried from the schema rows by name, section and rename; a
// field that no row, rename or derivation covers, a name two sections share, or a row of another type
// stops the process naming the field (a build's programming error, found here first).
#include "jobs/carry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessel::jobs {
namespace {

JobSpec Rgat() {
  const std::string text =
      "version = 1\n[job]\nname = \"t\"\nkind = \"rgnn\"\nseed = 7\n[data]\nformat = \"synthetic\"\n"
      "[model]\nname = \"rgat\"\nhidden = 24\nheads = 3\ncompact = false\n"
      "[train]\nlr = 0.0123\nfanouts = [5, 4]\nprecision = \"fp64\"\n";
  Result<JobSpec> spec = ParseJob(text, "carry.toml", {});
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : JobSpec{};
}

#define CARRIED_FIELDS(X)          \
  X(double, lr)                    \
  X(int32_t, heads)                \
  X(int32_t, width)                \
  X(bool, compact)                 \
  X(Precision, precision)          \
  X(std::vector<int32_t>, fanouts) \
  X(uint64_t, seed)                \
  X(int32_t, left_for_the_caller)
struct Carried {
  TESSEL_FIELDS(Carried, CARRIED_FIELDS)
};

TEST(Carry, FieldsComeFromTheRowsOfTheirSectionsOrTheirRename) {
  const JobSpec spec = Rgat();
  const auto c = CarryFrom<Carried>(spec, {.sections = {"train", "model", "job"},
                                           .renamed = {{"width", "model.hidden"}},
                                           .derived = {"left_for_the_caller"}});
  EXPECT_EQ(c.lr, 0.0123);
  EXPECT_EQ(c.heads, 3);
  EXPECT_EQ(c.width, 24);
  EXPECT_FALSE(c.compact);
  EXPECT_EQ(c.precision, Precision::kFp64);
  EXPECT_EQ(c.fanouts, (std::vector<int32_t>{5, 4}));
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.left_for_the_caller, 0) << "a derived field is the caller's";
}

TEST(Carry, TheDefaultFanoutsAreOneNamedFunction) {
  JobSpec spec = Rgat();
  EXPECT_EQ(FanoutsOf(spec), (std::vector<int32_t>{5, 4}));
  spec.train.fanouts.clear();
  EXPECT_EQ(FanoutsOf(spec), std::vector<int32_t>(static_cast<size_t>(spec.model.layers), kDefaultFanout));
}

#define UNCOVERED_FIELDS(X) X(double, lr) X(int32_t, no_such_setting)
struct Uncovered {
  TESSEL_FIELDS(Uncovered, UNCOVERED_FIELDS)
};
#define WRONG_TYPE_FIELDS(X) X(std::string, lr)
struct WrongType {
  TESSEL_FIELDS(WrongType, WRONG_TYPE_FIELDS)
};
#define SHARED_NAME_FIELDS(X) X(uint64_t, seed)
struct SharedName {
  TESSEL_FIELDS(SharedName, SHARED_NAME_FIELDS)
};

TEST(CarryDeathTest, AFieldNothingCoversIsAProgrammingError) {
  const JobSpec spec = Rgat();
  EXPECT_DEATH(CarryFrom<Uncovered>(spec, {.sections = {"train"}, .renamed = {}, .derived = {}}),
               "worker field 'no_such_setting': no schema row in its sections");
  EXPECT_DEATH(CarryFrom<Uncovered>(
                   spec, {.sections = {"train"}, .renamed = {{"no_such_setting", "train.nope"}}, .derived = {}}),
               "renamed to train.nope, which is no schema row");
  EXPECT_DEATH(CarryFrom<WrongType>(spec, {.sections = {"train"}, .renamed = {}, .derived = {}}),
               "worker field 'lr': the row train.lr is of another type");
  EXPECT_DEATH(CarryFrom<SharedName>(spec, {.sections = {"job", "data.synthetic"}, .renamed = {}, .derived = {}}),
               "rows job.seed and data.synthetic.seed both match");
}

}  // namespace
}  // namespace tessel::jobs
