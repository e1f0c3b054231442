// Simulated CUDA runtime: host memory stands in for device memory, each stream is a worker thread
// that runs its tasks in order, an event completes when the stream reaches it. It enforces what
// the sidecar relies on: cudaFree and cudaFreeHost wait for the device's pending work, a stream
// holds at most CMESH_SIM_QUEUE_DEPTH tasks (launching more blocks), a cudaMemcpyAsync to or from
// pageable host memory (not from cudaMallocHost) returns only once the stream has run it, bad
// pointers and devices are errors. CMESH_SIM_CUDA_FAULT=launch makes cudaEventRecord and
// cudaMemcpyAsync fail with cudaErrorLaunchFailure, as a faulted kernel's sticky error does.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "sim.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr cudaError_t kSuccess = 0, kInvalidValue = 1, kMemoryAllocation = 2, kNoDevice = 100,
                      kInvalidDevice = 101, kInvalidHandle = 400, kNotReady = 600, kLaunchTimeout = 702,
                      kLaunchFailure = 719;

int deviceCount() { return static_cast<int>(cmesh_sim::envInt(std::getenv("CMESH_SIM_DEVICES"), 2)); }
size_t deviceMemory() { return static_cast<size_t>(cmesh_sim::envInt(std::getenv("CMESH_SIM_DEVICE_MEMORY"), int64_t(1) << 30)); }
size_t queueDepth() { return static_cast<size_t>(cmesh_sim::envInt(std::getenv("CMESH_SIM_QUEUE_DEPTH"), 1024)); }

thread_local int tlsDevice = 0;

/** CMESH_SIM_CUDA_FAULT=launch: the device faulted; every launch-path call reports it. */
bool launchFault() {
  const char* f = std::getenv("CMESH_SIM_CUDA_FAULT");
  return f && std::strcmp(f, "launch") == 0;
}

}  // namespace

struct CUstream_st {
  int device = 0;
  std::mutex m;
  std::condition_variable cv;
  std::deque<cmesh_sim::Task> q;
  bool running = false;
  bool destroyed = false;
};

struct CUevent_st {
  std::mutex m;
  uint64_t recorded = 0, done = 0;
  Clock::time_point at{};
  int queued = 0;          // its records still on a stream
  bool destroyed = false;  // cudaEventDestroy came while one was: the last one deletes it
};

namespace {

struct Registry {
  std::mutex m;
  std::condition_variable idle;  // a stream went idle or away
  std::set<CUstream_st*> streams;
  std::map<uintptr_t, std::pair<size_t, int>> allocations;  // base -> (bytes, device)
  std::map<uintptr_t, size_t> pinned;                       // cudaMallocHost: base -> bytes
  std::map<int, size_t> usedBytes;
};
Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: worker threads may outlive main's statics
  return *r;
}

bool streamIdle(CUstream_st* s) { return s->q.empty() && !s->running; }

void worker(CUstream_st* s) {
  for (;;) {
    cmesh_sim::Task t;
    {
      std::unique_lock<std::mutex> lk(s->m);
      s->cv.wait(lk, [&] { return !s->q.empty() || s->destroyed; });
      if (s->q.empty()) break;  // destroyed and drained
      t = std::move(s->q.front());
      s->q.pop_front();
      s->running = true;
    }
    s->cv.notify_all();  // a launcher blocked on the queue depth may go on
    t();
    {
      std::lock_guard<std::mutex> lk(s->m);
      s->running = false;
    }
    s->cv.notify_all();
    Registry& r = registry();
    { std::lock_guard<std::mutex> lk(r.m); }
    r.idle.notify_all();
  }
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lk(r.m);
    r.streams.erase(s);
  }
  r.idle.notify_all();
  delete s;
}

/** True when [p, p+n) lies inside one allocation. */
bool deviceRange(const void* p, size_t n) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.m);
  auto u = reinterpret_cast<uintptr_t>(p);
  auto it = r.allocations.upper_bound(u);
  if (it == r.allocations.begin()) return false;
  --it;
  return u >= it->first && n <= it->second.first && u - it->first <= it->second.first - n;
}

/** True when [p, p+n) lies inside one cudaMallocHost allocation (page-locked host memory). */
bool pinnedRange(const void* p, size_t n) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.m);
  auto u = reinterpret_cast<uintptr_t>(p);
  auto it = r.pinned.upper_bound(u);
  if (it == r.pinned.begin()) return false;
  --it;
  return u >= it->first && n <= it->second && u - it->first <= it->second - n;
}

/**
 * Waits (r.m held through `lk`) until no stream of `device` (-1: of any device) has work pending,
 * as cudaFree and cudaFreeHost synchronise; false after the hang limit.
 */
bool waitDeviceIdle(std::unique_lock<std::mutex>& lk, int device, const char* what) {
  Registry& r = registry();
  auto pending = [&] {
    for (CUstream_st* s : r.streams) {
      if (device >= 0 && s->device != device) continue;
      std::lock_guard<std::mutex> g(s->m);
      if (!streamIdle(s)) return true;
    }
    return false;
  };
  auto until = Clock::now() + std::chrono::milliseconds(cmesh_sim::hangLimitMs());
  while (pending()) {
    if (r.idle.wait_until(lk, std::min(until, Clock::now() + std::chrono::milliseconds(20))) == std::cv_status::timeout &&
        Clock::now() >= until) {
      cmesh_sim::log(std::string(what) + " waited " + std::to_string(cmesh_sim::hangLimitMs()) +
                     " ms for pending work on device " + std::to_string(device));
      return false;
    }
  }
  return true;
}

/**
 * A copy to or from pageable memory: CUDA stages it through its own pinned buffer, so the call
 * returns only once the stream has reached and run it (behind whatever was queued before).
 */
cudaError_t enqueueAndWait(cudaStream_t s, cmesh_sim::Task t) {
  auto done = std::make_shared<std::pair<std::mutex, bool>>();
  done->second = false;
  auto cv = std::make_shared<std::condition_variable>();
  bool queued = cmesh_sim::enqueue(s, [t = std::move(t), done, cv] {
    t();
    {
      std::lock_guard<std::mutex> lk(done->first);
      done->second = true;
    }
    cv->notify_all();
  });
  if (!queued) return kLaunchTimeout;
  std::unique_lock<std::mutex> lk(done->first);
  if (!cv->wait_for(lk, std::chrono::milliseconds(cmesh_sim::hangLimitMs()), [&] { return done->second; })) {
    cmesh_sim::log("a cudaMemcpyAsync with pageable host memory waited " + std::to_string(cmesh_sim::hangLimitMs()) +
                   " ms for its stream (the work queued before it never finished)");
    return kLaunchTimeout;
  }
  return kSuccess;
}

}  // namespace

namespace cmesh_sim {

int64_t envInt(const char* v, int64_t fallback) {
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  return *end ? fallback : n;
}

int64_t hangLimitMs() { return envInt(std::getenv("CMESH_SIM_HANG_MS"), 60000); }

void log(const std::string& line) {
  std::fprintf(stderr, "cmesh-sim[%d]: %s\n", static_cast<int>(::getpid()), line.c_str());
  std::fflush(stderr);
}

int currentDevice() { return tlsDevice; }

bool enqueue(cudaStream_t s, Task t) {
  std::unique_lock<std::mutex> lk(s->m);
  auto until = Clock::now() + std::chrono::milliseconds(hangLimitMs());
  if (!s->cv.wait_until(lk, until, [&] { return s->q.size() < queueDepth(); })) {
    log("a launch waited " + std::to_string(hangLimitMs()) + " ms for room in a full stream queue");
    return false;
  }
  s->q.push_back(std::move(t));
  lk.unlock();
  s->cv.notify_all();
  return true;
}

}  // namespace cmesh_sim

CMESH_SIM_API cudaError_t cudaGetDeviceCount(int* n) {
  *n = deviceCount();
  return *n > 0 ? kSuccess : kNoDevice;
}

CMESH_SIM_API cudaError_t cudaGetDeviceProperties(void* prop, int device) {
  if (device < 0 || device >= deviceCount()) return kInvalidDevice;
  // cudaDeviceProp: char name[256] at 0, totalGlobalMem (size_t) at 288 (cuda_api.hpp).
  char name[256] = {0};
  std::snprintf(name, sizeof name, "cmesh-sim device %d", device);
  std::memcpy(prop, name, sizeof name);
  size_t total = deviceMemory();
  std::memcpy(static_cast<char*>(prop) + 288, &total, sizeof total);
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int device) {
  if (device < 0 || device >= deviceCount()) return kInvalidDevice;
  std::snprintf(bus, static_cast<size_t>(len), "00000000:%02X:00.0", device + 1);
  return kSuccess;
}

CMESH_SIM_API const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case kSuccess: return "cudaSuccess";
    case kInvalidValue: return "cudaErrorInvalidValue";
    case kMemoryAllocation: return "cudaErrorMemoryAllocation";
    case kNoDevice: return "cudaErrorNoDevice";
    case kInvalidDevice: return "cudaErrorInvalidDevice";
    case kInvalidHandle: return "cudaErrorInvalidResourceHandle";
    case kNotReady: return "cudaErrorNotReady";
    case kLaunchTimeout: return "cudaErrorLaunchTimeout";
    case kLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaErrorUnknown";
  }
}

CMESH_SIM_API const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case kSuccess: return "no error";
    case kInvalidValue: return "invalid argument";
    case kMemoryAllocation: return "out of memory";
    case kNoDevice: return "no CUDA-capable device is detected";
    case kInvalidDevice: return "invalid device ordinal";
    case kInvalidHandle: return "invalid resource handle";
    case kNotReady: return "device not ready";
    case kLaunchTimeout: return "the launch timed out and was terminated (simulated: pending work never finished)";
    case kLaunchFailure: return "unspecified launch failure (simulated: CMESH_SIM_CUDA_FAULT=launch)";
    default: return "unknown error";
  }
}

CMESH_SIM_API cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 12080;
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaDriverGetVersion(int* v) {
  *v = 12080;
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= deviceCount()) return kInvalidDevice;
  tlsDevice = device;
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaMalloc(void** p, size_t bytes) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.m);
  size_t& used = r.usedBytes[tlsDevice];
  if (bytes > deviceMemory() - used) return kMemoryAllocation;
  void* mem = std::malloc(bytes ? bytes : 1);
  if (!mem) return kMemoryAllocation;
  used += bytes;
  r.allocations[reinterpret_cast<uintptr_t>(mem)] = {bytes, tlsDevice};
  *p = mem;
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaFree(void* p) {
  if (!p) return kSuccess;
  Registry& r = registry();
  std::unique_lock<std::mutex> lk(r.m);
  auto it = r.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == r.allocations.end()) return kInvalidValue;
  int device = it->second.second;
  // cudaFree synchronises the device: it returns only once no stream there has work pending.
  if (!waitDeviceIdle(lk, device, "cudaFree")) return kLaunchTimeout;
  it = r.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == r.allocations.end()) return kInvalidValue;
  r.usedBytes[device] -= it->second.first;
  r.allocations.erase(it);
  lk.unlock();
  std::free(p);
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, int kind, cudaStream_t s) {
  if (!s) return kInvalidHandle;
  if (launchFault()) return kLaunchFailure;
  if (n == 0) return kSuccess;
  if (kind == 1) {  // host to device
    if (!deviceRange(dst, n)) return kInvalidValue;
    if (!pinnedRange(src, n)) {
      auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + n);
      return enqueueAndWait(s, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
    }
    return cmesh_sim::enqueue(s, [dst, src, n] { std::memcpy(dst, src, n); }) ? kSuccess : kLaunchTimeout;
  }
  if (kind == 2) {  // device to host
    if (!deviceRange(src, n)) return kInvalidValue;
    if (!pinnedRange(dst, n)) return enqueueAndWait(s, [dst, src, n] { std::memcpy(dst, src, n); });
    return cmesh_sim::enqueue(s, [dst, src, n] { std::memcpy(dst, src, n); }) ? kSuccess : kLaunchTimeout;
  }
  return kInvalidValue;
}

CMESH_SIM_API cudaError_t cudaMallocHost(void** p, size_t bytes) {
  void* mem = std::malloc(bytes ? bytes : 1);
  if (!mem) return kMemoryAllocation;
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.m);
  r.pinned[reinterpret_cast<uintptr_t>(mem)] = bytes;
  *p = mem;
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaFreeHost(void* p) {
  if (!p) return kSuccess;
  Registry& r = registry();
  std::unique_lock<std::mutex> lk(r.m);
  if (!r.pinned.count(reinterpret_cast<uintptr_t>(p))) return kInvalidValue;
  // Like cudaFree, an implicitly synchronising call: it waits for every device's pending work.
  if (!waitDeviceIdle(lk, -1, "cudaFreeHost")) return kLaunchTimeout;
  r.pinned.erase(reinterpret_cast<uintptr_t>(p));
  lk.unlock();
  std::free(p);
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaMemsetAsync(void* dst, int value, size_t n, cudaStream_t s) {
  if (!s) return kInvalidHandle;
  if (n == 0) return kSuccess;
  if (!deviceRange(dst, n)) return kInvalidValue;
  return cmesh_sim::enqueue(s, [dst, value, n] { std::memset(dst, value, n); }) ? kSuccess : kLaunchTimeout;
}

CMESH_SIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* out, unsigned flags) {
  auto* s = new CUstream_st();
  s->device = tlsDevice;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lk(r.m);
    r.streams.insert(s);
  }
  std::thread(worker, s).detach();
  *out = s;
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaStreamDestroy(cudaStream_t s) {
  // As in CUDA, the call returns at once; the stream finishes its work, then goes away.
  if (!s) return kInvalidHandle;
  // Notified under the lock: the worker deletes the stream as soon as it sees the flag.
  std::lock_guard<std::mutex> lk(s->m);
  s->destroyed = true;
  s->cv.notify_all();
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (!s) return kInvalidHandle;
  std::lock_guard<std::mutex> lk(s->m);
  return streamIdle(s) ? kSuccess : kNotReady;
}

CMESH_SIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* out, unsigned flags) {
  *out = new CUevent_st();
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e || !s) return kInvalidHandle;
  if (launchFault()) return kLaunchFailure;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lk(e->m);
    seq = ++e->recorded;
    e->queued++;
  }
  // The event completes once every task queued before it has run.
  auto ran = [e, seq](bool run) {
    bool last;
    {
      std::lock_guard<std::mutex> lk(e->m);
      if (run && seq > e->done) {
        e->done = seq;
        e->at = Clock::now();
      }
      last = --e->queued == 0 && e->destroyed;
    }
    if (last) delete e;
  };
  if (cmesh_sim::enqueue(s, [ran] { ran(true); })) return kSuccess;
  ran(false);
  return kLaunchTimeout;
}

CMESH_SIM_API cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (!e) return kInvalidHandle;
  std::lock_guard<std::mutex> lk(e->m);
  return e->done >= e->recorded ? kSuccess : kNotReady;
}

CMESH_SIM_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  if (!a || !b) return kInvalidHandle;
  std::lock_guard<std::mutex> la(a->m);
  std::lock_guard<std::mutex> lb(b->m);
  if (a->done < a->recorded || b->done < b->recorded || a->done == 0 || b->done == 0) return kNotReady;
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return kSuccess;
}

CMESH_SIM_API cudaError_t cudaEventDestroy(cudaEvent_t e) {
  // As in CUDA, the call returns at once: an event still queued on a stream (after an abort) goes
  // once its last record has run.
  if (!e) return kInvalidHandle;
  {
    std::lock_guard<std::mutex> lk(e->m);
    if (e->queued > 0) {
      e->destroyed = true;
      return kSuccess;
    }
  }
  delete e;
  return kSuccess;
}
