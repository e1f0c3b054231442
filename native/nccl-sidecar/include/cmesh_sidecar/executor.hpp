// One thread that runs GPU requests in arrival order. Callers wait with their request's deadline;
// a job still queued when its deadline passes is answered TIMEOUT without running.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cmesh_sidecar/request.hpp"

namespace cmesh {

class Executor {
 public:
  using Task = std::function<Response()>;

  Executor();
  ~Executor();

  /**
   * Runs `task` on the executor thread and waits for it until the deadline plus `graceMs` (the
   * task watches the deadline itself and reports what timed out; the grace covers a task stuck
   * inside a library call). Throws SidecarError(TIMEOUT) when no result came in time.
   */
  Response run(const std::string& label, const Deadline& deadline, int64_t graceMs, Task task);

  struct Job;
  using JobPtr = std::shared_ptr<Job>;
  /** run() in two steps: queue the task now (requests keep their order), wait for it later. */
  JobPtr submit(const std::string& label, const Deadline& deadline, Task task);
  Response wait(const JobPtr& job, int64_t graceMs);

  struct Job {
    std::string label;
    Deadline deadline;
    Task task;
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    Response response;
    std::string errorCode, errorMessage;
    Job(std::string l, const Deadline& d, Task t) : label(std::move(l)), deadline(d), task(std::move(t)) {}
  };

 private:

  void loop();

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::string busyLabel_;
  Deadline::Clock::time_point busySince_{};
  std::thread thread_;
};

}  // namespace cmesh
