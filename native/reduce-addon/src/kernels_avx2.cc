// Built with -mavx2 -mf16c; used only when the CPU reports both (checked in addon.cc).
#include "kernels.h"

namespace cmesh {
extern const KernelSet kAvx2Kernels;
const KernelSet kAvx2Kernels = make_kernel_set("avx2+f16c");
}
