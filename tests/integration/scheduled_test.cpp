// The scheduled-task example as a test (run by tools/demo/schedule_supervisor, as
// scripts/demo does): 5 instances of examples/scheduled_report, clocks up
// to ±150 ms apart, random start delays, the busiest instance killed during a run and
// restarted, 60 slots of 400 ms against a real redis-server. Every slot must run exactly
// once, and the run records in Redis must name the instance that ran it.
#include <gtest/gtest.h>

#include <string>

#include "redis_process.hpp"
#include "yaml_file.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

TEST(ScheduledReport, SixtySlotsRunExactlyOnceAcrossFiveSkewedInstancesWithARestart) {
  RedisServer server;
  server.start();
  const YamlFile config("service: scheduled-test\nbackends:\n  default:\n    topology: single\n    address: " +
                        server.address() + "\n    connect_timeout: 500ms\n    command_timeout: 500ms\n");
  const CommandResult r = run_command(
      {DLOCK_SCHEDULE_SUPERVISOR, DLOCK_SCHEDULED_REPORT, "--instances", "5", "--slots", "60",
       "--period-ms", "400", "--max-offset-ms", "150", "--max-start-delay-ms", "800", "--work-ms", "40-120"},
      90s, ChildOptions{.env = {"DLOCK_CONFIG=" + config.path()}, .merge_stderr = true});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("slots: 60, ran exactly once: 60, duplicates: 0, missed: 0"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("run records in Redis that disagree with the instances' journals: 0"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("killed i5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("restarted i5"), std::string::npos) << r.output;
  // Others took over while the busiest instance was down.
  EXPECT_NE(r.output.find(" i4 "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dlock::test
