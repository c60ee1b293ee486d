#include <gtest/gtest.h>

#include "engine.hpp"

namespace dlock::internal {
namespace {

BackendConfig memory_config() {
  BackendConfig config;
  config.name = "local";
  config.topology = Topology::kMemory;
  return config;
}

TEST(Engine, TheMemoryEngineOffersEverySeam) {
  const Engine engine = make_engine(memory_config(), "engine-test", std::make_shared<Metrics>());
  ASSERT_NE(engine.lock, nullptr);
  EXPECT_EQ(engine.lock->config().name, "local");
  EXPECT_NO_THROW((void)runs_of(engine).server_time_ms());
  EXPECT_TRUE(admin_of(engine).list("*").empty());
}

TEST(Engine, AMissingCapabilityIsAnErrorNamingTheTopologyAndTheBackend) {
  Engine engine = make_engine(memory_config(), "engine-test", std::make_shared<Metrics>());
  engine.runs.reset();
  engine.admin.reset();
  try {
    (void)runs_of(engine);
    FAIL() << "runs_of returned without run records";
  } catch (const NotSupported& e) {
    EXPECT_STREQ(e.what(), "scheduled runs are not supported by memory (backend 'local')");
  }
  try {
    (void)admin_of(engine);
    FAIL() << "admin_of returned without admin operations";
  } catch (const AdminNotSupported& e) {
    EXPECT_STREQ(e.what(), "admin operations are not supported by memory (backend 'local')");
  }
}

TEST(Engine, TopologiesAreNamedAsTheConfigurationSpellsThem) {
  EXPECT_STREQ(to_string(Topology::kSingle), "single");
  EXPECT_STREQ(to_string(Topology::kSentinel), "sentinel");
  EXPECT_STREQ(to_string(Topology::kCluster), "cluster");
  EXPECT_STREQ(to_string(Topology::kRedlock), "redlock");
  EXPECT_STREQ(to_string(Topology::kMemory), "memory");
}

}  // namespace
}  // namespace dlock::internal
