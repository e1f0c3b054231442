#include "cmesh_sidecar/executor.hpp"

#include <chrono>

namespace cmesh {

Executor::Executor() : thread_([this] { loop(); }) { thread_.detach(); }

Executor::~Executor() = default;  // the process exits with the thread still parked

void Executor::loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lk(m_);
      cv_.wait(lk, [this] { return !queue_.empty(); });
      job = queue_.front();
      queue_.pop_front();
      busyLabel_ = job->label;
      busySince_ = Deadline::Clock::now();
    }
    Response resp;
    std::string code, message;
    if (job->deadline.expired()) {
      code = codes::kTimeout;
      message = job->label + " expired while queued behind earlier requests (timeout " +
                std::to_string(job->deadline.budgetMs()) + " ms)";
    } else {
      try {
        resp = job->task();
      } catch (const SidecarError& e) {
        code = e.code();
        message = e.what();
      } catch (const std::exception& e) {
        code = codes::kInternal;
        message = std::string(job->label) + ": " + e.what();
      }
    }
    {
      std::lock_guard<std::mutex> lk(m_);
      busyLabel_.clear();
    }
    std::lock_guard<std::mutex> lk(job->m);
    job->response = std::move(resp);
    job->errorCode = code;
    job->errorMessage = message;
    job->done = true;
    job->cv.notify_all();
  }
}

Response Executor::run(const std::string& label, const Deadline& deadline, int64_t graceMs, Task task) {
  return wait(submit(label, deadline, std::move(task)), graceMs);
}

Executor::JobPtr Executor::submit(const std::string& label, const Deadline& deadline, Task task) {
  auto job = std::make_shared<Job>(label, deadline, std::move(task));
  {
    std::lock_guard<std::mutex> lk(m_);
    queue_.push_back(job);
  }
  cv_.notify_one();
  return job;
}

Response Executor::wait(const JobPtr& job, int64_t graceMs) {
  const Deadline& deadline = job->deadline;
  const std::string& label = job->label;
  std::unique_lock<std::mutex> lk(job->m);
  bool done = job->cv.wait_until(lk, deadline.at() + std::chrono::milliseconds(graceMs), [&] { return job->done; });
  if (!done) {
    std::string busy;
    {
      std::lock_guard<std::mutex> g(m_);
      if (!busyLabel_.empty()) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::Clock::now() - busySince_).count();
        busy = "; the sidecar has been busy with " + busyLabel_ + " for " + std::to_string(ms) + " ms";
      }
    }
    // The job's result, if it ever comes, is dropped: `job` is shared, so nothing dangles.
    throw SidecarError(codes::kTimeout,
                       label + " got no result within " + std::to_string(deadline.budgetMs()) + " ms" + busy);
  }
  if (!job->errorCode.empty()) throw SidecarError(job->errorCode, job->errorMessage);
  return std::move(job->response);
}

}  // namespace cmesh
