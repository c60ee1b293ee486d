// What every corpus guard checks in its body: the lock is really held, as another client
// (another instance, as far as the lock server can tell) sees it.
#pragma once

#include <string>

namespace corpus {

/// True when this thread holds a lease whose key is `key` and another client is refused it.
bool held_elsewhere(const std::string& key);

}  // namespace corpus
