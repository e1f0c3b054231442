// Codes shared with libs/collectives/src/reduce/native.ts (keep both in sync).
#pragma once
#include <cstddef>

namespace cmesh {

enum DType : int { F32 = 0, F64 = 1, I8 = 2, U8 = 3, I32 = 4, I64 = 5, F16 = 6, BF16 = 7, NUM_DTYPES = 8 };
enum Op : int { SUM = 0, PRODUCT = 1, MIN = 2, MAX = 3, BAND = 4, BOR = 5, BXOR = 6, NUM_OPS = 7 };

// dst[i] = dst[i] op src[i] for i < n elements.
using ReduceFn = void (*)(void* dst, const void* src, size_t n);
// t[i] = t[i] / divisor (floating dtypes only).
using DivFn = void (*)(void* t, size_t n, double divisor);

struct KernelSet {
  const char* name;
  ReduceFn reduce[NUM_DTYPES][NUM_OPS];  // nullptr where the op is not defined for the dtype
  DivFn div[NUM_DTYPES];                 // nullptr for integers
};

extern const KernelSet kGenericKernels;
#ifdef CMESH_HAVE_AVX2_TU
extern const KernelSet kAvx2Kernels;
#endif

}  // namespace cmesh
