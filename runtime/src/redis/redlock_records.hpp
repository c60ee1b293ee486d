// The `redlock` topology's scheduled runs and admin operations (engine.hpp's RunStore and
// AdminBackend), over the same instances as its locks (redlock_quorum.hpp). Every instance
// is asked, one after the other; a record or a lock counts when a quorum holds it for one
// owner. See redlock_records.cpp for each call's rule.
#pragma once

#include <memory>
#include <string>

#include "engine.hpp"
#include "redis/redlock_quorum.hpp"

namespace dlock::internal {

/// Sets `engine.runs` and `engine.admin` to Redlock's, for keys of `service`.
void add_redlock_records(Engine& engine, std::shared_ptr<RedlockQuorum> quorum,
                         const std::string& service);

}  // namespace dlock::internal
