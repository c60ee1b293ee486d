// Where the process-wide client gets its configuration, and the log sink.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sys/wait.h>
#include <unistd.h>
#include <thread>

#include "dlock/dlock.hpp"

namespace dlock {
namespace {

class ProcessClient : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("DLOCK_CONFIG");
    shutdown();
    set_log_sink({});
    set_log_level(LogLevel::kInfo);
    for (const auto& f : files_) std::filesystem::remove(f);
  }
  std::string write(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() /
                      (name + "-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(path) << text;
    files_.push_back(path);
    return path.string();
  }
  std::vector<std::filesystem::path> files_;
};

constexpr const char* kMemory = "backends:\n  default: { topology: memory }\n";

TEST_F(ProcessClient, WithoutInitOrEnvironmentUsesTheBuiltInSingleNode) {
  ::unsetenv("DLOCK_CONFIG");
  const Config& config = client().config();
  EXPECT_EQ(config.source, "<built-in>");
  ASSERT_EQ(config.backends.count("default"), 1u);
  EXPECT_EQ(config.backends.at("default").topology, Topology::kSingle);
  EXPECT_EQ(config.backends.at("default").endpoints.at(0).host, "127.0.0.1");
  EXPECT_EQ(config.backends.at("default").endpoints.at(0).port, 6379);
}

TEST_F(ProcessClient, TheEnvironmentVariableNamesTheFile) {
  ::setenv("DLOCK_CONFIG", write("env", std::string("service: from-env\n") + kMemory).c_str(), 1);
  init();
  EXPECT_EQ(client().config().service, "from-env");
  shutdown();
  EXPECT_EQ(client().config().service, "from-env") << "first use without init reads it too";
}

TEST_F(ProcessClient, AnExplicitPathWinsOverTheEnvironment) {
  ::setenv("DLOCK_CONFIG", write("env", std::string("service: from-env\n") + kMemory).c_str(), 1);
  init(write("path", std::string("service: from-path\n") + kMemory));
  EXPECT_EQ(client().config().service, "from-path");
}

TEST_F(ProcessClient, ABadFileThrowsConfigErrorAndKeepsThePreviousClient) {
  init(write("good", std::string("service: good\n") + kMemory));
  const std::string bad = write("bad", "service: x\nbackends:\n  default: { topology: singel }\n");
  try {
    init(bad);
    FAIL() << "a bad file was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(bad + ":3:"), std::string::npos) << e.what();
  }
  EXPECT_EQ(client().config().service, "good");
}

TEST_F(ProcessClient, TheLogSinkReceivesLossesAtTheirLevel) {
  init(write("log", std::string("service: log\n") + kMemory));
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;
  set_log_sink([&](LogLevel level, std::string_view line) {
    std::lock_guard lock(mutex);
    lines.emplace_back(level, std::string(line));
  });
  LockSettings s;
  s.lease = std::chrono::milliseconds(150);
  s.max_hold = std::chrono::milliseconds(150);
  Lease lease = client().acquire("logged", s, "log-test");
  ASSERT_TRUE(lease);
  std::atomic<bool> lost{false};
  lease.view().on_lost([&](const LeaseView&) { lost = true; });
  for (int i = 0; i < 100 && !lost; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(lost);
  std::lock_guard lock(mutex);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().first, LogLevel::kWarn);
  EXPECT_NE(lines.back().second.find("key=logged"), std::string::npos) << lines.back().second;
  EXPECT_NE(lines.back().second.find("name=log-test"), std::string::npos);
  EXPECT_NE(lines.back().second.find("max_hold"), std::string::npos);
}

TEST_F(ProcessClient, EventsBelowTheLevelAreNotDelivered) {
  init(write("quiet", std::string("service: quiet\n") + kMemory));
  int delivered = 0;
  set_log_sink([&](LogLevel, std::string_view) { ++delivered; });
  set_log_level(LogLevel::kError);
  LockSettings s;
  s.lease = std::chrono::milliseconds(100);
  s.max_hold = std::chrono::milliseconds(100);
  {
    Lease lease = client().acquire("quiet", s);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    EXPECT_TRUE(lease.lost());
  }
  EXPECT_EQ(delivered, 0) << "a max_hold loss is a warning, below kError";
}

}  // namespace
}  // namespace dlock

namespace dlock {
namespace {

TEST_F(ProcessClient, AForkedChildGetsAWorkingClientWithItsParentsConfiguration) {
  init(write("fork", std::string("service: forked\n") + kMemory));
  Lease parent_lease = client().acquire("parent-only", LockSettings{});
  ASSERT_TRUE(parent_lease);
  const pid_t child = ::fork();
  if (child == 0) {
    // The child's client is new: same configuration, its own watchdog, which renews.
    int code = 0;
    if (client().config().service != "forked") code = 1;
    LockSettings s;
    s.lease = std::chrono::milliseconds(150);
    Lease lease = client().acquire("child", s);
    if (!lease) code = 2;
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    if (lease.lost() || client().metrics().renewals < 2) code = 3;
    std::_Exit(code);
  }
  ASSERT_GT(child, 0);
  int status = -1;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: lost the configuration, 2: no lock, 3: no renewals";
  EXPECT_FALSE(parent_lease.lost());
}

TEST_F(ProcessClient, AHandleSurvivesInitAndShutdownOnAnotherThread) {
  init(write("handles", std::string("service: handles\n") + kMemory));
  std::atomic<bool> stop{false};
  std::atomic<int> acquired{0};
  std::thread user([&] {
    while (!stop) {
      Lease lease = client().acquire("k", LockSettings{});
      if (lease) ++acquired;
    }
  });
  for (int i = 0; i < 200; ++i) {
    init(write("handles", std::string("service: handles\n") + kMemory));
    if (i % 10 == 0) shutdown();
  }
  stop = true;
  user.join();
  EXPECT_GT(acquired.load(), 0);
}

// The loader refuses this; a Config built in code must not slip past as the 'default' user.
TEST(ClientConfig, AUserNameWithoutAPasswordIsRefused) {
  Config config = Config::builtin();
  config.backends["default"].username = "app";
  try {
    Client client(config);
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("backends.default: a user name without a password"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace dlock
