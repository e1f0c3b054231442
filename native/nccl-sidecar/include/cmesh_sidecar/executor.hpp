// A thread that runs requests in arrival order: the sidecar has one per communicator (its
// collectives), one per connection (buffer copies, pings) and one for clean-up, so a process
// group never waits on another's work. Callers wait with their request's deadline; a job still
// queued (or waiting for the jobs it must follow) when its deadline passes is answered TIMEOUT
// without running.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cmesh_sidecar/request.hpp"

namespace cmesh {

class Executor {
 public:
  using Task = std::function<Response()>;

  Executor();
  /** Closes: the thread ends once the jobs already queued have run. */
  ~Executor();

  /**
   * Runs `task` on the executor thread and waits for it until the deadline plus `graceMs` (the
   * task watches the deadline itself and reports what timed out; the grace covers a task stuck
   * inside a library call). Throws SidecarError(TIMEOUT) when no result came in time.
   */
  Response run(const std::string& label, const Deadline& deadline, int64_t graceMs, Task task);

  struct Job;
  using JobPtr = std::shared_ptr<Job>;
  /**
   * run() in two steps: queue the task now (requests keep their order), wait for it later. The
   * task starts only after every job in `after` has finished (those may run on other executors).
   */
  JobPtr submit(const std::string& label, const Deadline& deadline, Task task, std::vector<JobPtr> after = {});
  /** Waits for a job of any executor (see run()). */
  static Response wait(const JobPtr& job, int64_t graceMs);
  /** A job answered without running (a request refused before it was queued). */
  static JobPtr failed(const std::string& label, const Deadline& deadline, const std::string& code, const std::string& message);
  /** No more jobs: the thread ends after the queued ones. Safe from the executor's own task. */
  void close();

  struct Job {
    std::string label;
    Deadline deadline;
    Task task;
    std::vector<JobPtr> after;
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    Response response;
    std::string errorCode, errorMessage;
    Job(std::string l, const Deadline& d, Task t) : label(std::move(l)), deadline(d), task(std::move(t)) {}
    std::function<std::string()> busy;  // what its executor is running now, for a TIMEOUT message
    /** Waits for the job until `at`; true when it finished. */
    bool waitDone(Deadline::Clock::time_point at);
    bool finished();
  };

 private:
  struct State {
    std::mutex m;
    std::condition_variable cv;
    std::deque<JobPtr> queue;
    bool closed = false;
    std::string busyLabel;
    Deadline::Clock::time_point busySince{};
  };
  static void loop(std::shared_ptr<State> s);
  std::shared_ptr<State> s_;  // shared with the thread, which may outlive this object
};

}  // namespace cmesh
