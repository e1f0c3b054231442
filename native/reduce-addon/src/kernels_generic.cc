// Baseline x86-64 (SSE2) or whatever the target's default is: runs on every CPU.
#include "kernels.h"

namespace cmesh {
extern const KernelSet kGenericKernels;
const KernelSet kGenericKernels = make_kernel_set("generic");
}
