#include "orchestrator/planners/stage_calibration.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <tessel/bf16.h>
#include <tessel/ops/llm.h>
#include <tessel/ops/nn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/cuda_device.h"
#include "core/process_memory.h"
#include "core/thread_pool.h"
#include "storage/spill_store.h"
#include "workers/kernel_set.h"
#include "workers/plugin_host/kernel_registry.h"

namespace tessel::orchestrator {
namespace {

// Fills host memory with small pseudo-random values (the calibration's inputs).
void Fill(Tensor& t, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  const auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53);
  };
  if (t.dtype() == DType::kF32) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(0.1 * (next() - 0.5));
  } else if (t.dtype() == DType::kBF16) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<Bf16>()[i] = ToBf16(static_cast<float>(0.1 * (next() - 0.5)));
  }
}

}  // namespace

Result<StageCosts> Calibrate(const jobs::JobSpec& spec, const workers::GptConfig& m,
                             const workers::LlmTrainSettings& t) {
  const auto started = std::chrono::steady_clock::now();
  CudaStream stream;  // declared first, so destroyed last: the plugins' cuBLAS handles are bound to it
  workers::KernelRegistry registry;
  registry.SetPreference(spec.plugins.prefer);
  TESSEL_RETURN_IF_ERROR(registry.LoadDefaults(spec.plugins.paths, spec.plugins.search_dirs));
  Result<std::unique_ptr<ThreadPool>> threads = ThreadPool::Create(spec.resources.threads_per_worker);
  if (!threads.ok()) {
    return UsageError(StrCat("resources.threads_per_worker = ", spec.resources.threads_per_worker, ": the calibration ",
                             threads.status().message()));
  }
  ThreadPool& pool = **threads;
  workers::ExecutorContext context;
  context.pool = &pool;
  context.kernels = &registry;
  // A GPU job's kernels are timed on this rank's first GPU, where it sees one: the workers' times, not
  // the CPU's (which also took 36-40 s at GPT-2 124M's shape, issue 17).
  const CudaProbe probe = ProbeCuda();
  const bool gpu = spec.job.device != jobs::DeviceChoice::kCpu && probe.usable();
  StageCosts costs;
  if (gpu) {
    TESSEL_RETURN_IF_ERROR(SelectCudaDevice(0));
    TESSEL_ASSIGN_OR_RETURN(stream, CudaStream::Create());
    context.device = workers::DeviceContext{Device::kCuda, 0, stream.get(), &CudaAllocator()};
    costs.device = Device::kCuda;
  } else if (spec.job.device == jobs::DeviceChoice::kCuda) {
    costs.note = StrCat("this rank sees no usable GPU (", probe.problem,
                        "): calibrated on its CPU, so the predicted "
                        "times are the CPU's, not the GPU workers'");
  }
  const Device dev = context.device.device;
  workers::KernelSet k(registry, context);
  const int64_t b = t.microbatch, s = t.seq_len, c = m.width, h = m.heads, v = m.vocab, n = b * s;
  // The activations' and working weights' dtype (the job's precision); statistics and gradients are f32.
  const DType act = workers::ActivationDType(t.precision);
  // Before any tensor: the calibration's own tensors, from the shapes below (a block's activations, weights
  // and gradients; the tied embedding, the logits of up to 1024 rows, the positions), against this host's
  // memory. A model too large to calibrate here is refused naming its settings (exit 6), rather than
  // allocated until the allocator fails or the kernel's OOM killer ends the process.
  if (!gpu) {
    const double a = static_cast<double>(DTypeSize(act)), cd = static_cast<double>(c);
    const double activations = static_cast<double>(n) * cd * 23 * a;  // x y dy, qkv dqkv, att datt, wide wide2 dwide
    const double weights = (12.0 * cd * cd + 9.0 * cd) * (a + 4);
    const double head = (static_cast<double>(v) + static_cast<double>(s)) * cd * (a + 4) +
                        static_cast<double>(std::min<int64_t>(n, 1024)) * static_cast<double>(v) * a;
    const double host = static_cast<double>(HostMemoryBytes());
    if (host > 0 && activations + weights + head > host) {
      char need[96];
      std::snprintf(need, sizeof need, "%.3g bytes (%.3g of them one block's weights, %.3g its activations)",
                    activations + weights + head, weights, activations);
      char have[32];
      std::snprintf(have, sizeof have, "%.3g", host);
      return StorageError(
          StrCat("out of memory: the calibration's tensors need ", need, ", more than this host's ", have,
                 " bytes of memory; they come from model.hidden = ", c, ", ", n,
                 " tokens a micro-batch (train.microbatch_size x train.seq_len) and model.vocab_size = ", v,
                 ": lower them, or plan on a larger host"));
    }
  }
  std::vector<Tensor> keep;
  keep.reserve(64);  // every tensor below (44), so that the pointers handed out stay valid
  // A tensor of small pseudo-random values (or what `init` writes), on the device the kernels run on.
  // An allocation that fails names the tensor and the settings its shape comes from (exit 6).
  const auto failed = [&](std::string_view name, const Status& st) {
    return Status(st.code(),
                  StrCat("the calibration's tensor '", name, "', ", st.message(), "; its shape comes from ",
                         "model.hidden = ", c, ", ", n, " tokens a micro-batch (train.microbatch_size x ",
                         "train.seq_len) and model.vocab_size = ", v, ": lower them, or plan on a larger host"));
  };
  const auto make = [&](std::string_view name, DType dtype, std::vector<int64_t> shape,
                        const std::function<void(Tensor&)>& init = nullptr) -> Result<Tensor*> {
    Result<Tensor> allocated = Tensor::Zeros(dtype, shape);
    if (!allocated.ok()) return failed(name, allocated.status());
    Tensor host = std::move(allocated).value();
    init ? init(host) : Fill(host, keep.size() + 1);
    if (!gpu) {
      keep.push_back(std::move(host));
      return &keep.back();
    }
    Result<Tensor> on_gpu = Tensor::Empty(dtype, std::move(shape), CudaAllocator());
    if (!on_gpu.ok()) return failed(name, on_gpu.status());
    Tensor x = std::move(on_gpu).value();
    TESSEL_RETURN_IF_ERROR(CopyMemory(x.raw(), Device::kCuda, host.raw(), Device::kCpu, host.nbytes(), stream.get()));
    keep.push_back(std::move(x));
    return &keep.back();
  };
  TESSEL_ASSIGN_OR_RETURN(Tensor * x, make("x", act, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * y, make("y", act, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dy, make("dy", act, {n, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * mean, make("mean", DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * rstd, make("rstd", DType::kF32, {n}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * lw, make("lw", act, {c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * lb, make("lb", act, {c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dlw, make("dlw", DType::kF32, {c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dlb, make("dlb", DType::kF32, {c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * qkv, make("qkv", act, {b, s, 3 * c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dqkv, make("dqkv", act, {b, s, 3 * c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * att, make("att", act, {b, s, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * datt, make("datt", act, {b, s, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * lse, make("lse", DType::kF32, {b, h, s}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * wide, make("wide", act, {n, 4 * c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * wide2, make("wide2", act, {n, 4 * c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dwide, make("dwide", act, {n, 4 * c}));
  struct Lin {
    Tensor *w, *b, *dw, *db;
  };
  const auto linear = [&](const std::string& name, int64_t out, int64_t in) -> Result<Lin> {
    Lin l;
    TESSEL_ASSIGN_OR_RETURN(l.w, make(name + ".w", act, {out, in}));
    TESSEL_ASSIGN_OR_RETURN(l.b, make(name + ".b", act, {out}));
    TESSEL_ASSIGN_OR_RETURN(l.dw, make(name + ".dw", DType::kF32, {out, in}));
    TESSEL_ASSIGN_OR_RETURN(l.db, make(name + ".db", DType::kF32, {out}));
    return l;
  };
  TESSEL_ASSIGN_OR_RETURN(Lin lqkv, linear("qkv", 3 * c, c));
  TESSEL_ASSIGN_OR_RETURN(Lin lproj, linear("attn_proj", c, c));
  TESSEL_ASSIGN_OR_RETURN(Lin lfc, linear("fc", 4 * c, c));
  TESSEL_ASSIGN_OR_RETURN(Lin lfcproj, linear("fc_proj", c, 4 * c));
  // The attention's lse must be a real log-sum-exp for the backward to see realistic values.
  const tessel_layernorm_params ln{sizeof(tessel_layernorm_params), 1e-5};
  const tessel_attention_params at{sizeof(tessel_attention_params), m.heads};
  Tensor qkv2 = Tensor::Borrow(qkv->raw(), act, {n, 3 * c}, dev);
  Tensor dqkv2 = Tensor::Borrow(dqkv->raw(), act, {n, 3 * c}, dev);
  Tensor att2 = Tensor::Borrow(att->raw(), act, {n, c}, dev);
  Tensor datt2 = Tensor::Borrow(datt->raw(), act, {n, c}, dev);
  Tensor fx = Tensor::Borrow(x->raw(), act, {n * c}, dev), fy = Tensor::Borrow(y->raw(), act, {n * c}, dev);
  const auto block_forward = [&]() -> Status {
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_layernorm_fwd, {x, lw, lb}, {y, mean, rstd}, ln));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_fwd, {y, lqkv.w, lqkv.b}, {&qkv2}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_attention_fwd, {qkv}, {att, lse}, at));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_fwd, {&att2, lproj.w, lproj.b}, {y}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_add, {&fx, &fy}, {&fy}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_layernorm_fwd, {x, lw, lb}, {y, mean, rstd}, ln));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_gelu_tanh_fwd, {y, lfc.w, lfc.b}, {wide2, wide}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_fwd, {wide2, lfcproj.w, lfcproj.b}, {y}));
    return k.Call(tessel_op_nn_add, {&fx, &fy}, {&fy});
  };
  const auto block = [&]() -> Status {
    TESSEL_RETURN_IF_ERROR(block_forward());
    // The backward regenerates the GELU's output it does not keep (workers/llm/gpt_stage.cc).
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_gelu_tanh_fwd, {wide}, {wide2}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_bwd, {dy, wide2, lfcproj.w}, {dwide, lfcproj.dw, lfcproj.db}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_gelu_tanh_bwd, {dwide, wide}, {wide2}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_bwd, {wide2, y, lfc.w}, {x, lfc.dw, lfc.db}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_layernorm_bwd, {x, y, lw, mean, rstd}, {dy, dlw, dlb}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_bwd, {dy, &att2, lproj.w}, {&datt2, lproj.dw, lproj.db}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_attention_bwd, {datt, qkv, att, lse}, {dqkv}, at));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_bwd, {&dqkv2, y, lqkv.w}, {x, lqkv.dw, lqkv.db}));
    return k.Call(tessel_op_llm_layernorm_bwd, {x, y, lw, mean, rstd}, {dy, dlw, dlb});
  };
  // The head: final LayerNorm, logits against the tied embedding, loss (its gradient over the logits, as
  // the executor does); and back. Timed on at most 1024 of
  // the micro-batch's rows and scaled to all of them (its cost is linear in the rows; a GPT-2 vocabulary
  // would otherwise cost gigabytes of logits and seconds of calibration).
  const int64_t hn = std::min<int64_t>(n, 1024);
  TESSEL_ASSIGN_OR_RETURN(Tensor * wte, make("wte", act, {v, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dwte, make("dwte", DType::kF32, {v, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * logits, make("logits", act, {hn, v}));
  const auto zeros = [](Tensor&) {};
  TESSEL_ASSIGN_OR_RETURN(Tensor * head_bias, make("head_bias", act, {v}, zeros));  // the tied head has no bias
  Tensor no_bias = Tensor::Borrow(nullptr, DType::kF32, {0}, dev);
  TESSEL_ASSIGN_OR_RETURN(Tensor * targets, make("targets", DType::kI64, {hn}, [&](Tensor& x) {
                            for (int64_t i = 0; i < hn; ++i) x.data<int64_t>()[i] = i % v;
                          }));
  TESSEL_ASSIGN_OR_RETURN(Tensor * mask, make("mask", DType::kU8, {hn}, [&](Tensor& x) {
                            for (int64_t i = 0; i < hn; ++i) x.data<uint8_t>()[i] = 1;
                          }));
  TESSEL_ASSIGN_OR_RETURN(Tensor * loss, make("loss", DType::kF64, {1}, zeros));
  TESSEL_ASSIGN_OR_RETURN(Tensor * correct, make("correct", DType::kI64, {1}, zeros));
  Tensor hx = Tensor::Borrow(x->raw(), act, {hn, c}, dev), hy = Tensor::Borrow(y->raw(), act, {hn, c}, dev);
  Tensor hdy = Tensor::Borrow(dy->raw(), act, {hn, c}, dev);
  Tensor hmean = Tensor::Borrow(mean->raw(), DType::kF32, {hn}, dev);
  Tensor hrstd = Tensor::Borrow(rstd->raw(), DType::kF32, {hn}, dev);
  const auto head = [&]() -> Status {
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_layernorm_fwd, {&hx, lw, lb}, {&hy, &hmean, &hrstd}, ln));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_fwd, {&hy, wte, head_bias}, {logits}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_softmax_xent, {logits, targets, mask}, {loss, correct, logits},
                                  tessel_softmax_xent_params{sizeof(tessel_softmax_xent_params), 1.0 / n}));
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_nn_linear_bwd, {logits, &hy, wte}, {&hdy, dwte, &no_bias}));
    return k.Call(tessel_op_llm_layernorm_bwd, {&hdy, &hx, lw, &hmean, &hrstd}, {&hy, dlw, dlb});
  };
  TESSEL_ASSIGN_OR_RETURN(Tensor * wpe, make("wpe", act, {s, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * dwpe, make("dwpe", DType::kF32, {s, c}));
  TESSEL_ASSIGN_OR_RETURN(Tensor * tokens, make("tokens", DType::kI32, {b, s}, [&](Tensor& x) {
                            for (int64_t i = 0; i < n; ++i) x.data<int32_t>()[i] = static_cast<int32_t>(i % v);
                          }));
  Tensor x3 = Tensor::Borrow(x->raw(), act, {b, s, c}, dev), dy3 = Tensor::Borrow(dy->raw(), act, {b, s, c}, dev);
  const auto embed = [&]() -> Status {
    TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_encoder_fwd, {wte, wpe, tokens}, {&x3}));
    return k.Call(tessel_op_llm_encoder_bwd, {&dy3, tokens}, {dwte, dwpe});
  };
  TESSEL_RETURN_IF_ERROR(k.Call(tessel_op_llm_attention_fwd, {qkv}, {att, lse}, at));
  // Each run's time ends when the GPU has done its work.
  const auto best_of = [&](int reps, const auto& fn) -> Result<double> {
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < reps; ++r) {
      const auto start = std::chrono::steady_clock::now();
      TESSEL_RETURN_IF_ERROR(fn());
      TESSEL_RETURN_IF_ERROR(SyncStream(dev, stream.get()));
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return best;
  };
  TESSEL_RETURN_IF_ERROR(block());  // first touches (on a GPU: module loads, cuBLAS's handle and workspace)
  TESSEL_RETURN_IF_ERROR(head());
  TESSEL_RETURN_IF_ERROR(embed());
  TESSEL_ASSIGN_OR_RETURN(costs.block_seconds, best_of(3, block));
  TESSEL_ASSIGN_OR_RETURN(costs.block_forward_seconds, best_of(3, block_forward));
  TESSEL_ASSIGN_OR_RETURN(costs.head_seconds, best_of(3, head));
  costs.head_seconds *= static_cast<double>(n) / static_cast<double>(hn);
  TESSEL_ASSIGN_OR_RETURN(costs.embed_seconds, best_of(3, embed));
  costs.tokens = n, costs.width = c, costs.heads = h, costs.vocab = v, costs.padded_vocab = m.padded_vocab;
  costs.context = m.context;
  costs.precision = t.precision;
  // What a worker holds besides its tensors, measured in this process, which is like a worker's: the same
  // plugins and the libraries they link, the BLAS buffers the kernels above touched, the token data. Less
  // the calibration's own tensors, still alive here.
  int64_t calibration_bytes = 0;
  for (const Tensor& t : keep) calibration_bytes += static_cast<int64_t>(t.nbytes());
  costs.process_bytes = gpu ? 0 : std::max<int64_t>(0, ResidentBytes() - calibration_bytes);
  costs.calibration_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return costs;
}

Result<SpillBandwidth> MeasureSpillBandwidth(const jobs::JobSpec& spec, int64_t slot_bytes) {
  constexpr int64_t kAlign = 4096, kSlots = 4, kMinSlot = 64 << 10;
  slot_bytes = std::clamp<int64_t>(slot_bytes, int64_t{4} << 20, int64_t{64} << 20) / kAlign * kAlign;
  // The buffer outlives the store: the store's I/O thread may still be reading it when the probe stops
  // early (a write found no space), and the store's destructor drains that thread first. (Declared the
  // other way round, a failed first write freed the buffer under the other three: a segmentation fault
  // in the spill I/O thread's memcpy on a small disk.)
  Tensor buffer;
  // Opening the store checks that the directory can be written (exit 6 when not).
  TESSEL_ASSIGN_OR_RETURN(
      std::unique_ptr<storage::SpillStore> store,
      storage::SpillStore::Open({spec.spill.dir, StrCat(spec.job.name, "-bandwidth-probe"), spec.spill.checksum, 0}));
  SpillBandwidth measured;
  // The probe fits in what it measures: at most a quarter of the free space, so that a small disk is
  // measured with less, and a nearly full one not at all (it is then as good as full: the blocks keep or
  // recompute, and an offloading block falls back to recomputing when a write finds no space).
  if (struct statvfs fs; ::statvfs(storage::SpillDirectory(spec.spill.dir).c_str(), &fs) == 0) {
    measured.free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
    slot_bytes = std::min(slot_bytes, measured.free_bytes / (4 * kSlots) / kAlign * kAlign);
  }
  if (slot_bytes < kMinSlot) return measured;
  TESSEL_ASSIGN_OR_RETURN(buffer, Tensor::Empty(DType::kU8, {kSlots * slot_bytes}));
  for (int64_t i = 0; i < buffer.numel(); ++i) buffer.data<uint8_t>()[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  using Clock = std::chrono::steady_clock;
  const auto run = [&](bool write) -> Result<double> {
    const auto start = Clock::now();
    std::vector<storage::SpillStore::Ticket> tickets;
    for (int64_t k = 0; k < kSlots; ++k) {
      uint8_t* at = buffer.data<uint8_t>() + k * slot_bytes;
      tickets.push_back(write ? store->Write(k, at, slot_bytes) : store->Read(k, at, slot_bytes));
    }
    if (write) tickets.push_back(store->Sync());
    Status first;  // every ticket is waited for, failed or not: none is left in flight
    for (storage::SpillStore::Ticket t : tickets) {
      Status st = store->Wait(t);
      if (first.ok() && !st.ok()) first = std::move(st);
    }
    TESSEL_RETURN_IF_ERROR(first);
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  Result<double> written = run(true);
  if (!written.ok() && storage::IsNoSpace(written.status())) return measured;  // filled up meanwhile
  TESSEL_ASSIGN_OR_RETURN(const double write_seconds, std::move(written));
  // Reads from the disk, not from the page cache.
  if (const int fd = ::open(store->path().c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  TESSEL_ASSIGN_OR_RETURN(const double read_seconds, run(false));
  const double bytes = static_cast<double>(kSlots * slot_bytes);
  measured.write_bytes_per_second = bytes / std::max(write_seconds, 1e-9);
  measured.read_bytes_per_second = bytes / std::max(read_seconds, 1e-9);
  measured.probe_bytes = kSlots * slot_bytes;
  return measured;
}

}  // namespace tessel::orchestrator
