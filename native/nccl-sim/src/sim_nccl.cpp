// Simulated NCCL: the ranks of a communicator are separate processes (one sidecar each) joined
// by Unix sockets named after the unique id; every collective runs as a task on the caller's
// CUDA stream (sim_cuda.cpp) that exchanges whole buffers with the peers and reduces in rank
// order, so every rank gets the same bits. Contracts the sidecar relies on are enforced: two
// ranks of one communicator on one device (per CMESH_SIM_HOST) fail init with ncclInvalidUsage,
// non-blocking communicators (NCCL_COMM_BLOCKING=0) answer ncclInProgress and report errors
// through ncclCommGetAsyncError, ncclCommAbort may be called from any thread and ends the
// communicator's pending work. Faults come from the environment (README "Simulation").
//
// What breaks a host thread on real NCCL is enforced too: connections are set up lazily inside the
// first launch that needs them (point-to-point always; collectives with NCCL_RUNTIME_CONNECT=1, the
// default from 2.22), so on a blocking communicator that launch call waits for the peer; a send
// larger than CMESH_SIM_P2P_BUFFER bytes completes only once the peer has received it; a call on a
// communicator after ncclCommAbort / ncclCommDestroy freed it kills the process (use after free).
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <vector>

#include "sim.hpp"

using ncclResult_t = int;
struct ncclUniqueId {
  char internal[128];
};

namespace {

using Clock = std::chrono::steady_clock;
constexpr ncclResult_t kSuccess = 0, kUnhandledCuda = 1, kSystemError = 2, kInternalError = 3, kInvalidArgument = 4,
                       kInvalidUsage = 5, kRemoteError = 6, kInProgress = 7;

// ncclDataType_t / ncclRedOp_t
enum { tInt8, tUint8, tInt32, tUint32, tInt64, tUint64, tFloat16, tFloat32, tFloat64, tBfloat16 };
enum { opSum, opProd, opMax, opMin, opAvg };

size_t dtypeBytes(int t) {
  static const size_t b[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return t >= 0 && t <= tBfloat16 ? b[t] : 0;
}

// ---- 16-bit floats (round to nearest even, as the GPU's conversions) ----
float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  uint32_t bits = exp == 31 ? sign | 0x7f800000u | (man << 13) : sign | ((exp + 112) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;
  if (a < 6.103515625e-05f) return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));  // subnormal
  uint32_t ax;
  std::memcpy(&ax, &a, 4);
  uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
  return sign | static_cast<uint16_t>(((rounded >> 13) - (112u << 10)) & 0x7fffu);
}
float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

template <typename T>
T applyOp(int op, T a, T b) {
  switch (op) {
    case opProd: return a * b;
    case opMax: return a > b ? a : b;
    case opMin: return a < b ? a : b;
    default: return a + b;  // sum, avg
  }
}

template <typename T>
void reduceTyped(int op, int n, const std::vector<const char*>& in, char* out, size_t count) {
  for (size_t i = 0; i < count; i++) {
    T acc;
    std::memcpy(&acc, in[0] + i * sizeof(T), sizeof(T));
    bool premul = op == opAvg && std::is_floating_point<T>::value;
    if (premul) acc = static_cast<T>(acc * (T(1) / T(n)));
    for (int r = 1; r < n; r++) {
      T v;
      std::memcpy(&v, in[r] + i * sizeof(T), sizeof(T));
      if (premul) v = static_cast<T>(v * (T(1) / T(n)));
      acc = applyOp(op, acc, v);
    }
    if (op == opAvg && !premul) acc = static_cast<T>(acc / static_cast<T>(n));  // integers: sum, then divide
    std::memcpy(out + i * sizeof(T), &acc, sizeof(T));
  }
}

// 16-bit floats reduce pairwise in their own precision (each step rounds), as NCCL's kernels do.
void reduceHalf(int op, int n, const std::vector<const char*>& in, char* out, size_t count, bool bf) {
  auto load = [&](const char* p, size_t i) {
    uint16_t h;
    std::memcpy(&h, p + i * 2, 2);
    return bf ? bf16ToFloat(h) : halfToFloat(h);
  };
  auto round = [&](float f) { return bf ? bf16ToFloat(floatToBf16(f)) : halfToFloat(floatToHalf(f)); };
  const float scale = round(1.0f / static_cast<float>(n));
  for (size_t i = 0; i < count; i++) {
    float acc = load(in[0], i);
    if (op == opAvg) acc = round(acc * scale);
    for (int r = 1; r < n; r++) {
      float v = load(in[r], i);
      if (op == opAvg) v = round(v * scale);
      acc = round(applyOp(op, acc, v));
    }
    uint16_t h = bf ? floatToBf16(acc) : floatToHalf(acc);
    std::memcpy(out + i * 2, &h, 2);
  }
}

void reduceInto(int dtype, int op, int n, const std::vector<const char*>& in, char* out, size_t count) {
  switch (dtype) {
    case tInt8: return reduceTyped<int8_t>(op, n, in, out, count);
    case tUint8: return reduceTyped<uint8_t>(op, n, in, out, count);
    case tInt32: return reduceTyped<int32_t>(op, n, in, out, count);
    case tUint32: return reduceTyped<uint32_t>(op, n, in, out, count);
    case tInt64: return reduceTyped<int64_t>(op, n, in, out, count);
    case tUint64: return reduceTyped<uint64_t>(op, n, in, out, count);
    case tFloat16: return reduceHalf(op, n, in, out, count, false);
    case tFloat32: return reduceTyped<float>(op, n, in, out, count);
    case tFloat64: return reduceTyped<double>(op, n, in, out, count);
    case tBfloat16: return reduceHalf(op, n, in, out, count, true);
  }
}

// ---- process-wide settings and fault injection ----
bool blockingComms() {
  // NCCL before 2.14 has no non-blocking communicators and ignores the variable.
  if (cmesh_sim::envInt(std::getenv("CMESH_SIM_NCCL_VERSION"), 22703) < 21400) return true;
  const char* b = std::getenv("NCCL_COMM_BLOCKING");
  return !(b && b[0] == '0');
}
std::string hostName() {
  if (const char* h = std::getenv("CMESH_SIM_HOST")) return h;
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}
/**
 * NCCL_DEBUG's lines, as NCCL writes them: on stdout (NCCL_DEBUG_FILE aside), "host:pid:tid
 * [device] NCCL WARN|INFO text". WARN at NCCL_DEBUG=WARN and above, INFO at INFO and TRACE.
 */
void ncclDebug(bool info, int device, const std::string& text) {
  const char* level = std::getenv("NCCL_DEBUG");
  if (!level) return;
  const std::string l = level;
  const bool warnOn = l == "WARN" || l == "INFO" || l == "TRACE", infoOn = l == "INFO" || l == "TRACE";
  if (!(info ? infoOn : warnOn)) return;
  char host[64] = {0};
  ::gethostname(host, sizeof host - 1);
  std::printf("%s:%d:%d [%d] NCCL %s %s\n", host, static_cast<int>(::getpid()), static_cast<int>(::gettid()), device,
              info ? "INFO" : "WARN", text.c_str());
  std::fflush(stdout);
}

std::string faultKind() {
  const char* f = std::getenv("CMESH_SIM_FAULT");
  return f ? f : "";
}
std::atomic<int64_t> launches{0};  // collective calls in this process, for CMESH_SIM_FAULT_AFTER

/** The fault this launch triggers ("" for none): the (CMESH_SIM_FAULT_AFTER+1)-th launch onwards. */
std::string faultForLaunch() {
  std::string kind = faultKind();
  int64_t n = launches.fetch_add(1);
  if (kind.empty() || n < cmesh_sim::envInt(std::getenv("CMESH_SIM_FAULT_AFTER"), 0)) return "";
  return kind;
}

bool writeAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
bool readAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

sockaddr_un rankAddress(const std::string& key, int rank, socklen_t& len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string name = "cmesh-sim-" + key + "-" + std::to_string(rank);
  a.sun_path[0] = '\0';  // abstract namespace: nothing to clean up on disk
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

struct Hello {
  int32_t rank, nranks, device;
  char host[64];
};

}  // namespace

/** One rank's communicator state; shared with the stream tasks and reader threads that use it. */
struct CommState {
  std::string key;
  int rank = 0, nranks = 0, device = 0;
  bool blocking = true;
  std::atomic<bool> aborted{false};
  std::atomic<bool> initializing{true};
  std::atomic<bool> finalizing{false};
  std::atomic<bool> callInProgress{false};
  std::atomic<int> pendingOps{0};
  int splits = 0;  // ncclCommSplit calls on this communicator: each child's rendezvous key
  std::mutex m;
  std::condition_variable cv;
  ncclResult_t asyncError = kSuccess;
  std::string lastError;
  std::vector<int> fds;  // per peer; -1 for self
  std::vector<std::unique_ptr<std::mutex>> sendLocks;
  struct Msg {
    std::vector<char> data;
    bool ack = false;  // the sender waits until this rank has received it
  };
  std::vector<std::deque<Msg>> inbox;
  std::vector<bool> dead;
  std::vector<int> acks;                        // per peer: receipts of our large sends
  std::vector<int> connectsIn[2];               // per kind (p2p, collective) and peer: connect requests seen
  std::vector<bool> connected[2];               // per kind and peer: the lazy connection is up
  bool collectivesConnected = false;
  int listenFd = -1;

  ~CommState() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
    if (listenFd >= 0) ::close(listenFd);
  }

  void fail(ncclResult_t r, const std::string& why) {
    {
      std::lock_guard<std::mutex> lk(m);
      if (asyncError == kSuccess) {
        asyncError = r;
        lastError = why;
      }
    }
    cmesh_sim::log("rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ": " + why);
    ncclDebug(false, device, why);
    cv.notify_all();
  }
  bool failed() {
    std::lock_guard<std::mutex> lk(m);
    return asyncError != kSuccess || aborted;
  }
  /** Ends every wait and connection (abort, destroy). */
  void shutdown() {
    {
      // Under the lock: no waiter misses the flag between its check and its wait, and the
      // rendezvous (which sets the descriptors under it) is not mid-way.
      std::lock_guard<std::mutex> lk(m);
      aborted = true;
      for (int fd : fds)
        if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
      if (listenFd >= 0) ::shutdown(listenFd, SHUT_RDWR);
    }
    cv.notify_all();
  }
};

/** A socket being set up: closed when dropped, unless handed to the communicator's state. */
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

/**
 * The handle NCCL hands out. ncclCommAbort and ncclCommDestroy free it in NCCL; here it is kept,
 * marked freed, so that a later call on it is caught (and kills the process, as a use after free
 * would sooner or later) instead of passing by luck.
 */
struct ncclComm {
  std::shared_ptr<CommState> s;
  std::atomic<bool> freed{false};
  std::atomic<int> calls{0};  // calls inside the library on this handle now
};

namespace {

/** Marks one API call on a handle; a handle already freed is a use after free. */
class Call {
 public:
  Call(ncclComm* c, const char* fn) : c_(c) {
    if (!c_) return;
    if (c_->freed) {
      cmesh_sim::log(std::string(fn) + " called on a communicator that ncclCommAbort/ncclCommDestroy already freed "
                                       "(a use after free in NCCL): aborting the process");
      std::abort();
    }
    c_->calls++;
  }
  ~Call() {
    if (c_) c_->calls--;
  }

 private:
  ncclComm* c_;
};

}  // namespace

namespace {

enum : uint32_t { kMsgData = 0, kMsgAck = 1, kMsgConnect = 2 };
struct WireHeader {
  uint64_t bytes;
  uint32_t type;
  uint32_t flags;  // data: 1 = acknowledge on receipt; connect: the kind (0 p2p, 1 collective)
};

void readerLoop(std::shared_ptr<CommState> s, int peer) {
  int fd = s->fds[peer];
  for (;;) {
    WireHeader h{};
    if (!readAll(fd, &h, sizeof h)) break;
    std::vector<char> data(h.bytes);
    if (h.bytes && !readAll(fd, data.data(), h.bytes)) break;
    {
      std::lock_guard<std::mutex> lk(s->m);
      if (h.type == kMsgAck) s->acks[peer]++;
      else if (h.type == kMsgConnect) s->connectsIn[h.flags & 1][peer]++;
      else s->inbox[peer].push_back(CommState::Msg{std::move(data), (h.flags & 1) != 0});
    }
    s->cv.notify_all();
  }
  {
    std::lock_guard<std::mutex> lk(s->m);
    s->dead[peer] = true;
  }
  s->cv.notify_all();
}

bool sendTo(CommState& s, int peer, const void* data, size_t bytes, uint32_t type = kMsgData, uint32_t flags = 0) {
  if (peer == s.rank) {
    {
      std::lock_guard<std::mutex> lk(s.m);
      if (type == kMsgAck) s.acks[peer]++;
      else if (type == kMsgConnect) s.connectsIn[flags & 1][peer]++;
      else s.inbox[peer].push_back(CommState::Msg{std::vector<char>(static_cast<const char*>(data), static_cast<const char*>(data) + bytes), (flags & 1) != 0});
    }
    s.cv.notify_all();
    return true;
  }
  std::lock_guard<std::mutex> lk(*s.sendLocks[peer]);
  WireHeader h{bytes, type, flags};
  if (writeAll(s.fds[peer], &h, sizeof h) && (!bytes || writeAll(s.fds[peer], data, bytes))) return true;
  if (!s.aborted) s.fail(kRemoteError, "send to rank " + std::to_string(peer) + " failed: its connection is closed");
  return false;
}

/** A send's buffer on the receiving side (NCCL_BUFFSIZE's role): larger sends wait for the receiver. */
size_t p2pBufferBytes() {
  return static_cast<size_t>(cmesh_sim::envInt(std::getenv("CMESH_SIM_P2P_BUFFER"), int64_t(4) << 20));
}

/**
 * Waits (s.m held through `lk`) until `ready` holds; false, with the communicator's error set,
 * when it was aborted, the peer went away or the hang limit passed.
 */
template <typename Ready>
bool waitPeer(CommState& s, std::unique_lock<std::mutex>& lk, int peer, const std::string& what, Ready ready) {
  auto until = Clock::now() + std::chrono::milliseconds(cmesh_sim::hangLimitMs());
  for (;;) {
    if (s.aborted || s.asyncError != kSuccess) return false;
    if (ready()) return true;
    if (s.dead[peer]) {
      lk.unlock();
      s.fail(kRemoteError, "rank " + std::to_string(peer) + " closed its connection (process gone?) while " + what);
      lk.lock();
      return false;
    }
    if (s.cv.wait_until(lk, until) == std::cv_status::timeout && Clock::now() >= until) {
      lk.unlock();
      s.fail(kInternalError, "waited " + std::to_string(cmesh_sim::hangLimitMs()) + " ms for rank " +
                                 std::to_string(peer) + " while " + what + " (CMESH_SIM_HANG_MS)");
      lk.lock();
      return false;
    }
  }
}

/** A large send completes once the receiver took it. */
bool waitAck(CommState& s, int peer) {
  std::unique_lock<std::mutex> lk(s.m);
  if (!waitPeer(s, lk, peer, "sending to it (a send larger than CMESH_SIM_P2P_BUFFER waits for the receive)",
                [&] { return s.acks[peer] > 0; }))
    return false;
  s.acks[peer]--;
  return true;
}

/**
 * Lazy connection setup, as NCCL does it inside the first launch that needs a connection: a
 * request to each peer not yet connected for this kind, then the peer's own request back (it sends
 * one when it reaches its matching launch). Until then the calling thread waits.
 */
bool connectPeers(CommState& s, int kind, const std::vector<int>& peers) {
  std::vector<int> todo;
  {
    std::lock_guard<std::mutex> lk(s.m);
    for (int p : peers)
      if (p != s.rank && !s.connected[kind][p] && std::find(todo.begin(), todo.end(), p) == todo.end()) todo.push_back(p);
  }
  for (int p : todo)
    if (!sendTo(s, p, nullptr, 0, kMsgConnect, static_cast<uint32_t>(kind))) return false;
  std::unique_lock<std::mutex> lk(s.m);
  for (int p : todo) {
    if (!waitPeer(s, lk, p, kind ? "connecting for a collective" : "connecting for a send/receive",
                  [&] { return s.connectsIn[kind][p] > 0; }))
      return false;
    s.connectsIn[kind][p]--;
    s.connected[kind][p] = true;
  }
  return true;
}

/** The next message from `peer`; false (and the communicator's error set) when it cannot come. */
bool recvFrom(CommState& s, int peer, std::vector<char>& out) {
  std::unique_lock<std::mutex> lk(s.m);
  if (!waitPeer(s, lk, peer, "receiving from it", [&] { return !s.inbox[peer].empty(); })) return false;
  CommState::Msg msg = std::move(s.inbox[peer].front());
  s.inbox[peer].pop_front();
  lk.unlock();
  out = std::move(msg.data);
  // The sender of a large message is waiting for this receipt.
  return !msg.ack || sendTo(s, peer, nullptr, 0, kMsgAck);
}

/** Connects the full mesh and checks the ranks' devices. Returns the error (and sets lastError). */
ncclResult_t rendezvous(const std::shared_ptr<CommState>& sp) {
  CommState& s = *sp;
  auto deadline = Clock::now() + std::chrono::milliseconds(cmesh_sim::hangLimitMs());
  auto failWith = [&](ncclResult_t r, const std::string& why) {
    s.fail(r, why);
    return r;
  };
  Hello me{};
  me.rank = s.rank;
  me.nranks = s.nranks;
  me.device = s.device;
  std::string host = hostName();
  std::strncpy(me.host, host.c_str(), sizeof me.host - 1);
  std::vector<Hello> peers(s.nranks);
  peers[s.rank] = me;

  socklen_t len;
  sockaddr_un addr = rankAddress(s.key, s.rank, len);
  {
    std::lock_guard<std::mutex> lk(s.m);
    s.listenFd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  }
  if (::bind(s.listenFd, reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return failWith(kInvalidUsage, "rank " + std::to_string(s.rank) + " of this communicator is already taken (" +
                                       std::strerror(errno) + ")");
  ::listen(s.listenFd, 64);
  // Lower ranks are dialled, higher ranks dial us.
  for (int p = 0; p < s.rank; p++) {
    for (;;) {
      if (s.aborted) return kInternalError;
      if (Clock::now() >= deadline)
        return failWith(kSystemError, "rank " + std::to_string(p) + " never joined (CMESH_SIM_HANG_MS)");
      {
        Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        socklen_t plen;
        sockaddr_un pa = rankAddress(s.key, p, plen);
        if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&pa), plen) == 0) {
          Hello h{};
          if (!writeAll(fd.get(), &me, sizeof me) || !readAll(fd.get(), &h, sizeof h))
            return failWith(kRemoteError, "rank " + std::to_string(p) + " hung up during setup");
          {
            std::lock_guard<std::mutex> lk(s.m);
            s.fds[p] = fd.release();  // the state closes it
          }
          peers[p] = h;
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  for (int accepted = 0; accepted < s.nranks - 1 - s.rank;) {
    if (s.aborted) return kInternalError;
    if (Clock::now() >= deadline) return failWith(kSystemError, "not every higher rank joined (CMESH_SIM_HANG_MS)");
    pollfd pfd{s.listenFd, POLLIN, 0};
    if (::poll(&pfd, 1, 50) <= 0) continue;
    Fd fd(::accept4(s.listenFd, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.get() < 0) continue;
    Hello h{};
    if (!readAll(fd.get(), &h, sizeof h) || h.rank <= s.rank || h.rank >= s.nranks || s.fds[h.rank] >= 0 ||
        !writeAll(fd.get(), &me, sizeof me))
      return failWith(kInvalidUsage, "a peer joined with a bad or duplicate rank");
    {
      std::lock_guard<std::mutex> lk(s.m);
      s.fds[h.rank] = fd.release();
    }
    peers[h.rank] = h;
    accepted++;
  }
  {
    std::lock_guard<std::mutex> lk(s.m);
    ::close(s.listenFd);
    s.listenFd = -1;
  }
  for (int p = 0; p < s.nranks; p++) {
    if (peers[p].nranks != s.nranks)
      return failWith(kInvalidUsage, "rank " + std::to_string(p) + " was initialised with nranks " +
                                         std::to_string(peers[p].nranks) + ", this rank with " + std::to_string(s.nranks));
    // NCCL: "Duplicate GPU detected": one device for two ranks of a communicator is unsupported.
    if (p != s.rank && peers[p].device == s.device && std::strncmp(peers[p].host, me.host, sizeof me.host) == 0)
      return failWith(kInvalidUsage, "Duplicate GPU detected: rank " + std::to_string(s.rank) + " and rank " +
                                         std::to_string(p) + " both on simulated device " + std::to_string(s.device) +
                                         " of host " + host);
  }
  for (int p = 0; p < s.nranks; p++)
    if (p != s.rank) std::thread(readerLoop, sp, p).detach();
  ncclDebug(true, s.device, "comm " + s.key + " rank " + std::to_string(s.rank) + " nRanks " + std::to_string(s.nranks) +
                                " cudaDev " + std::to_string(s.device) + " - Init COMPLETE (simulated)");
  // The ring's channel to the next rank, as NCCL names the transport it picked (one host: shared
  // memory here; another host: the socket): what a first run reads to see how ranks are joined.
  if (s.nranks > 1) {
    const int next = (s.rank + 1) % s.nranks;
    const bool sameHost = std::strncmp(peers[next].host, me.host, sizeof me.host) == 0;
    ncclDebug(true, s.device, "Channel 00/0 : " + std::to_string(s.rank) + "[" + std::to_string(s.device) + "] -> " +
                                  std::to_string(next) + "[" + std::to_string(peers[next].device) + "] via " +
                                  (sameHost ? "SHM/direct/direct" : "NET/Socket/0") + " (simulated)");
  }
  // NCCL_RUNTIME_CONNECT=0 (or NCCL before 2.22) connects the collectives' channels during init.
  const char* rc = std::getenv("NCCL_RUNTIME_CONNECT");
  if ((rc && rc[0] == '0') || cmesh_sim::envInt(std::getenv("CMESH_SIM_NCCL_VERSION"), 22703) < 22200) {
    std::lock_guard<std::mutex> lk(s.m);
    s.connected[1].assign(s.nranks, true);
  }
  return kSuccess;
}

thread_local int groupDepth = 0;
struct P2p {
  bool send;
  const void* sendBuf;
  void* recvBuf;
  size_t bytes;
  int peer;
};
struct PendingGroup {
  std::shared_ptr<CommState> s;
  cudaStream_t stream = nullptr;
  std::vector<P2p> ops;
};
thread_local std::vector<PendingGroup> groupOps;

constexpr int kConnectP2p = 0, kConnectCollective = 1;

/**
 * Runs `body` on the stream as one operation of the communicator: skipped once it failed or was
 * aborted; the fault (if any) applies at its start. The connections it needs (`kind` to `peers`)
 * are set up first: inside this call on a blocking communicator (the calling thread waits for the
 * peers), on the stream on a non-blocking one (the call is in progress meanwhile).
 */
ncclResult_t launch(ncclComm* comm, cudaStream_t stream, std::function<void(CommState&)> body, int kind,
                    std::vector<int> peers) {
  if (!comm || !comm->s) return kInvalidArgument;
  Call call(comm, "a launch");
  std::shared_ptr<CommState> sp = comm->s;
  if (sp->initializing) return kInvalidUsage;
  if (sp->blocking && !connectPeers(*sp, kind, peers)) {
    std::lock_guard<std::mutex> lk(sp->m);
    if (sp->asyncError != kSuccess) return sp->asyncError;
    sp->lastError = "aborted while connecting to peers inside a launch";
    return kInternalError;
  }
  if (sp->blocking) peers.clear();
  std::string fault = faultForLaunch();
  if (fault == "launch-fail") {
    std::lock_guard<std::mutex> lk(sp->m);
    sp->lastError = "simulated launch failure (CMESH_SIM_FAULT=launch-fail)";
    return kUnhandledCuda;
  }
  if (fault == "async-error") {
    // The call is accepted, and the error shows while the caller polls the communicator.
    sp->fail(kRemoteError, "simulated asynchronous error (CMESH_SIM_FAULT=async-error)");
    sp->callInProgress = !sp->blocking;
    return sp->blocking ? kSuccess : kInProgress;
  }
  sp->pendingOps++;
  bool queued = cmesh_sim::enqueue(stream, [sp, body, fault, kind, peers] {
    if (!peers.empty() && !sp->failed()) connectPeers(*sp, kind, peers);
    if (fault == "die") {
      cmesh_sim::log("CMESH_SIM_FAULT=die: killing this process mid-collective");
      ::kill(::getpid(), SIGKILL);
    }
    if (fault == "stall" && !sp->failed()) {
      cmesh_sim::log("CMESH_SIM_FAULT=stall: this rank stops inside a collective until aborted");
      std::unique_lock<std::mutex> lk(sp->m);
      sp->cv.wait_for(lk, std::chrono::milliseconds(cmesh_sim::hangLimitMs()), [&] { return sp->aborted.load(); });
    }
    if (!sp->failed()) body(*sp);
    sp->pendingOps--;
    sp->cv.notify_all();
  });
  if (!queued) {
    sp->pendingOps--;
    std::lock_guard<std::mutex> lk(sp->m);
    sp->lastError = "the stream's launch queue stayed full for CMESH_SIM_HANG_MS";
    return kInternalError;
  }
  // Non-blocking communicators report the call in progress until the caller polls once.
  if (!sp->blocking) {
    sp->callInProgress = true;
    return kInProgress;
  }
  return kSuccess;
}

/** The collectives, as whole-buffer exchanges (a message per peer), reduced in rank order. */
void reduceFromAll(CommState& s, const char* mine, size_t count, int dtype, int op, char* out,
                   const std::vector<int>& from, size_t chunkOffset) {
  std::vector<std::vector<char>> got(s.nranks);
  std::vector<const char*> in(s.nranks);
  for (int p : from) {
    if (p == s.rank) {
      in[p] = mine;
      continue;
    }
    if (!recvFrom(s, p, got[p])) return;
    in[p] = got[p].data();
  }
  (void)chunkOffset;
  reduceInto(dtype, op, s.nranks, in, out, count);
}

std::vector<int> allRanks(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; i++) v[i] = i;
  return v;
}

}  // namespace

CMESH_SIM_API ncclResult_t ncclGetVersion(int* v) {
  *v = static_cast<int>(cmesh_sim::envInt(std::getenv("CMESH_SIM_NCCL_VERSION"), 22703));
  return kSuccess;
}

CMESH_SIM_API ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::random_device rd;
  for (int i = 0; i < 16; i++) id->internal[i] = static_cast<char>(rd());
  return kSuccess;
}

CMESH_SIM_API const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case kSuccess: return "no error";
    case kUnhandledCuda: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case kSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case kInternalError: return "internal error - please report this issue to the NCCL developers";
    case kInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case kInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case kRemoteError: return "remote process exited or there was a network error";
    case kInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

CMESH_SIM_API const char* ncclGetLastError(ncclComm* comm) {
  thread_local std::string copy;
  if (!comm || !comm->s) return "";
  std::lock_guard<std::mutex> lk(comm->s->m);
  copy = comm->s->lastError;
  return copy.c_str();
}

namespace {

/** ncclConfig_t's first fields (NCCL 2.14), all the simulation reads. */
struct SimConfig {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
};
constexpr int kConfigUndefInt = INT_MIN;  // NCCL_CONFIG_UNDEF_INT

/** The communicator's mode from a config, as NCCL decides it: NCCL_COMM_BLOCKING overrides the config. */
ncclResult_t configBlocking(const SimConfig* config, bool& blocking) {
  if (!config || config->magic != 0xcafebeef || config->version < 21400 || config->size < sizeof(SimConfig))
    return kInvalidArgument;  // NCCL: "Invalid config: magic/version/size"
  const bool v214 = cmesh_sim::envInt(std::getenv("CMESH_SIM_NCCL_VERSION"), 22703) >= 21400;
  if (std::getenv("NCCL_COMM_BLOCKING") || !v214) blocking = blockingComms();
  else blocking = config->blocking == kConfigUndefInt || config->blocking != 0;  // unset: blocking
  return kSuccess;
}

std::shared_ptr<CommState> newState(const std::string& key, int nranks, int rank, int device, bool blocking) {
  auto sp = std::make_shared<CommState>();
  sp->key = key;
  sp->rank = rank;
  sp->nranks = nranks;
  sp->device = device;
  sp->blocking = blocking;
  sp->fds.assign(nranks, -1);
  for (int i = 0; i < nranks; i++) sp->sendLocks.emplace_back(new std::mutex());
  sp->inbox.resize(nranks);
  sp->dead.assign(nranks, false);
  sp->acks.assign(nranks, 0);
  for (int k = 0; k < 2; k++) {
    sp->connectsIn[k].assign(nranks, 0);
    sp->connected[k].assign(nranks, false);
  }
  return sp;
}

ncclResult_t initComm(ncclComm** out, int nranks, ncclUniqueId id, int rank, bool blocking) {
  if (nranks < 1 || rank < 0 || rank >= nranks) return kInvalidArgument;
  static const char hex[] = "0123456789abcdef";
  std::string key;
  for (int i = 0; i < 16; i++) {
    key += hex[(id.internal[i] >> 4) & 0xf];
    key += hex[id.internal[i] & 0xf];
  }
  // CMESH_SIM_NCCL_DEVICE: NCCL ignores the caller's cudaSetDevice and takes this device, as a
  // libnccl with its own CUDA runtime may when the device was set through another runtime.
  const int device = static_cast<int>(cmesh_sim::envInt(std::getenv("CMESH_SIM_NCCL_DEVICE"), cmesh_sim::currentDevice()));
  auto sp = newState(key, nranks, rank, device, blocking);
  auto* comm = new ncclComm{sp};
  if (sp->blocking) {
    ncclResult_t r = rendezvous(sp);
    sp->initializing = false;
    if (r != kSuccess) {
      sp->shutdown();
      delete comm;
      *out = nullptr;
      return r;
    }
    *out = comm;
    return kSuccess;
  }
  *out = comm;
  std::thread([sp] {
    rendezvous(sp);
    sp->initializing = false;
  }).detach();
  return kInProgress;
}

}  // namespace

CMESH_SIM_API ncclResult_t ncclCommInitRank(ncclComm** out, int nranks, ncclUniqueId id, int rank) {
  return initComm(out, nranks, id, rank, blockingComms());
}

CMESH_SIM_API ncclResult_t ncclCommInitRankConfig(ncclComm** out, int nranks, ncclUniqueId id, int rank, const SimConfig* config) {
  bool blocking = true;
  if (ncclResult_t r = configBlocking(config, blocking)) return r;
  return initComm(out, nranks, id, rank, blocking);
}

// The simulation splits into the same ranks only: every rank passes one color and its own rank as
// the key (what the sidecar does); NCCL_SPLIT_NOCOLOR leaves the caller out. As NCCL does, a
// non-blocking parent makes the split asynchronous: the call returns at once and the child is
// written to *newcomm from another thread when it is ready.
CMESH_SIM_API ncclResult_t ncclCommSplit(ncclComm* comm, int color, int key, ncclComm** newcomm, const SimConfig* config) {
  if (!comm || !comm->s || !newcomm) return kInvalidArgument;
  Call call(comm, "ncclCommSplit");
  std::shared_ptr<CommState> parent = comm->s;
  *newcomm = nullptr;
  if (cmesh_sim::envInt(std::getenv("CMESH_SIM_NCCL_VERSION"), 22703) < 21800) return kInvalidUsage;
  if (parent->initializing || parent->failed()) return kInvalidUsage;
  if (color == -1) return kSuccess;
  if (key != parent->rank) {
    std::lock_guard<std::mutex> lk(parent->m);
    parent->lastError = "the simulation splits into the same ranks only (key = the caller's rank)";
    return kInvalidUsage;
  }
  bool blocking = true;
  if (ncclResult_t r = configBlocking(config, blocking)) return r;
  auto child = newState(parent->key + "s" + std::to_string(++parent->splits), parent->nranks, parent->rank, parent->device, blocking);
  auto finish = [child, newcomm] {
    rendezvous(child);  // a failure stays in the child's state, as NCCL hands back a child in error
    child->initializing = false;
    __atomic_store_n(newcomm, new ncclComm{child}, __ATOMIC_RELEASE);
  };
  if (parent->blocking) {
    finish();
    return kSuccess;
  }
  std::thread(finish).detach();
  return kSuccess;
}

CMESH_SIM_API ncclResult_t ncclCommCuDevice(ncclComm* comm, int* device) {
  if (!comm || !comm->s || !device) return kInvalidArgument;
  Call call(comm, "ncclCommCuDevice");
  *device = comm->s->device;
  return kSuccess;
}

CMESH_SIM_API ncclResult_t ncclCommGetAsyncError(ncclComm* comm, ncclResult_t* state) {
  if (!comm || !comm->s) return kInvalidArgument;
  Call call(comm, "ncclCommGetAsyncError");
  CommState& s = *comm->s;
  {
    std::lock_guard<std::mutex> lk(s.m);
    if (s.asyncError != kSuccess) {
      *state = s.asyncError;
      return kSuccess;
    }
  }
  if (s.initializing || s.callInProgress.exchange(false) || (s.finalizing && s.pendingOps > 0)) {
    *state = kInProgress;
    return kSuccess;
  }
  *state = kSuccess;
  return kSuccess;
}

CMESH_SIM_API ncclResult_t ncclCommFinalize(ncclComm* comm) {
  if (!comm || !comm->s) return kInvalidArgument;
  Call call(comm, "ncclCommFinalize");
  CommState& s = *comm->s;
  if (faultKind() == "finalize-fail") {
    std::lock_guard<std::mutex> lk(s.m);
    s.lastError = "simulated finalize failure (CMESH_SIM_FAULT=finalize-fail)";
    return kInternalError;
  }
  s.finalizing = true;
  if (!s.blocking) return kInProgress;
  std::unique_lock<std::mutex> lk(s.m);
  if (!s.cv.wait_for(lk, std::chrono::milliseconds(cmesh_sim::hangLimitMs()), [&] { return s.pendingOps == 0 || s.aborted; }))
    return kInternalError;
  return kSuccess;
}

namespace {

/**
 * Freed handles, kept for the life of the process (a later call on one is caught, and no new
 * handle takes its address): held here, they are retained on purpose, not lost.
 */
void retire(ncclComm* comm) {
  static std::mutex m;
  static auto* retired = new std::vector<ncclComm*>();  // never destroyed: detached threads may still look
  std::lock_guard<std::mutex> lk(m);
  retired->push_back(comm);
}

/**
 * Ends the communicator's work and frees the handle. A call still inside the library on another
 * thread (a launch waiting for a peer) sees the abort and returns first; any call after this one
 * is a use after free.
 */
ncclResult_t release(ncclComm* comm, const char* fn) {
  if (!comm) return kInvalidArgument;
  { Call call(comm, fn); }
  comm->s->shutdown();
  auto until = Clock::now() + std::chrono::milliseconds(cmesh_sim::hangLimitMs());
  while (comm->calls > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  comm->freed = true;  // never deleted: later calls are caught (Call)
  retire(comm);
  return kSuccess;
}

}  // namespace

CMESH_SIM_API ncclResult_t ncclCommDestroy(ncclComm* comm) { return release(comm, "ncclCommDestroy"); }

// Callable from any thread while the communicator's work is pending: that work ends at once.
CMESH_SIM_API ncclResult_t ncclCommAbort(ncclComm* comm) { return release(comm, "ncclCommAbort"); }

CMESH_SIM_API ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, int dtype, int op, ncclComm* comm,
                                         cudaStream_t stream) {
  if (!dtypeBytes(dtype) || op < opSum || op > opAvg) return kInvalidArgument;
  size_t bytes = count * dtypeBytes(dtype);
  return launch(comm, stream, [=](CommState& s) {
    for (int p = 0; p < s.nranks; p++)
      if (p != s.rank && !sendTo(s, p, send, bytes)) return;
    std::vector<char> mine(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
    reduceFromAll(s, mine.data(), count, dtype, op, static_cast<char*>(recv), allRanks(s.nranks), 0);
  }, kConnectCollective, comm && comm->s ? allRanks(comm->s->nranks) : std::vector<int>{});
}

CMESH_SIM_API ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, int dtype, int root, ncclComm* comm,
                                         cudaStream_t stream) {
  if (!dtypeBytes(dtype)) return kInvalidArgument;
  size_t bytes = count * dtypeBytes(dtype);
  return launch(comm, stream, [=](CommState& s) {
    if (s.rank == root) {
      for (int p = 0; p < s.nranks; p++)
        if (p != s.rank && !sendTo(s, p, send, bytes)) return;
      if (recv != send) std::memmove(recv, send, bytes);
      return;
    }
    std::vector<char> got;
    if (recvFrom(s, root, got)) std::memcpy(recv, got.data(), bytes);
  }, kConnectCollective, comm && comm->s ? allRanks(comm->s->nranks) : std::vector<int>{});
}

CMESH_SIM_API ncclResult_t ncclReduce(const void* send, void* recv, size_t count, int dtype, int op, int root,
                                      ncclComm* comm, cudaStream_t stream) {
  if (!dtypeBytes(dtype) || op < opSum || op > opAvg) return kInvalidArgument;
  size_t bytes = count * dtypeBytes(dtype);
  return launch(comm, stream, [=](CommState& s) {
    if (s.rank != root) {
      sendTo(s, root, send, bytes);
      return;
    }
    std::vector<char> mine(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
    reduceFromAll(s, mine.data(), count, dtype, op, static_cast<char*>(recv), allRanks(s.nranks), 0);
  }, kConnectCollective, comm && comm->s ? allRanks(comm->s->nranks) : std::vector<int>{});
}

CMESH_SIM_API ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, int dtype, ncclComm* comm,
                                         cudaStream_t stream) {
  if (!dtypeBytes(dtype)) return kInvalidArgument;
  size_t bytes = count * dtypeBytes(dtype);
  return launch(comm, stream, [=](CommState& s) {
    for (int p = 0; p < s.nranks; p++)
      if (p != s.rank && !sendTo(s, p, send, bytes)) return;
    std::memmove(static_cast<char*>(recv) + s.rank * bytes, send, bytes);
    for (int p = 0; p < s.nranks; p++) {
      if (p == s.rank) continue;
      std::vector<char> got;
      if (!recvFrom(s, p, got)) return;
      std::memcpy(static_cast<char*>(recv) + p * bytes, got.data(), bytes);
    }
  }, kConnectCollective, comm && comm->s ? allRanks(comm->s->nranks) : std::vector<int>{});
}

CMESH_SIM_API ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, int dtype, int op,
                                             ncclComm* comm, cudaStream_t stream) {
  if (!dtypeBytes(dtype) || op < opSum || op > opAvg) return kInvalidArgument;
  size_t bytes = count * dtypeBytes(dtype);
  return launch(comm, stream, [=](CommState& s) {
    const char* in = static_cast<const char*>(send);
    for (int p = 0; p < s.nranks; p++)
      if (p != s.rank && !sendTo(s, p, in + p * bytes, bytes)) return;
    std::vector<char> mine(in + s.rank * bytes, in + (s.rank + 1) * bytes);
    reduceFromAll(s, mine.data(), count, dtype, op, static_cast<char*>(recv), allRanks(s.nranks), 0);
  }, kConnectCollective, comm && comm->s ? allRanks(comm->s->nranks) : std::vector<int>{});
}

CMESH_SIM_API ncclResult_t ncclGroupStart() {
  groupDepth++;
  return kSuccess;
}

namespace {

ncclResult_t p2p(bool isSend, const void* sendBuf, void* recvBuf, size_t count, int dtype, int peer, ncclComm* comm,
                 cudaStream_t stream) {
  if (!dtypeBytes(dtype) || !comm || !comm->s || peer < 0 || peer >= comm->s->nranks) return kInvalidArgument;
  Call call(comm, isSend ? "ncclSend" : "ncclRecv");
  P2p op{isSend, sendBuf, recvBuf, count * dtypeBytes(dtype), peer};
  if (groupDepth > 0) {
    for (auto& g : groupOps)
      if (g.s == comm->s && g.stream == stream) {
        g.ops.push_back(op);
        return kSuccess;
      }
    groupOps.push_back(PendingGroup{comm->s, stream, {op}});
    return kSuccess;
  }
  return launch(comm, stream, [op](CommState& s) {
    if (op.send) {
      const bool large = op.bytes > p2pBufferBytes();
      if (sendTo(s, op.peer, op.sendBuf, op.bytes, kMsgData, large ? 1 : 0) && large) waitAck(s, op.peer);
      return;
    }
    std::vector<char> got;
    if (recvFrom(s, op.peer, got)) std::memcpy(op.recvBuf, got.data(), std::min(op.bytes, got.size()));
  }, kConnectP2p, {op.peer});
}

}  // namespace

CMESH_SIM_API ncclResult_t ncclSend(const void* send, size_t count, int dtype, int peer, ncclComm* comm,
                                    cudaStream_t stream) {
  return p2p(true, send, nullptr, count, dtype, peer, comm, stream);
}

CMESH_SIM_API ncclResult_t ncclRecv(void* recv, size_t count, int dtype, int peer, ncclComm* comm, cudaStream_t stream) {
  return p2p(false, nullptr, recv, count, dtype, peer, comm, stream);
}

CMESH_SIM_API ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0) return kInvalidUsage;
  if (--groupDepth > 0) return kSuccess;
  std::vector<PendingGroup> groups;
  groups.swap(groupOps);
  ncclResult_t result = kSuccess;
  for (auto& g : groups) {
    ncclComm handle{g.s};
    std::vector<int> peers;
    for (const auto& op : g.ops) peers.push_back(op.peer);
    // A group's operations progress together (NCCL runs them as one kernel): its sends go first,
    // then its receives in call order, then the group waits for the receipts of its large sends.
    // No ordering between ranks can deadlock.
    ncclResult_t r = launch(&handle, g.stream, [ops = g.ops](CommState& s) {
      std::vector<int> awaiting;
      for (const auto& op : ops) {
        if (!op.send) continue;
        const bool large = op.bytes > p2pBufferBytes();
        if (!sendTo(s, op.peer, op.sendBuf, op.bytes, kMsgData, large ? 1 : 0)) return;
        if (large) awaiting.push_back(op.peer);
      }
      for (const auto& op : ops) {
        if (op.send) continue;
        std::vector<char> got;
        if (!recvFrom(s, op.peer, got)) return;
        std::memcpy(op.recvBuf, got.data(), std::min(op.bytes, got.size()));
      }
      for (int p : awaiting)
        if (!waitAck(s, p)) return;
    }, kConnectP2p, peers);
    if (result == kSuccess || result == kInProgress) result = r == kSuccess ? result : r;
  }
  return result;
}
