#include "cmesh_sidecar/cuda_api.hpp"

#include <algorithm>
#include <cstring>

#include "cmesh_sidecar/library_search.hpp"

#ifdef CMESH_HAVE_CUDA_HEADERS
#include <cstddef>
#include <cuda_runtime_api.h>
// The declarations in cuda_api.hpp must agree with the toolkit's.
static_assert(cudaSuccess == cmesh::kCudaSuccess, "cudaSuccess");
static_assert(cudaErrorInsufficientDriver == cmesh::kCudaErrorInsufficientDriver, "cudaErrorInsufficientDriver");
static_assert(cudaErrorNotReady == cmesh::kCudaErrorNotReady, "cudaErrorNotReady");
static_assert(cudaMemcpyHostToDevice == cmesh::kCudaMemcpyHostToDevice, "cudaMemcpyHostToDevice");
static_assert(cudaMemcpyDeviceToHost == cmesh::kCudaMemcpyDeviceToHost, "cudaMemcpyDeviceToHost");
static_assert(cudaStreamNonBlocking == cmesh::kCudaStreamNonBlocking, "cudaStreamNonBlocking");
static_assert(cudaEventDefault == cmesh::kCudaEventDefault, "cudaEventDefault");
static_assert(offsetof(cudaDeviceProp, name) == cmesh::kDevicePropNameOffset, "cudaDeviceProp.name");
static_assert(offsetof(cudaDeviceProp, totalGlobalMem) == cmesh::kDevicePropTotalMemOffset,
              "cudaDeviceProp.totalGlobalMem");
static_assert(sizeof(cudaDeviceProp) <= cmesh::kDevicePropBufferBytes, "cudaDeviceProp size");
#endif

namespace cmesh {

std::string CudaApi::describe(cudaError_t e) const {
  std::string name = getErrorName ? getErrorName(e) : ("cudaError " + std::to_string(e));
  std::string text = getErrorString ? getErrorString(e) : "";
  return text.empty() ? name : name + " (" + text + ")";
}

namespace {

template <typename Fn>
bool bind(void* h, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(findSymbol(h, name));
  if (!fn) {
    if (!missing.empty()) missing += ", ";
    missing += name;
  }
  return fn != nullptr;
}

// Binds every entry point; returns the names of missing ones (empty = all found).
std::string bindAll(void* h, CudaApi& api) {
  std::string missing;
  bind(h, "cudaGetDeviceCount", api.getDeviceCount, missing);
  // CUDA 12 versions the struct (cudaGetDeviceProperties_v2); CUDA 11 and 13 export the plain name.
  api.getDeviceProperties = reinterpret_cast<decltype(api.getDeviceProperties)>(findSymbol(h, "cudaGetDeviceProperties_v2"));
  if (!api.getDeviceProperties) bind(h, "cudaGetDeviceProperties", api.getDeviceProperties, missing);
  bind(h, "cudaDeviceGetPCIBusId", api.deviceGetPCIBusId, missing);
  bind(h, "cudaGetErrorString", api.getErrorString, missing);
  bind(h, "cudaGetErrorName", api.getErrorName, missing);
  bind(h, "cudaRuntimeGetVersion", api.runtimeGetVersion, missing);
  bind(h, "cudaDriverGetVersion", api.driverGetVersion, missing);
  bind(h, "cudaSetDevice", api.setDevice, missing);
  bind(h, "cudaMalloc", api.malloc, missing);
  bind(h, "cudaFree", api.free, missing);
  bind(h, "cudaMallocHost", api.mallocHost, missing);
  bind(h, "cudaFreeHost", api.freeHost, missing);
  bind(h, "cudaMemcpyAsync", api.memcpyAsync, missing);
  bind(h, "cudaMemsetAsync", api.memsetAsync, missing);
  bind(h, "cudaStreamCreateWithFlags", api.streamCreateWithFlags, missing);
  bind(h, "cudaStreamDestroy", api.streamDestroy, missing);
  bind(h, "cudaStreamQuery", api.streamQuery, missing);
  bind(h, "cudaEventCreateWithFlags", api.eventCreateWithFlags, missing);
  bind(h, "cudaEventRecord", api.eventRecord, missing);
  bind(h, "cudaEventQuery", api.eventQuery, missing);
  bind(h, "cudaEventElapsedTime", api.eventElapsedTime, missing);
  bind(h, "cudaEventDestroy", api.eventDestroy, missing);
  return missing;
}

}  // namespace

CudaProbe loadCuda(const std::string& explicitPath, CudaApi& api) {
  CudaProbe probe;
  // CUDA 11's runtime is not a candidate: cudaSetDevice there does not make the device's context
  // current until the next runtime call, and NCCL >= 2.14 (non-blocking communicators) needs 11.3+.
  auto candidates = libraryCandidates(
      explicitPath, {"libcudart.so", "libcudart.so.13", "libcudart.so.12"},
      {"nvidia/cuda_runtime/lib/libcudart.so.*", "nvidia/cu13/lib/libcudart.so.*"},
      {"/usr/local/cuda/lib64/libcudart.so.*", "/usr/local/cuda-*/lib64/libcudart.so.*"});
  std::string attempts;
  std::vector<std::string> seen;  // real files already tried under another name
  auto note = [&](const std::string& s) { attempts += (attempts.empty() ? "" : "; ") + s; };
  for (const auto& path : candidates) {
    std::string err;
    void* h = openLibrary(path, err);
    if (!h) {
      // Sonames that simply are not installed are noise; name them only when explicit.
      if (!explicitPath.empty() || path.find('/') != std::string::npos) note(path + ": " + err);
      continue;
    }
    std::string real = loadedPath(h);
    if (std::find(seen.begin(), seen.end(), real) != seen.end()) continue;
    seen.push_back(real);
    CudaApi candidate;
    candidate.library = real.empty() || real == path ? path : path + " (" + real + ")";
    std::string missing = bindAll(h, candidate);
    if (!missing.empty()) {
      note(candidate.library + ": missing symbols " + missing);
      continue;
    }
    int count = 0;
    cudaError_t e = candidate.getDeviceCount(&count);
    candidate.runtimeGetVersion(&probe.runtimeVersion);
    candidate.driverGetVersion(&probe.driverVersion);
    if (e == kCudaErrorInsufficientDriver && explicitPath.empty()) {
      // A runtime newer than the installed driver: an older runtime further down may work.
      note(candidate.library + ": cudaGetDeviceCount: " + candidate.describe(e));
      continue;
    }
    api = candidate;
    if (e != kCudaSuccess) {
      probe.reason = "cudaGetDeviceCount failed: " + candidate.describe(e) + " [" + candidate.library + "]";
      return probe;
    }
    if (count == 0) {
      probe.reason = "no CUDA device found [" + candidate.library + "]";
      return probe;
    }
    for (int i = 0; i < count; i++) {
      CudaDeviceInfo d;
      d.index = i;
      std::vector<char> props(kDevicePropBufferBytes, 0);
      if (candidate.getDeviceProperties(props.data(), i) == kCudaSuccess) {
        d.name = std::string(props.data() + kDevicePropNameOffset, strnlen(props.data(), 256));
        std::memcpy(&d.totalMemoryBytes, props.data() + kDevicePropTotalMemOffset, sizeof(size_t));
      }
      char bus[64] = {0};
      if (candidate.deviceGetPCIBusId(bus, sizeof bus, i) == kCudaSuccess) d.pciBusId = bus;
      probe.devices.push_back(d);
    }
    probe.available = true;
    return probe;
  }
  probe.reason = "no usable CUDA runtime (libcudart) found";
  if (!attempts.empty()) probe.reason += ": " + attempts;
  if (explicitPath.empty()) probe.reason += " (set CMESH_CUDART_LIB or --cudart-lib to choose one)";
  return probe;
}

}  // namespace cmesh
