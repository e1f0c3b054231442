// The server over the CPU simulation of CUDA and NCCL (native/nccl-sim, loaded by path like the
// real libraries): abort from the connection thread, abort on every error, the bounded launch
// queue, handles per connection, timing across ranks. Several ranks run in this one process, one
// Server (and GPU thread) each, as separate sidecars would.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <thread>

#include "cmesh_sidecar/server.hpp"
#include "harness.hpp"
#include "support.hpp"

using namespace cmesh;
using namespace testsupport;
using Clock = std::chrono::steady_clock;

namespace {

GpuRuntime& runtime(int i) {
  static GpuRuntime* rts[2] = {nullptr, nullptr};
  if (!rts[i]) {
    ::setenv("CMESH_SIM_DEVICES", "2", 1);
    ::setenv("CMESH_SIM_HANG_MS", "8000", 1);  // no wait in the simulation outlives a test
    rts[i] = new GpuRuntime(RuntimeOptions{CMESH_SIM_NCCL_LIB, CMESH_SIM_CUDART_LIB});
  }
  return *rts[i];
}

/** Never destroyed (see test_server.cpp): the executor thread stays parked. */
Server& server(int i) {
  static Server* srvs[2] = {nullptr, nullptr};
  if (!srvs[i]) {
    ServerOptions o;
    o.socketPath = "/nonexistent/cmesh-sim-test.sock";
    o.maxFrameBytes = 1 << 20;
    o.graceMs = 500;
    srvs[i] = new Server(o, runtime(i));
  }
  return *srvs[i];
}

/** Server 0's runtime behind a 16 MiB frame limit: copies of several staging buffers' worth. */
Server& bigFrameServer() {
  static Server* srv = nullptr;
  if (!srv) {
    ServerOptions o;
    o.socketPath = "/nonexistent/cmesh-sim-test-big.sock";
    o.maxFrameBytes = 16 << 20;
    o.graceMs = 500;
    srv = new Server(o, runtime(0));
  }
  return *srv;
}

struct Conn {
  SocketPair sp;
  std::thread t;
  uint64_t nextId = 1;
  // made here, not on the connection thread: two threads creating servers at once would race
  // on the lazy statics and on setenv against the other runtime's getenv (a segfault under load)
  explicit Conn(int srv = 0) : Conn(server(srv)) {}
  explicit Conn(Server& s) {
    int fd = sp.b;
    sp.b = -1;
    t = std::thread([fd, &s] { s.serveConnection(fd, false); });
  }
  ~Conn() { close(); }
  void close() {
    if (!t.joinable()) return;
    sp.closeA();
    t.join();
  }
  uint64_t send(Request r, const std::vector<uint8_t>& payload = {}) {
    r.id = nextId++;
    if (!r.timeoutMs) r.timeoutMs = 10000;
    auto bytes = frameBytes(r, payload);
    writeAll(sp.a, bytes.data(), bytes.size());
    return r.id;
  }
  Reply read(int timeoutMs = 5000) {
    Reply out;
    if (!readReply(sp.a, out, timeoutMs)) harness::fail(__FILE__, __LINE__, "no reply");
    return out;
  }
  Reply call(const Request& r, const std::vector<uint8_t>& payload = {}) {
    send(r, payload);
    return read(15000);
  }
};

Request req(Op op) {
  Request r;
  r.op = op;
  return r;
}

int64_t field(const std::string& body, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(body, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

std::vector<uint8_t> fromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<uint8_t> uniqueId(Conn& c) {
  Reply r = c.call(req(Op::GetUniqueId));
  std::smatch m;
  std::regex_search(r.body, m, std::regex("\"uniqueId\":\"([0-9a-f]+)\""));
  return fromHex(m[1]);
}

uint64_t commInit(Conn& c, const std::vector<uint8_t>& id, uint32_t nranks, uint32_t rank, uint32_t device) {
  Request r = req(Op::CommInitRank);
  r.nranks = nranks;
  r.rank = rank;
  r.device = device;
  r.payloadLength = 128;
  Reply rep = c.call(r, id);
  CHECK(rep.header.status == ErrorCode::Ok);
  return static_cast<uint64_t>(field(rep.body, "comm"));
}

uint64_t alloc(Conn& c, uint32_t device, uint64_t bytes) {
  Request r = req(Op::Alloc);
  r.device = device;
  r.count = bytes;
  r.dtype = 1;
  Reply rep = c.call(r);
  CHECK(rep.header.status == ErrorCode::Ok);
  return static_cast<uint64_t>(field(rep.body, "buf"));
}

Request allReduce(uint64_t comm, uint64_t send, uint64_t recv, uint64_t count) {
  Request r = req(Op::Collective);
  r.comm = comm;
  r.collective = 0;
  r.dtype = 7;  // float32
  r.count = count;
  r.sendBuf = send;
  r.recvBuf = recv;
  r.iters = 1;
  return r;
}

/** A 1-rank communicator with two 64-byte buffers on device 0. */
struct OneRank {
  Conn c;
  uint64_t comm, send, recv;
  OneRank() {
    comm = commInit(c, uniqueId(c), 1, 0, 0);
    send = alloc(c, 0, 64);
    recv = alloc(c, 0, 64);
  }
};

struct Fault {
  Fault(const char* kind) { ::setenv("CMESH_SIM_FAULT", kind, 1); }
  ~Fault() { ::unsetenv("CMESH_SIM_FAULT"); }
};

int64_t msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

std::string hello(Conn& c) { return c.call(req(Op::Hello)).body; }

/** The GPU thread(s) of a connection answer again: a ping within 1 s. */
bool answers(Conn& c) {
  Request p = req(Op::Ping);
  p.timeoutMs = 1000;
  return c.call(p).header.status == ErrorCode::Ok;
}

/** 1000 launches of a stalled all-reduce with a 1.5 s deadline: a Timeout within a second of it. */
Reply stalledAllReduce(OneRank& r) {
  Fault f("stall");
  Request ar = allReduce(r.comm, r.send, r.recv, 16);
  ar.iters = 1000;
  ar.timeoutMs = 1500;
  auto t0 = Clock::now();
  Reply rep = r.c.call(ar);
  CHECK(rep.header.status == ErrorCode::Timeout);
  CHECK(msSince(t0) < 1500 + 1000);
  return rep;
}

}  // namespace

TEST(sim, a_two_rank_all_reduce_sums_and_reports_the_slowest_rank) {
  Conn a(0), b(1);
  auto id = uniqueId(a);
  Request init = req(Op::CommInitRank);
  init.nranks = 2;
  init.payloadLength = 128;
  init.device = 0;
  init.rank = 0;
  a.send(init, id);
  init.device = 1;
  init.rank = 1;
  b.send(init, id);
  uint64_t ca = field(a.read().body, "comm"), cb = field(b.read().body, "comm");
  uint64_t sa = alloc(a, 0, 16), ra = alloc(a, 0, 16), sb = alloc(b, 1, 16), rb = alloc(b, 1, 16);
  auto floats = [](std::vector<float> v) {
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  Request in = req(Op::CopyIn);
  in.dtype = 1;
  in.count = in.payloadLength = 16;
  in.buf = sa;
  CHECK(a.call(in, floats({1, 2, 3, 4})).header.status == ErrorCode::Ok);
  in.buf = sb;
  CHECK(b.call(in, floats({10, 20, 30, 40})).header.status == ErrorCode::Ok);
  Request ar = allReduce(ca, sa, ra, 4);
  ar.warmup = 2;
  ar.iters = 5;
  a.send(ar);
  ar = allReduce(cb, sb, rb, 4);
  ar.warmup = 2;
  ar.iters = 5;
  b.send(ar);
  Reply x = a.read(), y = b.read();
  CHECK(x.header.status == ErrorCode::Ok);
  CHECK(y.header.status == ErrorCode::Ok);
  CHECK_CONTAINS(x.body, "\"slowestRank\":true");
  // Both ranks report the same (slowest) time.
  std::smatch mx, my;
  std::regex dev("\"deviceSeconds\":([0-9.e-]+)");
  CHECK(std::regex_search(x.body, mx, dev) && std::regex_search(y.body, my, dev) && mx[1] == my[1]);
  Request out = req(Op::CopyOut);
  out.dtype = 1;
  out.count = 16;
  out.buf = ra;
  CHECK(a.call(out).payload == floats({11, 22, 33, 44}));
  out.buf = rb;
  CHECK(b.call(out).payload == floats({11, 22, 33, 44}));
  Request d = req(Op::Destroy);
  d.comm = ca;
  a.send(d);
  d.comm = cb;
  b.send(d);
  CHECK(a.read().header.status == ErrorCode::Ok);
  CHECK(b.read().header.status == ErrorCode::Ok);
}

TEST(sim, two_ranks_of_one_communicator_on_one_device_fail_init) {
  Conn a(0), b(1);
  auto id = uniqueId(a);
  Request init = req(Op::CommInitRank);
  init.nranks = 2;
  init.payloadLength = 128;
  init.device = 1;
  init.rank = 0;
  a.send(init, id);
  init.rank = 1;
  b.send(init, id);
  Reply x = a.read(), y = b.read();
  CHECK(x.header.status == ErrorCode::NcclError);
  CHECK(y.header.status == ErrorCode::NcclError);
  CHECK_CONTAINS(x.body, "Duplicate GPU");
}

TEST(sim, abort_interrupts_a_hung_collective_from_the_connection_thread) {
  OneRank r;
  Fault f("stall");
  Request ar = allReduce(r.comm, r.send, r.recv, 16);
  ar.timeoutMs = 20000;
  uint64_t collId = r.c.send(ar);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Request ab = req(Op::Abort);
  ab.comm = r.comm;
  auto t0 = Clock::now();
  uint64_t abortId = r.c.send(ab);
  // Both are answered at once, although the collective came first and was still running (which
  // reply is written first is a race between the two threads: replies carry their ids).
  Reply x = r.c.read(4000), y = r.c.read(4000);
  const Reply& abortReply = x.header.id == abortId ? x : y;
  const Reply& collReply = x.header.id == abortId ? y : x;
  CHECK_EQ(abortReply.header.id, abortId);
  CHECK(abortReply.header.status == ErrorCode::Ok);
  CHECK_EQ(collReply.header.id, collId);
  CHECK(collReply.header.status == ErrorCode::Aborted);
  CHECK_CONTAINS(collReply.body, "abort request");
  CHECK(msSince(t0) < 3000);
  // A request on the released handle (one queued behind the abort, or sent after it) says so.
  Reply late = r.c.call(allReduce(r.comm, r.send, r.recv, 16));
  CHECK(late.header.status == ErrorCode::Aborted);
  CHECK_CONTAINS(late.body, "was aborted by an abort request");
}

TEST(sim, every_error_aborts_the_communicator) {
  for (const char* kind : {"launch-fail", "async-error"}) {
    OneRank r;
    {
      Fault f(kind);
      Reply rep = r.c.call(allReduce(r.comm, r.send, r.recv, 16));
      CHECK(rep.header.status == ErrorCode::NcclError);
      CHECK_CONTAINS(rep.body, "communicator aborted");
    }
    Request q = req(Op::AsyncError);
    q.comm = r.comm;
    CHECK_CONTAINS(r.c.call(q).body, "\"aborted\":true");
    // Buffers are freed after the abort, without waiting on the failed work.
    Request fr = req(Op::Free);
    fr.buf = r.send;
    auto t0 = Clock::now();
    CHECK(r.c.call(fr).header.status == ErrorCode::Ok);
    CHECK(msSince(t0) < 2000);
  }
}

TEST(sim, deadlines_hold_with_a_full_launch_queue_and_no_wait_inside_the_timed_loop) {
  ::setenv("CMESH_SIM_QUEUE_DEPTH", "160", 1);  // the 161st launch blocks inside the library
  OneRank r;
  // Answered by the sidecar's own deadline check (communicator aborted), not by the reply's
  // grace timer while the GPU thread is stuck inside a launch.
  CHECK_CONTAINS(stalledAllReduce(r).body, "communicator aborted");
  CHECK(answers(r.c));  // the GPU thread is free again
  ::unsetenv("CMESH_SIM_QUEUE_DEPTH");
}

TEST(sim, handles_belong_to_their_connection_and_are_released_when_it_closes) {
  Conn other;
  std::string before = hello(other);
  int64_t comms0 = field(before, "comms"), bufs0 = field(before, "buffers");
  {
    OneRank r;
    Request fr = req(Op::Free);
    fr.buf = r.send;
    Reply rep = other.call(fr);
    CHECK(rep.header.status == ErrorCode::NotFound);
    CHECK_CONTAINS(rep.body, "on this connection");
    Request ab = req(Op::Abort);
    ab.comm = r.comm;
    CHECK(other.call(ab).header.status == ErrorCode::NotFound);
    std::string during = hello(other);
    CHECK_EQ(field(during, "comms"), comms0 + 1);
    CHECK_EQ(field(during, "buffers"), bufs0 + 2);
    // Closing with a collective hung inside: the abort on close interrupts it, then the frees run.
    Fault f("stall");
    Request ar = allReduce(r.comm, r.send, r.recv, 16);
    ar.timeoutMs = 30000;
    r.c.send(ar);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto t0 = Clock::now();
    r.c.close();
    CHECK(msSince(t0) < 5000);
  }
  std::string after = hello(other);
  CHECK_EQ(field(after, "comms"), comms0);
  CHECK_EQ(field(after, "buffers"), bufs0);
  CHECK_EQ(field(after, "bufferBytes"), 0);
}

TEST(sim, non_blocking_is_reported_only_for_nccl_2_14_and_later) {
  ::setenv("CMESH_SIM_NCCL_VERSION", "21304", 1);
  GpuRuntime old(RuntimeOptions{CMESH_SIM_NCCL_LIB, CMESH_SIM_CUDART_LIB});
  ::unsetenv("CMESH_SIM_NCCL_VERSION");
  std::string d = old.describe().dump();
  CHECK_CONTAINS(d, "\"versionString\":\"2.13.4\"");
  CHECK_CONTAINS(d, "\"nonblocking\":false");
  CHECK_CONTAINS(runtime(0).describe().dump(), "\"nonblocking\":true");
}

namespace {

/** The simulation's own entry points, resolved like the sidecar does (cuda_api / nccl_api). */
struct SimLibs {
  CudaApi cuda;
  NcclApi nccl;
  SimLibs() {
    CudaProbe c = loadCuda(CMESH_SIM_CUDART_LIB, cuda);
    NcclProbe n = loadNccl(CMESH_SIM_NCCL_LIB, nccl);
    CHECK(c.available && n.available);
  }
};

bool pollComm(const NcclApi& nccl, ncclComm_t comm, int timeoutMs = 5000) {
  auto until = Clock::now() + std::chrono::milliseconds(timeoutMs);
  while (Clock::now() < until) {
    ncclResult_t st = kNcclInProgress;
    nccl.commGetAsyncError(comm, &st);
    if (st == kNcclSuccess) return true;
    if (st != kNcclInProgress) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace

TEST(sim, the_simulation_keeps_cuda_contracts_events_complete_in_order_and_cudaFree_waits_for_pending_work) {
  SimLibs L;
  CHECK_EQ(L.cuda.setDevice(1), kCudaSuccess);
  void* buf = nullptr;
  CHECK_EQ(L.cuda.malloc(&buf, 64), kCudaSuccess);
  cudaStream_t s = nullptr;
  cudaEvent_t ev = nullptr;
  CHECK_EQ(L.cuda.streamCreateWithFlags(&s, kCudaStreamNonBlocking), kCudaSuccess);
  CHECK_EQ(L.cuda.eventCreateWithFlags(&ev, kCudaEventDefault), kCudaSuccess);
  ncclUniqueId id;
  L.nccl.getUniqueId(&id);
  ncclComm_t comm = nullptr;
  ncclResult_t r = L.nccl.commInitRank(&comm, 1, id, 0);
  CHECK(r == kNcclSuccess || r == kNcclInProgress);
  CHECK(pollComm(L.nccl, comm));
  {
    Fault f("stall");  // the collective stays on the stream until the communicator is aborted
    r = L.nccl.allReduce(buf, buf, 16, kNcclFloat32, kNcclSum, comm, s);
    CHECK(r == kNcclSuccess || r == kNcclInProgress);
  }
  CHECK(pollComm(L.nccl, comm));
  CHECK_EQ(L.cuda.eventRecord(ev, s), kCudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_EQ(L.cuda.eventQuery(ev), kCudaErrorNotReady);  // queued behind the hung collective
  CHECK_EQ(L.cuda.streamQuery(s), kCudaErrorNotReady);
  // cudaFree synchronises the device: it does not return while the collective is pending.
  std::atomic<bool> freed{false};
  std::thread freer([&] {
    L.cuda.free(buf);
    freed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(!freed);
  auto t0 = Clock::now();
  L.nccl.commAbort(comm);  // from another thread, as the sidecar's connection thread does
  freer.join();
  CHECK(msSince(t0) < 2000);
  CHECK_EQ(L.cuda.eventQuery(ev), kCudaSuccess);
  CHECK_EQ(L.cuda.streamQuery(s), kCudaSuccess);
  L.cuda.eventDestroy(ev);
  L.cuda.streamDestroy(s);
}

// ---- Deadlines, independent communicators, the device, errors (the contracts a GPU run meets) ----

namespace {

/** A 2-rank communicator: rank 0 on server 0 (device 0) over `a`, rank 1 on server 1 (device 1) over `b`. */
std::pair<uint64_t, uint64_t> commInit2(Conn& a, Conn& b) {
  auto id = uniqueId(a);
  Request init = req(Op::CommInitRank);
  init.nranks = 2;
  init.payloadLength = 128;
  init.device = 0;
  init.rank = 0;
  a.send(init, id);
  init.device = 1;
  init.rank = 1;
  b.send(init, id);
  Reply x = a.read(15000), y = b.read(15000);
  CHECK(x.header.status == ErrorCode::Ok);
  CHECK(y.header.status == ErrorCode::Ok);
  return {static_cast<uint64_t>(field(x.body, "comm")), static_cast<uint64_t>(field(y.body, "comm"))};
}

Request p2p(uint64_t comm, bool send, uint64_t buf, uint64_t count, int peer) {
  Request r = req(Op::Collective);
  r.comm = comm;
  r.collective = send ? 6 : 7;
  r.dtype = 7;
  r.count = count;
  (send ? r.sendBuf : r.recvBuf) = buf;
  (send ? r.sendPeer : r.recvPeer) = peer;
  r.iters = 1;
  return r;
}

}  // namespace

TEST(sim, a_launch_blocked_on_a_missing_peer_ends_at_its_deadline_and_aborts_the_communicator) {
  // NCCL connects lazily inside the first launch: on the (blocking) ops communicator the launch
  // call itself waits for the peer, where no poll sees the deadline.
  Conn a(0), b(1);
  auto [ca, cb] = commInit2(a, b);
  uint64_t sa = alloc(a, 0, 64), ra = alloc(a, 0, 64);
  Request ar = allReduce(ca, sa, ra, 16);
  ar.timeoutMs = 1000;
  auto t0 = Clock::now();
  Reply rep = a.call(ar);  // rank 1 never joins
  CHECK(rep.header.status == ErrorCode::Timeout);
  CHECK_CONTAINS(rep.body, "communicator aborted");
  CHECK(msSince(t0) < 1000 + 800);
  CHECK(answers(a));
  Request ab = req(Op::Abort);
  ab.comm = cb;
  b.call(ab);
}

TEST(sim, the_slowest_rank_exchange_keeps_its_deadline_when_a_peer_leaves_after_the_warm_up) {
  // The alignment all-reduce's result is copied to the host: into pageable memory that copy
  // returns only when the all-reduce is done, so a peer missing there held the thread.
  Conn a(0), b(1);
  auto [ca, cb] = commInit2(a, b);
  uint64_t sa = alloc(a, 0, 64), ra = alloc(a, 0, 64), sb = alloc(b, 1, 64), rb = alloc(b, 1, 64);
  a.send(allReduce(ca, sa, ra, 16));  // connects
  b.send(allReduce(cb, sb, rb, 16));
  CHECK(a.read(8000).header.status == ErrorCode::Ok);
  CHECK(b.read(8000).header.status == ErrorCode::Ok);
  Request ar = allReduce(ca, sa, ra, 16);
  ar.warmup = 1;
  ar.timeoutMs = 1500;
  auto t0 = Clock::now();
  a.send(ar);
  CHECK(b.call(allReduce(cb, sb, rb, 16)).header.status == ErrorCode::Ok);  // rank 0's warm-up only
  Reply rep = a.read(15000);
  CHECK(rep.header.status == ErrorCode::Timeout);
  CHECK_CONTAINS(rep.body, "communicator aborted");
  CHECK(msSince(t0) < 1500 + 800);
  CHECK(answers(a));
  Request ab = req(Op::Abort);
  ab.comm = cb;
  b.call(ab);
}

TEST(sim, two_process_groups_issued_in_opposite_orders_on_two_ranks_both_complete) {
  // Rank 0 runs group A then B, rank 1 B then A (torch allows it: each group has its own stream).
  // Also with a send larger than NCCL's buffer, which completes only once its receive is posted.
  ::setenv("CMESH_SIM_P2P_BUFFER", "64", 1);
  for (bool sendRecv : {false, true}) {
    Conn a(0), b(1);
    auto [a0, a1] = commInit2(a, b);
    auto [b0, b1] = commInit2(a, b);
    // Separate buffers per group: the two groups' ops run at the same time.
    uint64_t sa = alloc(a, 0, 1024), ra = alloc(a, 0, 1024), sb = alloc(b, 1, 1024), rb = alloc(b, 1, 1024);
    uint64_t sa2 = alloc(a, 0, 64), ra2 = alloc(a, 0, 64), sb2 = alloc(b, 1, 64), rb2 = alloc(b, 1, 64);
    Request first0 = sendRecv ? p2p(a0, true, sa, 256, 1) : allReduce(a0, sa, ra, 256);
    Request last1 = sendRecv ? p2p(a1, false, rb, 256, 0) : allReduce(a1, sb, rb, 256);
    Request second0 = allReduce(b0, sa2, ra2, 16), first1 = allReduce(b1, sb2, rb2, 16);
    for (Request* r : {&first0, &second0, &first1, &last1}) r->timeoutMs = 3000;
    auto t0 = Clock::now();
    a.send(first0);
    a.send(second0);
    b.send(first1);
    b.send(last1);
    Reply x0 = a.read(8000), x1 = a.read(8000), y0 = b.read(8000), y1 = b.read(8000);
    for (const Reply* r : {&x0, &x1, &y0, &y1}) {
      CHECK(r->header.status == ErrorCode::Ok);
      if (r->header.status != ErrorCode::Ok) std::fprintf(stderr, "    %s\n", r->body.c_str());
    }
    CHECK(msSince(t0) < 2000);
  }
  ::unsetenv("CMESH_SIM_P2P_BUFFER");
}

TEST(sim, two_ranks_of_one_communicator_on_one_sidecar_are_refused_at_once) {
  // Local ranks that share one CMESH_NCCL_SOCKET: the second init must not queue behind the first,
  // which waits for it.
  Conn c1(0), c2(0);
  auto id = uniqueId(c1);
  Request init = req(Op::CommInitRank);
  init.nranks = 2;
  init.payloadLength = 128;
  init.timeoutMs = 4000;
  init.device = 0;
  init.rank = 0;
  c1.send(init, id);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  init.device = 1;
  init.rank = 1;
  auto t0 = Clock::now();
  c2.send(init, id);
  Reply second = c2.read(8000);
  CHECK(second.header.status == ErrorCode::InvalidArgument);
  CHECK_CONTAINS(second.body, "one sidecar");
  CHECK(msSince(t0) < 1000);
  Reply first = c1.read(8000);
  CHECK(first.header.status != ErrorCode::Ok);
  CHECK(msSince(t0) < 1000);
}

TEST(sim, aborting_an_idle_communicator_does_not_wait_on_another_communicators_kernels) {
  OneRank hung, idle;  // both on device 0
  Fault f("stall");
  Request ar = allReduce(hung.comm, hung.send, hung.recv, 16);
  ar.timeoutMs = 20000;
  hung.c.send(ar);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Request ab = req(Op::Abort);
  ab.comm = idle.comm;
  auto t0 = Clock::now();
  Reply rep = idle.c.call(ab);
  CHECK(rep.header.status == ErrorCode::Ok);
  CHECK(msSince(t0) < 1000);
  ab.comm = hung.comm;
  hung.c.send(ab);
  hung.c.read(4000);
  hung.c.read(4000);
}

TEST(sim, a_communicator_that_nccl_placed_on_another_device_is_refused) {
  // NCCL takes the device from its own CUDA runtime's current device: CMESH_SIM_NCCL_DEVICE=0
  // stands for one that did not see the sidecar's cudaSetDevice(1).
  ::setenv("CMESH_SIM_NCCL_DEVICE", "0", 1);
  Conn c;
  auto id = uniqueId(c);
  Request init = req(Op::CommInitRank);
  init.nranks = 1;
  init.rank = 0;
  init.device = 1;
  init.payloadLength = 128;
  Reply rep = c.call(init, id);
  ::unsetenv("CMESH_SIM_NCCL_DEVICE");
  CHECK(rep.header.status == ErrorCode::NcclError);
  CHECK_CONTAINS(rep.body, "device 0");
  CHECK_CONTAINS(rep.body, "device 1");
  CHECK_EQ(field(hello(c), "comms"), 0);
}

TEST(sim, a_cuda_error_on_the_launch_path_aborts_the_communicator) {
  OneRank r;
  ::setenv("CMESH_SIM_CUDA_FAULT", "launch", 1);
  Reply rep = r.c.call(allReduce(r.comm, r.send, r.recv, 16));
  ::unsetenv("CMESH_SIM_CUDA_FAULT");
  CHECK(rep.header.status == ErrorCode::CudaError);
  CHECK_CONTAINS(rep.body, "cudaErrorLaunchFailure");
  CHECK_CONTAINS(rep.body, "communicator aborted");
  Request q = req(Op::AsyncError);
  q.comm = r.comm;
  CHECK_CONTAINS(r.c.call(q).body, "\"aborted\":true");
}

TEST(sim, an_abort_request_ends_a_launch_blocked_inside_nccl_and_nothing_uses_the_freed_communicator) {
  // The simulation kills the process on any call on a communicator after ncclCommAbort freed it.
  Conn a(0), b(1);
  auto [ca, cb] = commInit2(a, b);
  uint64_t sa = alloc(a, 0, 64), ra = alloc(a, 0, 64);
  Request ar = allReduce(ca, sa, ra, 16);
  ar.timeoutMs = 20000;
  uint64_t collId = a.send(ar);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Request ab = req(Op::Abort);
  ab.comm = ca;
  auto t0 = Clock::now();
  uint64_t abortId = a.send(ab);
  Reply x = a.read(4000), y = a.read(4000);
  const Reply& collReply = x.header.id == abortId ? y : x;
  CHECK_EQ(collReply.header.id, collId);
  CHECK(collReply.header.status == ErrorCode::Aborted);
  CHECK(msSince(t0) < 2500);
  CHECK(answers(a));
  Request q = req(Op::AsyncError);
  q.comm = ca;
  Reply gone = a.call(q);  // the handle went with the abort: later requests on it say so
  CHECK(gone.header.status == ErrorCode::Aborted);
  CHECK_CONTAINS(gone.body, "was aborted by an abort request");
  ab.comm = cb;
  b.call(ab);
}

TEST(sim, copies_larger_than_a_staging_buffer_round_trip_at_an_offset) {
  // copyIn / copyOut go through 4 MiB pinned staging buffers, a piece at a time.
  Conn c(bigFrameServer());
  const size_t n = (size_t(10) << 20) + 5, offset = 3;
  uint64_t buf = alloc(c, 0, n + offset);
  std::vector<uint8_t> data(n);
  for (size_t i = 0; i < n; i++) data[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  Request in = req(Op::CopyIn);
  in.dtype = 1;
  in.buf = buf;
  in.offset = offset;
  in.count = in.payloadLength = n;
  CHECK(c.call(in, data).header.status == ErrorCode::Ok);
  Request out = req(Op::CopyOut);
  out.dtype = 1;
  out.buf = buf;
  out.offset = offset;
  out.count = n;
  Reply rep = c.call(out);
  CHECK(rep.header.status == ErrorCode::Ok);
  CHECK(rep.payload == data);
}

TEST(sim, a_launch_blocked_on_a_full_launch_queue_ends_at_its_deadline) {
  // A queue shorter than the launches between two stream waits: the launch call itself blocks
  // (as a full CUDA launch queue blocks the host), and only the watchdog sees the deadline there.
  ::setenv("CMESH_SIM_QUEUE_DEPTH", "40", 1);
  OneRank r;
  CHECK_CONTAINS(stalledAllReduce(r).body, "watchdog");
  CHECK(answers(r.c));
  ::unsetenv("CMESH_SIM_QUEUE_DEPTH");
}

TEST(sim, a_collective_refuses_a_buffer_on_another_device_naming_it) {
  OneRank r;
  uint64_t elsewhere = alloc(r.c, 1, 64);
  Reply rep = r.c.call(allReduce(r.comm, elsewhere, r.recv, 16));
  CHECK(rep.header.status == ErrorCode::InvalidArgument);
  CHECK_CONTAINS(rep.body, "sendBuf is on device 1, the communicator on device 0");
  rep = r.c.call(allReduce(r.comm, r.send, elsewhere, 16));
  CHECK(rep.header.status == ErrorCode::InvalidArgument);
  CHECK_CONTAINS(rep.body, "recvBuf is on device 1, the communicator on device 0");
  CHECK(r.c.call(allReduce(r.comm, r.send, r.recv, 16)).header.status == ErrorCode::Ok);
}
