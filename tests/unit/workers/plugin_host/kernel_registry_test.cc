// KernelRegistry: loading the real rgnn plugin, and refusing each kind of broken plugin with a message
// that names the file and the defect.
#include "workers/plugin_host/kernel_registry.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>

#include "test_dirs.h"
#include "workers/plugin_host/op_table.h"

namespace tessel::workers {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestPlugin;

Logger QuietLogger() { return Logger("test", LogLevel::kError); }

std::string FileName(const std::string& path) { return std::filesystem::path(path).filename().string(); }

TEST(KernelRegistry, LoadsRgnnPluginAndFindsEveryRgnnOp) {
  KernelRegistry registry(QuietLogger());
  ASSERT_TRUE(registry.LoadPlugin(testing::RgnnPlugin()).ok());
  const std::vector<std::string> rgnn_ops = OpsOfFamily("rgnn");
  ASSERT_FALSE(rgnn_ops.empty());
  EXPECT_TRUE(registry.RequireOps(rgnn_ops, Device::kCpu).ok());
  for (const std::string& op : rgnn_ops) {
    Result<const Kernel*> kernel = registry.Find(op, Device::kCpu);
    ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
    EXPECT_EQ((*kernel)->op(), op);
    EXPECT_EQ((*kernel)->schema(), ExpectedSchema(op));
  }
  const std::vector<PluginInfo> plugins = registry.plugins();
  ASSERT_EQ(plugins.size(), 1u);
  EXPECT_EQ(plugins[0].name, "rgnn");
  EXPECT_EQ(plugins[0].abi_major, TESSEL_PLUGIN_ABI_MAJOR);
  EXPECT_EQ(plugins[0].abi_minor, TESSEL_PLUGIN_ABI_MINOR);
  EXPECT_GE(plugins[0].kernels.size(), rgnn_ops.size());
  EXPECT_EQ(FileName(plugins[0].path), "libtessel_rgnn.so");
}

TEST(KernelRegistry, BuiltinPluginsLoadTogetherWithoutSharingAnOp) {
  KernelRegistry registry(QuietLogger());
  ASSERT_TRUE(registry.LoadPlugin(testing::NnPlugin()).ok());
  ASSERT_TRUE(registry.LoadPlugin(testing::RgnnPlugin()).ok()) << "a duplicate (op, device) would refuse it";
  ASSERT_TRUE(registry.LoadPlugin(testing::GatherPlugin()).ok()) << "a duplicate (op, device) would refuse it";
  ASSERT_TRUE(registry.LoadPlugin(testing::LlmPlugin()).ok()) << "a duplicate (op, device) would refuse it";
  std::vector<std::string> all;
  for (const tessel_op_decl* decl : HostOps()) all.push_back(decl->name);
  EXPECT_TRUE(registry.RequireOps(all, Device::kCpu).ok()) << "every host op has a built-in CPU kernel";
  EXPECT_THAT(registry.Find("nn.relu.fwd", Device::kCpu).value()->plugin_path(), HasSubstr("libtessel_nn.so"));
}

TEST(KernelRegistry, PluginBuiltAgainstAbi10LoadsAndRuns) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(TestPlugin("abi_1_0"));
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(registry.plugins().size(), 1u);
  EXPECT_EQ(registry.plugins()[0].abi_major, 1);
  EXPECT_EQ(registry.plugins()[0].abi_minor, 0);
  const Kernel* kernel = registry.Find("test.v10.double.fwd", Device::kCpu).value();
  EXPECT_EQ(kernel->params_size(), 0u);
  std::vector<double> x = {1, -2, 3}, y(3);
  Tensor tx = Tensor::Borrow(x.data(), DType::kF64, {3}), ty = Tensor::Borrow(y.data(), DType::kF64, {3});
  ThreadPool pool(2);
  const Status call = kernel->Call({&tx}, {&ty}, &pool);
  ASSERT_TRUE(call.ok()) << call.ToString();
  EXPECT_EQ(y, (std::vector<double>{2, -4, 6}));
}

TEST(KernelRegistry, KernelWhoseParameterStructDiffersIsRefused) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(TestPlugin("wrong_params"));
  ASSERT_EQ(st.code(), Code::kPlugin) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("op optim.adam.step"));
  EXPECT_THAT(st.message(), HasSubstr("parameter struct has 8 bytes"));
  EXPECT_TRUE(registry.plugins().empty());
}

TEST(KernelRegistry, WorkspaceIsChargedToTheBudgetAndGivenBack) {
  KernelRegistry registry(QuietLogger());
  ASSERT_TRUE(registry.LoadPlugin(TestPlugin("throwing")).ok());
  const Kernel* kernel = registry.Find("test.workspace.fwd", Device::kCpu).value();
  std::vector<double> x(1000, 1.0), y(1000);
  Tensor tx = Tensor::Borrow(x.data(), DType::kF64, {1000}), ty = Tensor::Borrow(y.data(), DType::kF64, {1000});
  MemoryBudget budget(1 << 20);
  ASSERT_TRUE(kernel->Call({&tx}, {&ty}, CallOptions{nullptr, nullptr, 0, &budget}).ok());
  EXPECT_EQ(y[999], 2.0);  // the kernel copied x through its workspace, doubled
  EXPECT_EQ(budget.peak(), 8000);
  EXPECT_EQ(budget.used(), 0);
  MemoryBudget tight(4000);
  const Status st = kernel->Call({&tx}, {&ty}, CallOptions{nullptr, nullptr, 0, &tight});
  EXPECT_EQ(st.code(), Code::kInternal) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("memory budget"));
  EXPECT_EQ(tight.used(), 0);
}

TEST(KernelRegistry, PooledWorkspaceComesBackToTheNextCall) {
  KernelRegistry registry(QuietLogger());
  ASSERT_TRUE(registry.LoadPlugin(TestPlugin("throwing")).ok());
  const Kernel* kernel = registry.Find("test.workspace.fwd", Device::kCpu).value();
  std::vector<double> x(1000, 1.0), y(1000);
  Tensor tx = Tensor::Borrow(x.data(), DType::kF64, {1000}), ty = Tensor::Borrow(y.data(), DType::kF64, {1000});
  MemoryBudget budget(1 << 20);
  {
    WorkspacePool pool(&budget);
    CallOptions options{nullptr, nullptr, 0, &budget, &pool};
    ASSERT_TRUE(kernel->Call({&tx}, {&ty}, options).ok());
    EXPECT_EQ(y[999], 2.0);
    // The block stays in the pool, and charged: it is resident.
    EXPECT_EQ(pool.pooled_bytes(), 8000);
    EXPECT_EQ(budget.used(), 8000);
    ASSERT_TRUE(kernel->Call({&tx}, {&ty}, options).ok());
    EXPECT_EQ(budget.peak(), 8000) << "the second call reused the pooled block";
  }
  EXPECT_EQ(budget.used(), 0) << "the pool gave everything back when it went";
}

TEST(WorkspacePool, ReusesTheSmallestFittingBlockUpToTwiceTheSize) {
  MemoryBudget budget(0);
  WorkspacePool pool(&budget, 10000);
  auto a = pool.Take(1000), b = pool.Take(3000);
  ASSERT_TRUE(a.ok() && b.ok());
  void* const pa = a->ptr;
  pool.Give(*a);
  pool.Give(*b);
  EXPECT_EQ(pool.pooled_bytes(), 4000);
  auto c = pool.Take(900);  // fits the 1000-byte block
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ptr, pa);
  EXPECT_EQ(c->capacity, 1000u);
  auto d = pool.Take(1200);  // 3000 > 2 x 1200: a new block
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->capacity, 1200u);
  EXPECT_EQ(budget.used(), 1000 + 3000 + 1200);
  pool.Give(*c);
  pool.Give(*d);
  auto big = pool.Take(20000);
  ASSERT_TRUE(big.ok());
  pool.Give(*big);  // past the idle limit: freed at once
  EXPECT_EQ(pool.pooled_bytes(), 5200);
  EXPECT_EQ(budget.used(), 5200);
}

TEST(WorkspacePool, RefusesPastTheBudget) {
  MemoryBudget budget(1000);
  WorkspacePool pool(&budget);
  const auto r = pool.Take(2000);
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("memory budget"));
  EXPECT_EQ(budget.used(), 0);
}

TEST(KernelRegistry, WrongAbiMajorIsRefusedNamingFileAndBothVersions) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(TestPlugin("wrong_abi_major"));
  ASSERT_EQ(st.code(), Code::kPlugin) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("libtest_plugin_wrong_abi_major.so"));
  EXPECT_THAT(st.message(),
              HasSubstr(StrCat("built for ABI ", TESSEL_PLUGIN_ABI_MAJOR + 1, ".", TESSEL_PLUGIN_ABI_MINOR)));
  EXPECT_THAT(st.message(), HasSubstr(StrCat("host has ", TESSEL_PLUGIN_ABI_MAJOR, ".", TESSEL_PLUGIN_ABI_MINOR)));
  // Nothing was committed: the plugin's kernel is not visible.
  EXPECT_TRUE(registry.plugins().empty());
  EXPECT_FALSE(registry.Find("nn.relu.fwd", Device::kCpu).ok());
}

TEST(KernelRegistry, NewerAbiMinorIsRefused) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(TestPlugin("newer_abi_minor"));
  ASSERT_EQ(st.code(), Code::kPlugin) << st.ToString();
  EXPECT_THAT(st.message(),
              HasSubstr(StrCat("built for ABI ", TESSEL_PLUGIN_ABI_MAJOR, ".", TESSEL_PLUGIN_ABI_MINOR + 1)));
  EXPECT_THAT(st.message(), HasSubstr("host's minor is older"));
}

TEST(KernelRegistry, MissingOpFailsRequireOpsNamingTheOpAndTheLoadedPlugins) {
  KernelRegistry registry(QuietLogger());
  ASSERT_TRUE(registry.LoadPlugin(TestPlugin("missing_ops")).ok());
  EXPECT_TRUE(registry.RequireOps({"nn.relu.fwd"}, Device::kCpu).ok());
  const Status st = registry.RequireOps(OpsOfFamily("rgnn"), Device::kCpu);
  ASSERT_EQ(st.code(), Code::kPlugin);
  EXPECT_THAT(st.message(), HasSubstr("no loaded plugin provides op 'rgnn.typed_linear.fwd' for device cpu, nor "));
  EXPECT_THAT(st.message(), HasSubstr("'rgnn.aggregate.fwd'"));
  EXPECT_THAT(st.message(), HasSubstr("loaded: libtest_plugin_missing_ops.so"));
  EXPECT_THAT(st.message(), ::testing::Not(HasSubstr("'nn.relu.fwd'")));
  const Status on_cuda = registry.RequireOps({"nn.relu.fwd"}, Device::kCuda);
  EXPECT_THAT(on_cuda.message(), HasSubstr("op 'nn.relu.fwd' for device cuda"));
}

TEST(KernelRegistry, WrongSchemaIsRefusedNamingOpExpectedAndActual) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(TestPlugin("wrong_schema"));
  ASSERT_EQ(st.code(), Code::kPlugin) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("libtest_plugin_wrong_schema.so"));
  EXPECT_THAT(st.message(), HasSubstr("op nn.relu.fwd"));
  EXPECT_THAT(st.message(), HasSubstr(std::string(ExpectedSchema("nn.relu.fwd"))));
  EXPECT_THAT(st.message(), HasSubstr("nn.relu.fwd(X:T[N,D]) -> (Y:T[N,C])"));
  EXPECT_TRUE(registry.plugins().empty());
}

TEST(KernelRegistry, MalformedSchemaIsRefused) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(TestPlugin("bad_syntax"));
  ASSERT_EQ(st.code(), Code::kPlugin) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("malformed schema"));
  EXPECT_THAT(st.message(), HasSubstr("libtest_plugin_bad_syntax.so"));
}

TEST(KernelRegistry, WorldWritablePluginFileIsRefused) {
  TempDir dir;
  const std::string copy = dir.Copy(testing::RgnnPlugin(), "libtessel_rgnn.so");
  {
    KernelRegistry registry(QuietLogger());
    ASSERT_TRUE(registry.LoadPlugin(copy).ok()) << "the private copy itself must load";
  }
  ASSERT_EQ(chmod(copy.c_str(), 0757), 0);
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(copy);
  ASSERT_EQ(st.code(), Code::kPlugin) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(copy));
  EXPECT_THAT(st.message(), HasSubstr("world-writable"));
}

TEST(KernelRegistry, PluginInWorldWritableDirectoryIsRefused) {
  TempDir dir;
  const std::string copy = dir.Copy(testing::RgnnPlugin(), "libtessel_rgnn.so");
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(copy);
  ASSERT_EQ(st.code(), Code::kPlugin) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("directory " + dir.path() + " is world-writable"));
}

TEST(KernelRegistry, SharedObjectWithoutInitSymbolIsRefused) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(TestPlugin("no_init"));
  ASSERT_EQ(st.code(), Code::kPlugin) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("libtest_plugin_no_init.so"));
  EXPECT_THAT(st.message(), HasSubstr("'tessel_plugin_init'"));
  EXPECT_THAT(st.message(), HasSubstr("undefined symbol"));  // dlerror's text
}

TEST(KernelRegistry, NonexistentPathIsRefused) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin("/nonexistent/libtessel_nothing.so");
  ASSERT_EQ(st.code(), Code::kPlugin);
  EXPECT_THAT(st.message(), HasSubstr("/nonexistent/libtessel_nothing.so"));
}

TEST(KernelRegistry, NonPluginFileIsRefusedWithDlerror) {
  TempDir dir;
  const std::string path = dir.path() + "/libtessel_text.so";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("not an ELF file\n", f);
    std::fclose(f);
  }
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(path);
  ASSERT_EQ(st.code(), Code::kPlugin);
  EXPECT_THAT(st.message(), HasSubstr("not an ELF file"));
  EXPECT_THAT(st.message(), HasSubstr("libtessel_text.so"));
}

TEST(KernelRegistry, DuplicateOpWithoutPreferenceIsAnErrorNamingBoth) {
  KernelRegistry registry(QuietLogger());
  ASSERT_TRUE(registry.LoadPlugin(testing::NnPlugin()).ok());
  ASSERT_TRUE(registry.LoadPlugin(TestPlugin("duplicate_op")).ok()) << "offering an op twice is not wrong in itself";
  for (const Status& st : {registry.Find("nn.relu.fwd", Device::kCpu).status(),
                           registry.RequireOps({"nn.relu.fwd", "nn.add"}, Device::kCpu)}) {
    ASSERT_EQ(st.code(), Code::kPlugin) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr("op 'nn.relu.fwd' for device cpu is provided by both 'nn'"));
    EXPECT_THAT(st.message(), HasSubstr("libtessel_nn.so"));
    EXPECT_THAT(st.message(), HasSubstr("'test_duplicate_op'"));
    EXPECT_THAT(st.message(), HasSubstr("[plugins] prefer"));
  }
  // An op only one of them offers is unaffected.
  EXPECT_TRUE(registry.Find("nn.add", Device::kCpu).ok());
}

TEST(KernelRegistry, PreferenceChoosesAmongPluginsThatOfferAnOp) {
  for (const char* preferred : {"test_duplicate_op", "nn"}) {
    KernelRegistry registry(QuietLogger());
    registry.SetPreference({preferred});
    ASSERT_TRUE(registry.LoadDefaults({testing::NnPlugin(), TestPlugin("duplicate_op")}, {}).ok());
    auto relu = registry.Find("nn.relu.fwd", Device::kCpu);
    ASSERT_TRUE(relu.ok()) << relu.status().ToString();
    EXPECT_EQ(registry.PluginNameOf(**relu), preferred);
    EXPECT_TRUE(registry.RequireOps({"nn.relu.fwd"}, Device::kCpu).ok());
  }
}

// Served() is what tessel_plugin_info exports: per (op, device), the plugin that serves it; an op that two
// plugins offer and no preference decides is left out.
TEST(KernelRegistry, ServedNamesThePluginOfEveryOpAndLeavesOutUndecidedOnes) {
  const auto served_by = [](const KernelRegistry& registry) {
    std::map<std::string, std::string> by;
    for (const ServedKernel& k : registry.Served()) {
      if (k.device == Device::kCpu) by[k.op] = StrCat(k.plugin, " ", k.version, " ", k.abi_major, ".", k.abi_minor);
    }
    return by;
  };
  KernelRegistry undecided(QuietLogger());
  ASSERT_TRUE(undecided.LoadDefaults({testing::NnPlugin(), testing::ExamplePlugin()}, {}).ok());
  std::map<std::string, std::string> by = served_by(undecided);
  EXPECT_EQ(by.count("nn.relu.fwd"), 0u);
  EXPECT_EQ(by.count("nn.relu.bwd"), 0u);
  EXPECT_EQ(by["nn.gelu.fwd"], "nn 0.1.0 1.1");
  EXPECT_EQ(by["example.scale.fwd"], "example 1.1.0 1.1");

  KernelRegistry decided(QuietLogger());
  decided.SetPreference({"example"});
  ASSERT_TRUE(decided.LoadDefaults({testing::NnPlugin(), testing::ExamplePlugin()}, {}).ok());
  by = served_by(decided);
  EXPECT_EQ(by["nn.relu.fwd"], "example 1.1.0 1.1");
  EXPECT_EQ(by["nn.relu.bwd"], "example 1.1.0 1.1");
  EXPECT_EQ(by["nn.gelu.fwd"], "nn 0.1.0 1.1");
}

TEST(KernelRegistry, APreferenceForAPluginNotLoadedIsAnError) {
  KernelRegistry registry(QuietLogger());
  registry.SetPreference({"exmaple"});
  const Status st = registry.LoadDefaults({testing::NnPlugin()}, {});
  ASSERT_EQ(st.code(), Code::kPlugin) << st.ToString();
  EXPECT_THAT(st.message(),
              HasSubstr("plugins.prefer names 'exmaple', but no loaded plugin has that name (loaded: nn)"));
}

TEST(KernelRegistry, LoadingTheSameFileTwiceIsANoOp) {
  KernelRegistry registry(QuietLogger());
  ASSERT_TRUE(registry.LoadPlugin(testing::RgnnPlugin()).ok());
  ASSERT_TRUE(registry.LoadPlugin(testing::RgnnPlugin()).ok());
  EXPECT_EQ(registry.plugins().size(), 1u);
}

TEST(KernelRegistry, InitFailureIsReportedWithThePluginsMessage) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(TestPlugin("init_fails"));
  ASSERT_EQ(st.code(), Code::kPlugin);
  EXPECT_THAT(st.message(), HasSubstr("tessel_plugin_init failed: no licence for this machine"));
}

TEST(KernelRegistry, ExceptionThrownByInitIsCaught) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadPlugin(TestPlugin("init_throws"));
  ASSERT_EQ(st.code(), Code::kPlugin);
  EXPECT_THAT(st.message(), HasSubstr("init exploded"));
}

TEST(KernelRegistry, ExceptionsThrownByKernelsBecomeInternalErrors) {
  KernelRegistry registry(QuietLogger());
  ASSERT_TRUE(registry.LoadPlugin(TestPlugin("throwing")).ok());
  std::vector<double> x(4, 1.0), y(4, 0.0);
  Tensor tx = Tensor::Borrow(x.data(), DType::kF64, {4}), ty = Tensor::Borrow(y.data(), DType::kF64, {4});
  const Status direct = registry.Find("test.throw.fwd", Device::kCpu).value()->Call({&tx}, {&ty}, nullptr);
  EXPECT_EQ(direct.code(), Code::kInternal);
  EXPECT_THAT(direct.message(), HasSubstr("boom from the kernel"));
  EXPECT_THAT(direct.message(), HasSubstr("op test.throw.fwd"));
  ThreadPool pool(3);
  const Status in_pool = registry.Find("test.throw_in_range.fwd", Device::kCpu).value()->Call({&tx}, {&ty}, &pool);
  EXPECT_EQ(in_pool.code(), Code::kInternal);
  EXPECT_THAT(in_pool.message(), HasSubstr("boom from a range"));
}

TEST(KernelRegistry, KernelStatusCarriesCodeAndContext) {
  KernelRegistry registry(QuietLogger());
  ASSERT_TRUE(registry.LoadPlugin(TestPlugin("missing_ops")).ok());
  std::vector<float> x(4, 1.f), y(4, 0.f);
  Tensor tx = Tensor::Borrow(x.data(), DType::kF32, {2, 2}), ty = Tensor::Borrow(y.data(), DType::kF32, {2, 2});
  const Status st = registry.Find("nn.relu.fwd", Device::kCpu).value()->Call({&tx}, {&ty}, nullptr);
  EXPECT_EQ(st.code(), Code::kUsage);  // TESSEL_STATUS_INVALID_ARGUMENT
  EXPECT_THAT(st.message(), HasSubstr("libtest_plugin_missing_ops.so op nn.relu.fwd: f64 only"));
}

TEST(KernelRegistry, LoadDefaultsLoadsLibtesselFilesOfSearchDirs) {
  TempDir dir;
  dir.Copy(testing::RgnnPlugin(), "libtessel_rgnn.so");
  dir.Copy(testing::ExamplePlugin(), "libtessel_example.so");
  dir.Copy(TestPlugin("wrong_abi_major"), "libother.so");  // not libtessel_*: ignored
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadDefaults({}, {dir.path()});
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(registry.plugins().size(), 2u);
  EXPECT_EQ(registry.plugins()[0].name, "example");  // sorted by file name
  EXPECT_EQ(registry.plugins()[1].name, "rgnn");
}

TEST(KernelRegistry, LoadDefaultsStopsAtABrokenPluginInASearchDir) {
  TempDir dir;
  dir.Copy(TestPlugin("wrong_abi_major"), "libtessel_broken.so");
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadDefaults({testing::RgnnPlugin()}, {dir.path()});
  EXPECT_EQ(st.code(), Code::kPlugin);
  EXPECT_THAT(st.message(), HasSubstr("libtessel_broken.so"));
}

TEST(KernelRegistry, LoadDefaultsRefusesAMissingSearchDir) {
  KernelRegistry registry(QuietLogger());
  const Status st = registry.LoadDefaults({}, {"/nonexistent/plugins"});
  EXPECT_EQ(st.code(), Code::kPlugin);
  EXPECT_THAT(st.message(), HasSubstr("/nonexistent/plugins"));
}

TEST(KernelRegistry, KernelPointersSurviveAMoveOfTheRegistry) {
  KernelRegistry registry(QuietLogger());
  ASSERT_TRUE(registry.LoadPlugin(testing::NnPlugin()).ok());
  const Kernel* relu = registry.Find("nn.relu.fwd", Device::kCpu).value();
  KernelRegistry moved = std::move(registry);
  EXPECT_EQ(moved.Find("nn.relu.fwd", Device::kCpu).value(), relu);
  std::vector<double> x = {-1, 2}, y(2);
  Tensor tx = Tensor::Borrow(x.data(), DType::kF64, {1, 2}), ty = Tensor::Borrow(y.data(), DType::kF64, {1, 2});
  ASSERT_TRUE(relu->Call({&tx}, {&ty}, nullptr).ok());
  EXPECT_EQ(y, (std::vector<double>{0, 2}));
}

// A plugin stays mapped once loaded (RTLD_NODELETE, shared_library.h): CUDA registers its kernels for the
// life of the process, and an embedded run loads the plugins twice (the planner's calibration, then the
// worker). A second registry after the first is gone loads it again and its kernels run.
TEST(KernelRegistry, APluginStaysMappedAfterItsRegistryIsGoneAndLoadsAgain) {
  const std::string path = testing::NnPlugin();
  {
    KernelRegistry first(QuietLogger());
    ASSERT_TRUE(first.LoadPlugin(path).ok());
  }
  void* still = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  EXPECT_NE(still, nullptr) << "the plugin was unmapped with its registry";
  if (still != nullptr) dlclose(still);
  KernelRegistry second(QuietLogger());
  ASSERT_TRUE(second.LoadPlugin(path).ok());
  const Kernel* relu = second.Find("nn.relu.fwd", Device::kCpu).value();
  std::vector<double> x = {-3, 4}, y(2);
  Tensor tx = Tensor::Borrow(x.data(), DType::kF64, {1, 2}), ty = Tensor::Borrow(y.data(), DType::kF64, {1, 2});
  ASSERT_TRUE(relu->Call({&tx}, {&ty}, nullptr).ok());
  EXPECT_EQ(y, (std::vector<double>{0, 4}));
}

}  // namespace
}  // namespace tessel::workers
