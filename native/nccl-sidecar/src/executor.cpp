#include "cmesh_sidecar/executor.hpp"

#include <chrono>

namespace cmesh {

Executor::Executor() : s_(std::make_shared<State>()) { std::thread(loop, s_).detach(); }

Executor::~Executor() { close(); }

void Executor::close() {
  {
    std::lock_guard<std::mutex> lk(s_->m);
    s_->closed = true;
  }
  s_->cv.notify_all();
}

bool Executor::Job::waitDone(Deadline::Clock::time_point at) {
  std::unique_lock<std::mutex> lk(m);
  return cv.wait_until(lk, at, [&] { return done; });
}

bool Executor::Job::finished() {
  std::lock_guard<std::mutex> lk(m);
  return done;
}

Executor::JobPtr Executor::failed(const std::string& label, const Deadline& deadline, const std::string& code,
                                  const std::string& message) {
  auto job = std::make_shared<Job>(label, deadline, nullptr);
  job->errorCode = code;
  job->errorMessage = message;
  job->done = true;
  return job;
}

void Executor::loop(std::shared_ptr<State> s) {
  for (;;) {
    JobPtr job;
    {
      std::unique_lock<std::mutex> lk(s->m);
      s->cv.wait(lk, [&] { return !s->queue.empty() || s->closed; });
      if (s->queue.empty()) return;  // closed and drained
      job = s->queue.front();
      s->queue.pop_front();
      s->busyLabel = job->label;
      s->busySince = Deadline::Clock::now();
    }
    Response resp;
    std::string code, message;
    // The jobs this one follows (earlier requests of its connection on other executors).
    bool ready = true;
    for (const auto& before : job->after)
      if (!before->waitDone(job->deadline.at())) ready = false;
    job->after.clear();
    if (!ready || job->deadline.expired()) {
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
    job->task = nullptr;  // what it captured goes now, not with the last reference to the job
    {
      std::lock_guard<std::mutex> lk(s->m);
      s->busyLabel.clear();
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

Executor::JobPtr Executor::submit(const std::string& label, const Deadline& deadline, Task task, std::vector<JobPtr> after) {
  auto job = std::make_shared<Job>(label, deadline, std::move(task));
  job->after = std::move(after);
  std::weak_ptr<State> weak = s_;
  job->busy = [weak] {
    auto s = weak.lock();
    if (!s) return std::string();
    std::lock_guard<std::mutex> g(s->m);
    if (s->busyLabel.empty()) return std::string();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::Clock::now() - s->busySince).count();
    return "; the sidecar has been busy with " + s->busyLabel + " for " + std::to_string(ms) + " ms";
  };
  {
    std::lock_guard<std::mutex> lk(s_->m);
    if (s_->closed) {
      // A communicator's executor closes with its handle: the request is answered as one on an
      // unknown handle would be.
      std::lock_guard<std::mutex> g(job->m);
      job->errorCode = codes::kNotFound;
      job->errorMessage = label + ": the communicator is gone (destroyed or aborted)";
      job->done = true;
      return job;
    }
    s_->queue.push_back(job);
  }
  s_->cv.notify_all();
  return job;
}

Response Executor::wait(const JobPtr& job, int64_t graceMs) {
  const Deadline& deadline = job->deadline;
  const std::string& label = job->label;
  if (!job->waitDone(deadline.at() + std::chrono::milliseconds(graceMs))) {
    const std::string busy = job->busy ? job->busy() : "";
    // The job's result, if it ever comes, is dropped: `job` is shared, so nothing dangles.
    throw SidecarError(codes::kTimeout,
                       label + " got no result within " + std::to_string(deadline.budgetMs()) + " ms" + busy);
  }
  std::lock_guard<std::mutex> lk(job->m);
  if (!job->errorCode.empty()) throw SidecarError(job->errorCode, job->errorMessage);
  return std::move(job->response);
}

}  // namespace cmesh
