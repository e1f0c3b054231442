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
//   fastOpen(own, ownOffset, peers)  -> handle          small collectives in one step (below)
//   fastPost(h, seq)                                    this rank's part of op `seq` is written
//   fastWait(h, seq, spinUs, sleepUs, yieldUs?, only?) -> index | -1   waits for every peer's (or one peer's) part of op `seq`
//
// A segment's ArrayBuffer owns its mapping: the finalizer unmaps it, so no JavaScript view can
// outlive the memory it points at.
#include <napi.h>
#include <uv.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <ctime>
#include <vector>
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
#include <linux/futex.h>

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

// ---- small collectives in one step: each rank's segment ends with a region holding the number
// of the last op it posted (seq), how many peers sleep on that word (futex waiters), the op's
// signature and data, two of each (op k uses k & 1). JavaScript writes the data and signature,
// fastPost publishes them, fastWait spins on the peers' seq words up to a bound, the rest (the
// reduction) is JavaScript's again. Why two: a rank posts op k+1 only after it saw every peer post
// op k, and a peer posts op k only once it is done reading op k-1, so the half k+1 overwrites is
// free (libs/collectives/src/transport/shm/fast.ts).
constexpr size_t F_SEQ = 0;
constexpr size_t F_WAITERS = 64;
constexpr size_t H_ARMED = 256;  // layout.ts: the segment owner sleeps in its event loop

struct FastPeer {
  std::atomic<int32_t>* seq;
  std::atomic<int32_t>* waiters;
  std::atomic<int32_t>* armed;  // in the peer's segment header
  int doorbell;                 // the peer's doorbell (write end), -1 when none
};

struct Fast {
  std::atomic<int32_t>* seq;
  std::atomic<int32_t>* waiters;
  std::vector<FastPeer> peers;
  std::vector<Napi::Reference<Napi::ArrayBuffer>> keep;  // the mappings outlive the handle
};

long futex(std::atomic<int32_t>* addr, int op, int32_t val, const struct timespec* ts) {
  // not FUTEX_PRIVATE_FLAG: the word is shared between processes (MAP_SHARED memfd)
  return syscall(SYS_futex, reinterpret_cast<int32_t*>(addr), op, val, ts, nullptr, 0);
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

inline int64_t nowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// seq words wrap: "a is at or past b"
inline bool reached(int32_t a, int32_t b) { return int32_t(uint32_t(a) - uint32_t(b)) >= 0; }

uint8_t* bufferAt(const Napi::Value& v, size_t offset, size_t need) {
  Napi::ArrayBuffer ab = v.As<Napi::ArrayBuffer>();
  if (offset + need > ab.ByteLength()) return nullptr;
  return static_cast<uint8_t*>(ab.Data()) + offset;
}

void fastFree(Napi::Env, Fast* f) {
  for (auto& r : f->keep) r.Reset();
  delete f;
}

// fastOpen(own, ownOffset, [[buffer, offset, doorbell], ...]): the region of this rank and of each
// peer (an offset into its mapped segment); a peer's doorbell is rung when it sleeps in its loop.
Napi::Value FastOpen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto* f = new Fast();
  uint8_t* own = bufferAt(info[0], size_t(info[1].As<Napi::Number>().Int64Value()), 128);
  if (!own) {
    delete f;
    Napi::RangeError::New(env, "fastOpen: the region lies outside this rank's segment").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  f->seq = reinterpret_cast<std::atomic<int32_t>*>(own + F_SEQ);
  f->waiters = reinterpret_cast<std::atomic<int32_t>*>(own + F_WAITERS);
  f->keep.push_back(Napi::Persistent(info[0].As<Napi::ArrayBuffer>()));
  Napi::Array peers = info[2].As<Napi::Array>();
  for (uint32_t i = 0; i < peers.Length(); i++) {
    Napi::Array p = peers.Get(i).As<Napi::Array>();
    Napi::Value buf = p.Get(uint32_t(0));
    uint8_t* base = bufferAt(buf, 0, H_ARMED + 4);
    uint8_t* region = bufferAt(buf, size_t(p.Get(uint32_t(1)).As<Napi::Number>().Int64Value()), 128);
    if (!base || !region) {
      fastFree(env, f);
      Napi::RangeError::New(env, "fastOpen: a peer's region lies outside its segment").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    f->peers.push_back(FastPeer{reinterpret_cast<std::atomic<int32_t>*>(region + F_SEQ), reinterpret_cast<std::atomic<int32_t>*>(region + F_WAITERS),
                                reinterpret_cast<std::atomic<int32_t>*>(base + H_ARMED), p.Get(uint32_t(2)).As<Napi::Number>().Int32Value()});
    f->keep.push_back(Napi::Persistent(buf.As<Napi::ArrayBuffer>()));
  }
  return Napi::External<Fast>::New(env, f, fastFree);
}

// fastPost(h, seq): the data and signature of op `seq` are in place; publish them, wake the
// peers that sleep on this rank's seq word (futex) or in their event loop (doorbell).
Napi::Value FastPost(const Napi::CallbackInfo& info) {
  Fast* f = info[0].As<Napi::External<Fast>>().Data();
  const int32_t seq = info[1].As<Napi::Number>().Int32Value();
  // seq_cst store, then the waiters load: Dekker with fastWait's increment-then-check
  f->seq->store(seq, std::memory_order_seq_cst);
  if (f->waiters->load(std::memory_order_seq_cst) > 0) futex(f->seq, FUTEX_WAKE, INT_MAX, nullptr);
  for (auto& p : f->peers) {
    int32_t one = 1;
    if (p.doorbell >= 0 && p.armed->load(std::memory_order_seq_cst) == 1 && p.armed->compare_exchange_strong(one, 0)) {
      const char b = 1;
      ssize_t n = write(p.doorbell, &b, 1);  // EAGAIN: wake-ups pending already
      (void)n;
    }
  }
  return info.Env().Undefined();
}

// fastWait(h, seq, spinUs, sleepUs, yieldUs, only?): -1 once every peer (or peer `only`) has
// posted op `seq` (or a later one), else the index of a peer that has not. Spins (pause) for up to spinUs, then yields the core
// (sched_yield) in a loop for up to yieldUs, then sleeps on the awaited peer's seq word (futex: its
// post wakes this thread) for up to sleepUs more. Yielding and sleeping give the core away, which
// a peer that shares it needs to post at all; a yield hands it over without the futex's wake-up.
Napi::Value FastWait(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Fast* f = info[0].As<Napi::External<Fast>>().Data();
  const int32_t seq = info[1].As<Napi::Number>().Int32Value();
  const int64_t spinNs = int64_t(info[2].As<Napi::Number>().DoubleValue() * 1000);
  const int64_t sleepNs = int64_t(info[3].As<Napi::Number>().DoubleValue() * 1000);
  const int64_t yieldNs = info.Length() > 4 ? int64_t(info[4].As<Napi::Number>().DoubleValue() * 1000) : 0;
  // only: the one peer (index) to wait for, as a rooted op's non-root waits for its root; -1: all
  const int32_t only = info.Length() > 5 ? info[5].As<Napi::Number>().Int32Value() : -1;
  const bool one = only >= 0 && size_t(only) < f->peers.size();
  const size_t n = one ? size_t(only) + 1 : f->peers.size();
  size_t i = one ? size_t(only) : 0;
  // first look without reading the clock: the common case is that everyone is there
  while (i < n && reached(f->peers[i].seq->load(std::memory_order_acquire), seq)) i++;
  if (i == n) return Napi::Number::New(env, -1);
  if (spinNs <= 0 && sleepNs <= 0 && yieldNs <= 0) return Napi::Number::New(env, double(i));
  const int64_t start = nowNs();
  const int64_t spinEnd = start + spinNs;
  const int64_t yieldEnd = spinEnd + yieldNs;
  const int64_t deadline = yieldEnd + sleepNs;
  unsigned spins = 0;
  for (;;) {
    FastPeer& p = f->peers[i];
    int32_t seen = p.seq->load(std::memory_order_acquire);
    if (reached(seen, seq)) {
      if (++i == n) return Napi::Number::New(env, -1);
      continue;
    }
    if ((++spins & 63) == 0) {
      const int64_t now = nowNs();
      if (now >= deadline) return Napi::Number::New(env, double(i));
      if (now >= spinEnd && now < yieldEnd) {
        sched_yield();
        spins = 63;  // the clock again after each yield: it takes a microsecond or more
        continue;
      }
      if (now >= yieldEnd) {
        p.waiters->fetch_add(1, std::memory_order_seq_cst);
        seen = p.seq->load(std::memory_order_seq_cst);
        if (!reached(seen, seq)) {
          const int64_t left = deadline - now;
          struct timespec ts = {time_t(left / 1000000000), long(left % 1000000000)};
          futex(p.seq, FUTEX_WAIT, seen, &ts);  // woken, timed out, or the word changed already
        }
        p.waiters->fetch_sub(1, std::memory_order_seq_cst);
        continue;
      }
    }
    cpuRelax();
  }
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
  exports.Set("fastOpen", Napi::Function::New(env, FastOpen));
  exports.Set("fastPost", Napi::Function::New(env, FastPost));
  exports.Set("fastWait", Napi::Function::New(env, FastWait));
  return exports;
}

}  // namespace

NODE_API_MODULE(cmesh_shm, Init)
