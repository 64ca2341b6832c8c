#include "workers/plugin_host/conformance.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <iomanip>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "core/allocator.h"
#include "core/thread_pool.h"
#include "workers/plugin_host/conformance_case.h"
#include "workers/plugin_host/op_table.h"

namespace tessel::workers {
namespace {

using conformance::Buffer;
using conformance::Case;
using conformance::ForwardOf;
using conformance::IsFloating;
using conformance::kGuard;
using conformance::kTimingVariant;
using conformance::kVariants;
using conformance::ShapeText;

// ---------------------------------------------------------------------------------------------------
// Running a kernel.

std::vector<Tensor> Views(const std::vector<Buffer>& buffers) {
  std::vector<Tensor> out;
  for (const Buffer& b : buffers) out.push_back(b.View());
  return out;
}

Status CallOn(const Kernel& kernel, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Case& c,
              ThreadPool& pool) {
  std::vector<const Tensor*> ip;
  std::vector<Tensor*> op;
  for (const Tensor& t : in) ip.push_back(&t);
  for (Tensor& t : out) op.push_back(&t);
  return kernel.Call(ip, op, CallOptions{&pool, nullptr, 0, nullptr, nullptr, nullptr},
                     c.params.empty() ? nullptr : c.params.data(), c.params.size());
}

// A case's buffers on the GPU, guards included.
class DeviceCopy {
 public:
  DeviceCopy() = default;
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() {
    for (void* p : memory_) CudaAllocator().Free(p);
  }
  Status Upload(const Case& c) {
    for (const auto* list : {&c.inputs, &c.outputs}) {
      for (const Buffer& b : *list) {
        TESSEL_ASSIGN_OR_RETURN(void* p, CudaAllocator().Allocate(b.total()));
        memory_.push_back(p);
        TESSEL_RETURN_IF_ERROR(CopyMemory(p, Device::kCuda, b.base(), Device::kCpu, b.total()));
        Tensor t = Tensor::Borrow(static_cast<uint8_t*>(p) + kGuard, b.dtype(), b.shape(), Device::kCuda);
        (list == &c.inputs ? inputs_ : outputs_).push_back(std::move(t));
      }
    }
    return Status::Ok();
  }
  Status Download(Case& c) const {
    TESSEL_RETURN_IF_ERROR(SyncStream(Device::kCuda, nullptr));
    size_t i = 0;
    for (auto* list : {&c.inputs, &c.outputs}) {
      for (Buffer& b : *list)
        TESSEL_RETURN_IF_ERROR(CopyMemory(b.base(), Device::kCpu, memory_[i++], Device::kCuda, b.total()));
    }
    return Status::Ok();
  }
  std::vector<Tensor> inputs_, outputs_;

 private:
  std::vector<void*> memory_;
};

// Runs `kernel` on `c` (in place: its buffers come back as the kernel left them, guards included).
Status Run(const Kernel& kernel, Case& c, ThreadPool& pool) {
  if (kernel.device() == Device::kCpu) {
    std::vector<Tensor> out = Views(c.outputs);
    return CallOn(kernel, Views(c.inputs), out, c, pool);
  }
  DeviceCopy dev;
  TESSEL_RETURN_IF_ERROR(dev.Upload(c));
  TESSEL_RETURN_IF_ERROR(CallOn(kernel, dev.inputs_, dev.outputs_, c, pool));
  return dev.Download(c);
}

// A kernel set up to be called again and again on its own copy of a case (on its device).
class Timed {
 public:
  Timed(const Kernel& kernel, const Case& c, ThreadPool& pool) : kernel_(kernel), pool_(pool), scratch_(c) {}
  Status Prepare() {
    if (kernel_.device() == Device::kCuda) {
      TESSEL_RETURN_IF_ERROR(dev_.Upload(scratch_));
      in_ = dev_.inputs_;
      out_ = dev_.outputs_;
    } else {
      in_ = Views(scratch_.inputs);
      out_ = Views(scratch_.outputs);
    }
    return Call(nullptr);  // warm-up: first touches, lazy initialisation
  }
  Status Call(std::vector<double>* seconds) {
    const auto start = std::chrono::steady_clock::now();
    TESSEL_RETURN_IF_ERROR(CallOn(kernel_, in_, out_, scratch_, pool_));
    TESSEL_RETURN_IF_ERROR(SyncStream(kernel_.device(), nullptr));
    if (seconds != nullptr)
      seconds->push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return Status::Ok();
  }

 private:
  const Kernel& kernel_;
  ThreadPool& pool_;
  Case scratch_;
  DeviceCopy dev_;
  std::vector<Tensor> in_, out_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median times of `runs` calls of `kernel` and of `other` (when not null) on `c`, their calls
// interleaved so that both see the same machine.
Result<std::pair<double, double>> TimeBoth(const Kernel& kernel, const Kernel* other, const Case& c, ThreadPool& pool,
                                           int runs) {
  Timed a(kernel, c, pool);
  std::optional<Timed> b;
  TESSEL_RETURN_IF_ERROR(a.Prepare());
  if (other != nullptr) {
    b.emplace(*other, c, pool);
    TESSEL_RETURN_IF_ERROR(b->Prepare());
  }
  std::vector<double> ta, tb;
  for (int i = 0; i < runs; ++i) {
    TESSEL_RETURN_IF_ERROR(a.Call(&ta));
    if (b) TESSEL_RETURN_IF_ERROR(b->Call(&tb));
  }
  return std::make_pair(Median(ta), b ? Median(tb) : -1.0);
}

// ---------------------------------------------------------------------------------------------------
// The case of a backward op, from its forward: the inputs the forward computes (Y, mean, rstd, lse) come
// from running the reference forward on generated inputs, as in a training step; each d<out> input is a
// random cotangent. Fails (UsageError) when a backward input is none of those.
struct Pair {
  Case forward;  // after the forward ran: its outputs hold the forward's results
  Case backward;
};

Result<Pair> FromForward(const Schema& bwd, const Kernel& fwd_kernel, DType t, int variant, uint64_t seed,
                         ThreadPool& pool) {
  Pair p;
  TESSEL_ASSIGN_OR_RETURN(p.forward, conformance::Generate(fwd_kernel.parsed_schema(), t, variant, seed));
  TESSEL_RETURN_IF_ERROR(Run(fwd_kernel, p.forward, pool));
  TESSEL_ASSIGN_OR_RETURN(p.backward, conformance::BindBackward(bwd, p.forward, t, seed));
  return p;
}

// ---------------------------------------------------------------------------------------------------
// Comparisons.

// Relative to each value, and to the expected tensor's RMS where a value is near zero (never to a fixed
// 1, which let a kernel writing zeros pass wherever the outputs are small). A CUDA kernel sums in another
// order than the CPU reference (tiles, warps, fused multiply-adds), so its f32 results get more room; a
// bf16 kernel rounds its operands and results to 8 bits of mantissa.
double Tolerance(DType t, Device device) {
  switch (t) {
    case DType::kF64:
      return 1e-9;
    case DType::kBF16:
    case DType::kF16:
      return 3e-2;
    default:
      return device == Device::kCuda ? 5e-4 : 1e-4;
  }
}

// The smallest magnitude a value is compared relative to: Tolerance x NoiseFloor (1e-13 for f64, 1e-7
// for f32, 3e-3 for bf16) is about the dtype's rounding of the O(1) inputs the cases are made of, below
// which a value is zero at that precision.
double NoiseFloor(DType t) {
  switch (t) {
    case DType::kF64:
      return 1e-4;
    case DType::kF32:
      return 1e-3;
    default:
      return 1e-1;
  }
}

// The first element where `got` and `want` differ beyond the dtype's tolerance: "" when none does.
// `worst` gets the largest relative difference seen. `got` may be of a narrower floating dtype than
// `want` (a kernel against the f64 kernel of its op): the tolerance is `got`'s.
std::string Mismatch(const Buffer& got, const Buffer& want, Device device, double* worst) {
  const bool floating = IsFloating(got.dtype());
  const double tol = Tolerance(got.dtype(), device);
  double squares = 0;
  for (int64_t i = 0; floating && i < want.numel(); ++i) {
    if (std::isfinite(want.At(i))) squares += want.At(i) * want.At(i);
  }
  const double rms = want.numel() > 0 ? std::sqrt(squares / static_cast<double>(want.numel())) : 0.0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double a = got.At(i), b = want.At(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;  // an infinity matched, or an exact zero
    // A tensor whose every value is rounding noise (an f64 reference's 1e-12 where the exact result is
    // 0, as a softmax over one element's gradient) is matched by any value below the dtype's floor.
    const double diff = std::abs(a - b) / std::max({std::abs(b), rms, NoiseFloor(got.dtype())});
    if (floating && std::isfinite(diff)) *worst = std::max(*worst, diff);
    if (floating ? !(diff <= tol) : a != b) return StrCat("[", i, "] = ", a, ", the reference gives ", b);
  }
  return "";
}

int64_t FirstDifference(const Buffer& a, const Buffer& b) {
  const auto* x = static_cast<const uint8_t*>(a.data());
  const auto* y = static_cast<const uint8_t*>(b.data());
  const size_t size = DTypeSize(a.dtype());
  for (size_t i = 0; i < a.nbytes(); ++i) {
    if (x[i] != y[i]) return static_cast<int64_t>(i / size);
  }
  return -1;
}

// `c` with every floating buffer widened to f64, value for value (a bf16 op's f32 statistics too: the
// schema's dtype variables are all f64 in the f64 kernel): the inputs of the op's f64 kernel. Index
// buffers stay.
Case Widened(const Case& c) {
  Case w = c;
  const auto widen = [](std::vector<Buffer>& buffers) {
    for (Buffer& b : buffers) {
      if (!IsFloating(b.dtype()) || b.dtype() == DType::kF64) continue;
      Buffer wide(DType::kF64, b.shape());
      for (int64_t i = 0; i < b.numel(); ++i) wide.Set(i, b.At(i));
      b = std::move(wide);
    }
  };
  widen(w.inputs);
  widen(w.outputs);
  return w;
}

// ---------------------------------------------------------------------------------------------------
// One row of the table.

struct Row {
  std::string op;
  Device device = Device::kCpu;
  DType dtype = DType::kF32;
  std::string verdict;  // PASS, FAIL, SKIP
  std::string shapes;   // "3/3"
  std::string vs_ref;   // the worst relative difference, or "none"
  std::string grad;     // ok, n/a, -
  std::string time, ref_time;
  std::string why;  // the first failure, or the reason for a skip
};

std::string Micros(double seconds) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(seconds < 1e-4 ? 2 : 1) << seconds * 1e6;
  return s.str();
}

std::string Sci(double x) {
  std::ostringstream s;
  s << std::scientific << std::setprecision(1) << x;
  return s.str();
}

class Checker {
 public:
  Checker(const KernelRegistry& candidate, const KernelRegistry& reference, const ConformanceOptions& options)
      : candidate_(candidate), reference_(reference), options_(options), pool_(options.threads) {}

  Row Check(const Kernel& kernel, DType t) {
    Row row{kernel.op(), kernel.device(), t, "PASS", "", "", "-", "", "", ""};
    const bool in_place = conformance::UpdatesInputs(kernel.op());
    Result<const Kernel*> ref = reference_.Find(kernel.op(), Device::kCpu);
    // A reference from the plugin under check (the same file, loaded twice) would compare it with itself.
    const Kernel* reference =
        ref.ok() && (*ref)->AcceptsFloating(t) && (*ref)->plugin_path() != kernel.plugin_path() ? *ref : nullptr;
    // Otherwise, for a narrower dtype or another device, the op's f64 CPU kernel (the candidate's own:
    // the built-in kernels are templates over the dtype, so f32 is held to the same code in double).
    const Kernel* f64 = nullptr;
    if (reference == nullptr && (t != DType::kF64 || kernel.device() != Device::kCpu)) {
      for (const KernelRegistry* r : {&reference_, &candidate_}) {
        Result<const Kernel*> k = r->Find(kernel.op(), Device::kCpu);
        if (f64 == nullptr && k.ok() && (*k)->AcceptsFloating(DType::kF64)) f64 = *k;
      }
    }
    double worst = 0;
    int done = 0;
    std::vector<std::string> failures;
    for (int v = 0; v < kVariants && failures.empty(); ++v) {
      Result<Case> made = MakeCase(kernel, t, v);
      if (!made.ok()) return Skip(std::move(row), StrCat("not covered: ", made.status().message()));
      const Case& c = *made;
      const std::string where = StrCat(" (", c.Describe(), ")");
      const auto fail = [&](std::string why) { failures.push_back(why + where); };
      Case first = c, second = c;
      if (Status st = Run(kernel, first, pool_); !st.ok()) {
        fail(StrCat("the kernel failed: ", st.message()));
        break;
      }
      if (std::string guard = BrokenGuards(first); !guard.empty()) {
        fail(guard);
        break;
      }
      for (size_t i = 0; !in_place && i < c.inputs.size() && failures.empty(); ++i) {
        if (!first.inputs[i].SameBytes(c.inputs[i])) {
          fail(StrCat("changed its input '", c.input_names[i], "' at [", FirstDifference(first.inputs[i], c.inputs[i]),
                      "]"));
        }
      }
      if (!failures.empty()) break;
      if (Status st = Run(kernel, second, pool_); !st.ok()) {
        fail(StrCat("the second call failed: ", st.message()));
        break;
      }
      if (std::string diff = Differs(first, second, in_place); !diff.empty()) {
        if (kernel.device() == Device::kCpu) {
          fail(StrCat("nondeterministic: ", diff, " differs between two calls with the same inputs"));
          break;
        }
        row.why = StrCat("note: ", diff, " differs between two calls (atomics?)");
      }
      // Held to another plugin's kernel of the op, or else to the op's own f64 CPU kernel on the same values.
      if (const Kernel* against = reference != nullptr ? reference : f64; against != nullptr) {
        const std::string which = reference != nullptr ? "" : " against the f64 kernel";
        Case want = reference != nullptr ? c : Widened(c);
        if (Status st = Run(*against, want, pool_); !st.ok()) {
          return Skip(std::move(row), StrCat("the ", reference != nullptr ? "reference" : "f64 reference", " failed",
                                             where, ": ", st.message()));
        }
        for (size_t i = 0; i < c.outputs.size() && failures.empty(); ++i) {
          if (std::string m = Mismatch(first.outputs[i], want.outputs[i], kernel.device(), &worst); !m.empty()) {
            fail(StrCat("wrong value: output '", c.output_names[i], "'", which, m));
          }
        }
        for (size_t i = 0; in_place && i < c.inputs.size() && failures.empty(); ++i) {
          if (std::string m = Mismatch(first.inputs[i], want.inputs[i], kernel.device(), &worst); !m.empty()) {
            fail(StrCat("wrong value: updated input '", c.input_names[i], "'", which, m));
          }
        }
      }
      if (failures.empty()) ++done;
    }
    row.shapes = StrCat(done, "/", kVariants);
    row.vs_ref = reference != nullptr ? Sci(worst) : f64 != nullptr ? Sci(worst) + " (f64)" : "none";
    if (kernel.device() == Device::kCpu && t == DType::kF64 && !ForwardOf(kernel.op()).empty()) {
      row.grad = GradientCheck(kernel, &failures);
    }
    if (!failures.empty()) {
      row.verdict = "FAIL";
      row.why.clear();
      for (const std::string& f : failures) row.why += (row.why.empty() ? "" : "; ") + f;
      return row;
    }
    if (options_.timing_runs <= 0) return row;
    if (Result<Case> big = MakeCase(kernel, t, kTimingVariant); big.ok()) {
      Result<const Kernel*> same_device = reference_.Find(kernel.op(), kernel.device());
      const Kernel* other = same_device.ok() && (*same_device)->AcceptsFloating(t) ? *same_device : nullptr;
      if (Result<std::pair<double, double>> s = TimeBoth(kernel, other, *big, pool_, options_.timing_runs); s.ok()) {
        row.time = Micros(s->first);
        if (other != nullptr) row.ref_time = Micros(s->second);
      }
    }
    return row;
  }

 private:
  static Row Skip(Row row, std::string why) {
    row.verdict = "SKIP";
    row.why = std::move(why);
    return row;
  }

  // The forward kernel of a backward op: the reference's, so that a backward is checked against the true
  // forward and a wrong forward fails only its own row; the candidate's when the reference has none.
  const Kernel* ForwardKernel(const std::string& fwd, DType t) const {
    for (const KernelRegistry* r : {&reference_, &candidate_}) {
      Result<const Kernel*> k = r->Find(fwd, Device::kCpu);
      if (k.ok() && (*k)->AcceptsFloating(t)) return *k;
    }
    return nullptr;
  }

  Result<Case> MakeCase(const Kernel& kernel, DType t, int variant) {
    const uint64_t seed =
        options_.seed + static_cast<uint64_t>(variant) * 7919u + std::hash<std::string>()(kernel.op());
    const std::string fwd = ForwardOf(kernel.op());
    if (const Kernel* f = fwd.empty() ? nullptr : ForwardKernel(fwd, t); f != nullptr) {
      Result<Pair> p = FromForward(kernel.parsed_schema(), *f, t, variant, seed, pool_);
      if (p.ok()) return std::move(p->backward);
    }
    return conformance::Generate(kernel.parsed_schema(), t, variant, seed);
  }

  static std::string BrokenGuards(const Case& c) {
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      if (std::string_view g = c.outputs[i].BrokenGuard(); !g.empty()) {
        return StrCat("wrote outside its output '", c.output_names[i], "' ", ShapeText(c.outputs[i].shape()),
                      ": the guard bytes ", g, " it changed");
      }
    }
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (std::string_view g = c.inputs[i].BrokenGuard(); !g.empty()) {
        return StrCat("wrote outside its input '", c.input_names[i], "' ", ShapeText(c.inputs[i].shape()),
                      ": the guard bytes ", g, " it changed");
      }
    }
    return "";
  }

  static std::string Differs(const Case& a, const Case& b, bool in_place) {
    for (size_t i = 0; i < a.outputs.size(); ++i) {
      if (int64_t at = FirstDifference(a.outputs[i], b.outputs[i]); at >= 0)
        return StrCat("output '", a.output_names[i], "'[", at, "]");
    }
    for (size_t i = 0; in_place && i < a.inputs.size(); ++i) {
      if (int64_t at = FirstDifference(a.inputs[i], b.inputs[i]); at >= 0)
        return StrCat("input '", a.input_names[i], "'[", at, "]");
    }
    return "";
  }

  // Central differences of the forward's L = sum over outputs o of G_o . o, against the backward's
  // d<input> outputs, in f64: "ok", "n/a" (no forward, or inputs the forward does not have), or "FAIL"
  // with the failure added to `failures`.
  std::string GradientCheck(const Kernel& bwd, std::vector<std::string>* failures) {
    const std::string fwd_op = ForwardOf(bwd.op());
    const Kernel* fwd = fwd_op.empty() ? nullptr : ForwardKernel(fwd_op, DType::kF64);
    if (fwd == nullptr) return "n/a";
    const uint64_t seed = options_.seed + 104729u + std::hash<std::string>()(bwd.op());
    Result<Pair> made = FromForward(bwd.parsed_schema(), *fwd, DType::kF64, 1, seed, pool_);
    if (!made.ok()) return "n/a";
    Pair& p = *made;
    for (Buffer& out : p.backward.outputs) out.Zero();  // gradients may be added to
    Case analytic = p.backward;
    if (Status st = Run(bwd, analytic, pool_); !st.ok()) {
      failures->push_back(StrCat("the kernel failed in the gradient check: ", st.message()));
      return "FAIL";
    }
    // The cotangent of each forward output that the backward takes.
    std::vector<std::pair<size_t, const Buffer*>> cotangents;
    for (size_t i = 0; i < p.backward.input_names.size(); ++i) {
      const std::string& name = p.backward.input_names[i];
      if (name.size() < 2 || name[0] != 'd') continue;
      auto o = std::find(p.forward.output_names.begin(), p.forward.output_names.end(), name.substr(1));
      if (o != p.forward.output_names.end()) {
        cotangents.emplace_back(static_cast<size_t>(o - p.forward.output_names.begin()), &p.backward.inputs[i]);
      }
    }
    Case probe = p.forward;
    const auto objective = [&]() -> Result<double> {
      Case run = probe;
      TESSEL_RETURN_IF_ERROR(Run(*fwd, run, pool_));
      double sum = 0;
      for (const auto& [o, g] : cotangents) {
        for (int64_t k = 0; k < g->numel(); ++k) sum += g->At(k) * run.outputs[o].At(k);
      }
      return sum;
    };
    std::mt19937_64 rng(seed);
    int compared = 0;
    for (size_t j = 0; j < analytic.output_names.size(); ++j) {
      const std::string& name = analytic.output_names[j];
      if (name.size() < 2 || name[0] != 'd') continue;
      auto in = std::find(probe.input_names.begin(), probe.input_names.end(), name.substr(1));
      if (in == probe.input_names.end()) continue;
      Buffer& x = probe.inputs[static_cast<size_t>(in - probe.input_names.begin())];
      if (!IsFloating(x.dtype()) || x.numel() == 0) continue;
      // Every element of a small input, 16 random ones of a larger one.
      const int64_t samples = x.numel() <= 64 ? x.numel() : 16;
      for (int64_t s = 0; s < samples; ++s) {
        const int64_t k = x.numel() <= 64 ? s : static_cast<int64_t>(rng() % static_cast<uint64_t>(x.numel()));
        const double keep = x.At(k), h = 1e-6;
        x.Set(k, keep + h);
        Result<double> up = objective();
        x.Set(k, keep - h);
        Result<double> down = objective();
        x.Set(k, keep);
        if (!up.ok() || !down.ok()) return "n/a";
        const double numeric = (*up - *down) / (2 * h), exact = analytic.outputs[j].At(k);
        if (!(std::abs(numeric - exact) <= 1e-5 * std::max(1.0, std::abs(numeric)))) {
          failures->push_back(StrCat("wrong gradient: ", name, "[", k, "] = ", exact, ", finite differences give ",
                                     numeric, " (", p.forward.Describe(), ")"));
          return "FAIL";
        }
        ++compared;
      }
    }
    return compared > 0 ? "ok" : "n/a";
  }

  const KernelRegistry& candidate_;
  const KernelRegistry& reference_;
  ConformanceOptions options_;
  ThreadPool pool_;
};

}  // namespace

ConformanceSummary CheckConformance(const KernelRegistry& candidate, const std::string& plugin_path,
                                    const KernelRegistry& reference, std::ostream& out,
                                    const ConformanceOptions& options) {
  ConformanceSummary summary;
  std::vector<Row> rows;
  Checker checker(candidate, reference, options);
  const bool gpu = CudaAvailable();
  for (const PluginInfo& p : candidate.plugins()) {
    if (p.path != plugin_path) continue;
    for (const KernelInfo& k : p.kernels) {
      if (FindOp(k.op) == nullptr) continue;  // nothing to compare with; the load report said so
      Result<const Kernel*> kernel = candidate.Find(k.op, k.device);
      if (!kernel.ok()) continue;
      if (k.device == Device::kCuda && !gpu) {
        rows.push_back(Row{k.op, k.device, DType::kF32, "SKIP", "", "", "-", "", "",
                           "no GPU visible: CUDA kernels are checked where one is"});
        continue;
      }
      for (DType t : {DType::kF32, DType::kF64, DType::kBF16}) {
        if (!(*kernel)->AcceptsFloating(t)) continue;
        try {
          rows.push_back(checker.Check(**kernel, t));
        } catch (const std::exception& e) {  // the harness's own failure, not the kernel's: said so, not hidden
          rows.push_back(
              Row{k.op, k.device, t, "SKIP", "", "", "-", "", "", StrCat("the check itself failed: ", e.what())});
        }
      }
    }
  }
  out << "  conformance against the built-in kernels (threads " << options.threads;
  if (options.timing_runs > 0) {
    out << ", times: median of " << options.timing_runs << " calls on the largest shape, microseconds";
  }
  out << "):\n";
  out << "  " << std::left << std::setw(31) << "op" << std::setw(6) << "dev" << std::setw(6) << "dtype" << std::setw(6)
      << "verdict"
      << " " << std::setw(7) << "shapes" << std::setw(9) << "vs ref" << std::setw(6) << "grad" << std::right
      << std::setw(10) << "time" << std::setw(10) << "built-in"
      << "\n";
  for (const Row& r : rows) {
    out << "  " << std::left << std::setw(31) << r.op << std::setw(6) << DeviceName(r.device) << std::setw(6)
        << (r.verdict == "SKIP" && r.shapes.empty() && r.why.rfind("no GPU", 0) == 0 ? "-"
                                                                                     : std::string(DTypeName(r.dtype)))
        << std::setw(7) << r.verdict << " " << std::setw(7) << (r.shapes.empty() ? "-" : r.shapes) << std::setw(9)
        << (r.vs_ref.empty() ? "-" : r.vs_ref) << std::setw(6) << r.grad << std::right << std::setw(10)
        << (r.time.empty() ? "-" : r.time) << std::setw(10) << (r.ref_time.empty() ? "-" : r.ref_time) << "\n";
    if (!r.why.empty()) out << "      " << (r.verdict == "FAIL" ? "FAIL: " : "") << r.why << "\n";
    if (r.verdict == "PASS") ++summary.passed;
    if (r.verdict == "FAIL") ++summary.failed;
    if (r.verdict == "SKIP") ++summary.skipped;
  }
  out << "  " << summary.passed << " passed, " << summary.failed << " failed, " << summary.skipped << " skipped\n";
  return summary;
}

}  // namespace tessel::workers
