// The Unix-socket server: accepts connections, reads frames, answers hello/ping/shutdown itself
// and hands GPU requests to the executor. A bad frame gets an error frame; the server stays up.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "cmesh_sidecar/executor.hpp"
#include "cmesh_sidecar/frame.hpp"
#include "cmesh_sidecar/gpu_runtime.hpp"
#include "cmesh_sidecar/protocol.hpp"

namespace cmesh {

constexpr const char* kSidecarVersion = "0.1.0";

struct ServerOptions {
  std::string socketPath;
  int64_t defaultTimeoutMs = 30 * 60 * 1000;  // torch's default collective timeout
  int64_t maxTimeoutMs = 24LL * 3600 * 1000;
  uint64_t maxFrameBytes = (uint64_t(1) << 30) + (uint64_t(1) << 20);
  int stallTimeoutMs = 30000;
  int64_t graceMs = 2000;
};

class Server {
 public:
  Server(const ServerOptions& opts, GpuRuntime& runtime) : opts_(opts), runtime_(runtime) {}
  /** Binds and listens; throws std::runtime_error naming the path on failure. */
  void listen();
  /** Accepts until shutdown is requested. */
  void serve();
  /** The hello result. */
  Json hello() const;
  /**
   * Serves one connected stream socket until the peer closes or the stream breaks; closes `fd`.
   * A shutdown request exits the process (unless `exitOnShutdown` is false: then it only ends
   * this connection, for tests).
   */
  void serveConnection(int fd, bool exitOnShutdown = true);

 private:
  /** Runs one decoded request; sets `reply` and returns the result (never throws). */
  Response dispatch(Frame& frame, bool& shutdown, ReplyHeader& reply, std::string& errorMessage, uint64_t owner);
  /**
   * How one connection's requests are ordered across executors: a communicator's requests run on
   * its executor, in order, after the connection's buffer requests that came before them, and
   * independently of other communicators; a buffer request (copies, frees), ping or
   * getUniqueId runs on the connection's executor after every earlier request of the connection.
   */
  struct Ordering {
    std::shared_ptr<Executor> conn = std::make_shared<Executor>();
    Executor::JobPtr lastBarrier;
    std::vector<Executor::JobPtr> since;  // communicator requests queued after lastBarrier
  };
  /** Queues a ping or GPU request on its executor. */
  Executor::JobPtr submit(Frame& frame, uint64_t owner, Ordering& order);
  /** Aborts a closed connection's communicators and frees its buffers. */
  void releaseConnection(uint64_t owner);

  ServerOptions opts_;
  GpuRuntime& runtime_;
  Executor executor_;  // clean-up of closed connections' buffers
  int listenFd_ = -1;
  std::atomic<uint64_t> nextConnection_{1};
};

}  // namespace cmesh
