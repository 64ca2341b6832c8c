// Deliberately broken builds of the example plugin, for the conformance test of `tessel plugin check`:
// the real example (compiled in, its entry point renamed) with one op's results corrupted after each
// call, chosen by the BROKEN_* definition of the build:
//   BROKEN_WRONG_VALUE       nn.relu.fwd is wrong at one element when its size is odd and above 1
//   BROKEN_WRITE_PAST        nn.relu.fwd writes one element past the end of Y
//   BROKEN_WRONG_GRADIENT    nn.relu.bwd returns half the gradient
//   BROKEN_NONDETERMINISTIC  nn.relu.fwd moves Y[0] by one ulp on every second call
//   BROKEN_HANG              nn.relu.fwd on the CPU never returns from its third call on: a kernel that
//                            stops making progress mid-run, for the step watchdogs (tests/cluster/hung_kernel.sh),
//                            not for the conformance run
//   BROKEN_SLOW              nn.relu.fwd on the CPU takes 60 ms longer in MPI world rank 2 (OMPI_COMM_WORLD_RANK,
//                            which mpirun sets): a straggler on demand, for the straggler watch
//                            (tests/cluster/prometheus_live.sh), not for the conformance run
// Each of the others should fail exactly that op's rows of the check, naming the failure.
#define tessel_plugin_init example_plugin_init
#include "plugins/example/example_plugin.cc"
#undef tessel_plugin_init

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace {

struct Wrapped {
  tessel_kernel_fn fn;
  void* state;
  bool relu_fwd, relu_bwd;
};
std::vector<std::unique_ptr<Wrapped>>* g_wrapped = new std::vector<std::unique_ptr<Wrapped>>;
tessel_status* (*g_register)(void*, const tessel_kernel_def*) = nullptr;
std::atomic<int> g_calls{0};

template <typename T>
void Corrupt(const Wrapped& w, tessel_tensor& y) {
  T* out = static_cast<T*>(y.data);
  const int64_t n = Numel(y);
  (void)n;
#if defined(BROKEN_WRONG_VALUE)
  if (w.relu_fwd && n > 1 && n % 2 == 1) out[n / 2] += T(1);
#elif defined(BROKEN_WRITE_PAST)
  if (w.relu_fwd) out[n] = T(0);
#elif defined(BROKEN_WRONG_GRADIENT)
  if (w.relu_bwd) {
    for (int64_t i = 0; i < n; ++i) out[i] *= T(0.5);
  }
#elif defined(BROKEN_NONDETERMINISTIC)
  if (w.relu_fwd && g_calls.fetch_add(1) % 2 == 1) out[0] = std::nextafter(out[0], T(2));
#elif defined(BROKEN_HANG) || defined(BROKEN_SLOW)
  (void)w, (void)out;
#else
#error "define one BROKEN_* kind"
#endif
}

tessel_status* Faulty(void* state, const tessel_kernel_call* call) {
  const auto& w = *static_cast<const Wrapped*>(state);
#if defined(BROKEN_HANG)
  if (w.relu_fwd && call->outputs[0].device == TESSEL_DEVICE_CPU && g_calls.fetch_add(1) >= 2) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
#elif defined(BROKEN_SLOW)
  static const bool slow = [] {
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    return rank != nullptr && std::strcmp(rank, "2") == 0;
  }();
  if (slow && w.relu_fwd && call->outputs[0].device == TESSEL_DEVICE_CPU) {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
#endif
  tessel_status* st = w.fn(w.state, call);
  if (st != nullptr || call->outputs[0].device != TESSEL_DEVICE_CPU) return st;
  if (call->outputs[0].dtype == TESSEL_DTYPE_F64) {
    Corrupt<double>(w, call->outputs[0]);
  } else {
    Corrupt<float>(w, call->outputs[0]);
  }
  return nullptr;
}

tessel_status* RegisterFaulty(void* registry, const tessel_kernel_def* def) {
  g_wrapped->push_back(std::make_unique<Wrapped>(Wrapped{
      def->fn, def->kernel_state, std::strcmp(def->op, "nn.relu.fwd") == 0, std::strcmp(def->op, "nn.relu.bwd") == 0}));
  tessel_kernel_def copy = *def;
  copy.fn = &Faulty;
  copy.kernel_state = g_wrapped->back().get();
  return g_register(registry, &copy);
}

}  // namespace

extern "C" TESSEL_PLUGIN_EXPORT tessel_status* tessel_plugin_init(const tessel_host_api* host,
                                                                  tessel_plugin_info* info) {
  tessel_host_api wrapped = *host;
  g_register = host->register_kernel;
  wrapped.register_kernel = &RegisterFaulty;
  tessel_status* st = example_plugin_init(&wrapped, info);
  info->name = "broken_example";
  return st;
}
