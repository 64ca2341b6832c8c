// What the GPT stage tests give the executor, as a worker does: the built plugins, one worker's
// communicators and two threads (TestWorker), and the executor of an assignment built through the
// registry from its encoded bytes (BuildStage). TESSEL_BINARY_DIR names the build tree (CMake).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/byte_io.h"
#include "core/thread_pool.h"
#include "workers/comm/comm.h"
#include "workers/executor_registry.h"
#include "workers/llm/llm_settings.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::workers {

struct TestWorker {
  KernelRegistry kernels{Logger("test", LogLevel::kWarn)};
  LocalComm comm;
  HostDeviceComm device_comm{comm};
  ThreadPool pool{2};

  TestWorker() {
    for (const char* name : {"libtessel_nn.so", "libtessel_llm.so"}) {
      const Status st = kernels.LoadPlugin(std::string(TESSEL_BINARY_DIR) + "/plugins/" + name);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
  }
  // The context of an executor of this worker; `seed` is the job's.
  ExecutorContext Context(uint64_t seed) {
    ExecutorContext c;
    c.comm = &comm;
    c.device_comm = &device_comm;
    c.pool = &pool;
    c.kernels = &kernels;
    c.seed = seed;
    return c;
  }
};

// The executor of `a`, through the registry and the assignment bytes as a worker builds it.
inline Result<std::unique_ptr<Executor>> BuildStage(const LlmStageAssignment& a, const ExecutorContext& c) {
  ByteWriter out;
  a.Encode(out);
  const std::vector<uint8_t> bytes = out.Take();
  ByteReader in(bytes.data(), bytes.size());
  TESSEL_ASSIGN_OR_RETURN(const ExecutorFactory* factory, FindExecutor(LlmStageAssignment::kKind));
  std::unique_ptr<AssignmentPayload> payload = factory->decode(in);
  if (!in.ok() || payload == nullptr) return InternalError(StrCat("decoding the assignment: ", in.error()));
  return factory->build(std::move(payload), c);
}

}  // namespace tessel::workers
