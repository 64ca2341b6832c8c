// What `tessel plugin list|inspect|check` report and how they exit (kPlugin = exit 4).
#include "workers/plugin_host/plugin_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "test_dirs.h"
#include "workers/plugin_host/op_schemas.h"

namespace tessel::workers {
namespace {

using ::testing::HasSubstr;

TEST(PluginReport, CheckPassesTheRgnnPluginWithRgcnOps) {
  std::ostringstream out;
  const Status st = CheckPlugin(testing::RgnnPlugin(), RgcnOps(), Device::kCpu, out);
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << out.str();
  EXPECT_THAT(out.str(), HasSubstr("PASS"));
  EXPECT_THAT(out.str(), HasSubstr("ABI 1.0"));
}

TEST(PluginReport, CheckFailsEveryBrokenPluginWithExitCode4) {
  for (const char* variant :
       {"wrong_abi_major", "newer_abi_minor", "wrong_schema", "bad_syntax", "no_init", "init_fails", "init_throws"}) {
    std::ostringstream out;
    const Status st = CheckPlugin(testing::TestPlugin(variant), {}, Device::kCpu, out);
    EXPECT_EQ(st.exit_code(), 4) << variant << ": " << st.ToString();
    EXPECT_THAT(out.str(), HasSubstr("FAIL")) << variant;
    EXPECT_THAT(out.str(), ::testing::Not(HasSubstr("PASS"))) << variant;
  }
}

TEST(PluginReport, CheckWithRequiredOpsFailsAPluginThatLacksThem) {
  std::ostringstream out;
  const Status st = CheckPlugin(testing::TestPlugin("missing_ops"), RgcnOps(), Device::kCpu, out);
  EXPECT_EQ(st.exit_code(), 4);
  EXPECT_THAT(out.str(), HasSubstr("rgnn.typed_linear.fwd"));
  std::ostringstream without;
  EXPECT_TRUE(CheckPlugin(testing::TestPlugin("missing_ops"), {}, Device::kCpu, without).ok());
}

TEST(PluginReport, CheckNotesOpsTheHostDoesNotKnow) {
  std::ostringstream out;
  ASSERT_TRUE(CheckPlugin(testing::ExamplePlugin(), {}, Device::kCpu, out).ok());
  EXPECT_THAT(out.str(), HasSubstr("note op example.scale.fwd"));
}

TEST(PluginReport, InspectListsEveryKernelWithItsSchema) {
  std::ostringstream out;
  ASSERT_TRUE(InspectPlugin(testing::RgnnPlugin(), out).ok());
  for (const std::string& op : RgcnOps()) EXPECT_THAT(out.str(), HasSubstr(std::string(ExpectedSchema(op))));
  EXPECT_THAT(out.str(), HasSubstr("plugin:      rgnn"));
}

TEST(PluginReport, ListShowsGoodPluginsAndFailsOnABrokenOne) {
  testing::TempDir dir;
  dir.Copy(testing::RgnnPlugin(), "libtessel_rgnn.so");
  dir.Copy(testing::TestPlugin("wrong_abi_major"), "libtessel_broken.so");
  std::ostringstream out;
  const Status st = ListPlugins({dir.path()}, out);
  EXPECT_EQ(st.exit_code(), 4);
  EXPECT_THAT(out.str(), HasSubstr("rgnn"));
  EXPECT_THAT(out.str(), HasSubstr("ERROR plugin " + dir.path() + "/libtessel_broken.so built for ABI 2.0"));
}

TEST(PluginReport, ExpandOpSetTakesRgcnOrAList) {
  EXPECT_EQ(ExpandOpSet("rgcn").value(), RgcnOps());
  EXPECT_EQ(ExpandOpSet("a.b,c.d").value(), (std::vector<std::string>{"a.b", "c.d"}));
  EXPECT_EQ(ExpandOpSet("a.b,,c").status().code(), Code::kUsage);
  EXPECT_EQ(ParseDevice("gpu").status().code(), Code::kUsage);
}

}  // namespace
}  // namespace tessel::workers
