// cmesh-nccl-sidecar: one process per rank agent that owns the GPU side of NCCL collectives.
// Usage: cmesh-nccl-sidecar --socket PATH [--nccl-lib PATH] [--cudart-lib PATH]
//        [--default-timeout-ms N] [--max-frame-bytes N] [--stall-timeout-ms N]
//        cmesh-nccl-sidecar --probe     (prints the hello body as JSON and exits)
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "cmesh_sidecar/server.hpp"

namespace {

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --socket PATH [--nccl-lib PATH] [--cudart-lib PATH] [--default-timeout-ms N]\n"
               "          [--max-frame-bytes N] [--stall-timeout-ms N]\n"
               "       %s --probe [--nccl-lib PATH] [--cudart-lib PATH]\n"
               "env: CMESH_NCCL_LIB, CMESH_CUDART_LIB (used when the flags are absent)\n",
               argv0, argv0);
}

int64_t parseNumber(const char* flag, const char* value) {
  char* end = nullptr;
  long long v = std::strtoll(value, &end, 10);
  if (!value[0] || *end || v <= 0) {
    std::fprintf(stderr, "cmesh-nccl-sidecar: %s needs a positive integer, got '%s'\n", flag, value);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  cmesh::ServerOptions server;
  cmesh::RuntimeOptions runtime;
  if (const char* e = std::getenv("CMESH_NCCL_LIB")) runtime.ncclLib = e;
  if (const char* e = std::getenv("CMESH_CUDART_LIB")) runtime.cudartLib = e;
  bool probe = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "cmesh-nccl-sidecar: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--socket") server.socketPath = value();
    else if (a == "--nccl-lib") runtime.ncclLib = value();
    else if (a == "--cudart-lib") runtime.cudartLib = value();
    else if (a == "--default-timeout-ms") server.defaultTimeoutMs = parseNumber("--default-timeout-ms", value());
    else if (a == "--max-frame-bytes") server.maxFrameBytes = static_cast<uint64_t>(parseNumber("--max-frame-bytes", value()));
    else if (a == "--stall-timeout-ms") server.stallTimeoutMs = static_cast<int>(parseNumber("--stall-timeout-ms", value()));
    else if (a == "--probe") probe = true;
    else if (a == "--help" || a == "-h") { usage(argv[0]); return 0; }
    else {
      std::fprintf(stderr, "cmesh-nccl-sidecar: unknown argument '%s'\n", a.c_str());
      usage(argv[0]);
      return 2;
    }
  }
  if (server.maxFrameBytes > 0xFFFFFFFFull) {
    std::fprintf(stderr, "cmesh-nccl-sidecar: --max-frame-bytes is at most 4294967295 (u32 length prefix)\n");
    return 2;
  }
  if (!probe && server.socketPath.empty()) {
    usage(argv[0]);
    return 2;
  }

  // Signals go to one thread that removes the socket file and exits; the GPU driver reclaims
  // device memory and communicators with the process.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  cmesh::GpuRuntime gpu(runtime);
  cmesh::Server srv(server, gpu);
  // From here on, leave with _exit: the executor thread is parked on a condition variable that
  // destroying `srv` would pull from under it.
  if (probe) {
    std::printf("%s\n", srv.hello().dump().c_str());
    std::fflush(stdout);
    ::_exit(0);
  }
  try {
    srv.listen();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cmesh-nccl-sidecar: %s\n", e.what());
    std::fflush(stderr);
    ::_exit(1);
  }
  std::string path = server.socketPath;
  std::thread([set, path] {
    int sig = 0;
    sigwait(&set, &sig);
    ::unlink(path.c_str());
    ::_exit(0);
  }).detach();

  // One line on stdout tells a spawning parent that the socket accepts connections.
  std::printf("{\"event\":\"listening\",\"socket\":\"%s\",\"pid\":%d,\"available\":%s}\n", path.c_str(),
              static_cast<int>(::getpid()), gpu.available() ? "true" : "false");
  std::fflush(stdout);
  if (!gpu.available()) std::fprintf(stderr, "cmesh-nccl-sidecar: GPU backend unavailable: %s\n", gpu.unavailableReason().c_str());
  srv.serve();
  ::unlink(path.c_str());
  std::fflush(stderr);
  ::_exit(1);
}
