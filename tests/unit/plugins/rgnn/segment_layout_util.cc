#include "segment_layout_util.h"

namespace tessel::kernel_test {

void Append(std::vector<const Tensor*>& inputs, const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) inputs.push_back(&t);
}

}  // namespace tessel::kernel_test
