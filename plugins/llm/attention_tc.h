// llm.attention.fwd/.bwd in bf16 on the tensor cores (attention_tc.cu), which attention.cu's bf16 kernels
// call. Throws KernelError as the other kernels do (a head size above kMaxHeadSize is invalid-argument).
#pragma once

#include "attention_args.h"

namespace tessel::kernels::llm {

void AttentionFwdTensorCores(const KernelArgs& args, const AttentionFwdArgs<Bf16>& a);
void AttentionBwdTensorCores(const KernelArgs& args, const AttentionBwdArgs<Bf16>& a);

}  // namespace tessel::kernels::llm
