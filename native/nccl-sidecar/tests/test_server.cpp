// The server end to end on a socketpair, with NCCL and CUDA missing: typed error replies, the
// connection surviving bad requests, and closing on unrecoverable ones.
#include <thread>

#include "cmesh_sidecar/server.hpp"
#include "harness.hpp"
#include "support.hpp"

using namespace cmesh;
using namespace testsupport;

namespace {

GpuRuntime& runtime() {
  static GpuRuntime rt(RuntimeOptions{"/nonexistent/cmesh-test/libnccl.so.2", "/nonexistent/cmesh-test/libcudart.so"});
  return rt;
}

Server& server() {
  // Never destroyed, like the sidecar's (main leaves with _exit): the executor thread stays parked
  // on its condition variable, which a destructor would pull from under it.
  static Server* srv = [] {
    ServerOptions o;
    o.socketPath = "/nonexistent/cmesh-test.sock";
    o.maxFrameBytes = 1 << 20;
    o.stallTimeoutMs = 300;
    return new Server(o, runtime());
  }();
  return *srv;
}

/** A connection served by the server on its own thread. */
struct Conn {
  SocketPair sp;
  std::thread t;
  Conn() {
    int fd = sp.b;
    sp.b = -1;  // the server closes it
    t = std::thread([fd] { server().serveConnection(fd, false); });
  }
  ~Conn() {
    sp.closeA();
    t.join();
  }
  Reply call(const Request& r, const std::vector<uint8_t>& payload = {}) {
    auto bytes = frameBytes(r, payload);
    writeAll(sp.a, bytes.data(), bytes.size());
    Reply out;
    if (!readReply(sp.a, out)) harness::fail(__FILE__, __LINE__, "no reply");
    return out;
  }
};

Request req(Op op, uint64_t id) {
  Request r;
  r.op = op;
  r.id = id;
  return r;
}

}  // namespace

TEST(server, hello_and_ping_answer_ok) {
  Conn c;
  Reply r = c.call(req(Op::Hello, 1));
  CHECK(r.header.status == ErrorCode::Ok);
  CHECK_EQ(r.header.id, 1u);
  CHECK_EQ(r.header.op, static_cast<uint16_t>(Op::Hello));
  CHECK_CONTAINS(r.body, "\"protocol\":2");
  CHECK_CONTAINS(r.body, "\"available\":false");
  CHECK_CONTAINS(r.body, "\"maxFrameBytes\":1048576");
  CHECK_CONTAINS(r.body, "\"collective\"");
  Request p = req(Op::Ping, 2);
  p.delayMs = 1;
  r = c.call(p);
  CHECK(r.header.status == ErrorCode::Ok);
  CHECK_CONTAINS(r.body, "\"delayedMs\":1");
}

TEST(server, gpu_ops_fail_unavailable_or_not_found) {
  Conn c;
  Reply r = c.call(req(Op::GetUniqueId, 3));
  CHECK(r.header.status == ErrorCode::Unavailable);
  CHECK_CONTAINS(r.body, "NCCL unavailable");
  Request init = req(Op::CommInitRank, 4);
  init.nranks = 2;
  init.payloadLength = 128;
  r = c.call(init, std::vector<uint8_t>(128, 0));
  CHECK(r.header.status == ErrorCode::Unavailable);
  Request ae = req(Op::AsyncError, 5);
  ae.comm = 12345;
  r = c.call(ae);
  CHECK(r.header.status == ErrorCode::NotFound);
  CHECK_CONTAINS(r.body, "12345");
  Request fr = req(Op::Free, 6);
  fr.buf = 777;
  r = c.call(fr);
  CHECK(r.header.status == ErrorCode::NotFound);
  CHECK_EQ(r.header.id, 6u);
}

TEST(server, invalid_requests_get_typed_errors_and_the_connection_goes_on) {
  Conn c;
  Reply r = c.call(req(static_cast<Op>(99), 10));
  CHECK(r.header.status == ErrorCode::UnknownOp);
  CHECK(r.header.idKnown);
  CHECK_EQ(r.header.id, 10u);
  CHECK_CONTAINS(r.body, "unknown op 99; known ops: 1 hello");
  Request coll = req(Op::Collective, 11);
  coll.comm = 1;
  coll.dtype = 200;
  coll.iters = 1;
  r = c.call(coll);
  CHECK(r.header.status == ErrorCode::InvalidArgument);
  CHECK_EQ(r.header.op, static_cast<uint16_t>(Op::Collective));
  CHECK_CONTAINS(r.body, "field 'dtype'");
  Request in = req(Op::CopyIn, 12);
  in.buf = 1;
  in.dtype = 7;
  in.count = 4;
  in.payloadLength = 10;
  r = c.call(in, std::vector<uint8_t>(10, 1));
  CHECK(r.header.status == ErrorCode::InvalidArgument);
  CHECK_CONTAINS(r.body, "field 'payloadLength' = 10 does not match count × element size = 16");
  Request bigId = req(Op::Hello, kMaxRequestId + 1);
  r = c.call(bigId);
  CHECK(r.header.status == ErrorCode::BadFrame);
  CHECK(!r.header.idKnown);
  r = c.call(req(Op::Ping, 13));
  CHECK(r.header.status == ErrorCode::Ok);
  CHECK_EQ(r.header.id, 13u);
}

TEST(server, unrecoverable_frames_get_an_error_then_the_connection_closes) {
  {
    Conn c;
    std::string junk(128, '{');
    writeAll(c.sp.a, junk.data(), junk.size());
    Reply r;
    CHECK(readReply(c.sp.a, r));
    CHECK(r.header.status == ErrorCode::BadFrame);
    CHECK(!r.header.idKnown);
    CHECK_CONTAINS(r.body, "bad magic");
    CHECK_CONTAINS(r.body, "closing this connection");
    CHECK(peerClosed(c.sp.a));
  }
  {
    Conn c;
    Request big = req(Op::CopyIn, 20);
    big.buf = 1;
    big.dtype = 1;
    big.count = big.payloadLength = 2 << 20;
    auto bytes = frameBytes(big, std::vector<uint8_t>(2 << 20, 1));
    std::thread writer([&] { writeAll(c.sp.a, bytes.data(), bytes.size()); });
    Reply r;
    CHECK(readReply(c.sp.a, r));
    writer.join();
    // Refused with the request's id, and the connection goes on (clean-up requests still work).
    CHECK(r.header.status == ErrorCode::BadFrame);
    CHECK(r.header.idKnown);
    CHECK_EQ(r.header.id, 20u);
    CHECK_CONTAINS(r.body, "exceeds the limit of 1048576 bytes");
    Reply h = c.call(req(Op::Hello, 21));
    CHECK(h.header.status == ErrorCode::Ok);
  }
  {
    Conn c;
    auto bytes = frameBytes(req(Op::Hello, 30));
    writeAll(c.sp.a, bytes.data(), 40);  // and then nothing
    Reply r;
    CHECK(readReply(c.sp.a, r));
    CHECK(r.header.status == ErrorCode::Timeout);
    CHECK_CONTAINS(r.body, "stalled");
    CHECK(peerClosed(c.sp.a));
  }
}

TEST(server, shutdown_is_answered) {
  Conn c;
  Reply r = c.call(req(Op::Shutdown, 40));
  CHECK(r.header.status == ErrorCode::Ok);
  CHECK(peerClosed(c.sp.a));  // exitOnShutdown = false: only this connection ends
}
