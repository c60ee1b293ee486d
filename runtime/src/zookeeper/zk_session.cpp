#include "zookeeper/zk_session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "log.hpp"
#include "settler.hpp"
#include "zookeeper/zk_names.hpp"

namespace dlock::internal {

ZkHandle::~ZkHandle() {
  if (zh_ == nullptr) return;
  zoo_set_context(zh_, nullptr);  // events still queued find no session
  zookeeper_close(zh_);
}

std::int64_t ZkHandle::session_id() const {
  const clientid_t* id = zoo_client_id(zh_);
  return id == nullptr ? 0 : id->client_id;
}

std::string zk_error(int rc) {
  if (rc == kNoAnswer) return "no answer within the command timeout";
  return zerror(rc);
}

// ---- ZkBatch ----

struct ZkBatch::State {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<ZkAnswer> answers;
  std::size_t pending = 0;
  bool abandoned = false;
};

namespace {

// The `data` of one request: which answer of which batch it fills.
struct Slot {
  std::shared_ptr<ZkBatch::State> state;
  std::size_t index;
};

template <typename Fill>
void complete(const void* data, int rc, Fill fill) {
  std::unique_ptr<const Slot> slot(static_cast<const Slot*>(data));
  ZkBatch::State& state = *slot->state;
  std::lock_guard lock(state.mutex);
  ZkAnswer& answer = state.answers[slot->index];
  answer.rc = rc;
  if (rc == ZOK && !state.abandoned) fill(answer);
  if (--state.pending == 0) state.cv.notify_all();
}

void on_string_stat(int rc, const char* value, const struct Stat* stat, const void* data) {
  complete(data, rc, [&](ZkAnswer& answer) {
    if (value != nullptr) answer.value = value;
    if (stat != nullptr) answer.stat = *stat;
  });
}

void on_void(int rc, const void* data) {
  complete(data, rc, [](ZkAnswer&) {});
}

void on_stat(int rc, const struct Stat* stat, const void* data) {
  complete(data, rc, [&](ZkAnswer& answer) {
    if (stat != nullptr) answer.stat = *stat;
  });
}

void on_data(int rc, const char* value, int length, const struct Stat* stat, const void* data) {
  complete(data, rc, [&](ZkAnswer& answer) {
    if (value != nullptr && length > 0) answer.value.assign(value, static_cast<std::size_t>(length));
    if (stat != nullptr) answer.stat = *stat;
  });
}

void on_strings(int rc, const struct String_vector* strings, const void* data) {
  complete(data, rc, [&](ZkAnswer& answer) {
    if (strings == nullptr) return;
    answer.children.reserve(static_cast<std::size_t>(strings->count));
    for (int i = 0; i < strings->count; ++i) answer.children.emplace_back(strings->data[i]);
  });
}

// A transaction's operations and their results, alive until its answer.
struct MultiSlot : Slot {
  std::vector<ZkOp> ops;
  std::vector<zoo_op_t> raw;
  std::vector<zoo_op_result_t> results;
  std::vector<std::vector<char>> paths;  // where creates write the path they made
  std::vector<struct Stat> stats;        // where sets write the new stat
};

void on_multi(int rc, const void* data) {
  std::unique_ptr<const MultiSlot> slot(static_cast<const MultiSlot*>(data));
  ZkBatch::State& state = *slot->state;
  std::lock_guard lock(state.mutex);
  ZkAnswer& answer = state.answers[slot->index];
  answer.rc = rc;
  for (const zoo_op_result_t& result : slot->results) answer.results.push_back(result.err);
  if (--state.pending == 0) state.cv.notify_all();
}

struct RemoveLater {
  std::function<void(int)> done;
};

void on_removed_later(int rc, const void* data) {
  std::unique_ptr<RemoveLater> request(static_cast<RemoveLater*>(const_cast<void*>(data)));
  // Moved out: nothing of it is left to be destroyed on this thread.
  auto job = [done = std::move(request->done), rc] {
    try {
      done(rc);
    } catch (...) {  // done must not throw; nothing to do if it does
    }
  };
  try {
    settler::post(std::move(job));
  } catch (...) {  // out of memory: the delete's outcome goes unreported
  }
}

void on_string(int rc, const char*, const void* data) {
  complete(data, rc, [](ZkAnswer&) {});
}

// The C client's log lines, at debug level: connection attempts to a stopped member are
// routine for an ensemble, and the backend logs what matters to users itself.
void zk_log(const char* message) {
  if (message == nullptr) return;
  std::string_view text(message);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  log(LogLevel::kDebug, "zookeeper client: {}", text);
}

}  // namespace

ZkBatch::ZkBatch() : state_(std::make_shared<State>()) {}

std::size_t ZkBatch::add() {
  std::lock_guard lock(state_->mutex);
  state_->answers.emplace_back();
  ++state_->pending;
  return state_->answers.size() - 1;
}

void ZkBatch::refused(std::size_t index, int rc) {
  std::lock_guard lock(state_->mutex);
  state_->answers[index].rc = rc;
  --state_->pending;
}

template <typename Call>
std::size_t ZkBatch::send(Call call) {
  const std::size_t index = add();
  auto slot = std::make_unique<Slot>(Slot{state_, index});
  const int rc = call(static_cast<const void*>(slot.get()));
  if (rc == ZOK) {
    slot.release();  // the completion deletes it
  } else {
    refused(index, rc);
  }
  return index;
}

std::size_t ZkBatch::create(const ZkHandle& handle, const std::string& path,
                            std::string_view data, int flags) {
  return send([&](const void* slot) {
    return zoo_acreate2(handle.get(), path.c_str(), data.data(), static_cast<int>(data.size()),
                        &ZOO_OPEN_ACL_UNSAFE, flags, on_string_stat, slot);
  });
}

std::size_t ZkBatch::remove(const ZkHandle& handle, const std::string& path) {
  return send([&](const void* slot) {
    return zoo_adelete(handle.get(), path.c_str(), -1, on_void, slot);
  });
}

std::size_t ZkBatch::exists(const ZkHandle& handle, const std::string& path) {
  return send([&](const void* slot) {
    return zoo_aexists(handle.get(), path.c_str(), 0, on_stat, slot);
  });
}

std::size_t ZkBatch::get(const ZkHandle& handle, const std::string& path) {
  return send([&](const void* slot) {
    return zoo_aget(handle.get(), path.c_str(), 0, on_data, slot);
  });
}

std::size_t ZkBatch::children(const ZkHandle& handle, const std::string& path) {
  return send([&](const void* slot) {
    return zoo_aget_children(handle.get(), path.c_str(), 0, on_strings, slot);
  });
}

std::size_t ZkBatch::set(const ZkHandle& handle, const std::string& path, std::string_view data,
                         int version) {
  return send([&](const void* slot) {
    return zoo_aset(handle.get(), path.c_str(), data.data(), static_cast<int>(data.size()),
                    version, on_stat, slot);
  });
}

std::size_t ZkBatch::sync(const ZkHandle& handle, const std::string& path) {
  return send([&](const void* slot) { return zoo_async(handle.get(), path.c_str(), on_string, slot); });
}

std::size_t ZkBatch::multi(const ZkHandle& handle, std::vector<ZkOp> ops) {
  const std::size_t index = add();
  auto slot = std::make_unique<MultiSlot>();
  slot->state = state_;
  slot->index = index;
  slot->ops = std::move(ops);
  slot->raw.resize(slot->ops.size());
  slot->results.resize(slot->ops.size());
  slot->paths.resize(slot->ops.size());
  slot->stats.resize(slot->ops.size());
  for (std::size_t i = 0; i < slot->ops.size(); ++i) {
    const ZkOp& op = slot->ops[i];
    zoo_op_t& raw = slot->raw[i];
    switch (op.kind) {
      case ZkOp::Kind::kCheck:
        zoo_check_op_init(&raw, op.path.c_str(), op.version);
        break;
      case ZkOp::Kind::kCreate:
        slot->paths[i].resize(op.path.size() + 32);
        zoo_create_op_init(&raw, op.path.c_str(), op.data.data(), static_cast<int>(op.data.size()),
                           &ZOO_OPEN_ACL_UNSAFE, op.flags, slot->paths[i].data(),
                           static_cast<int>(slot->paths[i].size()));
        break;
      case ZkOp::Kind::kRemove:
        zoo_delete_op_init(&raw, op.path.c_str(), op.version);
        break;
      case ZkOp::Kind::kSet:
        zoo_set_op_init(&raw, op.path.c_str(), op.data.data(), static_cast<int>(op.data.size()),
                        op.version, &slot->stats[i]);
        break;
    }
  }
  const int rc = zoo_amulti(handle.get(), static_cast<int>(slot->raw.size()), slot->raw.data(),
                            slot->results.data(), on_multi, slot.get());
  if (rc == ZOK) {
    slot.release();
  } else {
    refused(index, rc);
  }
  return index;
}

bool ZkBatch::wait(Clock::time_point deadline) {
  std::unique_lock lock(state_->mutex);
  const bool all = state_->cv.wait_until(lock, deadline, [&] { return state_->pending == 0; });
  answers_ = state_->answers;
  if (!all) state_->abandoned = true;  // late answers are read into a state nobody looks at
  return all;
}

const ZkAnswer& ZkBatch::answer(std::size_t index) const { return answers_.at(index); }

void zk_remove_later(const ZkHandle& handle, const std::string& path,
                     std::function<void(int)> done) {
  auto request = std::make_unique<RemoveLater>(RemoveLater{std::move(done)});
  const int rc = zoo_adelete(handle.get(), path.c_str(), -1, on_removed_later, request.get());
  if (rc == ZOK) {
    request.release();
  } else {
    request->done(rc);
  }
}

// ---- ZkSignal ----

bool ZkSignal::wait_until(Clock::time_point until) {
  std::unique_lock lock(mutex_);
  cv_.wait_until(lock, until, [&] { return set_; });
  const bool was = set_;
  set_ = false;
  return was;
}

void ZkSignal::set() {
  {
    std::lock_guard lock(mutex_);
    set_ = true;
  }
  cv_.notify_all();
}

// ---- ZkSession ----

namespace {

std::string hosts_of(const BackendConfig& config) {
  std::string hosts;
  for (const Endpoint& endpoint : config.endpoints) {
    if (!hosts.empty()) hosts += ',';
    const bool v6 = endpoint.host.find(':') != std::string::npos;
    hosts += v6 ? fmt::format("[{}]:{}", endpoint.host, endpoint.port)
                : fmt::format("{}:{}", endpoint.host, endpoint.port);
  }
  return hosts;
}

struct WatchData {
  std::shared_ptr<ZkSignal> signal;
  std::vector<std::string> seen;  // a children watch's lock znodes when they were read
};

void on_watch_armed(int rc, const char*, int, const struct Stat*, const void* data) {
  std::unique_ptr<const WatchData> armed(static_cast<const WatchData*>(data));
  // No node (the one watched went first) or no answer: nothing will fire, so wake now.
  if (rc != ZOK) armed->signal->set();
}

void on_children_armed(int rc, const struct String_vector* children, const void* data) {
  std::unique_ptr<const WatchData> armed(static_cast<const WatchData*>(data));
  // A change between the caller's read and this one fires nothing: wake now for it too.
  std::vector<std::string> now;
  if (rc == ZOK && children != nullptr) {
    for (std::int32_t i = 0; i < children->count; ++i) now.emplace_back(children->data[i]);
  }
  if (rc != ZOK || zk::queue_of(std::move(now)) != armed->seen) armed->signal->set();
}

}  // namespace

ZkSession::ZkSession(const BackendConfig& config, std::function<void(Event, Millis)> on_event)
    : config_(config),
      on_event_(std::move(on_event)),
      hosts_(hosts_of(config)),
      timeout_ms_(static_cast<int>(config.session_timeout.count())) {
  // The C client's warnings reach dlock's log at debug level, and only when that is on: the
  // library formats every line into one buffer that its handles share unlocked (two clients
  // logging at once race on it), and 0 turns its logging off.
  zoo_set_debug_level(log_enabled(LogLevel::kDebug) ? ZOO_LOG_LEVEL_WARN
                                                    : static_cast<ZooLogLevel>(0));
  std::string error;
  std::lock_guard lock(mutex_);
  open_locked(error);  // a failure here is met again, and reported, by the first call
}

ZkSession::~ZkSession() {
  std::shared_ptr<ZkHandle> last;
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
    last = std::move(handle_);
  }
  if (last) zoo_set_context(last->get(), nullptr);
  last.reset();  // ends the session: the ensemble deletes its ephemeral znodes at once
  std::lock_guard lock(watches_mutex_);
  watches_.clear();
}

std::shared_ptr<ZkHandle> ZkSession::open_locked(std::string& error) {
  const std::uint64_t generation = ++generation_;
  state_ = 0;
  zhandle_t* zh = zookeeper_init2(hosts_.c_str(), &ZkSession::on_session,
                                  static_cast<int>(config_.session_timeout.count()), nullptr,
                                  this, 0, zk_log);
  if (zh == nullptr) {
    error = fmt::format("cannot start a ZooKeeper client for {}: {}", hosts_,
                        std::strerror(errno));
    handle_.reset();
    return nullptr;
  }
  handle_ = std::make_shared<ZkHandle>(zh, generation);
  return handle_;
}

void ZkSession::shut_down() {
  std::lock_guard lock(mutex_);
  closing_ = true;
  changed_.notify_all();
}

std::shared_ptr<ZkHandle> ZkSession::handle(Clock::time_point deadline, std::string& error) {
  std::shared_ptr<ZkHandle> old;  // closed outside the lock
  std::unique_lock lock(mutex_);
  for (;;) {
    if (closing_) {
      error = "the backend is shutting down";
      return nullptr;
    }
    if (!handle_ || state_ == ZOO_EXPIRED_SESSION_STATE || state_ == ZOO_AUTH_FAILED_STATE) {
      old = std::move(handle_);
      if (!open_locked(error)) return nullptr;
    }
    if (state_ == ZOO_CONNECTED_STATE) return handle_;
    if (Clock::now() >= deadline) {
      error = fmt::format("no ZooKeeper server of {} answered in time", hosts_);
      return nullptr;
    }
    changed_.wait_until(lock, deadline);
  }
}

void ZkSession::on_session(zhandle_t* zh, int type, int state, const char*, void* context) {
  auto* self = static_cast<ZkSession*>(context);
  if (type != ZOO_SESSION_EVENT || self == nullptr) return;
  Event event = Event::kSuspended;
  {
    std::lock_guard lock(self->mutex_);
    if (!self->handle_ || self->handle_->get() != zh) return;  // an older session's
    const int before = self->state_;
    self->state_ = state;
    if (state == ZOO_CONNECTED_STATE) {
      self->timeout_ms_ = zoo_recv_timeout(zh);
      event = Event::kConnected;
    } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
      event = Event::kExpired;
    } else if (before != ZOO_CONNECTED_STATE) {
      self->changed_.notify_all();
      return;  // still connecting
    }
    self->changed_.notify_all();
  }
  if (event == Event::kExpired) self->fire_all_watches();
  try {
    self->on_event_(event, self->timeout());
  } catch (...) {
  }
}

void ZkSession::fire_all_watches() {
  std::vector<std::shared_ptr<ZkSignal>> signals;
  {
    std::lock_guard lock(watches_mutex_);
    for (auto& [id, weak] : watches_) {
      if (auto signal = weak.lock()) signals.push_back(std::move(signal));
    }
    watches_.clear();
  }
  for (auto& signal : signals) signal->set();
}

void ZkSession::on_fire(zhandle_t* zh, int type, int, const char*, void* context) {
  auto* self = static_cast<ZkSession*>(const_cast<void*>(zoo_get_context(zh)));
  if (self == nullptr) return;
  const auto id = reinterpret_cast<std::uintptr_t>(context);
  std::shared_ptr<ZkSignal> signal;
  {
    std::lock_guard lock(self->watches_mutex_);
    const auto found = self->watches_.find(id);
    if (found == self->watches_.end()) return;
    signal = found->second.lock();
    // A session event leaves the watch registered in the C client; a node event ends it.
    if (type != ZOO_SESSION_EVENT || !signal) self->watches_.erase(found);
  }
  if (signal) signal->set();
}

std::uintptr_t ZkSession::register_watch(const std::shared_ptr<ZkSignal>& signal) {
  std::lock_guard lock(watches_mutex_);
  // Watches on znodes that live long outlast their waiters: drop those nobody waits on.
  if (watches_.size() >= 1024) std::erase_if(watches_, [](auto& e) { return e.second.expired(); });
  const std::uintptr_t id = next_watch_++;
  watches_.emplace(id, signal);
  return id;
}

bool ZkSession::armed(int rc, std::uintptr_t id, const std::shared_ptr<ZkSignal>& signal) {
  if (rc == ZOK) return true;
  {
    std::lock_guard lock(watches_mutex_);
    watches_.erase(id);
  }
  signal->set();
  return false;
}

void ZkSession::arm_watch(const ZkHandle& handle, const std::string& path,
                          const std::shared_ptr<ZkSignal>& signal) {
  const std::uintptr_t id = register_watch(signal);
  auto data = std::make_unique<WatchData>(WatchData{signal, {}});
  const int rc = zoo_awget(handle.get(), path.c_str(), on_fire, reinterpret_cast<void*>(id),
                           on_watch_armed, data.get());
  if (armed(rc, id, signal)) data.release();
}

void ZkSession::arm_children_watch(const ZkHandle& handle, const std::string& dir,
                                   std::vector<std::string> seen,
                                   const std::shared_ptr<ZkSignal>& signal) {
  const std::uintptr_t id = register_watch(signal);
  auto data = std::make_unique<WatchData>(WatchData{signal, std::move(seen)});
  const int rc = zoo_awget_children(handle.get(), dir.c_str(), on_fire,
                                    reinterpret_cast<void*>(id), on_children_armed, data.get());
  if (armed(rc, id, signal)) data.release();
}

}  // namespace dlock::internal
