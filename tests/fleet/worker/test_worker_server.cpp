// The worker's side of the protocol on its own (fleet/worker/worker_server.hpp): a WorkerServer served in
// this process over a socket pair, driven by raw protocol messages, with no worker process and no
// WorkerChannel in between. Each request kind gets its answer; what a channel may not ask, or did not
// send as JSON, is refused and the channel goes on.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <future>
#include <thread>

#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "fleet/worker/worker_server.hpp"
#include "ortfleet/base/clock.hpp"
#include "ortfleet/synth/synth.hpp"
#include "process/ipc.hpp"
#include "test_support.hpp"

namespace ortfleet::detail {
namespace {
using nlohmann::json;

using test::identity_model;

LocalStartPlan plan_for(const std::string& model) {
  LocalStartPlan plan;
  plan.model_path = model;
  plan.devices = {Device::cpu()};
  plan.config.session.optimized_model_cache = false;
  return plan;
}

/// A reply and the descriptors that came with it.
struct Reply {
  json body;
  std::vector<UniqueFd> fds;
};

class WorkerServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [mine, theirs] = MessageChannel::socket_pair();
    client_ = std::make_unique<MessageChannel>(std::move(mine));
    served_ = std::make_unique<MessageChannel>(std::move(theirs));
    server_ = std::make_unique<WorkerServer>(Device::cpu(), monotonic_ns());
    serving_ = std::async(std::launch::async, [this] { server_->serve(*served_); });
  }
  void TearDown() override {
    client_.reset();  // the control channel closes: serving ends
    ASSERT_EQ(serving_.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "the server kept serving a closed channel";
    server_.reset();
  }

  Reply ask(const json& request, const std::vector<int>& fds = {}) { return ask_on(*client_, request, fds); }
  static Reply ask_on(MessageChannel& channel, const json& request, const std::vector<int>& fds = {}) {
    channel.send(request, fds);
    Received received = channel.receive(deadline_in(120, monotonic_ns()));
    EXPECT_EQ(received.kind, Received::Kind::message) << received.problem;
    return {std::move(received.message.body), std::move(received.message.fds)};
  }
  json start(const LocalStartPlan& plan) { return ask(request_of(message::start, {{"plan", plan_to_json(plan)}})).body; }

  std::unique_ptr<MessageChannel> client_;
  std::unique_ptr<MessageChannel> served_;
  std::unique_ptr<WorkerServer> server_;
  std::future<void> serving_;
};

TEST_F(WorkerServerTest, AStartIsReadyAndTheSameModelStartedAgainIsResident) {
  const json first = start(plan_for(identity_model()));
  ASSERT_EQ(event_of(first), "ready") << first.dump();
  EXPECT_FALSE(first.at("status").at("resident").get<bool>());
  EXPECT_EQ(first.at("status").at("device"), "cpu");
  EXPECT_EQ(first.at("inputs").at(0).at("name"), "input");
  const json again = start(plan_for(identity_model()));
  ASSERT_EQ(event_of(again), "ready") << again.dump();
  EXPECT_EQ(again.at("session"), first.at("session"));
  EXPECT_TRUE(again.at("status").at("resident").get<bool>());
}

TEST_F(WorkerServerTest, StatusReleaseAndEvictFollowWhoHoldsASession) {
  EXPECT_TRUE(ask(request_of(message::status)).body.at("sessions").empty());
  const std::string session = start(plan_for(identity_model())).at("session");
  json status = ask(request_of(message::status)).body;
  ASSERT_EQ(event_of(status), "status") << status.dump();
  ASSERT_EQ(status.at("sessions").size(), 1u);
  EXPECT_EQ(status.at("sessions").at(0).at("holders"), 1);
  EXPECT_EQ(event_of(ask(request_of(message::evict)).body), "evicted");
  EXPECT_EQ(ask(request_of(message::status)).body.at("sessions").size(), 1u) << "a held session was evicted";
  EXPECT_EQ(event_of(ask(request_of(message::release, {{"session", session}})).body), "released");
  EXPECT_EQ(ask(request_of(message::evict)).body.at("count"), 1);
  EXPECT_TRUE(ask(request_of(message::status)).body.at("sessions").empty());
}

TEST_F(WorkerServerTest, ARunThroughTheSocketGivesTheModelsOutputsInSharedMemory) {
  const std::string session = start(plan_for(identity_model())).at("session");
  Tensor input = Tensor::host_copy("input", ElementType::float32, {2, 16}, nullptr);
  for (int64_t i = 0; i < input.element_count(); ++i) input.values<float>()[i] = static_cast<float>(i) * 0.5f;
  std::shared_ptr<SharedBuffer> buffer;
  const json described = pack_tensors({input}, buffer);
  Reply reply = ask(request_of(message::run, {{"session", session}, {"inputs", described}}), {buffer->fd()});
  ASSERT_EQ(event_of(reply.body), "outputs") << reply.body.dump();
  ASSERT_EQ(reply.fds.size(), 1u);
  const auto outputs = unpack_tensors(reply.body.at("outputs"), SharedBuffer::attach(std::move(reply.fds.front())));
  ASSERT_EQ(outputs.size(), 1u);
  ASSERT_EQ(outputs[0].shape, input.shape);
  for (int64_t i = 0; i < input.element_count(); ++i) EXPECT_EQ(outputs[0].values<float>()[i], input.values<float>()[i]) << i;
}

TEST_F(WorkerServerTest, ARunOfASessionItDoesNotKeepFailsNamingIt) {
  std::shared_ptr<SharedBuffer> buffer;
  const json described = pack_tensors({}, buffer);
  const json reply = ask(request_of(message::run, {{"session", "nope"}, {"inputs", described}}), {buffer->fd()}).body;
  EXPECT_EQ(event_of(reply), message::kFailed);
  EXPECT_NE(reply.at("error").at("what_failed").get<std::string>().find("no session 'nope' on cpu"), std::string::npos) << reply.dump();
}

TEST_F(WorkerServerTest, AStartThatFailsIsAFailureWithTheDevice) {
  const json reply = start(plan_for((test::scratch_dir() / "missing.onnx").string()));
  ASSERT_EQ(event_of(reply), message::kFailed) << reply.dump();
  EXPECT_NE(reply.at("error").at("what_failed").get<std::string>().find("missing.onnx"), std::string::npos) << reply.dump();
  EXPECT_EQ(event_of(ask(request_of(message::status)).body), "status") << "the channel did not go on";
}

TEST_F(WorkerServerTest, AnUnknownRequestIsRefusedAndTheChannelGoesOn) {
  const json reply = ask({{"op", "bogus"}}).body;
  EXPECT_EQ(event_of(reply), message::kFailed);
  EXPECT_EQ(reply.at("error").at("what_failed"), "unknown request 'bogus'");
  EXPECT_EQ(event_of(ask(request_of(message::status)).body), "status");
}

TEST_F(WorkerServerTest, AMessageThatIsNotJsonIsRefusedAndTheChannelGoesOn) {
  const char junk[] = "not json";
  ASSERT_EQ(::send(client_->fd(), junk, sizeof junk - 1, 0), static_cast<ssize_t>(sizeof junk - 1));
  Received refused = client_->receive(deadline_in(30, monotonic_ns()));
  ASSERT_EQ(refused.kind, Received::Kind::message);
  EXPECT_EQ(event_of(refused.message.body), message::kFailed);
  EXPECT_NE(refused.message.body.dump().find("malformed request"), std::string::npos) << refused.message.body.dump();
  EXPECT_EQ(event_of(ask(request_of(message::status)).body), "status");
}

TEST_F(WorkerServerTest, AnAttachedChannelHoldsItsSessionsAndMayNotAskWhatOnlyTheParentMay) {
  const std::string session = start(plan_for(identity_model())).at("session");
  auto [mine, theirs] = MessageChannel::socket_pair();
  const json attached = ask(request_of(message::attach, {{"hold", {session}}}), {theirs.get()}).body;
  ASSERT_EQ(event_of(attached), "attached") << attached.dump();
  { const UniqueFd sent = std::move(theirs); }  // the worker has its own copy now
  MessageChannel client(std::move(mine));
  EXPECT_EQ(ask_on(client, request_of(message::status)).body.at("sessions").at(0).at("holders"), 2);
  for (const MessageKind* parents_only : {&message::stop, &message::attach, &message::adopt}) {
    const json refused = ask_on(client, request_of(*parents_only)).body;
    EXPECT_EQ(refused.at("error").at("what_failed"), std::string("unknown request '") + parents_only->op + "'") << refused.dump();
  }
  // The client goes: what it held is let go, and the control channel still serves.
  { MessageChannel gone = std::move(client); }
  for (int i = 0; i < 100; ++i) {
    if (ask(request_of(message::status)).body.at("sessions").at(0).at("holders") == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ask(request_of(message::status)).body.at("sessions").at(0).at("holders"), 1);
}

TEST_F(WorkerServerTest, AStopRequestIsAnsweredAndEndsServing) {
  EXPECT_EQ(event_of(ask(request_of(message::stop)).body), "stopping");
  EXPECT_EQ(serving_.wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace ortfleet::detail
