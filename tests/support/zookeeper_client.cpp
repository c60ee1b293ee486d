// ZookeeperClient: a small synchronous client on ZooKeeper's C library (zookeeper_ensemble.hpp).
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "process_support.hpp"
#include "zookeeper_ensemble.hpp"

namespace dlock::test {

using namespace detail;

namespace {

// The library's log lines (connection attempts to a stopped member, ...) would fill the test
// output; a handle given this callback writes none. The global log level is left alone, so
// that the library's other users in the test program keep theirs.
void drop_log_line(const char* /*message*/) {}

// One asynchronous call: the completion fills it and signals. The library holds a reference
// (a heap-allocated shared_ptr passed as the completion's data) until the completion runs,
// which it always does, at the latest with ZCLOSING when the handle closes: a call given up
// after its timeout leaves nothing dangling.
struct Pending {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  int rc = ZOK;
  std::optional<std::string> text;
  ZookeeperStat stat;
  std::vector<std::string> names;
};
using PendingPtr = std::shared_ptr<Pending>;

const void* hand_over(const PendingPtr& pending) { return new PendingPtr(pending); }

PendingPtr take_back(const void* data) {
  std::unique_ptr<PendingPtr> holder(static_cast<PendingPtr*>(const_cast<void*>(data)));
  return *holder;
}

ZookeeperStat to_stat(const Stat& stat) {
  return {stat.czxid,    stat.mzxid,          stat.ctime,      stat.mtime,      stat.version,
          stat.cversion, stat.ephemeralOwner, stat.dataLength, stat.numChildren};
}

void complete(const void* data, int rc, const std::function<void(Pending&)>& fill) {
  const PendingPtr pending = take_back(data);
  std::lock_guard lock(pending->mutex);
  pending->rc = rc;
  if (rc == ZOK) fill(*pending);
  pending->done = true;
  pending->finished.notify_all();
}

void on_data(int rc, const char* value, int length, const Stat* stat, const void* data) {
  complete(data, rc, [&](Pending& p) {
    p.text = value != nullptr && length > 0 ? std::string(value, static_cast<std::size_t>(length))
                                            : std::string();
    if (stat != nullptr) p.stat = to_stat(*stat);
  });
}

void on_stat(int rc, const Stat* stat, const void* data) {
  complete(data, rc, [&](Pending& p) {
    if (stat != nullptr) p.stat = to_stat(*stat);
  });
}

void on_strings(int rc, const String_vector* strings, const void* data) {
  complete(data, rc, [&](Pending& p) {
    if (strings == nullptr) return;
    for (int i = 0; i < strings->count; ++i) p.names.emplace_back(strings->data[i]);
    std::sort(p.names.begin(), p.names.end());
  });
}

void on_string(int rc, const char* value, const void* data) {
  complete(data, rc, [&](Pending& p) {
    if (value != nullptr) p.text = std::string(value);
  });
}

void on_void(int rc, const void* data) {
  complete(data, rc, [](Pending&) {});
}

std::string error_text(int rc) {
  const char* text = ::zerror(rc);
  return fmt::format("{} ({})", text != nullptr ? text : "unknown error", rc);
}

}  // namespace

struct ZookeeperClient::Impl {
  std::string hosts;
  milliseconds timeout;
  zhandle_t* handle = nullptr;
  std::mutex mutex;
  std::condition_variable changed;
  int state = 0;  // the last session state the watcher saw

  static void watcher(zhandle_t* /*zh*/, int type, int state, const char* /*path*/, void* context) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* self = static_cast<Impl*>(context);
    std::lock_guard lock(self->mutex);
    self->state = state;
    self->changed.notify_all();
  }

  [[noreturn]] void fail(const std::string& what, const std::string& path, int rc) const {
    throw ZookeeperError(
        fmt::format("ZooKeeper {} {} (via {}): {}", what, path, hosts, error_text(rc)), rc);
  }

  void connect(milliseconds session_timeout) {
    handle =
        ::zookeeper_init2(hosts.c_str(), &Impl::watcher, static_cast<int>(session_timeout.count()),
                          nullptr, this, 0, drop_log_line);
    if (handle == nullptr) {
      throw ZookeeperError(
          fmt::format("ZooKeeper: cannot make a handle for {}: {}", hosts, errno_text(errno)),
          ZSYSTEMERROR);
    }
    std::unique_lock lock(mutex);
    const bool settled = changed.wait_for(lock, timeout, [&] {
      return state == ZOO_CONNECTED_STATE || state == ZOO_EXPIRED_SESSION_STATE ||
             state == ZOO_AUTH_FAILED_STATE;
    });
    const int seen = state;
    lock.unlock();
    if (seen == ZOO_CONNECTED_STATE) return;
    close();
    throw ZookeeperError(
        settled ? fmt::format("ZooKeeper: the session with {} failed (state {})", hosts, seen)
                : fmt::format("ZooKeeper: no session with {} within {} ms", hosts, timeout.count()),
        ZOPERATIONTIMEOUT);
  }

  // Submits a call (`submit` passes its data pointer to the library) and waits for it, bounded
  // by the timeout; a read meeting a lost connection is submitted again until then.
  PendingPtr call(const std::string& what, const std::string& path, bool read,
                  const std::function<int(const void*)>& submit) {
    if (handle == nullptr) fail(what, path, ZINVALIDSTATE);
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      auto pending = std::make_shared<Pending>();
      const void* data = hand_over(pending);
      const int rc = submit(data);
      if (rc != ZOK) {
        // Refused before the completion was queued; after a marshalling error it may have
        // been, so the reference is left to it.
        if (rc == ZBADARGUMENTS || rc == ZINVALIDSTATE) take_back(data);
        fail(what, path, rc);
      }
      std::unique_lock lock(pending->mutex);
      if (!pending->finished.wait_until(lock, deadline, [&] { return pending->done; })) {
        fail(what, path, ZOPERATIONTIMEOUT);
      }
      const bool lost = pending->rc == ZCONNECTIONLOSS || pending->rc == ZOPERATIONTIMEOUT;
      if (!read || !lost || Clock::now() >= deadline) return pending;
      lock.unlock();
      std::this_thread::sleep_for(milliseconds(50));
    }
  }

  void close() noexcept {
    if (handle == nullptr) return;
    ::zookeeper_close(handle);
    handle = nullptr;
  }

  ~Impl() { close(); }
};

ZookeeperClient::ZookeeperClient(std::string connect_string, std::chrono::milliseconds timeout,
                                 std::chrono::milliseconds session_timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->hosts = std::move(connect_string);
  impl_->timeout = timeout;
  impl_->connect(session_timeout);
}
ZookeeperClient::~ZookeeperClient() = default;
ZookeeperClient::ZookeeperClient(ZookeeperClient&&) noexcept = default;
ZookeeperClient& ZookeeperClient::operator=(ZookeeperClient&&) noexcept = default;

std::vector<std::string> ZookeeperClient::children(const std::string& path) {
  const auto p = impl_->call("children of", path, true, [&](const void* data) {
    return ::zoo_aget_children(impl_->handle, path.c_str(), 0, on_strings, data);
  });
  if (p->rc != ZOK) impl_->fail("children of", path, p->rc);
  return p->names;
}

std::optional<std::string> ZookeeperClient::get(const std::string& path) {
  const auto p = impl_->call("get", path, true, [&](const void* data) {
    return ::zoo_aget(impl_->handle, path.c_str(), 0, on_data, data);
  });
  if (p->rc == ZNONODE) return std::nullopt;
  if (p->rc != ZOK) impl_->fail("get", path, p->rc);
  return p->text;
}

std::optional<ZookeeperStat> ZookeeperClient::exists(const std::string& path) {
  const auto p = impl_->call("exists", path, true, [&](const void* data) {
    return ::zoo_aexists(impl_->handle, path.c_str(), 0, on_stat, data);
  });
  if (p->rc == ZNONODE) return std::nullopt;
  if (p->rc != ZOK) impl_->fail("exists", path, p->rc);
  return p->stat;
}

std::string ZookeeperClient::create(const std::string& path, const std::string& data, int flags) {
  const auto p = impl_->call("create", path, false, [&](const void* pending) {
    return ::zoo_acreate(impl_->handle, path.c_str(), data.data(), static_cast<int>(data.size()),
                         &ZOO_OPEN_ACL_UNSAFE, flags, on_string, pending);
  });
  if (p->rc != ZOK) impl_->fail("create", path, p->rc);
  return p->text.value_or(path);
}

void ZookeeperClient::set(const std::string& path, const std::string& data) {
  const auto p = impl_->call("set", path, false, [&](const void* pending) {
    return ::zoo_aset(impl_->handle, path.c_str(), data.data(), static_cast<int>(data.size()), -1,
                      on_stat, pending);
  });
  if (p->rc != ZOK) impl_->fail("set", path, p->rc);
}

bool ZookeeperClient::remove(const std::string& path) {
  const auto p = impl_->call("remove", path, false, [&](const void* data) {
    return ::zoo_adelete(impl_->handle, path.c_str(), -1, on_void, data);
  });
  if (p->rc == ZNONODE) return false;
  if (p->rc != ZOK) impl_->fail("remove", path, p->rc);
  return true;
}

std::int64_t ZookeeperClient::session_id() const {
  if (impl_->handle == nullptr) return 0;
  const clientid_t* id = ::zoo_client_id(impl_->handle);
  return id != nullptr ? id->client_id : 0;
}

std::string ZookeeperClient::connected_to() const {
  if (impl_->handle == nullptr || ::zoo_state(impl_->handle) != ZOO_CONNECTED_STATE) return {};
  const char* server = ::zoo_get_current_server(impl_->handle);
  return server != nullptr ? std::string(server) : std::string();
}

void ZookeeperClient::close() noexcept { impl_->close(); }

}  // namespace dlock::test
