// Guards of every lock kind (DESIGN §7) on the same few keys; kinds.cpp defines them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace woven_kinds {

/// Called by every guarded body with what the body is ("read", "write", "pool", "serve",
/// "transfer"); set by the test, which tracks who is inside and for how long.
extern void (*body)(const std::string& what);

[[dlock::guard("doc:<id>", mode=shared)]]
void read_doc(int id);

[[dlock::guard("doc:<id>")]]
void write_doc(int id);

/// A shared guard on doc:<id> whose body calls `call(id)`: through a pointer, so that the
/// generator cannot see which function it calls.
[[dlock::guard("doc:<id>", mode=shared)]]
void read_then(int id, void (*call)(int));

[[dlock::guard("pool:<id>", permits=2)]]
void use_pool(int id);

[[dlock::guard("ticket:<id>", fair=true)]]
void serve(int id);

/// The keys and tokens of `dlock::current_lease()` inside the body.
struct Seen {
  std::vector<std::string> keys;
  std::uint64_t first = 0;   // token(0)
  std::uint64_t second = 0;  // token(1)
};

[[dlock::guard("account:<from>", "account:<to>")]]
Seen transfer(int from, int to);

}  // namespace woven_kinds
