// Owners of the CUDA and NCCL handles the sidecar makes: each holds one handle and the dlopened
// API that releases it, and releases it once, when the owner is reset or goes out of scope, unless
// it was handed on with release(). Move-only, as std::unique_ptr.
#pragma once

#include <utility>

#include "cmesh_sidecar/cuda_api.hpp"
#include "cmesh_sidecar/nccl_api.hpp"

namespace cmesh {

/** `Free` names the API's member (a function pointer) that releases a T, e.g. &CudaApi::streamDestroy. */
template <typename T, typename Api, typename Result, Result (*Api::*Free)(T)>
class Owned {
 public:
  Owned() = default;
  Owned(const Api& api, T handle) : api_(&api), handle_(handle) {}
  Owned(Owned&& o) noexcept : api_(o.api_), handle_(std::exchange(o.handle_, T{})) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      reset();
      api_ = o.api_;
      handle_ = std::exchange(o.handle_, T{});
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { reset(); }

  T get() const { return handle_; }
  explicit operator bool() const { return handle_ != T{}; }
  /** Releases the handle now (no-op when empty) and returns the library's result. */
  Result reset() {
    if (handle_ == T{}) return Result{};
    return (api_->*Free)(std::exchange(handle_, T{}));
  }
  /** Gives the handle up without releasing it (the caller releases it, or leaves it on purpose). */
  T release() { return std::exchange(handle_, T{}); }
  /** For a create call's out-parameter: releases what is held and owns what the call writes. */
  T* put(const Api& api) {
    reset();
    api_ = &api;
    return &handle_;
  }

 private:
  const Api* api_ = nullptr;
  T handle_{};
};

using CudaStream = Owned<cudaStream_t, CudaApi, cudaError_t, &CudaApi::streamDestroy>;
using CudaEvent = Owned<cudaEvent_t, CudaApi, cudaError_t, &CudaApi::eventDestroy>;
/** cudaMalloc's memory. cudaFree waits for every kernel of the device: reset it where that is acceptable. */
using DeviceMemory = Owned<void*, CudaApi, cudaError_t, &CudaApi::free>;
/** cudaMallocHost's memory (cudaFreeHost waits as cudaFree does). */
using PinnedMemory = Owned<void*, CudaApi, cudaError_t, &CudaApi::freeHost>;
/**
 * A communicator, aborted when dropped: the release that never waits for peers. The orderly end
 * (ncclCommFinalize, then ncclCommDestroy) takes the handle with release().
 */
using NcclComm = Owned<ncclComm_t, NcclApi, ncclResult_t, &NcclApi::commAbort>;

}  // namespace cmesh
