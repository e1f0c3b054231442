// The few CUDA runtime entry points the sidecar uses, declared here and resolved with dlopen at
// run time: the sidecar builds without CUDA and runs (reporting "unavailable") without a GPU.
// Where CUDA's headers were found at build time, cuda_api.cpp checks these declarations against them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace cmesh {

using cudaError_t = int;
using cudaStream_t = struct CUstream_st*;
using cudaEvent_t = struct CUevent_st*;

constexpr cudaError_t kCudaSuccess = 0;
constexpr cudaError_t kCudaErrorInsufficientDriver = 35;
constexpr cudaError_t kCudaErrorNotReady = 600;
constexpr int kCudaMemcpyHostToDevice = 1;
constexpr int kCudaMemcpyDeviceToHost = 2;
constexpr unsigned kCudaStreamNonBlocking = 0x01;
constexpr unsigned kCudaEventDefault = 0x00;
// cudaDeviceProp begins with char name[256], cudaUUID_t uuid (16), char luid[8],
// unsigned luidDeviceNodeMask, size_t totalGlobalMem: stable since CUDA 10.
constexpr size_t kDevicePropNameOffset = 0;
constexpr size_t kDevicePropTotalMemOffset = 288;
constexpr size_t kDevicePropBufferBytes = 16384;  // far larger than any cudaDeviceProp

struct CudaApi {
  std::string library;  // path or soname that loaded
  cudaError_t (*getDeviceCount)(int*) = nullptr;
  cudaError_t (*getDeviceProperties)(void*, int) = nullptr;
  cudaError_t (*deviceGetPCIBusId)(char*, int, int) = nullptr;
  const char* (*getErrorString)(cudaError_t) = nullptr;
  const char* (*getErrorName)(cudaError_t) = nullptr;
  cudaError_t (*runtimeGetVersion)(int*) = nullptr;
  cudaError_t (*driverGetVersion)(int*) = nullptr;
  cudaError_t (*setDevice)(int) = nullptr;
  cudaError_t (*malloc)(void**, size_t) = nullptr;
  cudaError_t (*free)(void*) = nullptr;
  cudaError_t (*mallocHost)(void**, size_t) = nullptr;  // page-locked: copies to it are asynchronous
  cudaError_t (*freeHost)(void*) = nullptr;
  cudaError_t (*memcpyAsync)(void*, const void*, size_t, int, cudaStream_t) = nullptr;
  cudaError_t (*memsetAsync)(void*, int, size_t, cudaStream_t) = nullptr;
  cudaError_t (*streamCreateWithFlags)(cudaStream_t*, unsigned) = nullptr;
  cudaError_t (*streamDestroy)(cudaStream_t) = nullptr;
  cudaError_t (*streamQuery)(cudaStream_t) = nullptr;
  cudaError_t (*eventCreateWithFlags)(cudaEvent_t*, unsigned) = nullptr;
  cudaError_t (*eventRecord)(cudaEvent_t, cudaStream_t) = nullptr;
  cudaError_t (*eventQuery)(cudaEvent_t) = nullptr;
  cudaError_t (*eventElapsedTime)(float*, cudaEvent_t, cudaEvent_t) = nullptr;
  cudaError_t (*eventDestroy)(cudaEvent_t) = nullptr;

  /** "cudaErrorNoDevice (no CUDA-capable device is detected)" */
  std::string describe(cudaError_t e) const;
};

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  size_t totalMemoryBytes = 0;
  std::string pciBusId;
};

struct CudaProbe {
  bool available = false;
  std::string reason;  // why not, when !available
  int runtimeVersion = 0;
  int driverVersion = 0;
  std::vector<CudaDeviceInfo> devices;
};

/**
 * Loads libcudart (explicit path, or the usual sonames, /usr/local/cuda and Python wheel
 * locations) and counts devices. A runtime newer than the driver is skipped for the next
 * candidate. `api` is usable when probe.available.
 */
CudaProbe loadCuda(const std::string& explicitPath, CudaApi& api);

}  // namespace cmesh
