// What `tessel plugin list|inspect|check` report and how they exit (kPlugin = exit 4).
#include "workers/plugin_host/plugin_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <tessel/plugin.h>

#include <filesystem>
#include <sstream>

#include "core/logging.h"
#include "test_dirs.h"
#include "workers/plugin_host/op_table.h"

namespace tessel::workers {
namespace {

using ::testing::HasSubstr;

TEST(PluginReport, CheckPassesTheRgnnPluginWithEveryRgnnOp) {
  std::ostringstream out;
  const Status st = CheckPlugin(testing::RgnnPlugin(), OpsOfFamily("rgnn"), Device::kCpu, out);
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << out.str();
  EXPECT_THAT(out.str(), HasSubstr("PASS"));
  EXPECT_THAT(out.str(), HasSubstr("ABI 1.1"));
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

TEST(PluginReport, APluginThatCrashesWhileLoadingIsAVerdictNotACrash) {
  // Its tessel_plugin_init raises SIGSEGV: the check's child process dies, this one reports it.
  std::ostringstream out;
  const Status st = CheckPlugin(testing::TestPlugin("init_crashes"), {}, Device::kCpu, out);
  EXPECT_EQ(st.exit_code(), 4) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("libtest_plugin_init_crashes.so crashed the process that loaded it"));
  EXPECT_THAT(out.str(), HasSubstr("FAIL"));
  std::ostringstream inspect;
  EXPECT_EQ(InspectPlugin(testing::TestPlugin("init_crashes"), inspect).exit_code(), 4);
  // And this process goes on: the next check passes.
  std::ostringstream next;
  EXPECT_TRUE(CheckPlugin(testing::ExamplePlugin(), {}, Device::kCpu, next).ok()) << next.str();
}

TEST(PluginReport, CheckRefusesATruncatedCopyBeforeLoadingIt) {
  testing::TempDir dir;
  const std::string whole = testing::ExamplePlugin();
  const std::string cut = dir.path() + "/libtessel_cut.so";
  std::filesystem::copy_file(whole, cut);
  std::filesystem::resize_file(cut, 3000);
  std::ostringstream out;
  const Status st = CheckPlugin(cut, {}, Device::kCpu, out);
  EXPECT_EQ(st.exit_code(), 4) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("truncated"));
  EXPECT_THAT(st.message(), ::testing::Not(HasSubstr("crashed"))) << "refused before dlopen, not survived after it";
}

TEST(PluginReport, CheckWithRequiredOpsFailsAPluginThatLacksThem) {
  std::ostringstream out;
  const Status st = CheckPlugin(testing::TestPlugin("missing_ops"), OpsOfFamily("rgnn"), Device::kCpu, out);
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
  for (const std::string& op : OpsOfFamily("rgnn")) EXPECT_THAT(out.str(), HasSubstr(std::string(ExpectedSchema(op))));
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
  EXPECT_THAT(out.str(), HasSubstr(StrCat("ERROR plugin ", dir.path(), "/libtessel_broken.so built for ABI ",
                                          TESSEL_PLUGIN_ABI_MAJOR + 1, ".", TESSEL_PLUGIN_ABI_MINOR)));
}

TEST(PluginReport, ExpandOpSetTakesAnOpFamilyOrAList) {
  EXPECT_EQ(ExpandOpSet("rgnn").value(), OpsOfFamily("rgnn"));
  EXPECT_EQ(ExpandOpSet("optim").value(),
            (std::vector<std::string>{"optim.adam.step", "optim.adam.step_rows", "optim.adamw.step"}));
  EXPECT_EQ(ExpandOpSet("a.b,c.d").value(), (std::vector<std::string>{"a.b", "c.d"}));
  EXPECT_EQ(ExpandOpSet("a.b,,c").status().code(), Code::kUsage);
  EXPECT_EQ(ParseDevice("gpu").status().code(), Code::kUsage);
}

}  // namespace
}  // namespace tessel::workers
