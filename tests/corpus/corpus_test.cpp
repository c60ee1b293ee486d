// Runs the corpus against a real redis-server: every guard of every source must hold its
// lock in its body (another process is refused it there).
#include <gtest/gtest.h>
#include <unistd.h>

#include <dlock/dlock.hpp>

#include <filesystem>
#include <fstream>

#include "corpus/probe.hpp"
#include "corpus/programs.hpp"
#include "redis_process.hpp"

namespace {

class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    server.start();
    config_path = (std::filesystem::temp_directory_path() /
                   ("dlock-corpus-" + std::to_string(::getpid()) + ".yaml"))
                      .string();
    std::ofstream(config_path)
        << "service: corpus\n"
        << "backends:\n  default: { topology: single, address: " << server.address() << " }\n"
        << "defaults: { lease: 5s, wait: 5s }\n";
    corpus::config_path = config_path;
    dlock::init(config_path);
  }
  void TearDown() override {
    dlock::shutdown();
    std::filesystem::remove(config_path);
    server.stop();
  }
  dlock::test::RedisServer server;
  std::string config_path;
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new Environment);

TEST(Corpus, Cxx17CodeHoldsItsLocks) { EXPECT_TRUE(corpus::run_classic(100)); }

TEST(Corpus, HeavyLibraryHeadersHoldTheirLocks) { EXPECT_TRUE(corpus::run_libraries(200)); }

#if DLOCK_CORPUS_MODERN
TEST(Corpus, Cxx20CodeHoldsItsLocks) { EXPECT_TRUE(corpus::run_modern(300)); }
#endif

}  // namespace
