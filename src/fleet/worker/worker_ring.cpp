#include "fleet/worker/worker_ring.hpp"

#include <algorithm>
#include <cstring>

#include "fleet/worker/wire.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {
using Wait = RequestRing::Wait;

namespace {
constexpr size_t kResponseAlignment = 64;

/// Runs `release` when it goes out of scope, unless dismissed.
template <class Release>
class OnExit {
 public:
  explicit OnExit(Release release) : release_(std::move(release)) {}
  ~OnExit() { release_(); }
  OnExit(const OnExit&) = delete;
  OnExit& operator=(const OnExit&) = delete;

 private:
  Release release_;
};
}  // namespace

// --- the parent's side ---------------------------------------------------------------------------

RingClient::RingClient(Peer peer, std::shared_ptr<RequestRing> ring) : peer_(std::move(peer)), ring_(std::move(ring)) {}

RingClient::~RingClient() { shutdown(); }

size_t RingClient::slot_bytes() const {
  std::lock_guard lock(mutex_);
  return ring_->slot_bytes();
}

void RingClient::throw_failure(Wait why, double timeout_s) const {
  if (why == Wait::stopped) {
    throw Error("the worker process for " + peer_.device + " was stopped while it ran a request",
                "The fleet was shut down with runs in flight; wait for them before shutting it down", peer_.device);
  }
  std::rethrow_exception(peer_.failure(why, timeout_s));
}

RingClient::Claim RingClient::claim(size_t bytes) {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return !growing_ || stopped_; });
    if (stopped_) throw_failure(Wait::stopped);
    if (bytes > ring_->slot_bytes()) {
      grow(lock, bytes);
      continue;
    }
    Claim c;
    c.ring = ring_;
    ++in_flight_;
    lock.unlock();
    const auto slot = c.ring->acquire();  // waits while every slot is in flight
    if (!slot) {
      lock.lock();
      --in_flight_;
      changed_.notify_all();
      throw_failure(Wait::stopped);
    }
    c.slot = *slot;
    return c;
  }
}

void RingClient::grow(std::unique_lock<std::mutex>& lock, size_t bytes) {
  // A worker serves one ring at a time: the old one drains before the bigger one replaces it.
  growing_ = true;
  changed_.wait(lock, [&] { return in_flight_ == 0 || stopped_; });
  OnExit done([&] {
    growing_ = false;
    changed_.notify_all();
  });
  if (stopped_) throw_failure(Wait::stopped);
  // Twice the request: room for a response as large after it, and fewer regrowths.
  const size_t grown = std::max(bytes, ring_->slot_bytes()) * 2;
  auto bigger = RequestRing::create(ring_->slot_count(), grown);
  peer_.install(bigger->fd());
  ring_ = std::move(bigger);
}

void RingClient::unclaim(const Claim& c) {
  c.ring->release(c.slot);
  {
    std::lock_guard lock(mutex_);
    --in_flight_;
  }
  changed_.notify_all();
}

RingClient::Claim RingClient::submit(size_t bytes, size_t slot_bytes_needed, const Writer& write, const std::string& tag,
                                     double timeout_s, bool outputs_on_device) {
  Claim c = claim(std::max(bytes, slot_bytes_needed));
  c.outputs_on_device = outputs_on_device;
  try {
    write(c.ring->data(c.slot), c.ring->slot_bytes());
    c.request_id = next_request_id_.fetch_add(1);
    c.request_bytes = bytes;
    c.deadline_ns = deadline_in(timeout_s, monotonic_ns());
    c.ring->submit(c.slot, c.request_id, tag, bytes);
  } catch (...) {
    unclaim(c);
    throw;
  }
  return c;
}

RingClient::Claim RingClient::submit(const RingMessage& request, const std::string& tag, double timeout_s) {
  const size_t bytes = ring_message_bytes(request);
  return submit(bytes, bytes, [&](std::byte* area, size_t capacity) { write_ring_message(request, area, capacity); }, tag, timeout_s,
                request.outputs_on_device);
}

RingClient::Finished RingClient::finish(const Claim& c) {
  OnExit release([&] { unclaim(c); });
  const auto response = c.ring->response(c.slot);
  if (response.request_id != c.request_id) {
    throw Error("the worker process for " + peer_.device + " answered request " + std::to_string(response.request_id) + " in the slot of request " +
                    std::to_string(c.request_id),
                "This is a bug in ortfleet; please report it", peer_.device);
  }
  const std::byte* area = c.ring->data(c.slot);
  Finished finished;
  finished.outputs_on_device = c.outputs_on_device;
  switch (response.status) {
    case RequestRing::Status::ok: {
      // The slot is reused by the next request: the caller gets copies of host tensors.
      auto outputs = read_ring_message(area + response.offset, response.bytes, nullptr).tensors;
      for (auto& w : outputs) {
        if (!w.ipc) w.tensor = Tensor::host_copy(w.tensor.name, w.tensor.type, w.tensor.shape, w.tensor.data);
      }
      if (peer_.receive) {
        finished.outputs = peer_.receive(std::move(outputs), c.outputs_on_device);
      } else {
        for (auto& w : outputs) finished.outputs.push_back(std::move(w.tensor));
      }
      return finished;
    }
    case RequestRing::Status::response_too_large:
      if (response.needed_bytes <= c.ring->slot_bytes()) {
        throw Error("the worker process for " + peer_.device + " found no room for a response that fits its slot", "This is a bug in ortfleet; please report it",
                    peer_.device);
      }
      finished.resend.assign(area, area + c.request_bytes);
      finished.needed_bytes = response.needed_bytes;
      return finished;
    case RequestRing::Status::failed: {
      const auto text = std::string(reinterpret_cast<const char*>(area + response.offset), response.bytes);
      throw error_from_json(nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false), peer_.device);
    }
  }
  throw Error("the worker process for " + peer_.device + " answered with an unknown status " +
                  std::to_string(static_cast<uint32_t>(response.status)),
              "The worker and its parent come from different ortfleet builds?", peer_.device);
}

std::vector<Tensor> RingClient::wait_and_finish(const Claim& c, const std::string& tag, double timeout_s) {
  const Wait why = c.ring->wait_done(c.slot, c.deadline_ns, peer_.alive);
  if (why != Wait::done) {
    // The worker is gone, killed for not answering (failure() does that), or we are stopping: the
    // slot is ours again once the error is known.
    OnExit release([&] { unclaim(c); });
    throw_failure(why, timeout_s);
  }
  Finished finished = finish(c);
  if (!finished.resend.empty()) return resend(std::move(finished), tag, timeout_s);
  return std::move(finished.outputs);
}

std::vector<Tensor> RingClient::resend(Finished finished, const std::string& tag, double timeout_s) {
  const auto& bytes = finished.resend;
  const Claim c = submit(bytes.size(), finished.needed_bytes,
                         [&](std::byte* area, size_t) { std::memcpy(area, bytes.data(), bytes.size()); }, tag, timeout_s,
                         finished.outputs_on_device);
  const Wait why = c.ring->wait_done(c.slot, c.deadline_ns, peer_.alive);
  if (why != Wait::done) {
    OnExit release([&] { unclaim(c); });
    throw_failure(why, timeout_s);
  }
  Finished again = finish(c);
  if (!again.resend.empty()) {
    throw Error("the outputs of a run on " + peer_.device + " did not fit a ring slot grown to hold them", "This is a bug in ortfleet; please report it",
                peer_.device);
  }
  return std::move(again.outputs);
}

std::vector<Tensor> RingClient::run(const RingMessage& request, const std::string& tag, double timeout_s) {
  return wait_and_finish(submit(request, tag, timeout_s), tag, timeout_s);
}

std::future<std::vector<Tensor>> RingClient::run_async(const RingMessage& request, const std::string& tag, double timeout_s) {
  Pending p;
  p.claim = submit(request, tag, timeout_s);
  p.tag = tag;
  p.timeout_s = timeout_s;
  auto future = p.promise.get_future();
  bool stopped = false;
  {
    std::lock_guard lock(mutex_);
    stopped = stopped_;
    if (!stopped) {
      pending_.push_back(std::move(p));
      if (!completer_.joinable()) completer_ = std::thread([this] { complete_loop(); });
    }
  }
  if (stopped) {
    // shutdown() ran between the submit and now; it failed what it found in pending_: do the same.
    unclaim(p.claim);
    try {
      throw_failure(Wait::stopped);
    } catch (...) {
      p.promise.set_exception(std::current_exception());
    }
    return future;
  }
  changed_.notify_all();
  return future;
}

void RingClient::complete_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopped_ || !pending_.empty(); });
    if (stopped_) return;  // shutdown() fails what is left
    // Every pending request is in the current ring: a ring grows only when none is in flight.
    const auto ring = pending_.front().claim.ring;
    const double timeout_s = pending_.front().timeout_s;
    const uint32_t seen = ring->responses();  // before looking: a response after this wakes wait_any
    std::list<Pending> ready;
    int64_t earliest = kNoDeadline;
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto next = std::next(it);
      if (it->claim.ring->done(it->claim.slot)) ready.splice(ready.end(), pending_, it);
      else earliest = std::min(earliest, it->claim.deadline_ns);
      it = next;
    }
    lock.unlock();
    for (auto& p : ready) {
      try {
        Finished finished = finish(p.claim);
        if (finished.resend.empty()) {
          p.promise.set_value(std::move(finished.outputs));
          continue;
        }
        // Sending it again waits for a bigger ring, which waits for the requests this thread completes.
        std::lock_guard resenders_lock(mutex_);
        resenders_.emplace_back([this, p = std::move(p), finished = std::move(finished)]() mutable {
          try {
            p.promise.set_value(resend(std::move(finished), p.tag, p.timeout_s));
          } catch (...) {
            p.promise.set_exception(std::current_exception());
          }
        });
      } catch (...) {
        p.promise.set_exception(std::current_exception());
      }
    }
    if (ready.empty()) {
      const Wait why = ring->wait_any(seen, earliest, peer_.alive);
      if (why == Wait::timed_out || why == Wait::peer_gone) {
        // One request past its deadline or a dead worker: the worker is gone for all of them.
        std::exception_ptr error;
        try {
          throw_failure(why, timeout_s);
        } catch (...) {
          error = std::current_exception();
        }
        fail_pending(error);
      }
    }
    lock.lock();
  }
}

void RingClient::fail_pending(const std::exception_ptr& error) {
  std::list<Pending> failed;
  {
    std::lock_guard lock(mutex_);
    failed.splice(failed.end(), pending_);
  }
  for (auto& p : failed) {
    unclaim(p.claim);
    p.promise.set_exception(error);
  }
}

void RingClient::shutdown() {
  std::shared_ptr<RequestRing> ring;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    ring = ring_;
  }
  changed_.notify_all();
  ring->stop_client();  // wakes every wait on it
  if (completer_.joinable()) completer_.join();
  std::vector<std::thread> resenders;
  {
    std::lock_guard lock(mutex_);
    resenders.swap(resenders_);
  }
  for (auto& t : resenders) t.join();
  std::exception_ptr error;
  try {
    throw_failure(Wait::stopped);
  } catch (...) {
    error = std::current_exception();
  }
  fail_pending(error);
}

// --- the worker's side ---------------------------------------------------------------------------

RingServer::RingServer(Run run, Prepare prepare, Discard discard)
    : run_(std::move(run)), prepare_(std::move(prepare)), discard_(std::move(discard)) {}

RingServer::~RingServer() { stop(); }

void RingServer::serve(std::shared_ptr<RequestRing> ring) {
  std::lock_guard lock(mutex_);
  next_ = std::move(ring);
  if (current_) current_->retire();  // its requests are done: the parent grows a ring only when none is in flight
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void RingServer::stop() {
  stop_ = true;
  {
    std::lock_guard lock(mutex_);
    if (current_) current_->retire();
  }
  if (thread_.joinable()) thread_.join();
}

void RingServer::loop() {
  std::shared_ptr<void> prepared;
  std::shared_ptr<RequestRing> ring;
  while (!stop_.load()) {
    {
      std::lock_guard lock(mutex_);
      if (next_) {
        current_ = std::move(next_);
        ring = current_;
        prepared.reset();
        if (prepare_) prepared = prepare_(*ring);
      }
    }
    if (!ring) return;
    if (const auto slot = ring->next_request(stop_)) handle(ring, *slot);
  }
}

void RingServer::handle(const std::shared_ptr<RequestRing>& ring, uint32_t slot) {
  std::byte* area = ring->data(slot);
  const size_t capacity = ring->slot_bytes();
  try {
    const auto request = ring->request(slot);
    RingMessage response = run_(request.tag, read_ring_message(area, request.bytes, ring));
    const size_t offset = (request.bytes + kResponseAlignment - 1) / kResponseAlignment * kResponseAlignment;
    const size_t needed = ring_message_bytes(response);
    if (offset > capacity || needed > capacity - offset) {
      if (discard_) discard_(response);
      ring->respond(slot, RequestRing::Status::response_too_large, 0, 0, offset + needed);
      return;
    }
    // An output may view the ring itself (a model that hands an input back): copy it out before the
    // response is written over it.
    const auto* begin = static_cast<const std::byte*>(ring->mapping());
    for (auto& [t, ipc] : response.tensors) {
      const auto* data = static_cast<const std::byte*>(t.data);
      if (!ipc && data >= begin && data < begin + ring->mapping_bytes()) t = Tensor::host_copy(t.name, t.type, t.shape, t.data);
    }
    write_ring_message(response, area + offset, capacity - offset);
    ring->respond(slot, RequestRing::Status::ok, offset, needed);
  } catch (const std::exception& e) {
    const std::string text = error_to_json(e).dump();
    const size_t bytes = std::min(text.size(), capacity);  // cut short, it reads as an error without its text
    std::memcpy(area, text.data(), bytes);
    ring->respond(slot, RequestRing::Status::failed, 0, bytes);
  }
}

}  // namespace ortfleet::detail
