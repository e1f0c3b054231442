// Node-API entry points of the shared-memory transport. The rings themselves are read and written
// from JavaScript over the mapped memory (libs/collectives/src/transport/shm/); this addon does only
// what JavaScript cannot: make and map the segments, and sleep on and wake a futex without
// blocking the event loop.
//
//   createSegment(bytes)            -> { fd, buffer }   an anonymous memfd, mapped shared; nothing
//                                                       appears in /dev/shm, so a killed rank leaks nothing
//   openSegment(pid, fd, bytes)     -> buffer           maps a peer's segment via /proc/<pid>/fd/<fd>
//   closeFd(fd)                                         once every peer has mapped the segment
//   wake(buffer, offset)                                FUTEX_WAKE on the int32 at offset
//   startWaiter(buffer, doorbell, sleeping, spinUs, fn) -> waiter   a native thread that waits for
//                                                       the doorbell word to change and calls fn on
//                                                       the event loop (coalesced, uv_async)
//   stopWaiter(waiter)
//
// A segment's ArrayBuffer owns its mapping: the finalizer unmaps it, so no JavaScript view can
// outlive the memory it points at. A waiter holds a reference to its buffer until it is stopped.
#include <napi.h>
#include <uv.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

struct Mapping {
  void* addr;
  size_t bytes;
};

void unmap(Napi::Env, void* data, Mapping* m) {
  munmap(m->addr, m->bytes);
  delete m;
}

Napi::Value fail(Napi::Env env, const std::string& what) {
  Napi::Error e = Napi::Error::New(env, what + ": " + std::strerror(errno));
  e.Set("errno", Napi::Number::New(env, errno));
  e.ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::ArrayBuffer wrap(Napi::Env env, void* addr, size_t bytes) {
  auto* m = new Mapping{addr, bytes};
  return Napi::ArrayBuffer::New(env, addr, bytes, unmap, m);
}

Napi::Value CreateSegment(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const double want = info[0].As<Napi::Number>().DoubleValue();
  if (!(want > 0) || want > double(1ull << 40)) {
    Napi::TypeError::New(env, "createSegment: bytes out of range").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const size_t bytes = size_t(want);
  int fd = int(syscall(SYS_memfd_create, "cmesh-shm", MFD_CLOEXEC));
  if (fd < 0) return fail(env, "memfd_create");
  if (ftruncate(fd, off_t(bytes)) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return fail(env, "ftruncate");
  }
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    int saved = errno;
    close(fd);
    errno = saved;
    return fail(env, "mmap");
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("fd", Napi::Number::New(env, fd));
  out.Set("buffer", wrap(env, addr, bytes));
  return out;
}

Napi::Value OpenSegment(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int pid = info[0].As<Napi::Number>().Int32Value();
  const int fd = info[1].As<Napi::Number>().Int32Value();
  const size_t bytes = size_t(info[2].As<Napi::Number>().DoubleValue());
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
  int mine = open(path, O_RDWR | O_CLOEXEC);
  if (mine < 0) return fail(env, std::string("open ") + path);
  struct stat st;
  if (fstat(mine, &st) != 0 || size_t(st.st_size) < bytes) {
    close(mine);
    errno = EINVAL;
    return fail(env, std::string(path) + " is smaller than announced");
  }
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
  int saved = errno;
  close(mine);
  errno = saved;
  if (addr == MAP_FAILED) return fail(env, "mmap");
  return wrap(env, addr, bytes);
}

Napi::Value CloseFd(const Napi::CallbackInfo& info) {
  close(info[0].As<Napi::Number>().Int32Value());
  return info.Env().Undefined();
}

std::atomic<int32_t>* word(Napi::Env env, const Napi::Value& buf, const Napi::Value& off) {
  Napi::ArrayBuffer ab = buf.As<Napi::ArrayBuffer>();
  const size_t o = size_t(off.As<Napi::Number>().DoubleValue());
  if (o % 4 != 0 || o + 4 > ab.ByteLength()) {
    Napi::TypeError::New(env, "futex word out of range").ThrowAsJavaScriptException();
    return nullptr;
  }
  return reinterpret_cast<std::atomic<int32_t>*>(static_cast<char*>(ab.Data()) + o);
}

long futex(std::atomic<int32_t>* addr, int op, int32_t val, const timespec* ts) {
  // shared (not FUTEX_PRIVATE): the word lives in memory mapped by several processes
  return syscall(SYS_futex, reinterpret_cast<int32_t*>(addr), op, val, ts, nullptr, 0);
}

Napi::Value Wake(const Napi::CallbackInfo& info) {
  auto* w = word(info.Env(), info[0], info[1]);
  if (w) futex(w, FUTEX_WAKE, 1, nullptr);
  return info.Env().Undefined();
}

class Waiter {
 public:
  Waiter(Napi::Env env, Napi::ArrayBuffer buf, std::atomic<int32_t>* doorbell, std::atomic<int32_t>* sleeping, int spinUs, Napi::Function fn)
      : env_(env), doorbell_(doorbell), sleeping_(sleeping), spinNs_(int64_t(spinUs) * 1000) {
    buffer_ = Napi::Persistent(buf.As<Napi::Object>());
    fn_ = Napi::Persistent(fn);
    ctx_ = new Napi::AsyncContext(env, "cmesh-shm-doorbell");
    uv_loop_t* loop = nullptr;
    napi_get_uv_event_loop(env, &loop);
    uv_async_init(loop, &async_, &Waiter::OnAsync);
    async_.data = this;
    // the TCP connections beside the rings keep the loop alive while the group exists
    uv_unref(reinterpret_cast<uv_handle_t*>(&async_));
    // read here, before the caller's first look at the rings: a bump between that look and the
    // thread's start must count as new
    const int32_t seen = doorbell_->load();
    thread_ = std::thread([this, seen] { Run(seen); });
  }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    stop_.store(true, std::memory_order_seq_cst);
    futex(doorbell_, FUTEX_WAKE, 1 << 30, nullptr);
    thread_.join();
    delete ctx_;
    ctx_ = nullptr;
    fn_.Reset();
    buffer_.Reset();
    uv_close(reinterpret_cast<uv_handle_t*>(&async_), [](uv_handle_t*) {});
  }

 private:
  static int64_t now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }

  void Run(int32_t seen) {
    while (!stop_.load()) {
      int32_t v = doorbell_->load();
      if (v != seen) {
        seen = v;
        uv_async_send(&async_);
        continue;
      }
      if (spinNs_ > 0) {
        const int64_t until = now() + spinNs_;
        while ((v = doorbell_->load()) == seen && !stop_.load() && now() < until) __builtin_ia32_pause();
        if (v != seen) continue;
      }
      // Dekker with the producers: they bump the doorbell, then read `sleeping`
      sleeping_->store(1);
      if (doorbell_->load() == seen && !stop_.load()) {
        const timespec ts{1, 0};
        futex(doorbell_, FUTEX_WAIT, seen, &ts);
      }
      sleeping_->store(0);
    }
  }

  static void OnAsync(uv_async_t* h) {
    auto* self = static_cast<Waiter*>(h->data);
    if (self->stopped_) return;
    Napi::Env env = self->env_;
    Napi::HandleScope scope(env);
    // MakeCallback: microtasks (the promises this resolves) run before returning to the loop
    self->fn_.MakeCallback(env.Global(), {}, *self->ctx_);
  }

  Napi::Env env_;
  std::atomic<int32_t>* doorbell_;
  std::atomic<int32_t>* sleeping_;
  int64_t spinNs_;
  Napi::ObjectReference buffer_;
  Napi::FunctionReference fn_;
  Napi::AsyncContext* ctx_;
  uv_async_t async_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool stopped_ = false;
};

Napi::Value StartWaiter(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto* doorbell = word(env, info[0], info[1]);
  auto* sleeping = word(env, info[0], info[2]);
  if (!doorbell || !sleeping) return env.Undefined();
  auto* w = new Waiter(env, info[0].As<Napi::ArrayBuffer>(), doorbell, sleeping, info[3].As<Napi::Number>().Int32Value(), info[4].As<Napi::Function>());
  // stopped explicitly; the finalizer only frees (a waiter never stopped keeps running until exit)
  return Napi::External<Waiter>::New(env, w);
}

Napi::Value StopWaiter(const Napi::CallbackInfo& info) {
  info[0].As<Napi::External<Waiter>>().Data()->Stop();
  return info.Env().Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("createSegment", Napi::Function::New(env, CreateSegment));
  exports.Set("openSegment", Napi::Function::New(env, OpenSegment));
  exports.Set("closeFd", Napi::Function::New(env, CloseFd));
  exports.Set("wake", Napi::Function::New(env, Wake));
  exports.Set("startWaiter", Napi::Function::New(env, StartWaiter));
  exports.Set("stopWaiter", Napi::Function::New(env, StopWaiter));
  return exports;
}

}  // namespace

NODE_API_MODULE(cmesh_shm, Init)
