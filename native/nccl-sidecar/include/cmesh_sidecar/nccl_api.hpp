// NCCL's C API as far as the sidecar uses it, declared by the project (ABI of nccl.h 2.x) and
// resolved from libnccl.so.2 with dlopen at run time.
#pragma once

#include <cstddef>
#include <string>

#include "cmesh_sidecar/cuda_api.hpp"

namespace cmesh {

using ncclComm_t = struct ncclComm*;
constexpr size_t kNcclUniqueIdBytes = 128;
struct ncclUniqueId {
  char internal[kNcclUniqueIdBytes];
};

using ncclResult_t = int;
constexpr ncclResult_t kNcclSuccess = 0;
constexpr ncclResult_t kNcclInvalidArgument = 4;
constexpr ncclResult_t kNcclInProgress = 7;
constexpr ncclResult_t kNcclTimeout = 8;

// ncclDataType_t values
enum NcclDataType : int {
  kNcclInt8 = 0, kNcclUint8 = 1, kNcclInt32 = 2, kNcclUint32 = 3, kNcclInt64 = 4, kNcclUint64 = 5,
  kNcclFloat16 = 6, kNcclFloat32 = 7, kNcclFloat64 = 8, kNcclBfloat16 = 9,
};
// ncclRedOp_t values
enum NcclRedOp : int { kNcclSum = 0, kNcclProd = 1, kNcclMax = 2, kNcclMin = 3, kNcclAvg = 4 };

/**
 * ncclConfig_t as NCCL 2.14 declared it, the fields every later version starts with. NCCL reads a
 * config by its size and version, so a later library takes this one and defaults the rest.
 */
struct NcclConfig {
  size_t size = sizeof(NcclConfig);
  unsigned int magic = 0xcafebeef;
  unsigned int version = 21400;  // NCCL_VERSION(2, 14, 0)
  int blocking = 1;
};

struct NcclApi {
  std::string library;
  ncclResult_t (*getVersion)(int*) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, NcclConfig*) = nullptr;  // optional (2.14+)
  ncclResult_t (*commSplit)(ncclComm_t, int, int, ncclComm_t*, NcclConfig*) = nullptr;  // optional (2.18+)
  ncclResult_t (*commFinalize)(ncclComm_t) = nullptr;  // optional (2.14+)
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*commCuDevice)(ncclComm_t, int*) = nullptr;  // optional (every 2.x has it; checked when found)
  const char* (*getErrorString)(ncclResult_t) = nullptr;
  const char* (*getLastError)(ncclComm_t) = nullptr;  // optional (2.13+)
  ncclResult_t (*allReduce)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduce)(const void*, void*, size_t, int, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*allGather)(const void*, void*, size_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*send)(const void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;

  /** "ncclUnhandledCudaError (unhandled cuda error): <last error>" */
  std::string describe(ncclResult_t r, ncclComm_t comm = nullptr) const;
};

struct NcclProbe {
  bool available = false;
  std::string reason;
  int version = 0;  // ncclGetVersion code, e.g. 22703
  std::string versionString;
  bool nonblocking = false;  // communicators are created non-blocking (abortable on timeout)
  // ops launch on a blocking communicator split from the non-blocking one (NCCL 2.18+, and the
  // operator left NCCL_COMM_BLOCKING unset): a non-blocking communicator hands every grouped
  // launch to a thread of NCCL's own, ~50 us each on an H200
  bool splitLaunches = false;
};

/** Loads libnccl (explicit path, libnccl.so.2, Python wheel nvidia/nccl/lib). */
NcclProbe loadNccl(const std::string& explicitPath, NcclApi& api);

}  // namespace cmesh
