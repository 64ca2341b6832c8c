// KernelSet's checks before training: every op present on the device (Require), and every op's kernel
// taking the run's activation dtype (RequireDType, which train.precision = "bf16" asks for), with the
// real nn plugin: nn.linear.fwd and nn.add take bf16 on the CPU, nn.relu.fwd does not.
#include "workers/kernel_set.h"

#include <gtest/gtest.h>
#include <tessel/ops/nn.h>

#include "workers/plugin_host/kernel_registry.h"

namespace tessel::workers {
namespace {

KernelRegistry LoadNn() {
  KernelRegistry registry;
  const Status st = registry.LoadPlugin(std::string(TESSEL_BINARY_DIR) + "/plugins/libtessel_nn.so");
  EXPECT_TRUE(st.ok()) << st.ToString();
  return registry;
}

TEST(KernelSet, RequireDTypeAcceptsKernelsThatTakeTheDType) {
  const KernelRegistry registry = LoadNn();
  ExecutorContext context;
  KernelSet k(registry, context);
  EXPECT_TRUE(k.RequireDType({&tessel_op_nn_linear_fwd, &tessel_op_nn_add}, DType::kBF16, "bf16").ok());
  EXPECT_TRUE(k.RequireDType({&tessel_op_nn_relu_fwd}, DType::kF32, "f32").ok());
}

TEST(KernelSet, RequireDTypeNamesEveryOpThatDoesNotTakeIt) {
  const KernelRegistry registry = LoadNn();
  ExecutorContext context;
  KernelSet k(registry, context);
  const Status st = k.RequireDType({&tessel_op_nn_linear_fwd, &tessel_op_nn_relu_fwd, &tessel_op_nn_relu_bwd},
                                   DType::kBF16, "train.precision = \"bf16\"");
  EXPECT_EQ(st.code(), Code::kPlugin) << st.ToString();
  EXPECT_NE(st.message().find("train.precision = \"bf16\" needs bf16 kernels on cpu"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("nn.relu.fwd ("), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("nn.relu.bwd ("), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("libtessel_nn.so"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("nn.linear.fwd"), std::string::npos) << "linear takes bf16: " << st.message();
}

TEST(KernelSet, RequireDTypeOfAMissingOpIsThePluginError) {
  KernelRegistry empty;
  ExecutorContext context;
  KernelSet k(empty, context);
  const Status st = k.RequireDType({&tessel_op_nn_linear_fwd}, DType::kBF16, "bf16");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nn.linear.fwd"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tessel::workers
