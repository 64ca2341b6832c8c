// tessel-bench-metrics-cost: what monitoring costs, measured in-process where a whole job's step-time noise
// cannot hide it (bench/metrics/metrics_bench.py combines it with the jobs' step times):
//   update_us_per_step  the Metrics calls the worker runtime makes after every step (workers/worker.cc,
//                       StepFigures and RunAssignment) plus an executor's halo, gather and spill updates;
//   csv_us_per_row      one RunCsv::Append of a full row (flushed);
//   scrape_us           one scrape: Collect() and the text serialisation of a worker's registry, as the
//                       exporter's handler does it;
//   timer_us_per_call   what a sampled step's KernelTimer adds to one kernel call (workers/plugin_host/
//                       kernel_timer.h: two clock reads and a sum under a lock), and timer_off_us_per_call
//                       on the other steps (one branch), both over a call that does nothing.
// Prints one JSON object. Medians of 9 rounds.
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/common/bench_common.h"
#include "core/process_memory.h"
#include "monitoring/metrics.h"
#include "monitoring/run_csv.h"
#include "workers/plugin_host/kernel_timer.h"

namespace {

using tessel::bench::Clock;

template <typename F>
double MedianMicros(int rounds, int iterations, F&& body) {
  std::vector<double> us;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) body(i);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iterations);
  }
  return tessel::bench::Median(us);
}

}  // namespace

int main() {
  using tessel::monitoring::Metrics;
  Metrics metrics({"bench", 1, "worker"}, "0.1.0");
  metrics.Set("tessel_plugin_info", 1, {"nn", "0.1.0", "1.1", "nn.relu.fwd", "cpu"});
  // One step's updates, as workers/step_figures.cc and the executors make them.
  const double update = MedianMicros(9, 20000, [&](int i) {
    metrics.Add("tessel_halo_exchange_bytes_total", 1 << 20, {"sent"});
    metrics.Add("tessel_halo_exchange_bytes_total", 1 << 20, {"received"});
    metrics.Add("tessel_gather_bytes_total", 1 << 16, {"local"});
    metrics.Add("tessel_gather_bytes_total", 1 << 12, {"remote"});
    metrics.Add("tessel_spill_written_bytes_total", 1 << 20);
    metrics.Add("tessel_spill_read_bytes_total", 1 << 20);
    metrics.Add("tessel_spill_wait_seconds_total", 0.001);
    metrics.Set("tessel_activation_resident_bytes", 1 << 24);
    metrics.Observe("tessel_forward_duration_seconds", 0.01);
    metrics.Observe("tessel_backward_duration_seconds", 0.02);
    metrics.Add("tessel_samples_total", 4096, {"tokens"});
    metrics.Set("tessel_learning_rate", 3e-4);
    metrics.Add("tessel_peer_wait_seconds_total", 0.001, {"allreduce"});
    metrics.Add("tessel_pipeline_bytes_total", 1 << 16, {"sent"});
    metrics.Add("tessel_pipeline_bytes_total", 1 << 16, {"received"});
    metrics.Set("tessel_resident_memory_bytes", static_cast<double>(tessel::ResidentBytes()));
    for (std::string_view kind : tessel::monitoring::kMemoryKinds) metrics.Set("tessel_memory_bytes", 1 << 20, {kind});
    (void)metrics.Totals();
    metrics.ObserveStep(0.03);
    metrics.Set("tessel_loss", 1.0 / (i + 1));
    metrics.Set("tessel_epoch", i);
  });
  const std::string path =
      std::filesystem::temp_directory_path() / ("metrics-cost." + std::to_string(::getpid()) + ".csv");
  double csv = 0;
  {
    auto out = tessel::monitoring::RunCsv::Open(path);
    if (!out.ok()) {
      std::fprintf(stderr, "%s\n", out.status().message().c_str());
      return 1;
    }
    tessel::Record row;
    for (std::string_view c : tessel::monitoring::kStepColumns) tessel::Set(row, c, 12345.678);
    csv = MedianMicros(9, 2000, [&](int i) { (void)out->Append(1, i, row); });
  }
  std::filesystem::remove(path);
  auto registry = metrics.registry();
  size_t bytes = 0;
  const double scrape =
      MedianMicros(9, 200, [&](int) { bytes = prometheus::TextSerializer().Serialize(registry->Collect()).size(); });
  tessel::workers::KernelTimer timer(2);
  const std::string op = "nn.linear.fwd";
  auto nothing = [] { return tessel::Status(); };
  timer.BeginStep(1);  // sampled
  const double bare = MedianMicros(9, 200000, [&](int) { (void)nothing(); });
  const double timed =
      MedianMicros(9, 200000, [&](int) { (void)timer.Time(op, tessel::Device::kCpu, nullptr, nothing); });
  (void)timer.EndStep();
  timer.BeginStep(2);  // not sampled
  const double untimed =
      MedianMicros(9, 200000, [&](int) { (void)timer.Time(op, tessel::Device::kCpu, nullptr, nothing); });
  std::printf(
      "{\"update_us_per_step\": %.3f, \"csv_us_per_row\": %.3f, \"scrape_us\": %.1f, \"scrape_bytes\": %zu, "
      "\"timer_us_per_call\": %.4f, \"timer_off_us_per_call\": %.4f}\n",
      update, csv, scrape, bytes, std::max(0.0, timed - bare), std::max(0.0, untimed - bare));
  return 0;
}
