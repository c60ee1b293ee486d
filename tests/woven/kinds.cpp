#include "kinds.hpp"

#include <dlock/dlock.hpp>

namespace woven_kinds {

void (*body)(const std::string& what) = nullptr;

namespace {
void run(const std::string& what) {
  if (body != nullptr) body(what);
}
}  // namespace

void read_doc(int id) { run("read"); (void)id; }

void write_doc(int id) { run("write"); (void)id; }

void read_then(int id, void (*call)(int)) { call(id); }

void use_pool(int id) { run("pool"); (void)id; }

void serve(int id) { run("serve"); (void)id; }

Seen transfer(int from, int to) {
  run("transfer");
  (void)from;
  (void)to;
  const dlock::LeaseView lease = dlock::current_lease();
  Seen seen;
  for (const dlock::Key& key : lease.keys()) seen.keys.push_back(key.str());
  seen.first = lease.token(0);
  seen.second = lease.token(1);
  return seen;
}

}  // namespace woven_kinds
