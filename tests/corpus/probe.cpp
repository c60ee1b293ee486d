#include "corpus/probe.hpp"

#include <dlock/dlock.hpp>

#include <chrono>

#include "redis_process.hpp"

namespace corpus {

std::string config_path;

bool held_elsewhere(const std::string& key) {
  const dlock::LeaseView lease = dlock::current_lease();
  if (!lease || lease.key().str().find(key) == std::string::npos) return false;
  dlock::test::ChildProcess probe({DLOCK_WOVEN_PROBE, config_path, key});
  return probe.read_line(std::chrono::seconds(10)) == "held";
}

}  // namespace corpus
