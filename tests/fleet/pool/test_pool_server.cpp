// The pool server's wire and its next-job behaviour, on the CPU: whatever a client of this user sends,
// the server answers that client and goes on serving everyone else; a failed start leaves nothing
// running; the workers of a job that left the pool are taken over, model loaded, as it ends, so that
// the next job finds the model resident.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "base/environment.hpp"
#include "base/private_dir.hpp"
#include "engine/files/npy_file.hpp"
#include "fleet/pool/pool_client.hpp"
#include "fleet/pool/pool_protocol.hpp"
#include "fleet/worker/wire.hpp"
#include "fleet/worker/worker_protocol.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cache.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/fleet/fleet.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "ortfleet/fleet/worker_pool.hpp"
#include "ortfleet/synth/synth.hpp"
#include "fleet/pool/pool_test_outputs.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
using test::first_output;
using test::in_process_output;

/// Sends raw `bytes` with `fds` attached on socket `fd` and reads the one answer.
json ask_raw(int fd, const std::string& bytes, const std::vector<int>& fds = {}) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (c == nullptr) return nullptr;
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  if (::sendmsg(fd, &msg, MSG_NOSIGNAL) < 0) return nullptr;
  detail::MessageChannel channel(detail::UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)));
  const detail::Received reply = channel.receive(detail::deadline_in(30, monotonic_ns()));
  return reply.kind == detail::Received::Kind::message ? reply.message.body : json(nullptr);
}

detail::UniqueFd connect_raw(const std::string& path) {
  detail::UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  const sockaddr_un address = detail::pool_socket_address(path);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0) << path;
  return fd;
}

PoolOptions cpu_pool(int n, bool isolate) {
  PoolOptions o;
  for (int i = 0; i < n; ++i) o.devices.push_back(Device::cpu(i));
  o.isolate_new_models = isolate;
  return o;
}

/// The test MLP on the first CPU device, as a client's plan.
detail::LocalStartPlan cpu_mlp_plan() {
  detail::LocalStartPlan plan;
  plan.model_path = test::mlp_model();
  plan.devices = {Device::cpu(0)};
  return plan;
}

/// A pool server on a private socket, served on a thread of this test.
class Served {
 public:
  explicit Served(PoolOptions pool, double park_after_s = 0, double fold_after_s = ServeOptions{}.fold_after_s) {
    ServeOptions o;
    o.pool = std::move(pool);
    o.socket_path = (dir_.path() / "pool.sock").string();
    o.park_after_s = park_after_s;
    o.fold_after_s = fold_after_s;
    server_ = std::make_unique<PoolServer>(o);
    serving_ = std::thread([this] { server_->serve(); });
    EXPECT_TRUE(server_->pool().wait(120));
  }
  ~Served() {
    server_->stop();
    serving_.join();
  }
  const std::string& socket() const { return server_->socket_path(); }
  const std::filesystem::path& folder() const { return dir_.path(); }
  PoolServer& server() { return *server_; }
  json status() const { return json::parse(pool_status(server_->socket_path())); }
  FleetOptions client() const {
    FleetOptions o;
    o.devices = server_->pool().devices();
    o.pool_socket = server_->socket_path();
    return o;
  }

 private:
  detail::PrivateDir dir_ = detail::PrivateDir::temporary("ortfleet-test");
  std::unique_ptr<PoolServer> server_;
  std::thread serving_;
};

/// A started plan of `model` on the CPU, as a client's open request carries it.
json open_request(const std::string& model, double timeout_s = 60) {
  detail::LocalStartPlan plan;
  plan.model_path = model;
  plan.devices = {Device::cpu(0)};
  return detail::request_of(detail::pool_message::open, {{"plan", detail::plan_to_json(plan)}, {"timeout_s", timeout_s}});
}

/// The workers of each role in a pool status ({"shared": 1, "spare": 1, ...}).
std::map<std::string, int> roles(const json& status) {
  std::map<std::string, int> out;
  for (const auto& d : status.at("devices")) ++out[d.at("role").get<std::string>()];
  return out;
}

std::string failure_of(const json& reply) {
  if (!reply.is_object() || detail::event_of(reply) != detail::message::kFailed) return "(no refusal: " + reply.dump() + ")";
  return detail::error_from_json(reply.value("error", json()), "").what_failed();
}

}  // namespace

TEST(PoolServerWire, MalformedRequestsAreRefusedToTheirSenderAndTheServerGoesOn) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  std::mt19937 random(7);
  std::string noise(4096, '\0');
  for (auto& c : noise) c = static_cast<char>(random());
  detail::LocalStartPlan plan;
  plan.model_path = test::mlp_model();
  plan.devices = {Device::cpu(0)};
  const std::string plan_text = detail::plan_to_json(plan).dump();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"hello", "malformed request: it is not JSON"},
      {noise, "malformed request: it is not JSON"},
      {std::string("\xff\xff\xff\xff", 4), "malformed request"},
      {"[1,2]", "not an object"},
      {"5", "not an object"},
      {R"({"op":5})", "unknown request"},
      {R"({"op":"nope"})", "unknown request 'nope'"},
      {R"({"op":"open"})", "it has no plan"},
      {R"({"op":"open","plan":5})", "malformed"},
      {R"({"op":"open","plan":)" + plan_text + R"(,"timeout_s":"x"})", "timeout_s must be"},
      {R"({"op":"open","plan":)" + plan_text + R"(,"timeout_s":-1})", "timeout_s must be"},
      {R"({"op":"open","plan":)" + plan_text + R"(,"timeout_s":1e300})", "timeout_s must be"},
      {R"({"op":"hand_over","pid":42,"device":"cpu:0","model":"m"})", "2 descriptors"},
      {R"({"op":"restore_ahead"})", "it has no devices"},
      {R"({"op":"restore_ahead","devices":[]})", "devices must be a list of devices"},
      {R"({"op":"restore_ahead","devices":[5]})", "each device must be a string"},
      {R"({"op":"restore_ahead","devices":["cpu:0"],"model":5})", "model must be a string"},
      {R"({"op":"status","brief":"yes"})", "malformed request 'status': type must be boolean, but is string"},
  };
  const auto fd = connect_raw(pool.socket());
  for (const auto& [bytes, said] : cases) {
    const std::string why = failure_of(ask_raw(fd.get(), bytes));
    EXPECT_NE(why.find(said), std::string::npos) << "sent " << bytes.substr(0, 60) << "; got: " << why;
    // The JSON library's own prefix reaches nobody (the re-audit of issue 58, U4).
    EXPECT_EQ(why.find("json.exception"), std::string::npos) << "sent " << bytes.substr(0, 60) << "; got: " << why;
  }
  // A hand-over of a process that is not a worker (this test's own, with descriptors that lead
  // nowhere) is refused, and nothing is signalled.
  const detail::UniqueFd null1(::open("/dev/null", O_RDONLY | O_CLOEXEC)), null2(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const std::string me = R"({"op":"hand_over","pid":)" + std::to_string(::getpid()) + R"(,"device":"cpu:0","model":"m"})";
  EXPECT_NE(failure_of(ask_raw(fd.get(), me, {null1.get(), null2.get()})).find("leads to no worker"), std::string::npos);
  // The same connection, a new one, and a real job are all still served.
  EXPECT_EQ(detail::event_of(ask_raw(fd.get(), R"({"op":"status"})")), "status");
  EXPECT_EQ(pool.status().at("clients"), 1);
  Fleet fleet(test::mlp_model(), pool.client());
  fleet.start();
  ASSERT_TRUE(fleet.wait(120));
  const auto inputs = random_inputs(fleet.inputs(), 3);
  EXPECT_EQ(first_output(fleet.run(Device::cpu(0), inputs)), in_process_output(test::mlp_model(), inputs));
}

// A same-user client's hand_over naming an unrelated process (a `sleep`), with a channel the client
// answers itself as that pid, was taken: `pool status` listed the sleep as a worker and `pool stop`
// SIGKILLed it (issue 50). The kernel says who answers on the channel, and /proc who the pid runs.
TEST(PoolServerWire, AForgedHandOverOfAnotherProcessIsRefusedAndItIsLeftAlone) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  const pid_t sleeper = ::fork();
  ASSERT_GE(sleeper, 0);
  if (sleeper == 0) {
    ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The forger's channel: its other end answers every status request as the sleeping pid would.
  auto [forged, served] = detail::MessageChannel::socket_pair();
  std::thread answering([fd = std::move(served), sleeper]() mutable {
    detail::MessageChannel channel(std::move(fd));
    for (;;) {
      const detail::Received r = channel.receive(detail::deadline_in(30, monotonic_ns()));
      if (r.kind != detail::Received::Kind::message) return;
      channel.send(detail::answer_to(detail::message::status, {{"pid", sleeper}, {"sessions", json::array()}, {"memory_bytes", 0},
                                                               {"max_resident_sessions", 1}}));
    }
  });
  const detail::UniqueFd crash(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const std::string request = R"({"op":"hand_over","pid":)" + std::to_string(sleeper) + R"(,"device":"cpu:0","model":"m"})";
  const auto fd = connect_raw(pool.socket());
  const std::string why = failure_of(ask_raw(fd.get(), request, {forged.get(), crash.get()}));
  EXPECT_NE(why.find("the handed-over channel leads to pid " + std::to_string(::getpid()) + ", not to worker pid " + std::to_string(sleeper)),
            std::string::npos)
      << why;
  forged = detail::UniqueFd();
  answering.join();
  const json after = pool.status();  // held: a range over pool.status().at(...) would read a destroyed temporary
  ASSERT_FALSE(after.at("devices").empty());
  for (const auto& d : after.at("devices")) EXPECT_NE(d.at("pid"), sleeper) << "the sleep is listed as a worker";
  EXPECT_EQ(::kill(sleeper, 0), 0) << "the sleep was signalled";
  ::kill(sleeper, SIGKILL);
  ::waitpid(sleeper, nullptr, 0);

  // A process that answers for itself on the channel but is no worker (this test) is refused for what it runs.
  auto [mine, answered] = detail::MessageChannel::socket_pair();
  std::thread answering_myself([fd = std::move(answered)]() mutable {
    detail::MessageChannel channel(std::move(fd));
    const detail::Received r = channel.receive(detail::deadline_in(30, monotonic_ns()));
    if (r.kind == detail::Received::Kind::message) channel.send(detail::answer_to(detail::message::status, {{"pid", ::getpid()}}));
  });
  const std::string me = R"({"op":"hand_over","pid":)" + std::to_string(::getpid()) + R"(,"device":"cpu:0","model":"m"})";
  const std::string not_a_worker = failure_of(ask_raw(fd.get(), me, {mine.get(), crash.get()}));
  EXPECT_NE(not_a_worker.find("process " + std::to_string(::getpid()) + " runs "), std::string::npos) << not_a_worker;
  EXPECT_NE(not_a_worker.find("not the worker executable"), std::string::npos) << not_a_worker;
  answering_myself.join();
}

// 300 clients that connected and said nothing filled the pool: the job running went on, but the owner's
// status and a new job got "closed the connection" and `pool stop` was refused ("serves 256 clients at
// once already"; issue 50). Asking the pool is never refused for the connections it holds, a job is
// still served, and a connection that holds nothing and says nothing is closed after a while.
TEST(PoolServerWire, SilentClientsNeverKeepTheOwnerOut) {
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  const rlimit before = files;
  files.rlim_cur = std::min<rlim_t>(files.rlim_max, 4096);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0);
  // This process holds all three descriptors of every connection (the client's end, the server's and
  // its thread's copy): as many silent clients as the limit leaves room for, up to 300 (past the 256
  // jobs a pool serves at once), with 200 descriptors to spare for the pool, its worker and the job.
  const int count = static_cast<int>(std::min<rlim_t>(300, (files.rlim_cur - 200) / 3));
  if (count < 64) GTEST_SKIP() << "the descriptor limit (ulimit -n " << files.rlim_cur << ") leaves room for too few connections";
  {
    Served pool(cpu_pool(1, /*isolate=*/false));
    std::vector<detail::UniqueFd> silent;
    for (int i = 0; i < count; ++i) silent.push_back(connect_raw(pool.socket()));
    const json status = pool.status();
    EXPECT_EQ(status.at("clients").get<int>(), count) << "the silent clients are not all counted";
    Fleet fleet(test::mlp_model(), pool.client());
    fleet.start();
    EXPECT_TRUE(fleet.wait(120)) << fleet.status()[0].error;
    // Silence is not held for ever by a connection that holds nothing: they are closed.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (pool.status().at("clients").get<int>() > 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    EXPECT_LE(pool.status().at("clients").get<int>(), 1) << "silent connections are still held";
    for (auto& fd : silent) fd = detail::UniqueFd();
    // The owner's stop, with as many silent clients as before.
    for (int i = 0; i < count; ++i) silent.push_back(connect_raw(pool.socket()));
    detail::MessageChannel owner(detail::connect_to_pool(pool.socket()), "the pool");
    EXPECT_NO_THROW(detail::ask_pool(owner, detail::message::stop, nullptr, 30));
  }
  ::setrlimit(RLIMIT_NOFILE, &before);
}

TEST(PoolServerWire, MutatedRequestsNeverStopTheServer) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  const std::vector<std::string> seeds = {R"({"op":"status"})", R"({"op":"evict"})", open_request("/nonexistent/m.onnx", 5).dump(),
                                          R"({"op":"hand_over","pid":42,"device":"cpu:0","model":"m"})"};
  std::mt19937 random(11);
  const auto fd = connect_raw(pool.socket());
  int answered = 0;
  for (int i = 0; i < 300; ++i) {
    std::string bytes = seeds[random() % seeds.size()];
    for (int edits = 1 + static_cast<int>(random() % 4); edits > 0 && !bytes.empty(); --edits) {
      const size_t at = random() % bytes.size();
      switch (random() % 3) {
        case 0: bytes[at] = static_cast<char>(random()); break;
        case 1: bytes.erase(at, 1 + random() % 8); break;
        default: bytes.insert(at, 1, "{}[]\":,0a"[random() % 9]); break;
      }
    }
    const json parsed = json::parse(bytes, nullptr, false);
    if (parsed.is_object() && detail::op_of(parsed) == "stop") continue;  // a real request to stop: not what this is about
    const json reply = ask_raw(fd.get(), bytes);
    ASSERT_TRUE(reply.is_object()) << "no answer to mutation " << i << ": " << bytes;
    ++answered;
  }
  EXPECT_GT(answered, 250);
  EXPECT_EQ(pool.status().at("devices")[0].at("state"), "ready");
}

TEST(PoolServerWire, AGarbledRequestOnAWorkersChannelIsRefusedAndTheWorkerGoesOn) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  detail::LocalStartPlan plan;
  plan.model_path = test::mlp_model();
  plan.devices = {Device::cpu(0)};
  auto opened = detail::open_on_pool_server(pool.socket(), plan, 60);
  ASSERT_EQ(opened.devices.size(), 1u);
  ASSERT_TRUE(opened.devices[0].channel) << (opened.devices[0].error ? opened.devices[0].error->what() : "");
  auto& channel = *opened.devices[0].channel;
  EXPECT_NE(failure_of(ask_raw(channel.fd(), "hello")).find("malformed request"), std::string::npos);
  EXPECT_NE(failure_of(ask_raw(channel.fd(), R"({"op":"run","session":5})")), "(no refusal");
  const auto specs = opened.devices[0].ready->inputs;
  const auto inputs = random_inputs(specs, 5);
  EXPECT_EQ(first_output(channel.run(opened.devices[0].ready->session, inputs, 60)), in_process_output(test::mlp_model(), inputs));
}

TEST(PoolServerStart, AFailedStartLeavesNoWorkerOfItsOwn) {
  Served pool(cpu_pool(1, /*isolate=*/true));
  const auto dir = test::fresh_dir("failed-starts");
  for (int i = 0; i < 3; ++i) {
    const std::string model = (dir / ("broken" + std::to_string(i) + ".onnx")).string();
    std::ofstream(model) << "not a model " << i;
    detail::LocalStartPlan plan;
    plan.model_path = model;
    plan.devices = {Device::cpu(0)};
    const auto opened = detail::open_on_pool_server(pool.socket(), plan, 60);  // as a client that skipped its own checks
    ASSERT_EQ(opened.devices.size(), 1u);
    EXPECT_TRUE(opened.devices[0].error.has_value());
  }
  ASSERT_TRUE(pool.server().pool().wait(120));
  pool.server().pool().keep_up();
  const auto kinds = roles(pool.status());
  EXPECT_EQ(kinds.count("extra"), 0u) << pool.status().dump();
  EXPECT_EQ(kinds.at("shared"), 1);
  EXPECT_EQ(kinds.count("spare"), 0u) << "the shared worker holds nothing: one blank worker is enough";
}

// A worker busy past a client's deadline (a huge warm-up) wedged the pool: the client heard that the
// worker did not answer, but the worker went on, the next start of the model hung and `pool stop` failed
// (issue 50). It is ended within 5 s of the deadline, and the next start gets a new worker.
TEST(PoolServerStart, AWorkerBusyPastTheDeadlineIsEndedAndTheNextStartIsServed) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  const int busy = pool.status().at("devices")[0].at("pid").get<int>();
  detail::LocalStartPlan plan;
  plan.model_path = test::mlp_model();
  plan.devices = {Device::cpu(0)};
  plan.warmup_runs = 100'000'000;  // minutes of warm-up
  const auto late = detail::open_on_pool_server(pool.socket(), plan, /*timeout_s=*/3);
  const auto missed = std::chrono::steady_clock::now();
  ASSERT_EQ(late.devices.size(), 1u);
  ASSERT_TRUE(late.devices[0].error) << "minutes of warm-up were ready in 3 s";
  EXPECT_NE(std::string(late.devices[0].error->what()).find("did not become ready within 3 s"), std::string::npos) << late.devices[0].error->what();
  while (::kill(busy, 0) == 0 && std::chrono::steady_clock::now() - missed < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(::kill(busy, 0), 0) << "the worker " << busy << " busy past the deadline still runs 5 s after it";
  plan.warmup_runs = 1;
  const auto next = detail::open_on_pool_server(pool.socket(), plan, 60);
  ASSERT_EQ(next.devices.size(), 1u);
  ASSERT_TRUE(next.devices[0].ready) << next.devices[0].error->what();
  EXPECT_NE(next.devices[0].ready->status.pid, busy);
}

// A start on a pool whose shared worker is stopped (SIGSTOP) waited 60 s to attach to it, whatever its
// own timeout, and then told the user to raise the timeout (the re-audit of issue 58, S2): it ends at
// its own deadline, and its error names that.
TEST(PoolServerStart, AStartOnAStoppedWorkerEndsAtItsOwnDeadline) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  const detail::LocalStartPlan plan = cpu_mlp_plan();
  {
    const auto first = detail::open_on_pool_server(pool.socket(), plan, 60);  // the model resident, as a job leaves it
    ASSERT_TRUE(first.devices.at(0).ready) << first.devices.at(0).error->what();
  }
  const int worker = pool.status().at("devices")[0].at("pid").get<int>();
  test::stop_process(worker);
  const auto late = detail::open_on_pool_server(pool.socket(), plan, /*timeout_s=*/3);
  ::kill(worker, SIGCONT);  // it was ended meanwhile, or is now free to
  ASSERT_EQ(late.devices.size(), 1u);
  ASSERT_TRUE(late.devices[0].error) << "a stopped worker started a session";
  const std::string why = late.devices[0].error->what();
  EXPECT_NE(why.find("within 3 s"), std::string::npos) << why;
  EXPECT_EQ(why.find("60 s"), std::string::npos) << why;
}

// The entry a client's start missed is made by the pool after the client may have gone (issue 50): from
// copies of the plan's files, taken while the client waits for its open, not from the client's own.
TEST(PoolServerStart, TheEntryAClientMissedIsMadeAfterItsFilesAreGone) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  const fs::path dir = test::fresh_dir("pool-fill-owns-its-inputs");
  const fs::path job = dir / "job";
  fs::create_directories(job);
  detail::LocalStartPlan plan;
  plan.model_path = test::mlp_model();
  plan.devices = {Device::cpu(0)};
  plan.cache_dir = (dir / "cache").string();
  plan.config.session.optimized_model_cache = true;
  detail::write_npz((job / "warmup.npz").string(), random_inputs(inspect_model(test::mlp_model()).input_specs, 6));
  plan.config.warmup.inputs_file = (job / "warmup.npz").string();
  fs::copy_file(test::bin("libortfleet_test_crash_ops.so"), job / "libops.so");
  plan.config.session.custom_op_libraries = {(job / "libops.so").string()};
  const test::ScopedEnv later(detail::env_name(detail::EnvVar::test_worker_start_delay), "cpu=1");  // the fill's worker starts once the client is gone
  {
    const auto opened = detail::open_on_pool_server(pool.socket(), plan, 60);
    ASSERT_EQ(opened.devices.size(), 1u);
    ASSERT_TRUE(opened.devices[0].ready) << (opened.devices[0].error ? opened.devices[0].error->what() : "");
    EXPECT_EQ(opened.devices[0].ready->status.model_cache, "miss");
  }
  fs::remove_all(job);  // the client ends, and its files go with it
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!pool.status().at("cache_fills").empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(pool.status().at("cache_fills").empty()) << "the fill did not end in 120 s";
  EXPECT_EQ(ModelCache((dir / "cache").string()).entries().size(), 1u) << "the pool made no entry";
}

// What a start asks before it uses a pool (its devices) never waits on a worker: a stopped worker
// holds up `pool status` by at most its wait, and a start's probe not at all (the brief status reads no
// worker and no memory; the next job right after the first paid 0.8 s on 4 GPUs when the probe asked the full one).
TEST(PoolServerWire, AStartsProbeAsksNoWorker) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  ASSERT_TRUE(pool.server().pool().wait(120));
  const int worker = pool.server().pool().status().front().pid;
  ASSERT_EQ(::kill(worker, SIGSTOP), 0);
  const auto fd = connect_raw(pool.socket());
  const json brief = ask_raw(fd.get(), R"({"op":"status","brief":true})");
  const detail::PoolProbe probe = detail::probe_pool(pool.socket(), 5);
  ::kill(worker, SIGCONT);
  EXPECT_EQ(detail::event_of(brief), "status") << brief.dump();
  EXPECT_FALSE(brief.contains("total")) << "the brief status asked the workers: " << brief.dump();
  ASSERT_EQ(brief.at("devices").size(), 1u);
  EXPECT_EQ(brief.at("devices")[0].at("device"), "cpu");
  EXPECT_FALSE(brief.at("devices")[0].contains("sessions"));
  EXPECT_EQ(probe.kind, detail::PoolProbe::Kind::ours) << probe.why;
  EXPECT_EQ(probe.devices, std::vector<std::string>{"cpu"});
}

TEST(PoolServerParking, ACpuPoolDoesNotParkAndSaysWhy) {
  Served pool(cpu_pool(1, /*isolate=*/false), /*park_after_s=*/0.2);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // idle past the park time, a tick or two
  const json status = pool.status();
  EXPECT_EQ(status.at("parking").at("state"), "unavailable");
  EXPECT_EQ(status.at("parking").at("why"), "a CPU worker holds no GPU memory to release");
  for (const auto& d : status.at("devices")) EXPECT_FALSE(d.at("parked").get<bool>()) << d.dump();
  Fleet fleet(test::mlp_model(), pool.client());
  fleet.start();
  EXPECT_TRUE(fleet.wait(120));
}

// A pool asked for its status every 50 ms (as GPU test ParkingPool's await_parked, or `watch ortfleet
// pool status`) never parked: each request came on a second connection after a probe one, which the
// server counted as a client, so the pool never looked idle. Asking is no use of the pool: its idle time
// runs on through the asking, while a job attached stops it.
TEST(PoolServerIdle, AskingForStatusNeverKeepsThePoolBusyButAJobDoes) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  {
    Fleet job(test::mlp_model(), pool.client());
    job.start();
    ASSERT_TRUE(job.wait(120)) << job.status()[0].error;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_EQ(pool.status().at("idle_s").get<double>(), 0.0) << "a job is attached";
  }
  // The cache entry the job missed is made in the background, which is the pool's work: waited for first
  // (under ThreadSanitizer it outlasted a fixed window).
  const auto fills_end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!pool.status().value("cache_fills", nlohmann::json::array()).empty() && std::chrono::steady_clock::now() < fills_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Then only status requests: the pool's idle time grows past 1.5 s (asked every 50 ms, up to a deadline).
  double longest = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until && longest <= 1.5) {
    longest = std::max(longest, pool.status().at("idle_s").get<double>());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(longest, 1.5) << "the pool never stayed idle for 1.5 s while it was only asked for its status";
}

// With parking off, a device kept every worker jobs had left for ever: folding in happened only before
// parking (issue 58). An idle pool folds in after fold_after_s whether its workers park or not.
TEST(PoolServerIdle, AnIdlePoolFoldsInWithoutParking) {
  Served pool(cpu_pool(1, /*isolate=*/true), /*park_after_s=*/0, /*fold_after_s=*/0.5);
  std::vector<std::unique_ptr<Fleet>> jobs;
  for (int i = 0; i < 3; ++i) {
    const auto model = test::fresh_dir("fold-without-parking-" + std::to_string(i)) / "m.onnx";
    synth::WriteOptions w;
    w.seed = static_cast<uint64_t>(40 + i);
    synth::write_mlp(model.string(), synth::MlpSpec{}, w);
    jobs.push_back(std::make_unique<Fleet>(model.string(), pool.client()));
    jobs.back()->start();
    ASSERT_TRUE(jobs.back()->wait(120)) << jobs.back()->status()[0].error;  // held while the next one starts
  }
  ASSERT_GE(pool.status().at("devices").size(), 3u) << "three new models held at once: three workers";
  jobs.clear();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (pool.status().at("devices").size() > 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const json status = pool.status();
  EXPECT_LE(status.at("devices").size(), 2u) << "an idle pool that does not park kept its extra workers: " << status.dump();
  EXPECT_EQ(status.at("parking").at("state"), "off");
}

// Another user reaching a pool (its socket made reachable by hand, as root can) is refused in words that
// name both users, as before; it regressed to "closed the connection" (issue 58): the server closed
// before reading the client's request, and the kernel told the client the close first.
TEST(PoolServerWire, AnotherUserIsRefusedInWordsNamingBothUsers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to ask as another user";
  Served pool(cpu_pool(1, /*isolate=*/false));
  ASSERT_EQ(::chmod(pool.folder().c_str(), 0711), 0);
  ASSERT_EQ(::chmod(pool.socket().c_str(), 0666), 0);
  for (const auto& ask : {std::string("status"), std::string("evict"), std::string("stop")}) {
    SCOPED_TRACE(ask);
    const int code = test::exit_code_within(60, [&] {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 3;
      const std::string said = test::error_of([&] {
        if (ask == "status") pool_status(pool.socket(), 10);
        else if (ask == "evict") pool_evict(pool.socket(), 10);
        else pool_stop(pool.socket(), 10);
      });
      const bool both = said.find("serves only its own user (uid 0); this client runs as uid 65534") != std::string::npos;
      if (!both) std::fprintf(stderr, "said: %s\n", said.c_str());
      return both ? 0 : 1;
    });
    EXPECT_EQ(code, 0);
  }
  EXPECT_EQ(pool.status().at("devices")[0].at("state"), "ready") << "another user stopped the pool";
}

// A runtime a start names is part of what makes a session the same (issue 58): a pool serves it only
// where its workers run that very library (told by content, not by path); another library is refused with
// the reason; one that does not exist fails as it does without a pool.
TEST(PoolServerStart, AStartNamingAnotherRuntimeIsNotServedAndTheSameOneIs) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  const std::string runtime = pool.server().pool().options().ort_library;
  const fs::path dir = test::fresh_dir("runtime-named");
  fs::copy_file(runtime, dir / "libonnxruntime.so.copy");
  detail::LocalStartPlan plan;
  plan.model_path = test::mlp_model();
  plan.devices = {Device::cpu(0)};
  // No cache entry made in the background: its worker would be spawned while this test sets
  // ORTFLEET_ORT_LIB below (setenv against posix_spawn's read of the environment, ThreadSanitizer).
  plan.config.session.optimized_model_cache = false;
  plan.ort_library = (dir / "libonnxruntime.so.copy").string();
  const auto same = detail::open_on_pool_server(pool.socket(), plan, 60);
  ASSERT_EQ(same.devices.size(), 1u);
  EXPECT_TRUE(same.devices[0].ready) << "a copy of the workers' own runtime was refused: " << (same.devices[0].error ? same.devices[0].error->what() : "");
  // Another runtime by its content: the same library with a byte more at its end (a loadable library).
  const std::string other_runtime = (dir / "libonnxruntime.so.other").string();
  fs::copy_file(runtime, other_runtime);
  std::ofstream(other_runtime, std::ios::app | std::ios::binary) << '\0';
  plan.ort_library = other_runtime;
  const auto other = detail::open_on_pool_server(pool.socket(), plan, 60);
  ASSERT_TRUE(other.devices[0].error);
  EXPECT_NE(std::string(other.devices[0].error->what()).find("runs ONNX Runtime " + runtime + ", and this start names another library: " + plan.ort_library),
            std::string::npos)
      << other.devices[0].error->what();
  {
    const test::ScopedEnv missing("ORTFLEET_ORT_LIB", "/nonexistent/libonnxruntime.so");
    plan.ort_library.clear();
    const std::string said = test::error_of([&] { detail::open_on_pool_server(pool.socket(), plan, 60); });
    EXPECT_NE(said.find("no ONNX Runtime library at /nonexistent/libonnxruntime.so (from ORTFLEET_ORT_LIB)"), std::string::npos) << said;
    // A start choosing by itself goes without the pool, and fails as it would have.
    const detail::PoolProbe probe = detail::probe_pool(pool.socket(), 10);
    ASSERT_EQ(probe.kind, detail::PoolProbe::Kind::ours);
    const auto why = detail::pool_runtime_mismatch(probe, "");
    ASSERT_TRUE(why.has_value());
    EXPECT_NE(why->find("no ONNX Runtime library at /nonexistent"), std::string::npos) << *why;
  }
  const detail::PoolProbe probe = detail::probe_pool(pool.socket(), 10);
  EXPECT_FALSE(detail::pool_runtime_mismatch(probe, "").has_value());
  EXPECT_FALSE(detail::pool_runtime_mismatch(probe, (dir / "libonnxruntime.so.copy").string()).has_value());
  EXPECT_TRUE(detail::pool_runtime_mismatch(probe, other_runtime).has_value());
}

// One job's run past its deadline ends the worker it runs on, and with it the sessions other jobs hold
// there (docs/serving.md): the pool's log says so, not that the out-of-memory killer struck (issue 58).
TEST(PoolServerStart, AWorkerAJobEndsForItsLateRunIsLoggedAsThat) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  auto opened = detail::open_on_pool_server(pool.socket(), cpu_mlp_plan(), 60);
  ASSERT_TRUE(opened.devices[0].ready) << opened.devices[0].error->what();
  const int worker = opened.devices[0].ready->status.pid;
  const test::CapturedLog logged;  // never a sink added to the logger the pool's server logs through (ThreadSanitizer)
  test::stop_process(worker);  // its run will not finish in time
  const auto inputs = random_inputs(opened.devices[0].ready->inputs, 1);
  EXPECT_THROW(opened.devices[0].channel->run(opened.devices[0].ready->session, inputs, 1), Error);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (pool.server().pool().status()[0].pid == worker && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string log = logged.text();
  EXPECT_NE(log.find("pid " + std::to_string(worker) + " was killed by a job (pid " + std::to_string(::getpid()) + ") whose run on it missed its deadline"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("out-of-memory"), std::string::npos) << log;
}

// A pool's worker killed during a client's run: the client heard "closed its connection while handling
// 'ring' ... Its messages above say why" (the re-audit of issue 58, U1): nothing was above (they are in
// the pool's output) and 'ring' is the protocol's word. It hears whose worker ended, during what, and
// where the pool says why.
TEST(PoolServerStart, AClientWhosePoolWorkerIsKilledHearsWhereThePoolSaysWhy) {
  Served pool(cpu_pool(1, /*isolate=*/false));
  auto opened = detail::open_on_pool_server(pool.socket(), cpu_mlp_plan(), 60);
  ASSERT_TRUE(opened.devices[0].ready) << opened.devices[0].error->what();
  const int worker = opened.devices[0].ready->status.pid;
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  const auto inputs = random_inputs(opened.devices[0].ready->inputs, 1);
  const Error e = test::error_from([&] { opened.devices[0].channel->run(opened.devices[0].ready->session, inputs, 60); });
  const std::string why = e.what();
  EXPECT_NE(why.find("the pool's worker (pid " + std::to_string(worker) + ") for cpu ended during a run: the output of the pool server (pid " +
                     std::to_string(::getpid()) + ", ortfleet serve) says why"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("'ring'"), std::string::npos) << why;
  EXPECT_EQ(why.find("messages above"), std::string::npos) << why;
  EXPECT_NE(e.hint().find("the pool starts another worker for cpu"), std::string::npos) << e.hint();
}

// The next job right after the first (issue 42), on the CPU: the first job's start leaves a pool and
// hands its own worker to it as it ends; the second finds the model resident in that very worker.
TEST(NextJob, AJobRightAfterTheFirstFindsItsModelResidentInTheWorkerTheFirstHandedOver) {
  const std::string model = test::mlp_model();  // first: the test set-up sets ORTFLEET_AUTO_POOL=0 when it runs
  const detail::PrivateDir runtime = detail::PrivateDir::temporary("ortfleet-test-runtime");
  const test::ScopedEnv xdg("XDG_RUNTIME_DIR", runtime.path().string());
  const test::ScopedEnv allowed("ORTFLEET_AUTO_POOL", std::nullopt);
  FleetOptions o;
  o.devices = {Device::cpu(0)};
  o.config.warm_pool.idle_exit_s = 120;
  int first_pid = 0;
  std::vector<Tensor> inputs;
  std::vector<float> want;
  {
    Fleet first(model, o);
    EXPECT_NE(first.strategy_reason().find("takes over"), std::string::npos) << first.strategy_reason();
    first.start();
    ASSERT_TRUE(first.wait(120));
    first_pid = first.status()[0].pid;
    EXPECT_NE(first_pid, ::getpid()) << "a job that leaves a pool starts in a worker, to hand it over";
    inputs = random_inputs(first.inputs(), 9);
    want = first_output(first.run(Device::cpu(0), inputs));
    (void)first.wait_for_cache_fill(0);  // after_ready has run: the pool listens
    const auto notes = first.left_behind();
    ASSERT_FALSE(notes.empty());
    EXPECT_NE(notes[0].find("left a warm pool"), std::string::npos) << notes[0];
  }  // the first job ends: its worker goes to the pool
  ASSERT_EQ(::kill(first_pid, 0), 0) << "the handed-over worker outlives the job that spawned it";
  {
    Fleet second(model, o);
    EXPECT_EQ(second.strategy_reason().rfind("auto chose the warm worker pool on " + default_pool_socket(), 0), 0u) << second.strategy_reason();
    second.start();
    ASSERT_TRUE(second.wait(120));
    EXPECT_TRUE(second.status()[0].resident) << "the model is resident in the worker the first job handed over";
    EXPECT_EQ(second.status()[0].pid, first_pid);
    EXPECT_EQ(first_output(second.run(Device::cpu(0), inputs)), want);
  }
  pool_stop(default_pool_socket());
  // The pool stopped the worker it took over; it is this test process's child, so reap it here.
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 500 && reaped == 0; ++i) {
    reaped = ::waitpid(first_pid, &status, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(reaped, first_pid) << "pool stop ends the worker it took over";
}

}  // namespace ortfleet
