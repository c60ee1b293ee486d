// The ZooKeeper engine (`topology: zookeeper`): a lock is the lowest of the ephemeral
// sequential znodes under the key's directory, its fencing token that znode's czxid; each
// waiter watches only the znode before its own; a lock lives as long as the session of the
// process that holds it (zk_session.hpp), and this process deletes it when its lease ends
// unrenewed. It offers the lock and admin seams.
//
//   <root>/<service>/locks/<digest of key>          container; data: the key
//   <root>/<service>/locks/<digest>/l-<owner>-<seq> ephemeral sequential; data: the holder
//   <root>/<service>/audit/a-<seq>                  forced releases, the last 1000 kept
#pragma once

#include <memory>
#include <string>

#include "engine.hpp"

namespace dlock::internal {

/// Throws ConfigError when the backend names no server or its root is not a znode path.
Engine make_zookeeper_backend(const BackendConfig& config, const std::string& service,
                              std::shared_ptr<Metrics> metrics);

}  // namespace dlock::internal
