#include "workers/executor.h"

#include <cstring>

namespace tessel::workers {

Status MemoryState::Write(std::string_view name, const Tensor& tensor) {
  TESSEL_ASSIGN_OR_RETURN(Tensor copy, Tensor::Empty(tensor.dtype(), tensor.shape()));
  if (tensor.nbytes() > 0) std::memcpy(copy.raw(), tensor.raw(), tensor.nbytes());
  for (auto& [n, t] : tensors_) {
    if (n == name) {
      t = copy;
      return Status();
    }
  }
  tensors_.emplace_back(std::string(name), copy);
  return Status();
}

Result<Tensor> MemoryState::Read(std::string_view name) {
  for (const auto& [n, t] : tensors_) {
    if (n == name) return t;
  }
  return StorageError(StrCat("the saved state has no tensor '", name, "'"));
}

}  // namespace tessel::workers
