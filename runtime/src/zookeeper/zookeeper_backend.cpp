#include "zookeeper/zookeeper_backend.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "log.hpp"
#include "zookeeper/zk_backend.hpp"

namespace dlock::internal {

using namespace zk;

namespace {

constexpr std::size_t kMaxKeyBytes = 256 * 1024;
constexpr std::size_t kMaxNameBytes = 4096;

}  // namespace

GrantReply ZookeeperBackend::unavailable(std::string error, bool unknown) const {
  GrantReply reply;
  reply.kind = GrantReply::Kind::kUnavailable;
  reply.outcome_unknown = unknown;
  reply.error = fmt::format("backend {}: {}", config_.name, error);
  return reply;
}

std::shared_ptr<ZkHandle> ZookeeperBackend::handle_or_throw(Clock::time_point deadline) {
  std::string error;
  auto handle = session_->handle(deadline, error);
  if (!handle) throw BackendUnavailable(fmt::format("backend {}: {}", config_.name, error));
  return handle;
}

std::string ZookeeperBackend::holder_data(const GrantRequest& request) const {
  return fmt::format("{} {} {} {} {}", request.lease.count(), process_id(), thread_id(), host_,
                     hex(request.name.substr(0, kMaxNameBytes)));
}

bool ZookeeperBackend::make_dirs(const ZkHandle& handle, const std::string& dir, const Key* key,
                                 Clock::time_point deadline, std::string& error) {
  ZkBatch batch;
  std::vector<std::size_t> made;
  for (std::size_t slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1)) {
    made.push_back(batch.create(handle, dir.substr(0, slash), {}, 0));
  }
  // The key's directory goes by itself once its last lock znode is gone.
  made.push_back(batch.create(handle, dir, key ? std::string_view(key->str()) : std::string_view(),
                              key ? ZOO_CONTAINER : 0));
  batch.wait(deadline);
  for (const std::size_t index : made) {
    const int rc = batch.answer(index).rc;
    if (rc != ZOK && rc != ZNODEEXISTS) {
      error = fmt::format("cannot create {}: {}", dir, zk_error(rc));
      return false;
    }
  }
  return true;
}

// One acquire call: what its rounds share.
struct ZookeeperBackend::Try {
  const GrantRequest& request;
  std::shared_ptr<ZkHandle> handle;
  Clock::time_point until;
  std::string dir;
  std::string prefix;         // of the owner's znode names
  std::optional<Held> mine;   // the owner's znode, once known
  bool made_one = false;      // a znode of ours may exist: an unknown outcome is possible
  std::vector<std::string> queue;
  std::optional<GrantReply> reply;  // set when the round ends the call
};

GrantReply ZookeeperBackend::acquire(const GrantRequest& request) {
  const auto until = std::min(request.give_up_at, deadline());
  // A znode holds the key in its directory's data: ZooKeeper refuses a request over its
  // jute.maxbuffer (1 MB by default) by closing the connection, every call on it failing.
  if (request.key.str().size() > kMaxKeyBytes) {
    return unavailable(fmt::format("a key of {} bytes is longer than the {} a zookeeper backend "
                                   "stores",
                                   request.key.str().size(), kMaxKeyBytes),
                       false);
  }
  std::string error;
  auto handle = session_->handle(until, error);
  if (!handle) return unavailable(error, false);
  // Held to a timeout read before the ensemble granted one: nothing is made.
  if (request.lease > session_->timeout()) {
    return unavailable(fmt::format("the ensemble granted a session timeout of {} ms, shorter "
                                   "than this lease of {} ms; try again",
                                   session_->timeout().count(), request.lease.count()),
                       false);
  }
  Try t{request, std::move(handle), until, dir_of(request.key),
        name_prefix(request.kind, request.permits, request.owner),
        book_->find(request.owner), false,
        {}, std::nullopt};
  if (t.mine && t.mine->generation != t.handle->generation()) t.mine.reset();  // gone with it
  for (int round = 0; round < 4; ++round) {
    if (!queue_up(t)) {
      if (t.reply) return *t.reply;
      continue;
    }
    // Ours: the first of the owner's names (a create whose answer was lost made another).
    const auto own = std::find_if(t.queue.begin(), t.queue.end(), [&](const std::string& name) {
      return name.compare(0, t.prefix.size(), t.prefix) == 0 && owner_in(name) == request.owner;
    });
    if (own == t.queue.end()) {
      // Deleted (a forced release, an expired session) since it was made: queue again.
      if (t.mine) book_->take(request.owner);
      t.mine.reset();
      continue;
    }
    if (!adopt(t, *own)) {
      if (t.reply) return *t.reply;
      continue;
    }
    for (auto other = std::next(own); other != t.queue.end(); ++other) {
      if (owner_in(*other) == request.owner) {
        remove_now(*t.handle, Held{t.dir + "/" + *other, t.handle->generation(), 0});
      }
    }
    return place_taken(t, static_cast<std::size_t>(own - t.queue.begin()));
  }
  return unavailable(fmt::format("the lock znodes under {} kept changing", t.dir), t.made_one);
}

// Makes the owner's znode unless it has one, and lists the key's: one round trip, as the
// session applies them in order. False when the call ends (t.reply) or goes round again.
bool ZookeeperBackend::queue_up(Try& t) {
  ZkBatch batch;
  std::optional<std::size_t> made;
  if (!t.mine) {
    made = batch.create(*t.handle, t.dir + "/" + t.prefix, holder_data(t.request),
                        ZOO_EPHEMERAL_SEQUENTIAL);
  }
  const std::size_t listed = batch.children(*t.handle, t.dir);
  batch.wait(t.until);
  if (made) {
    const ZkAnswer& answer = batch.answer(*made);
    if (answer.rc == ZNONODE) {
      std::string error;
      if (!make_dirs(*t.handle, t.dir, &t.request.key, t.until, error)) {
        t.reply = unavailable(error, false);
      }
      return false;
    }
    // Maybe made, unseen: an owner-checked release finds it by its name.
    if (answer.rc != ZOK) {
      t.reply = unavailable(fmt::format("creating a znode under {}: {}", t.dir, zk_error(answer.rc)),
                            connection_trouble(answer.rc));
      return false;
    }
    t.mine = Held{answer.value, t.handle->generation(),
                  static_cast<std::uint64_t>(answer.stat.czxid)};
    t.made_one = true;
    book_->note(t.request.owner, *t.mine, later(Clock::now(), t.request.lease));
  }
  const ZkAnswer& children = batch.answer(listed);
  if (children.rc != ZOK) {
    t.reply = unavailable(fmt::format("listing {}: {}", t.dir, zk_error(children.rc)), t.made_one);
    return false;
  }
  t.queue = queue_of(children.children);
  return true;
}

// Takes `own` as the owner's znode when it is another than the one it made (the first of
// its names is the one that counts), reading its czxid. False when the call ends (t.reply)
// or goes round again.
bool ZookeeperBackend::adopt(Try& t, const std::string& own) {
  const std::string own_path = t.dir + "/" + own;
  if (own_path == t.mine->path) return true;
  ZkBatch stat;
  const std::size_t index = stat.exists(*t.handle, own_path);
  stat.wait(t.until);
  const int rc = stat.answer(index).rc;
  if (rc == ZNONODE) return false;  // deleted meanwhile: list again
  if (rc != ZOK) {
    t.reply = unavailable(fmt::format("reading {}: {}", own_path, zk_error(rc)), true);
    return false;
  }
  remove_now(*t.handle, *t.mine);
  t.mine = Held{own_path, t.handle->generation(),
                static_cast<std::uint64_t>(stat.answer(index).stat.czxid)};
  book_->note(t.request.owner, *t.mine, later(Clock::now(), t.request.lease));
  return true;
}

// The owner's znode is at `place` in the queue. It holds the lock when it waits for no znode
// before it (standing_of); else a waiter keeps its place and watches what it waits for (the
// znode it waits for; for a permit, the key's znodes, any of which may free one), and a try
// that does not wait, or a request for another kind than the key is held as, leaves.
GrantReply ZookeeperBackend::place_taken(Try& t, std::size_t place) {
  auto* watch = t.request.waiting ? dynamic_cast<ZkWatch*>(t.request.watch) : nullptr;
  GrantReply reply;
  const std::vector<Queued> kinds = kinds_in(t.queue);
  const Standing standing =
      standing_of(kinds, place, watch != nullptr && watch->place() == t.mine->path);
  if (standing.is == Standing::Is::kHolder) {
    if (watch) watch->settled();
    // Deleted by this process if its lease runs out unrenewed.
    book_->note(t.request.owner, *t.mine, later(Clock::now(), t.request.lease));
    reply.kind = GrantReply::Kind::kAcquired;
    reply.token = t.mine->czxid;
    return reply;
  }
  const bool refused = standing.is == Standing::Is::kRefused;
  reply.kind = refused ? GrantReply::Kind::kRefused : GrantReply::Kind::kBusy;
  if (refused) reply.error = held_as(kinds.front());
  if (!watch || reply.kind == GrantReply::Kind::kRefused) {
    // Sent now, the delete is applied before anything this process sends next (the reaper
    // tries again if it fails).
    if (watch) watch->settled();
    book_->take(t.request.owner);
    remove_now(*t.handle, *t.mine);
    return reply;
  }
  watch->queued(t.request.owner, *t.mine);
  book_->note(t.request.owner, *t.mine);  // deleted when the watch goes, not by time
  if (t.request.kind == LockKind::kPermit) {
    // Herded: every permit waiter of the key wakes at each change of its znodes.
    if (watch->armed_on() != t.dir) {
      watch->armed(t.dir);
      session_->arm_children_watch(*t.handle, t.dir, t.queue, watch->signal());
    }
    return reply;
  }
  const std::string before = t.dir + "/" + t.queue[standing.blocker];
  if (watch->armed_on() != before) {
    watch->armed(before);
    session_->arm_watch(*t.handle, before, watch->signal());
  }
  return reply;
}

ReleaseOutcome ZookeeperBackend::release(const Key& key, std::string_view owner,
                                         Millis keep_for) noexcept {
  try {
    const auto until = deadline();
    std::string error;
    const auto handle = session_->handle(until, error);
    std::optional<Held> held = book_->find(owner);
    if (!handle) {
      // Deleted once the ensemble answers again, while the session lives.
      if (held) {
        book_->take(owner);
        book_->delete_at(held->path, held->generation, Clock::now(), true);
      } else if (const auto current = session_->generation()) {
        book_->sweep(std::string(owner), dir_of(key), current);
      }
      return ReleaseOutcome::kUnavailable;
    }
    if (held && held->generation != handle->generation()) {
      book_->take(owner);
      return ReleaseOutcome::kGone;
    }
    std::optional<ReleaseOutcome> outcome;
    const std::vector<std::string> paths =
        held ? std::vector<std::string>{held->path} : find_by_name(*handle, key, owner, until, outcome);
    if (outcome) return *outcome;
    if (keep_for > Millis{0}) return keep_until(*handle, owner, paths.front(), keep_for, until);
    book_->take(owner);
    ZkBatch batch;
    for (const std::string& path : paths) batch.remove(*handle, path);
    batch.wait(until);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const int each = batch.answer(i).rc;
      if (each == ZOK || each == ZNONODE) {
        book_->forget(paths[i]);
      } else {
        book_->delete_at(paths[i], handle->generation(), Clock::now());
      }
    }
    const int rc = batch.answer(0).rc;
    return rc == ZOK ? ReleaseOutcome::kReleased
           : rc == ZNONODE ? ReleaseOutcome::kGone
                           : ReleaseOutcome::kUnavailable;
  } catch (...) {
    return ReleaseOutcome::kUnavailable;
  }
}

// Not made by a try this process saw answered: the owner's znodes are found by their names.
// Nothing expires them on the ensemble, so if they cannot be listed the reaper looks again
// while the session lives.
std::vector<std::string> ZookeeperBackend::find_by_name(const ZkHandle& handle, const Key& key,
                                                        std::string_view owner,
                                                        Clock::time_point until,
                                                        std::optional<ReleaseOutcome>& outcome) {
  const std::string dir = dir_of(key);
  ZkBatch batch;
  const std::size_t listed = batch.children(handle, dir);
  batch.wait(until);
  const ZkAnswer& answer = batch.answer(listed);
  std::vector<std::string> paths;
  if (answer.rc == ZNONODE) {
    outcome = ReleaseOutcome::kGone;
  } else if (answer.rc != ZOK) {
    book_->sweep(std::string(owner), dir, handle.generation());
    outcome = ReleaseOutcome::kUnavailable;
  } else {
    for (const std::string& name : queue_of(answer.children)) {
      if (owner_in(name) == owner) paths.push_back(dir + "/" + name);
    }
    if (paths.empty()) outcome = ReleaseOutcome::kGone;
  }
  return paths;
}

// A release before min_hold ends: the znode stays until then, deleted by this process (or
// with its session).
ReleaseOutcome ZookeeperBackend::keep_until(const ZkHandle& handle, std::string_view owner,
                                            const std::string& path, Millis keep_for,
                                            Clock::time_point until) {
  ZkBatch batch;
  const std::size_t index = batch.exists(handle, path);
  batch.wait(until);
  const int rc = batch.answer(index).rc;
  if (rc != ZOK && rc != ZNONODE) return ReleaseOutcome::kUnavailable;
  book_->take(owner);
  if (rc == ZNONODE) {
    book_->forget(path);
    return ReleaseOutcome::kGone;
  }
  book_->delete_at(path, handle.generation(), later(Clock::now(), keep_for));
  return ReleaseOutcome::kKept;
}

bool ZookeeperBackend::release_later(const Key&, std::string_view owner, Millis keep_for,
                                     std::function<void(ReleaseOutcome)> done) noexcept {
  try {
    if (keep_for > Millis{0}) return false;
    const std::optional<Held> held = book_->find(owner);
    if (!held) return false;
    std::string error;
    const auto handle = session_->handle(Clock::now(), error);
    if (!handle || handle->generation() != held->generation) return false;
    book_->take(owner);
    zk_remove_later(*handle, held->path,
                    [book = book_, held = *held, done = std::move(done)](int rc) {
                      if (rc == ZOK || rc == ZNONODE) {
                        book->forget(held.path);
                      } else {
                        // Deleted by the reaper once the ensemble answers, while the session
                        // lives.
                        book->delete_at(held.path, held.generation, Clock::now());
                      }
                      done(rc == ZOK ? ReleaseOutcome::kReleased
                           : rc == ZNONODE ? ReleaseOutcome::kGone
                                           : ReleaseOutcome::kUnavailable);
                    });
    return true;
  } catch (...) {
    return false;
  }
}

void ZookeeperBackend::remove_now(const ZkHandle& handle, const Held& held) {
  book_->forget(held.path);
  zk_remove_later(handle, held.path, [book = book_, held](int rc) {
    if (rc != ZOK && rc != ZNONODE) book->delete_at(held.path, held.generation, Clock::now());
  });
}

void ZookeeperBackend::on_event(ZkSession::Event event, Millis timeout) {
  switch (event) {
    case ZkSession::Event::kConnected:
      log(LogLevel::kDebug, "backend {}: ZooKeeper session connected (timeout {} ms)",
          config_.name, timeout.count());
      break;
    case ZkSession::Event::kSuspended:
      log(LogLevel::kWarn,
          "backend {}: ZooKeeper connection lost; held locks are at risk until the session "
          "reconnects (within {} ms) or expires",
          config_.name, timeout.count());
      break;
    case ZkSession::Event::kExpired:
      log(LogLevel::kWarn,
          "backend {}: ZooKeeper session expired: this process's locks are gone; a new "
          "session starts with the next call",
          config_.name);
      break;
  }
}

// Deletes the znodes whose time has come: leases that ran out unrenewed, min_hold ends,
// waiters that left, deletes that failed. Tries again every kZkRetryDelete while the session
// lives.
void ZookeeperBackend::reap() {
  for (;;) {
    const auto work = book_->wait_for_due();
    if (work.empty()) return;
    std::string error;
    const auto until = deadline();
    const auto handle = session_->handle(until, error);
    if (!handle) continue;
    auto due = work.deletes;
    if (!work.sweeps.empty()) {
      ZkBatch lists;
      std::vector<std::size_t> asked;
      for (const auto& [owner, dir, generation] : work.sweeps) {
        asked.push_back(lists.children(*handle, dir));
      }
      lists.wait(until);
      for (std::size_t i = 0; i < work.sweeps.size(); ++i) {
        const auto& [owner, dir, generation] = work.sweeps[i];
        const ZkAnswer& answer = lists.answer(asked[i]);
        if (generation != handle->generation() || answer.rc == ZNONODE) {
          book_->swept(owner);  // gone with its session, or nothing there
          continue;
        }
        if (answer.rc != ZOK) continue;  // again in kZkRetryDelete
        book_->swept(owner);
        for (const std::string& name : answer.children) {
          if (owner_in(name) != owner) continue;
          book_->delete_at(dir + "/" + name, generation, Clock::now());
          due.emplace_back(dir + "/" + name, generation);
        }
      }
    }
    ZkBatch batch;
    std::vector<std::pair<std::string, std::size_t>> sent;
    for (const auto& [path, generation] : due) {
      if (generation != handle->generation()) {
        book_->forget(path);  // gone with its session
        continue;
      }
      if (!book_->still_due(path)) continue;  // renewed or kept meanwhile
      sent.emplace_back(path, batch.remove(*handle, path));
    }
    batch.wait(until);
    for (const auto& [path, index] : sent) {
      const int rc = batch.answer(index).rc;
      if (rc == ZOK || rc == ZNONODE) book_->forget(path);
    }
  }
}

Engine make_zookeeper_backend(const BackendConfig& config, const std::string& service,
                              std::shared_ptr<Metrics>) {
  if (config.endpoints.empty()) {
    throw ConfigError(
        fmt::format("backends.{}: a zookeeper backend needs hosts (the ensemble's servers)",
                    config.name));
  }
  const bool absolute = config.root.size() > 1 && config.root.front() == '/' &&
                        config.root.back() != '/' &&
                        config.root.find("//") == std::string::npos;
  if (!absolute) {
    throw ConfigError(fmt::format(
        "backends.{}.root: '{}' is not an absolute znode path like /dlock", config.name,
        printable(config.root)));
  }
  return Engine::of(std::make_shared<ZookeeperBackend>(config, service));
}

}  // namespace dlock::internal
