// What the simulated NCCL library needs from the simulated CUDA runtime: streams that run tasks
// in order on a worker thread, the calling thread's current device, and the shared settings.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#define CMESH_SIM_API extern "C" __attribute__((visibility("default")))
#define CMESH_SIM_INTERNAL __attribute__((visibility("default")))

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using cudaError_t = int;

namespace cmesh_sim {

using Task = std::function<void()>;

/**
 * Appends a task to the stream (runs after everything queued before it). Blocks while the stream
 * already holds the queue depth (CMESH_SIM_QUEUE_DEPTH) of tasks, as a full CUDA launch queue
 * blocks the launching thread; false when that wait exceeded the hang limit.
 */
CMESH_SIM_INTERNAL bool enqueue(cudaStream_t s, Task t);
/** The calling thread's device (cudaSetDevice), 0 by default. */
CMESH_SIM_INTERNAL int currentDevice();
/** Every wait inside the simulation gives up after this long (CMESH_SIM_HANG_MS, default 60 s). */
CMESH_SIM_INTERNAL int64_t hangLimitMs();
/** An environment variable's value (std::getenv's) as an integer, or `fallback` when unset or not one. */
CMESH_SIM_INTERNAL int64_t envInt(const char* value, int64_t fallback);
/** One line on stderr, prefixed "cmesh-sim[pid]: ". */
CMESH_SIM_INTERNAL void log(const std::string& line);

}  // namespace cmesh_sim
