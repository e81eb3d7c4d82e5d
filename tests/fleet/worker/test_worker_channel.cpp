// The parent's side of the protocol on its own (fleet/worker/worker_channel.hpp): a WorkerChannel over a
// socket pair whose other end this test plays, as a worker that answers, fails, stays silent, sends junk
// or goes away. No worker process: what the channel makes of each is all there is.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <future>

#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/base/error.hpp"
#include "process/ipc.hpp"
#include "test_support.hpp"

namespace ortfleet::detail {
namespace {
using nlohmann::json;

class WorkerChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [mine, theirs] = MessageChannel::socket_pair();
    WorkerChannel::Hooks hooks;
    hooks.how_it_ended = [] { return std::string("was killed by SIGKILL"); };
    hooks.kill = [this] { killed_ = true; };
    channel_ = std::make_unique<WorkerChannel>(std::move(mine), Device::cpu(1), 4242, hooks);
    worker_ = std::make_unique<MessageChannel>(std::move(theirs));
  }

  /// The worker's side of one exchange: takes the next request and answers it with what `answer` makes
  /// of it (nothing: no answer), on a thread of its own.
  std::future<json> worker_answers(std::function<std::optional<json>(Message&, std::vector<int>&)> answer) {
    return std::async(std::launch::async, [this, answer] {
      Received r = worker_->receive(deadline_in(30, monotonic_ns()));
      if (r.kind != Received::Kind::message) return json();
      std::vector<int> fds;
      if (auto reply = answer(r.message, fds)) worker_->send(*reply, fds);
      return r.message.body;
    });
  }

  std::unique_ptr<WorkerChannel> channel_;
  std::unique_ptr<MessageChannel> worker_;
  std::atomic<bool> killed_{false};
};

TEST_F(WorkerChannelTest, TheWorkersErrorComesBackWithItsHintAndTheDevice) {
  auto worker = worker_answers([](Message&, std::vector<int>&) {
    return json{{"event", message::kFailed}, {"error", {{"what_failed", "the model is bad"}, {"hint", "Fix the model"}, {"where", ""}}}};
  });
  const Error e = test::error_from([&] { channel_->call(message::status, nullptr, 10); });
  EXPECT_EQ(e.what_failed(), "the model is bad");
  EXPECT_EQ(e.hint(), "Fix the model");
  EXPECT_EQ(e.where(), "cpu:1");
  EXPECT_EQ(op_of(worker.get()), "status");
  EXPECT_TRUE(channel_->alive()) << "a failed request is not a dead worker";
}

TEST_F(WorkerChannelTest, AnAnswerOfAnotherKindIsAFailureThatSaysTheWorkerDidNotSayWhy) {
  auto worker = worker_answers([](Message&, std::vector<int>&) { return json{{"event", "ready"}}; });
  EXPECT_EQ(test::error_from([&] { channel_->call(message::status, nullptr, 10); }).what_failed(), "the worker failed without saying why");
  worker.get();
}

TEST_F(WorkerChannelTest, AWorkerSilentPastTheDeadlineIsKilledAndEveryLaterRequestFails) {
  auto worker = worker_answers([](Message&, std::vector<int>&) { return std::nullopt; });
  const Error e = test::error_from([&] { channel_->call(message::status, nullptr, 0.3); });
  EXPECT_EQ(e.what_failed(), "the worker for cpu:1 (pid 4242) did not answer a status request within 0.3 s");
  EXPECT_NE(e.hint().find("raise the timeout"), std::string::npos) << e.hint();
  EXPECT_TRUE(killed_);
  EXPECT_FALSE(channel_->alive());
  ASSERT_TRUE(channel_->gone_error().has_value());
  const Error later = test::error_from([&] { channel_->call(message::status, nullptr, 10); });
  EXPECT_NE(later.what_failed().find("cpu:1 has no worker any more"), std::string::npos) << later.what();
  worker.get();
}

TEST_F(WorkerChannelTest, AWorkerThatGoesAwaySaysHowItEnded) {
  worker_.reset();
  const Error e = test::error_from([&] { channel_->call(message::status, nullptr, 10); });
  EXPECT_NE(e.what_failed().find("the worker process for cpu:1 was killed by SIGKILL during a status request"), std::string::npos)
      << e.what();
  EXPECT_FALSE(channel_->alive());
  EXPECT_FALSE(killed_) << "a worker that is gone is not killed again";
}

TEST_F(WorkerChannelTest, AnAnswerThatIsNotJsonIsAnErrorNamingTheWorkersPid) {
  auto worker = std::async(std::launch::async, [this] {
    worker_->receive(deadline_in(30, monotonic_ns()));
    const char junk[] = "{\"event\":";
    return ::send(worker_->fd(), junk, sizeof junk - 1, 0);
  });
  const Error e = test::error_from([&] { channel_->call(message::status, nullptr, 10); });
  EXPECT_NE(e.what_failed().find("the worker process (pid 4242) sent a malformed message during a status request"), std::string::npos)
      << e.what();
  worker.get();
}

TEST_F(WorkerChannelTest, OnnxRuntimesWarningsInAnAnswerAreTakenOutOfIt) {
  auto worker = worker_answers([](Message&, std::vector<int>&) {
    return json{{"event", "status"}, {"sessions", json::array()}, {"ort_warnings", json::array({json::array({"a warning", 2})})}};
  });
  const Message reply = channel_->call(message::status, nullptr, 10);
  EXPECT_FALSE(reply.body.contains("ort_warnings")) << reply.body.dump();
  EXPECT_TRUE(reply.body.contains("sessions"));
  worker.get();
}

TEST_F(WorkerChannelTest, WithoutARingARunCrossesTheSocketAndItsOutputsAreCopiesOfTheWorkers) {
  channel_->choose_request_ring(false);
  std::shared_ptr<SharedBuffer> worker_outputs;
  auto worker = worker_answers([&worker_outputs](Message& request, std::vector<int>& fds) -> std::optional<json> {
    if (request.fds.size() != 1) return json{{"event", message::kFailed}, {"error", {{"what_failed", "no shared memory"}}}};
    auto inputs = unpack_tensors(request.body.at("inputs"), SharedBuffer::attach(std::move(request.fds.front())));
    for (auto& t : inputs) {
      for (int64_t i = 0; i < t.element_count(); ++i) t.values<float>()[i] *= 2;  // the "model": twice its input
      t.name = "output";
    }
    const json described = pack_tensors(inputs, worker_outputs);
    fds = {worker_outputs->fd()};
    return answer_to(message::run, {{"outputs", described}});
  });
  Tensor input = Tensor::host_copy("input", ElementType::float32, {3}, nullptr);
  for (int i = 0; i < 3; ++i) input.values<float>()[i] = static_cast<float>(i) + 1;
  const auto outputs = channel_->run("a-session", {input}, 10);
  const json request = worker.get();
  EXPECT_EQ(op_of(request), "run");
  EXPECT_EQ(request.at("session"), "a-session");
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].name, "output");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(outputs[0].values<float>()[i], 2.0f * (static_cast<float>(i) + 1));
  // A copy: the worker writes its next outputs into the same shared memory.
  EXPECT_NE(static_cast<const void*>(outputs[0].data), static_cast<const void*>(worker_outputs->data()));
  EXPECT_EQ(channel_->transfer_counters().inputs_host_bytes, input.bytes);
}

}  // namespace
}  // namespace ortfleet::detail
