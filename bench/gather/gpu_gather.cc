#include "gpu_gather.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "core/tensor.h"
#include "gather_inputs.h"

#if TESSEL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessel::bench {

#if !TESSEL_HAVE_CUDA

GpuReport MeasureGpu(const GpuInputs&) {
  GpuReport report;
  report.skipped = "Tessel was built without CUDA: no GPU figures were taken";
  return report;
}

#else

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

Status Cuda(cudaError_t err, const std::string& what) {
  return err == cudaSuccess ? Status::Ok() : InternalError(what + ": " + cudaGetErrorString(err));
}

// Owners of the CUDA handles this file makes.
struct DeviceMemory {
  void* ptr = nullptr;
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (ptr != nullptr) cudaFree(ptr);
  }
};
struct PinnedMemory {
  void* ptr = nullptr;
  PinnedMemory() = default;
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  ~PinnedMemory() {
    if (ptr != nullptr) cudaFreeHost(ptr);
  }
};
struct HostRegistration {
  void* ptr = nullptr;
  HostRegistration() = default;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration() {
    if (ptr != nullptr) cudaHostUnregister(ptr);
  }
};
struct Stream {
  cudaStream_t stream = nullptr;
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};
struct Event {
  cudaEvent_t event = nullptr;
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (event != nullptr) cudaEventDestroy(event);
  }
};

// One cudaMemcpyAsync of `bytes` from pinned memory, per repetition, between two events.
Status MeasureH2d(void* device, const void* pinned, int64_t bytes, cudaStream_t stream, int repetitions,
                  std::vector<double>* gbps) {
  Event start, stop;
  TESSEL_RETURN_IF_ERROR(Cuda(cudaEventCreate(&start.event), "cudaEventCreate"));
  TESSEL_RETURN_IF_ERROR(Cuda(cudaEventCreate(&stop.event), "cudaEventCreate"));
  for (int r = -1; r < repetitions; ++r) {  // r = -1: warm-up
    TESSEL_RETURN_IF_ERROR(Cuda(cudaEventRecord(start.event, stream), "cudaEventRecord"));
    TESSEL_RETURN_IF_ERROR(
        Cuda(cudaMemcpyAsync(device, pinned, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync"));
    TESSEL_RETURN_IF_ERROR(Cuda(cudaEventRecord(stop.event, stream), "cudaEventRecord"));
    TESSEL_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(stop.event), "cudaEventSynchronize"));
    float ms = 0;
    TESSEL_RETURN_IF_ERROR(Cuda(cudaEventElapsedTime(&ms, start.event, stop.event), "cudaEventElapsedTime"));
    if (r >= 0) gbps->push_back(static_cast<double>(bytes) / (ms / 1e3) / 1e9);
  }
  return Status::Ok();
}

// Y (device memory) against the table rows, on sampled positions.
Status ValidateDevice(const char* table, int64_t row_bytes, const std::vector<int64_t>& ids, const void* y_device,
                      const char* what) {
  const int64_t m = static_cast<int64_t>(ids.size());
  std::vector<char> y(static_cast<size_t>(m * row_bytes));
  TESSEL_RETURN_IF_ERROR(Cuda(cudaMemcpy(y.data(), y_device, y.size(), cudaMemcpyDeviceToHost), "copy Y back"));
  const int64_t wrong = FirstWrongRow(table, row_bytes, ids.data(), m, y.data());
  if (wrong >= 0) return InternalError(std::string(what) + ": row " + std::to_string(wrong) + " of Y is wrong");
  return Status::Ok();
}

struct Shared {
  const GpuInputs& in;
  const workers::Kernel* cpu;
  const workers::Kernel* cuda;
  void* table_on_device;
  void* pinned_out;  // out_bytes of pinned host memory: the staging buffer
  void* device_out;  // out_bytes of device memory: Y
  cudaStream_t stream;
};

Status MeasureCase(const Shared& s, int64_t row_bytes, GpuCase* result) {
  const int64_t d = row_bytes / static_cast<int64_t>(sizeof(float));
  const int64_t n = s.in.table_bytes / row_bytes, m = s.in.out_bytes / row_bytes;
  result->row_bytes = row_bytes;
  result->rows = m;
  const std::vector<int64_t> ids = UniformIds(m, n, s.in.seed + static_cast<uint64_t>(row_bytes));
  DeviceMemory ids_device;
  TESSEL_RETURN_IF_ERROR(Cuda(cudaMalloc(&ids_device.ptr, ids.size() * sizeof(int64_t)), "cudaMalloc ids"));
  TESSEL_RETURN_IF_ERROR(
      Cuda(cudaMemcpy(ids_device.ptr, ids.data(), ids.size() * sizeof(int64_t), cudaMemcpyHostToDevice), "copy ids"));

  const Tensor table_dev = Tensor::Borrow(s.table_on_device, DType::kF32, {n, d}, Device::kCuda);
  const Tensor ids_dev = Tensor::Borrow(ids_device.ptr, DType::kI64, {m}, Device::kCuda);
  Tensor y_dev = Tensor::Borrow(s.device_out, DType::kF32, {m, d}, Device::kCuda);
  const Tensor table_host = Tensor::Borrow(s.in.table, DType::kF32, {n, d});
  const Tensor ids_host = Tensor::Borrow(const_cast<int64_t*>(ids.data()), DType::kI64, {m});
  Tensor y_pinned = Tensor::Borrow(s.pinned_out, DType::kF32, {m, d});
  const workers::CallOptions on_gpu{s.in.pool, s.stream, 0, nullptr};
  const workers::CallOptions on_cpu{s.in.pool, nullptr, 0, nullptr};
  const size_t y_bytes = static_cast<size_t>(m * row_bytes);

  auto zero_copy = [&]() -> Status {
    TESSEL_RETURN_IF_ERROR(s.cuda->Call({&table_dev, &ids_dev}, {&y_dev}, on_gpu));
    return Cuda(cudaStreamSynchronize(s.stream), "zero-copy gather");
  };
  auto staged = [&]() -> Status {
    TESSEL_RETURN_IF_ERROR(s.cpu->Call({&table_host, &ids_host}, {&y_pinned}, on_cpu));
    TESSEL_RETURN_IF_ERROR(
        Cuda(cudaMemcpyAsync(s.device_out, s.pinned_out, y_bytes, cudaMemcpyHostToDevice, s.stream), "staged copy"));
    return Cuda(cudaStreamSynchronize(s.stream), "staged gather");
  };
  // Each way validated before it is timed.
  TESSEL_RETURN_IF_ERROR(Cuda(cudaMemsetAsync(s.device_out, 0, y_bytes, s.stream), "clear Y"));
  TESSEL_RETURN_IF_ERROR(zero_copy());
  TESSEL_RETURN_IF_ERROR(ValidateDevice(s.in.table, row_bytes, ids, s.device_out, "zero-copy"));
  TESSEL_RETURN_IF_ERROR(Cuda(cudaMemsetAsync(s.device_out, 0, y_bytes, s.stream), "clear Y"));
  TESSEL_RETURN_IF_ERROR(staged());
  TESSEL_RETURN_IF_ERROR(ValidateDevice(s.in.table, row_bytes, ids, s.device_out, "staged"));
  // Interleaved, so that a change in the machine's load falls on both.
  for (int r = 0; r < s.in.repetitions; ++r) {
    auto t0 = Clock::now();
    TESSEL_RETURN_IF_ERROR(zero_copy());
    result->zero_copy_ms.push_back(MsSince(t0));
    t0 = Clock::now();
    TESSEL_RETURN_IF_ERROR(staged());
    result->staged_ms.push_back(MsSince(t0));
  }
  return Status::Ok();
}

}  // namespace

GpuReport MeasureGpu(const GpuInputs& in) {
  GpuReport report;
  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess || count == 0) {
    report.skipped = std::string("no CUDA device is visible (") +
                     (err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount = 0") +
                     "): no GPU figures were taken";
    return report;
  }
  auto fail = [&](const Status& st) {
    report.skipped = "GPU setup failed: " + st.ToString();
    return report;
  };
  if (Status st = Cuda(cudaSetDevice(0), "cudaSetDevice"); !st.ok()) return fail(st);
  cudaDeviceProp prop{};
  if (Status st = Cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"); !st.ok()) return fail(st);
  report.device = prop.name;
  Result<const workers::Kernel*> cpu = in.registry->Find("gather.rows", Device::kCpu);
  Result<const workers::Kernel*> cuda = in.registry->Find("gather.rows", Device::kCuda);
  if (!cpu.ok()) return fail(cpu.status());
  if (!cuda.ok()) return fail(cuda.status());

  Stream stream;
  PinnedMemory pinned_out;
  DeviceMemory device_out;
  HostRegistration registration;
  void* table_on_device = nullptr;
  const size_t out_bytes = static_cast<size_t>(in.out_bytes);
  if (Status st = Cuda(cudaStreamCreateWithFlags(&stream.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      !st.ok()) {
    return fail(st);
  }
  if (Status st = Cuda(cudaHostAlloc(&pinned_out.ptr, out_bytes, cudaHostAllocDefault), "cudaHostAlloc"); !st.ok()) {
    return fail(st);
  }
  if (Status st = Cuda(cudaMalloc(&device_out.ptr, out_bytes), "cudaMalloc"); !st.ok()) return fail(st);
  std::memset(pinned_out.ptr, 1, out_bytes);
  report.h2d_bytes = in.out_bytes;
  if (Status st =
          MeasureH2d(device_out.ptr, pinned_out.ptr, in.out_bytes, stream.stream, in.repetitions, &report.h2d_gbps);
      !st.ok()) {
    report.h2d_error = st.ToString();
  }

  // The table in place: page-locked and mapped, read by the kernel through its device pointer.
  if (Status st = Cuda(cudaHostRegister(in.table, static_cast<size_t>(in.table_bytes), cudaHostRegisterMapped),
                       "cudaHostRegister of the table");
      !st.ok()) {
    return fail(st);
  }
  registration.ptr = in.table;
  if (Status st = Cuda(cudaHostGetDevicePointer(&table_on_device, in.table, 0), "cudaHostGetDevicePointer"); !st.ok()) {
    return fail(st);
  }
  const Shared shared{in, *cpu, *cuda, table_on_device, pinned_out.ptr, device_out.ptr, stream.stream};
  for (int64_t row_bytes : in.row_sizes) {
    GpuCase result;
    if (Status st = MeasureCase(shared, row_bytes, &result); !st.ok()) result.error = st.ToString();
    report.cases.push_back(std::move(result));
  }
  return report;
}

#endif

}  // namespace tessel::bench
