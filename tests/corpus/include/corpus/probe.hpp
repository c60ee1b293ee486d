// What every corpus guard checks in its body: the lock is really held, as another process
// sees it (tests/woven's woven_probe, asked with the same configuration).
#pragma once

#include <string>

namespace corpus {

/// The configuration the program and the probe use; set by the test before any guard runs.
extern std::string config_path;

/// True when this thread holds a lease whose key contains `key`, and another process is
/// refused `key`.
bool held_elsewhere(const std::string& key);

}  // namespace corpus
