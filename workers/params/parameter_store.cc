#include "workers/params/parameter_store.h"

#include <tessel/ops/optim.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace tessel::workers {
namespace {

// A view of the elements of a flat buffer from `offset`, shaped `shape`, in the buffer's dtype.
Tensor View(const Tensor& flat, int64_t offset, const std::vector<int64_t>& shape) {
  return Tensor::Borrow(static_cast<char*>(flat.raw()) + offset * static_cast<int64_t>(DTypeSize(flat.dtype())),
                        flat.dtype(), shape, flat.device());
}

// The values drawn in double, stored in the store's dtype (f32: rounded once, as before f64 existed).
template <typename T, typename Draw>
void Fill(Tensor& host, int64_t offset, int64_t n, Draw&& draw) {
  T* w = host.data<T>() + offset;
  for (int64_t j = 0; j < n; ++j) w[j] = static_cast<T>(draw());
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

size_t ParameterStore::Add(ParameterSpec spec) {
  specs_.push_back(std::move(spec));
  return specs_.size() - 1;
}

int64_t ParameterStore::Find(std::string_view name) const {
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].name == name) return static_cast<int64_t>(i);
  }
  return -1;
}

Status ParameterStore::Allocate(const DeviceContext& device, uint64_t seed, WeightInit weights, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kF64) {
    return InternalError(StrCat("ParameterStore: parameters are f32 or f64, not ", DTypeName(dtype)));
  }
  device_ = device;
  offsets_.clear();
  total_ = 0;
  for (const ParameterSpec& s : specs_) {
    offsets_.push_back(total_);
    total_ += Numel(s.shape);
  }
  // Initialised on the host from the seed alone, parameter by parameter in declaration order.
  TESSEL_ASSIGN_OR_RETURN(Tensor host, Tensor::Empty(dtype, {total_}));
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 0x7E55E1ull);
  for (size_t i = 0; i < specs_.size(); ++i) {
    const ParameterSpec& s = specs_[i];
    const int64_t n = Numel(s.shape);
    const auto fill = [&](auto&& draw) {  // no std::function: a GPT's 124M draws stay one inlined loop
      if (dtype == DType::kF64) {
        Fill<double>(host, offsets_[i], n, draw);
      } else {
        Fill<float>(host, offsets_[i], n, draw);
      }
    };
    auto uniform = [&](double bound) {
      std::uniform_real_distribution<double> dist(-bound, bound);
      fill([&] { return dist(rng); });
    };
    const auto constant = [&](double v) { fill([v] { return v; }); };
    switch (s.init) {
      case ParamInit::kWeight: {
        const size_t rank = s.shape.size();
        const int64_t fan_in = rank >= 2 ? s.shape[rank - 2] : 1, fan_out = rank >= 1 ? s.shape[rank - 1] : 1;
        uniform(weights == WeightInit::kGlorot ? std::sqrt(6.0 / static_cast<double>(fan_in + fan_out))
                                               : 1.0 / std::sqrt(static_cast<double>(fan_in)));
        break;
      }
      case ParamInit::kBias:
        if (weights == WeightInit::kGlorot) {
          constant(0);
        } else {
          uniform(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(s.fan_in, 1))));
        }
        break;
      case ParamInit::kOnes:
        constant(1);
        break;
      case ParamInit::kZeros:
        constant(0);
        break;
    }
  }
  if (device.device == Device::kCpu) {
    flat_value_ = host;
  } else {
    TESSEL_ASSIGN_OR_RETURN(flat_value_, Tensor::Empty(dtype, {total_}, *device.allocator));
    TESSEL_RETURN_IF_ERROR(
        CopyMemory(flat_value_.raw(), device.device, host.raw(), Device::kCpu, host.nbytes(), device.stream));
  }
  // Gradients: dense ones shaped like their values, row gradients as their rows.
  std::vector<std::vector<int64_t>> grad_shapes;
  int64_t grad_total = 0;
  for (const ParameterSpec& s : specs_) {
    if (!s.row_gradient()) {
      grad_shapes.push_back(s.shape);
    } else {
      const int64_t width = s.shape.empty() ? 1 : s.shape.back();
      if (width == 0 || static_cast<int64_t>(s.row_of.size()) * width != Numel(s.shape) || s.grad_rows < 0) {
        return InternalError(
            StrCat("parameter '", s.name, "': row_of has ", s.row_of.size(), " rows for ", Numel(s.shape), " values"));
      }
      grad_shapes.push_back({s.grad_rows, width});
    }
    grad_total += Numel(grad_shapes.back());
  }
  TESSEL_ASSIGN_OR_RETURN(flat_grad_, Tensor::Empty(dtype, {grad_total}, *device.allocator));
  TESSEL_RETURN_IF_ERROR(ZeroMemory(flat_grad_.raw(), device.device, flat_grad_.nbytes(), device.stream));
  values_.clear();
  grads_.clear();
  row_of_.clear();
  int64_t grad_offset = 0;
  for (size_t i = 0; i < specs_.size(); ++i) {
    values_.push_back(View(flat_value_, offsets_[i], specs_[i].shape));
    grads_.push_back(View(flat_grad_, grad_offset, grad_shapes[i]));
    grad_offset += Numel(grad_shapes[i]);
    Tensor row_of;
    if (specs_[i].row_gradient()) {
      const std::vector<int32_t>& host = specs_[i].row_of;
      TESSEL_ASSIGN_OR_RETURN(row_of,
                              Tensor::Empty(DType::kI32, {static_cast<int64_t>(host.size())}, *device.allocator));
      TESSEL_RETURN_IF_ERROR(
          CopyMemory(row_of.raw(), device.device, host.data(), Device::kCpu, row_of.nbytes(), device.stream));
    }
    row_of_.push_back(row_of);
  }
  return Status();
}

bool ParameterStore::has_row_gradients() const {
  for (const ParameterSpec& s : specs_) {
    if (s.row_gradient()) return true;
  }
  return false;
}

Result<Tensor> ToHost(const Tensor& t, const DeviceContext& device) {
  TESSEL_ASSIGN_OR_RETURN(Tensor host, Tensor::Empty(t.dtype(), t.shape()));
  TESSEL_RETURN_IF_ERROR(CopyMemory(host.raw(), Device::kCpu, t.raw(), t.device(), t.nbytes(), device.stream));
  return host;
}

Status FromHost(const Tensor& host, Tensor& t, const DeviceContext& device, std::string_view name) {
  if (host.shape() != t.shape() || host.dtype() != t.dtype()) {
    return StorageError(StrCat("saved tensor '", name, "' is ", host.DebugString(), ", expected ", t.DebugString()));
  }
  return CopyMemory(t.raw(), t.device(), host.raw(), Device::kCpu, t.nbytes(), device.stream);
}

Status ParameterStore::SaveState(StateWriter& out) const {
  for (size_t i = 0; i < specs_.size(); ++i) {
    TESSEL_ASSIGN_OR_RETURN(Tensor host, ToHost(values_[i], device_));
    TESSEL_RETURN_IF_ERROR(out.Write("param/" + specs_[i].name, host));
  }
  return Status();
}

Status ParameterStore::LoadState(StateReader& in) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    const std::string name = "param/" + specs_[i].name;
    TESSEL_ASSIGN_OR_RETURN(Tensor host, in.Read(name));
    TESSEL_RETURN_IF_ERROR(FromHost(host, values_[i], device_, name));
  }
  return Status();
}

Status AdamOptimizer::Allocate(const ParameterStore& params) {
  device_ = params.device();
  const int64_t n = params.num_values();
  TESSEL_ASSIGN_OR_RETURN(m_, Tensor::Empty(params.dtype(), {n}, *device_.allocator));
  TESSEL_ASSIGN_OR_RETURN(v_, Tensor::Empty(params.dtype(), {n}, *device_.allocator));
  TESSEL_RETURN_IF_ERROR(ZeroMemory(m_.raw(), device_.device, m_.nbytes(), device_.stream));
  TESSEL_RETURN_IF_ERROR(ZeroMemory(v_.raw(), device_.device, v_.nbytes(), device_.stream));
  step_ = 0;
  return Status();
}

Status AdamOptimizer::Step(ParameterStore& params, const Kernel& adam, const Kernel* adam_rows,
                           const CallOptions& options) {
  if (m_.numel() != params.num_values()) return InternalError("AdamOptimizer::Step before Allocate");
  ++step_;
  for (size_t i = 0; i < params.size(); ++i) {
    tessel_adam_params h{};
    h.struct_size = sizeof(h);
    h.lr = hyper_.lr;
    h.beta1 = hyper_.beta1;
    h.beta2 = hyper_.beta2;
    h.eps = hyper_.eps;
    h.weight_decay = params.spec(i).decay == Decay::kL2 ? hyper_.weight_decay : 0.0;
    h.step = step_;
    const int64_t n = params.value(i).numel(), at = params.offset(i);
    if (params.spec(i).row_gradient()) {
      // [P, D] rows, of which the gradient covers some.
      if (adam_rows == nullptr)
        return InternalError("AdamOptimizer::Step: a row gradient without optim.adam.step_rows");
      const int64_t d = params.grad(i).dim(1), rows = n / d;
      Tensor w = View(params.value(i), 0, {rows, d});
      Tensor m = View(m_, at, {rows, d});
      Tensor v = View(v_, at, {rows, d});
      TESSEL_RETURN_IF_ERROR(adam_rows->Call({&w, &params.grad(i), &params.row_of(i), &m, &v}, {}, h, options));
      continue;
    }
    // Adam sees each parameter as one flat vector.
    Tensor w = View(params.value(i), 0, {n});
    Tensor g = View(params.grad(i), 0, {n});
    Tensor m = View(m_, at, {n});
    Tensor v = View(v_, at, {n});
    TESSEL_RETURN_IF_ERROR(adam.Call({&w, &g, &m, &v}, {}, h, options));
  }
  return Status();
}

Status AdamOptimizer::SaveState(StateWriter& out) const {
  TESSEL_ASSIGN_OR_RETURN(Tensor m, ToHost(m_, device_));
  TESSEL_ASSIGN_OR_RETURN(Tensor v, ToHost(v_, device_));
  TESSEL_ASSIGN_OR_RETURN(Tensor step, Tensor::Empty(DType::kI64, {1}));
  step.data<int64_t>()[0] = step_;
  TESSEL_RETURN_IF_ERROR(out.Write("adam/m", m));
  TESSEL_RETURN_IF_ERROR(out.Write("adam/v", v));
  return out.Write("adam/step", step);
}

Status AdamOptimizer::LoadState(StateReader& in) {
  TESSEL_ASSIGN_OR_RETURN(Tensor m, in.Read("adam/m"));
  TESSEL_ASSIGN_OR_RETURN(Tensor v, in.Read("adam/v"));
  TESSEL_ASSIGN_OR_RETURN(Tensor step, in.Read("adam/step"));
  TESSEL_RETURN_IF_ERROR(FromHost(m, m_, device_, "adam/m"));
  TESSEL_RETURN_IF_ERROR(FromHost(v, v_, device_, "adam/v"));
  if (step.dtype() != DType::kI64 || step.numel() != 1) return StorageError("saved 'adam/step' is not one i64");
  step_ = step.data<int64_t>()[0];
  return Status();
}

}  // namespace tessel::workers
