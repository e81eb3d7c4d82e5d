// Running under Slurm, without Slurm: the allocation as Slurm exports it, and a job's steps as
// processes titled the way slurmstepd titles itself.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/private_dir.hpp"
#include "base/slurm.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/device_selection.hpp"
#include "ortfleet/fleet/pool_server.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace {

/// A process titled as a step of Slurm job `job` ("slurmstepd: [<job>.batch]"), run by `uid` (this
/// process's own by default), stopped when it goes.
class FakeStep {
 public:
  explicit FakeStep(const std::string& job, std::optional<uid_t> uid = std::nullopt) {
    const std::string title = "slurmstepd: [" + job + ".batch]";
    const std::string command = "exec -a '" + title + "' sleep 600";
    pid_ = ::fork();
    if (pid_ == 0) {
      if (uid && (::setgid(*uid) != 0 || ::setuid(*uid) != 0)) ::_exit(126);
      ::execl("/bin/bash", "bash", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Until the title shows (bash has exec'd sleep under it).
    for (int i = 0; i < 500 && test::read_all("/proc/" + std::to_string(pid_) + "/cmdline").rfind(title, 0) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~FakeStep() { end(); }
  void end() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

/// Only root can make a process that passes for one of Slurm's step daemons (root's) and one of another user's.
#define SKIP_UNLESS_ROOT()                                                                                   \
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a step daemon is root's, and any other user's title must not count"

struct SlurmEnv {
  test::ScopedEnv job{"SLURM_JOB_ID", "4242"};
  test::ScopedEnv step{"SLURM_STEP_ID", std::nullopt};
  test::ScopedEnv step_gpus{"SLURM_STEP_GPUS", std::nullopt};
  test::ScopedEnv job_gpus{"SLURM_JOB_GPUS", std::nullopt};
  test::ScopedEnv visible{"CUDA_VISIBLE_DEVICES", std::nullopt};
  test::ScopedEnv cpus{"SLURM_CPUS_ON_NODE", "1"};
};

}  // namespace

TEST(Slurm, TheAllocationIsWhatSlurmExported) {
  {
    const test::ScopedEnv none("SLURM_JOB_ID", std::nullopt);
    EXPECT_FALSE(detail::slurm_allocation());
  }
  SlurmEnv env;
  const test::ScopedEnv step("SLURM_STEP_ID", "3");
  const test::ScopedEnv gpus("SLURM_STEP_GPUS", "2,5");
  const test::ScopedEnv visible("CUDA_VISIBLE_DEVICES", "0,1");
  const auto a = detail::slurm_allocation();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->job_id, "4242");
  EXPECT_EQ(a->described(), "job 4242 step 3");
  EXPECT_EQ(a->gpus, "2,5");
  EXPECT_EQ(a->gpus_variable, "SLURM_STEP_GPUS");
  EXPECT_EQ(a->gpu_count(), 2);
  EXPECT_EQ(a->cpus_on_node, 1);
}

TEST(Slurm, AllMeansTheCpuWhenSlurmGaveNoGpuAndSaysSo) {
  SlurmEnv env;
  const DeviceSelection all = select_devices("all");
  EXPECT_EQ(all.devices, std::vector<Device>{Device::cpu()});
  EXPECT_NE(all.reason.find("the CPU (1 CPU of this node): Slurm gave job 4242 no GPU"), std::string::npos) << all.reason;
  // An explicit list is taken as written, within the CPUs Slurm gave the job (1 here), and outside Slurm
  // "all" has nothing to explain.
  EXPECT_EQ(select_devices("cpu:1").devices, std::vector<Device>{Device::cpu(1)});
  EXPECT_EQ(select_devices("cpu:1").reason, "");
  EXPECT_NE(test::error_of([] { select_devices("cpu*2"); }).find("2 CPU sessions asked for, and this process may use 1 CPU"), std::string::npos);
  const test::ScopedEnv none("SLURM_JOB_ID", std::nullopt);
  EXPECT_EQ(select_devices("all").reason, "");
}

TEST(Slurm, GpusSlurmGaveThatThisNodeCannotUseMeanTheCpu) {
  if (gpu_count() > 0) GTEST_SKIP() << "this machine has GPUs: the GPUs Slurm gave would be used";
  SlurmEnv env;
  const test::ScopedEnv gpus("SLURM_JOB_GPUS", "0,1");
  const test::ScopedEnv visible("CUDA_VISIBLE_DEVICES", "0,1");
  const DeviceSelection all = select_devices("all");
  EXPECT_EQ(all.devices, std::vector<Device>{Device::cpu()});
  EXPECT_NE(all.reason.find("CUDA_VISIBLE_DEVICES=0,1 names no GPU this node has usable (job 4242)"), std::string::npos) << all.reason;
}

TEST(Slurm, CpuSessionsShareNoMoreCpusThanTheJobWasGiven) {
  SlurmEnv env;
  EXPECT_EQ(detail::usable_cpus(), 1);
  const test::ScopedEnv none("SLURM_JOB_ID", std::nullopt);
  EXPECT_GE(detail::usable_cpus(), 1);
}

TEST(Slurm, EachJobHasAPoolSocketOfItsOwn) {
  const test::ScopedEnv runtime("XDG_RUNTIME_DIR", test::scratch_dir().string());
  {
    const test::ScopedEnv none("SLURM_JOB_ID", std::nullopt);
    EXPECT_EQ(default_pool_socket(), (test::scratch_dir() / "ortfleet" / "pool.sock").string());
  }
  SlurmEnv env;
  EXPECT_EQ(default_pool_socket(), (test::scratch_dir() / "ortfleet" / "pool-job4242.sock").string());
  // A job inherits the login node's XDG_RUNTIME_DIR, which may not exist on the compute node.
  const test::ScopedEnv gone("XDG_RUNTIME_DIR", "/run/user/no-such-folder");
  EXPECT_EQ(default_pool_socket(), "/tmp/ortfleet-" + std::to_string(::getuid()) + "/pool-job4242.sock");
}

TEST(Slurm, AJobRunsWhileOneOfItsStepsDoes) {
  SKIP_UNLESS_ROOT();
  detail::SlurmJobWatch watch("987654");
  EXPECT_FALSE(watch.alive());
  FakeStep step("987654");
  EXPECT_TRUE(watch.alive());
  EXPECT_TRUE(watch.alive());  // the process found is remembered
  EXPECT_FALSE(detail::SlurmJobWatch("98765").alive()) << "a job whose id is a prefix of another's";
  step.end();
  EXPECT_FALSE(watch.alive());
}

// Any user can title a process "slurmstepd: [778.0]": that must not keep root's job pool alive.
TEST(Slurm, AnotherUsersProcessTitledAsAStepDoesNotKeepTheJobAlive) {
  SKIP_UNLESS_ROOT();
  const uid_t nobody = 65534;
  ASSERT_FALSE(detail::SlurmJobWatch::step_daemon_owner(nobody));
  FakeStep impostor("778", nobody);
  ASSERT_EQ(detail::process_real_uid(::getpid()), ::getuid());
  detail::SlurmJobWatch watch("778");
  EXPECT_FALSE(watch.alive()) << "a process of uid 65534 titled as a step of job 778 counted";
  FakeStep step("778");
  EXPECT_TRUE(watch.alive()) << "root's step daemon did not count";
}

// ortfleet names the job's pool socket after the job id: one that is not a plain id is refused, naming
// the variable, before any path is made of it; so are GPU lists and CPU counts Slurm would not write.
TEST(Slurm, VariablesSlurmWouldNotWriteAreRefusedNamingThem) {
  SlurmEnv env;
  for (const char* id : {"../../etc/x", "12/3", "..", "123.0", "12 3", "-1", "1_", "_2"}) {
    const test::ScopedEnv job("SLURM_JOB_ID", id);
    const std::string e = test::error_of([] { detail::slurm_allocation(); });
    EXPECT_NE(e.find(std::string("SLURM_JOB_ID='") + id + "' is not a Slurm job id"), std::string::npos) << e;
    EXPECT_NE(test::error_of([] { default_pool_socket(); }).find("SLURM_JOB_ID"), std::string::npos) << id;
  }
  for (const char* id : {"778", "1234_5"}) {
    const test::ScopedEnv job("SLURM_JOB_ID", id);
    EXPECT_EQ(detail::slurm_allocation()->job_id, id);
  }
  for (const char* gpus : {"gpu0", "0,,1", "0,x", "0-", "-1"}) {
    const test::ScopedEnv step_gpus("SLURM_STEP_GPUS", gpus);
    const std::string e = test::error_of([] { select_devices("all"); });
    EXPECT_NE(e.find(std::string("SLURM_STEP_GPUS='") + gpus + "' is not a list of GPU indices"), std::string::npos) << e;
  }
  for (const char* cpus : {"0x10", "12abc", "0", "-4"}) {
    const test::ScopedEnv count("SLURM_CPUS_ON_NODE", cpus);
    EXPECT_NE(test::error_of([] { detail::slurm_allocation(); }).find(std::string("SLURM_CPUS_ON_NODE='") + cpus + "'"), std::string::npos) << cpus;
  }
}

TEST(Slurm, GpusSlurmGaveThatThisNodeLacksAreRefusedNamingTheVariable) {
  if (gpu_count() > 3) GTEST_SKIP() << "this machine has a GPU 3";
  SlurmEnv env;
  const test::ScopedEnv gpus("SLURM_STEP_GPUS", "3");
  const std::string e = test::error_of([] { select_devices("all"); });
  EXPECT_NE(e.find("SLURM_STEP_GPUS=3 (what Slurm gave job 4242"), std::string::npos) << e;
  EXPECT_NE(e.find("no GPU cuda:3"), std::string::npos) << e;
}

namespace {
ServeOptions one_cpu_pool(const std::filesystem::path& folder) {
  ServeOptions o;
  o.pool.devices = {Device::cpu()};
  o.pool.isolate_new_models = false;
  o.socket_path = (folder / "pool.sock").string();
  return o;
}
}  // namespace

// Slurm may not end a daemon in a session of its own when the job ends (proctrack/linuxproc, pgid): the
// pool a job's start leaves behind watches the job's steps and ends with the last one.
TEST(Slurm, APoolStartedInAJobEndsWithIt) {
  SKIP_UNLESS_ROOT();
  FakeStep step("55501");
  const test::ScopedEnv job("SLURM_JOB_ID", "55501");
  const auto dir = detail::PrivateDir::temporary("ortfleet-test");
  PoolServer server(one_cpu_pool(dir.path()));
  auto served = std::async(std::launch::async, [&] { server.serve(); });
  EXPECT_EQ(nlohmann::json::parse(pool_status(server.socket_path())).at("slurm_job"), "55501");
  ASSERT_EQ(served.wait_for(std::chrono::milliseconds(1500)), std::future_status::timeout) << "it ended while the job ran";
  step.end();
  ASSERT_EQ(served.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "it outlived its job";
  served.get();
}

TEST(Slurm, APoolThatCouldNotTellWhenItsJobEndsIsNotStarted) {
  const test::ScopedEnv job("SLURM_JOB_ID", "55502");
  const auto dir = detail::PrivateDir::temporary("ortfleet-test");
  const Error e = test::error_from([&] { PoolServer server(one_cpu_pool(dir.path())); });
  EXPECT_NE(e.what_failed().find("no step of Slurm job 55502 is visible on this node"), std::string::npos) << e.what_failed();
  // Told to end with no job, it starts.
  ServeOptions o = one_cpu_pool(dir.path());
  o.end_with_slurm_job = "";
  PoolServer server(o);
  auto served = std::async(std::launch::async, [&] { server.serve(); });
  EXPECT_EQ(nlohmann::json::parse(pool_status(server.socket_path())).at("slurm_job"), "");
  server.stop();
  served.get();
}

}  // namespace ortfleet
