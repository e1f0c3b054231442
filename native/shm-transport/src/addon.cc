// Node-API entry points of the shared-memory transport. The rings themselves are read and written
// from JavaScript over the mapped memory (libs/collectives/src/transport/shm/); this addon does only
// what JavaScript cannot: make and map the segments, and wake a peer's event loop (a pipe its loop
// polls) without blocking either loop.
//
//   createSegment(bytes)            -> { fd, buffer }   an anonymous memfd, mapped shared; nothing
//                                                       appears in /dev/shm, so a killed rank leaks nothing
//   openSegment(pid, fd, bytes)     -> buffer           maps a peer's segment via /proc/<pid>/fd/<fd>
//   closeFd(fd)                                         once every peer has mapped the segment
//   createDoorbell()                -> { readFd, writeFd }   a non-blocking pipe
//   openDoorbell(pid, writeFd)      -> fd               a peer's doorbell, via /proc/<pid>/fd
//   ring(fd)                                            writes one byte (a wake-up)
//   startPoll(readFd, fn)           -> poll             calls fn on the event loop whenever the
//                                                       doorbell rang (uv_poll; the bytes are drained)
//   stopPoll(poll)
//   yield()                                             sched_yield()
//
// A segment's ArrayBuffer owns its mapping: the finalizer unmaps it, so no JavaScript view can
// outlive the memory it points at.
#include <napi.h>
#include <uv.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sched.h>

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

// ---- doorbells: a pipe per rank. Peers open its write end through /proc/<pid>/fd/<fd> and write
// a byte when the owner asked to be woken; the owner's event loop polls the read end (uv_poll), so
// a wake-up reaches the loop's thread directly, like a socket's data.

Napi::Value CreateDoorbell(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return fail(env, "pipe2");
  Napi::Object out = Napi::Object::New(env);
  out.Set("readFd", Napi::Number::New(env, fds[0]));
  out.Set("writeFd", Napi::Number::New(env, fds[1]));
  return out;
}

Napi::Value OpenDoorbell(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int pid = info[0].As<Napi::Number>().Int32Value();
  const int fd = info[1].As<Napi::Number>().Int32Value();
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
  int mine = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (mine < 0) return fail(env, std::string("open ") + path);
  return Napi::Number::New(env, mine);
}

Napi::Value Ring(const Napi::CallbackInfo& info) {
  const char b = 1;
  // EAGAIN: the pipe is full of wake-ups already; EPIPE: the owner is gone (its socket will say)
  ssize_t n = write(info[0].As<Napi::Number>().Int32Value(), &b, 1);
  (void)n;
  return info.Env().Undefined();
}

class Poll {
 public:
  Poll(Napi::Env env, int fd, Napi::Function fn) : env_(env), fd_(fd) {
    fn_ = Napi::Persistent(fn);
    ctx_ = new Napi::AsyncContext(env, "cmesh-shm-doorbell");
    uv_loop_t* loop = nullptr;
    napi_get_uv_event_loop(env, &loop);
    uv_poll_init(loop, &poll_, fd);
    poll_.data = this;
    uv_poll_start(&poll_, UV_READABLE, &Poll::OnReadable);
    // the TCP connections beside the rings keep the loop alive while the group exists
    uv_unref(reinterpret_cast<uv_handle_t*>(&poll_));
  }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    uv_poll_stop(&poll_);
    delete ctx_;
    ctx_ = nullptr;
    fn_.Reset();
    // the handle's memory lives until libuv is done with it
    uv_close(reinterpret_cast<uv_handle_t*>(&poll_), [](uv_handle_t* h) { delete static_cast<Poll*>(h->data); });
  }

 private:
  static void OnReadable(uv_poll_t* h, int status, int) {
    auto* self = static_cast<Poll*>(h->data);
    if (self->stopped_) return;
    char buf[256];
    while (read(self->fd_, buf, sizeof buf) > 0) {
    }
    Napi::Env env = self->env_;
    Napi::HandleScope scope(env);
    // MakeCallback: microtasks (the promises this resolves) run before returning to the loop
    self->fn_.MakeCallback(env.Global(), {}, *self->ctx_);
  }

  Napi::Env env_;
  int fd_;
  Napi::FunctionReference fn_;
  Napi::AsyncContext* ctx_;
  uv_poll_t poll_;
  bool stopped_ = false;
};

Napi::Value StartPoll(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto* p = new Poll(env, info[0].As<Napi::Number>().Int32Value(), info[1].As<Napi::Function>());
  return Napi::External<Poll>::New(env, p);
}

Napi::Value StopPoll(const Napi::CallbackInfo& info) {
  info[0].As<Napi::External<Poll>>().Data()->Stop();
  return info.Env().Undefined();
}

// The busy-polling loop of an oversubscribed rank gives its core to a runnable peer each turn
// (Open MPI's mpi_yield_when_idle).
Napi::Value Yield(const Napi::CallbackInfo& info) {
  sched_yield();
  return info.Env().Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("yield", Napi::Function::New(env, Yield));
  exports.Set("createSegment", Napi::Function::New(env, CreateSegment));
  exports.Set("openSegment", Napi::Function::New(env, OpenSegment));
  exports.Set("closeFd", Napi::Function::New(env, CloseFd));
  exports.Set("createDoorbell", Napi::Function::New(env, CreateDoorbell));
  exports.Set("openDoorbell", Napi::Function::New(env, OpenDoorbell));
  exports.Set("ring", Napi::Function::New(env, Ring));
  exports.Set("startPoll", Napi::Function::New(env, StartPoll));
  exports.Set("stopPoll", Napi::Function::New(env, StopPoll));
  return exports;
}

}  // namespace

NODE_API_MODULE(cmesh_shm, Init)
