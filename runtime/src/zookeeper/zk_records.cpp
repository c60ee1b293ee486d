// The ZooKeeper backend's admin operations (list, inspect, forced release, its audit list)
// and scheduled runs (run records, the ensemble's clock).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "dlock/admin.hpp"
#include "log.hpp"
#include "zookeeper/zk_backend.hpp"

namespace dlock::internal {

using namespace zk;

namespace {

constexpr std::size_t kAuditKept = 1000;

// A run record's data: what RunRecord holds but its times (the znode's ctime and mtime) and
// how long it is kept.
std::string run_data(const RunRecord& record, Millis keep) {
  return fmt::format("{} {} {} {} {} {} {} {} {}", hex(record.key), hex(record.name),
                     hex(record.label), hex(record.owner), record.token, hex(record.host),
                     record.pid, keep.count(), hex(record.outcome));
}

RunRecord run_record(const ZkAnswer& answer, std::int64_t now_ms, Millis* keep = nullptr) {
  const auto fields = fields_of(answer.value);
  RunRecord record;
  record.key = text_in(fields, 0);
  record.name = text_in(fields, 1);
  record.label = text_in(fields, 2);
  record.owner = text_in(fields, 3);
  record.token = static_cast<std::uint64_t>(number_in(fields, 4));
  record.host = text_in(fields, 5);
  record.pid = number_in(fields, 6);
  const Millis kept{number_in(fields, 7)};
  record.outcome = text_in(fields, 8);
  record.started_at_ms = answer.stat.ctime;
  record.finished_at_ms = record.outcome == "running" ? 0 : answer.stat.mtime;
  record.ttl = std::max(Millis{0}, Millis{answer.stat.ctime + kept.count() - now_ms});
  if (keep) *keep = kept;
  return record;
}

}  // namespace

std::optional<LockInfo> ZookeeperBackend::holder(const ZkHandle& handle, const std::string& dir,
                                                 std::string key, Clock::time_point until,
                                                 std::vector<std::string>* paths) {
  ZkBatch batch;
  const std::size_t listed = batch.children(handle, dir);
  batch.wait(until);
  const ZkAnswer& children = batch.answer(listed);
  if (children.rc == ZNONODE) return std::nullopt;
  if (children.rc != ZOK) {
    throw unreachable(children.rc);
  }
  const std::vector<std::string> queue = queue_of(children.children);
  ZkBatch read;
  std::vector<std::size_t> asked;
  for (const std::string& name : queue) asked.push_back(read.get(handle, dir + "/" + name));
  read.wait(until);
  // The znodes still there (one released meanwhile moves the others up), in queue order.
  std::vector<std::string> live;
  std::vector<const ZkAnswer*> answers;
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const ZkAnswer& answer = read.answer(asked[i]);
    if (answer.rc == ZNONODE) continue;
    if (answer.rc != ZOK) {
      throw unreachable(answer.rc);
    }
    live.push_back(queue[i]);
    answers.push_back(&answer);
  }
  if (live.empty()) return std::nullopt;
  LockInfo info;
  info.key = std::move(key);
  const std::vector<Queued> kinds = kinds_in(live);
  info.mode = to_string(kinds.front().kind);
  info.permits = kinds.front().permits;
  for (std::size_t i = 0; i < live.size(); ++i) {
    const Standing standing = standing_of(kinds, i);
    if (standing.is == Standing::Is::kRefused) continue;  // refused, about to go
    if (standing.is == Standing::Is::kWaiter) {
      // Waiters keep their places while their sessions live: served in order, no expiry.
      info.queue.push_back(
          WaiterInfo{std::string(owner_in(live[i])), to_string(kinds[i].kind), true, Millis{-1}});
      continue;
    }
    const auto fields = fields_of(answers[i]->value);
    HolderInfo held;
    held.owner = std::string(owner_in(live[i]));
    held.pid = number_in(fields, 1);
    held.thread = number_in(fields, 2);
    held.host = text_in(fields, 3);
    held.name = text_in(fields, 4);
    held.token = static_cast<std::uint64_t>(answers[i]->stat.czxid);
    held.acquired_at_ms = answers[i]->stat.ctime;
    held.ttl = Millis{-1};  // no expiry on the ensemble: it lives with the holder's session
    if (info.holders.empty()) info.lease = Millis{number_in(fields, 0)};
    info.holders.push_back(std::move(held));
    if (paths) paths->push_back(dir + "/" + live[i]);
  }
  describe_by_first_holder(info);
  return info;
}

std::vector<LockInfo> ZookeeperBackend::list(std::string_view pattern) {
  const auto until = deadline();
  const auto handle = handle_or_throw(until);
  ZkBatch batch;
  const std::size_t listed = batch.children(*handle, locks_);
  batch.wait(until);
  const ZkAnswer& dirs = batch.answer(listed);
  if (dirs.rc == ZNONODE) return {};
  if (dirs.rc != ZOK) {
    throw unreachable(dirs.rc);
  }
  ZkBatch keys;
  std::vector<std::size_t> asked;
  for (const std::string& dir : dirs.children) asked.push_back(keys.get(*handle, locks_ + "/" + dir));
  keys.wait(until);
  std::vector<LockInfo> out;
  for (std::size_t i = 0; i < dirs.children.size(); ++i) {
    const ZkAnswer& key = keys.answer(asked[i]);
    if (key.rc == ZNONODE) continue;
    if (key.rc != ZOK) {
      throw unreachable(key.rc);
    }
    if (!glob_match(pattern, key.value)) continue;
    if (auto info = holder(*handle, locks_ + "/" + dirs.children[i], key.value, until)) {
      out.push_back(std::move(*info));
    }
  }
  return out;
}

std::optional<LockInfo> ZookeeperBackend::inspect(const Key& key) {
  const auto until = deadline();
  const auto handle = handle_or_throw(until);
  return holder(*handle, dir_of(key), key.str(), until);
}

std::optional<LockInfo> ZookeeperBackend::force_release(const Key& key, const AuditEntry& who) {
  const auto until = deadline();
  const auto handle = handle_or_throw(until);
  // Every holder's znode (several for shared holds); one already gone was released meanwhile.
  std::vector<std::string> paths;
  std::optional<LockInfo> removed = holder(*handle, dir_of(key), key.str(), until, &paths);
  if (!removed) return std::nullopt;
  ZkBatch batch;
  std::vector<std::size_t> asked;
  for (const std::string& path : paths) asked.push_back(batch.remove(*handle, path));
  batch.wait(until);
  std::size_t gone = 0;
  for (const std::size_t index : asked) {
    const int rc = batch.answer(index).rc;
    if (rc == ZNONODE) {
      ++gone;
    } else if (rc != ZOK) {
      throw unreachable(rc);
    }
  }
  if (gone == asked.size()) return std::nullopt;  // released meanwhile
  log(LogLevel::kWarn,
      "forced release: backend={} key={} owner={} token={} by {}@{} pid {} note=\"{}\"",
      config_.name, printable(removed->key), removed->owner, removed->token, who.user, who.host,
      who.pid, printable(who.note));
  // The audit entry: its id and time are the znode's name and creation time.
  const std::string entry =
      fmt::format("{} {} {} {} {} {} {} {} {}", hex(who.user), hex(who.host), who.pid,
                  hex(who.note), hex(removed->key), hex(removed->owner), removed->token,
                  hex(removed->host), removed->pid) +
      " " + hex(removed->name);
  for (int attempt = 0; attempt < 2; ++attempt) {
    ZkBatch audit;
    const std::size_t made =
        audit.create(*handle, audit_ + "/" + std::string(kAuditPrefix), entry,
                     ZOO_PERSISTENT_SEQUENTIAL);
    const std::size_t listed = audit.children(*handle, audit_);
    audit.wait(until);
    const int made_rc = audit.answer(made).rc;
    if (made_rc == ZNONODE && attempt == 0) {
      std::string error;
      if (!make_dirs(*handle, audit_, nullptr, until, error)) break;
      continue;
    }
    if (made_rc != ZOK) {
      log(LogLevel::kWarn, "backend {}: the forced release of {} was not recorded: {}",
          config_.name, printable(removed->key), zk_error(made_rc));
      break;
    }
    // The oldest entries beyond the last kAuditKept go; nobody waits for that.
    std::vector<std::string> names = audit.answer(listed).children;
    sort_by_sequence(names);
    for (std::size_t i = 0; i + kAuditKept < names.size(); ++i) {
      zk_remove_later(*handle, audit_ + "/" + names[i], [](int) {});
    }
    break;
  }
  return removed;
}

std::vector<AuditEntry> ZookeeperBackend::history(std::size_t limit) {
  const auto until = deadline();
  const auto handle = handle_or_throw(until);
  ZkBatch batch;
  const std::size_t listed = batch.children(*handle, audit_);
  batch.wait(until);
  const ZkAnswer& entries = batch.answer(listed);
  if (entries.rc == ZNONODE) return {};
  if (entries.rc != ZOK) {
    throw unreachable(entries.rc);
  }
  std::vector<std::string> names = entries.children;
  sort_by_sequence(names, true);
  if (names.size() > limit) names.resize(limit);
  ZkBatch reads;
  std::vector<std::size_t> asked;
  for (const std::string& name : names) asked.push_back(reads.get(*handle, audit_ + "/" + name));
  reads.wait(until);
  std::vector<AuditEntry> out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const ZkAnswer& answer = reads.answer(asked[i]);
    if (answer.rc == ZNONODE) continue;
    if (answer.rc != ZOK) {
      throw unreachable(answer.rc);
    }
    const auto fields = fields_of(answer.value);
    AuditEntry entry;
    entry.id = names[i];
    entry.at_ms = answer.stat.ctime;
    entry.user = text_in(fields, 0);
    entry.host = text_in(fields, 1);
    entry.pid = number_in(fields, 2);
    entry.note = text_in(fields, 3);
    entry.key = text_in(fields, 4);
    entry.owner = text_in(fields, 5);
    entry.token = static_cast<std::uint64_t>(number_in(fields, 6));
    entry.owner_host = text_in(fields, 7);
    entry.owner_pid = number_in(fields, 8);
    entry.owner_name = text_in(fields, 9);
    out.push_back(std::move(entry));
  }
  return out;
}

std::int64_t ZookeeperBackend::server_time_ms() {
  const auto until = deadline();
  const auto handle = handle_or_throw(until);
  return server_time_ms(*handle, until);
}

// ZooKeeper has no clock to read: a write to <base>/clock is stamped with the leader's.
std::int64_t ZookeeperBackend::server_time_ms(const ZkHandle& handle, Clock::time_point until) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    ZkBatch batch;
    const std::size_t index = batch.set(handle, clock_, {});
    batch.wait(until);
    const ZkAnswer& answer = batch.answer(index);
    if (answer.rc == ZOK) return answer.stat.mtime;
    std::string error = zk_error(answer.rc);
    if (answer.rc == ZNONODE && attempt == 0 && make_dirs(handle, clock_, nullptr, until, error)) {
      continue;
    }
    throw BackendUnavailable(
        fmt::format("backend {}: cannot read the ensemble's clock: {}", config_.name, error));
  }
  throw BackendUnavailable(fmt::format("backend {}: cannot read the ensemble's clock", config_.name));
}

RunClaimReply ZookeeperBackend::claim_run(const Key& key, const RunRecord& mine, Millis keep) {
  const auto until = deadline();
  const auto handle = handle_or_throw(until);
  const std::optional<Held> held = book_->find(mine.owner);
  if (!held || held->generation != handle->generation()) return {ClaimStatus::kNotHeld, {}};
  ZkBatch lock;
  const std::size_t read = lock.get(*handle, held->path);
  lock.wait(until);
  if (lock.answer(read).rc == ZNONODE) return {ClaimStatus::kNotHeld, {}};
  if (lock.answer(read).rc != ZOK) throw unreachable(lock.answer(read).rc);
  RunRecord record = mine;
  record.name = text_in(fields_of(lock.answer(read).value), 4);
  record.outcome = "running";
  const std::string path = run_of(key);
  const std::string data = run_data(record, std::max(keep, Millis{1}));
  std::optional<int> replace;  // the version of an expired record to replace
  for (int attempt = 0; attempt < 4; ++attempt) {
    // Written only while our lock znode exists, and only if no record is there.
    std::vector<ZkOp> ops{{ZkOp::Kind::kCheck, held->path, {}, -1, 0}};
    if (replace) ops.push_back({ZkOp::Kind::kRemove, path, {}, *replace, 0});
    ops.push_back({ZkOp::Kind::kCreate, path, data, -1, 0});
    ZkBatch batch;
    const std::size_t wrote = batch.multi(*handle, std::move(ops));
    const std::size_t after = batch.get(*handle, path);
    batch.wait(until);
    const ZkAnswer& answer = batch.answer(wrote);
    const ZkAnswer& now = batch.answer(after);
    if (answer.rc == ZOK) {
      // Claimed, even if the record's answer came too late: the run is ours.
      if (now.rc == ZOK) return {ClaimStatus::kClaimed, run_record(now, now.stat.ctime)};
      return {ClaimStatus::kClaimed, record};
    }
    if (answer.results.empty() || connection_trouble(answer.rc)) throw unreachable(answer.rc);
    const int check = answer.results.front();
    const int create = answer.results.back();
    if (check == ZNONODE) return {ClaimStatus::kNotHeld, {}};
    if (create == ZNONODE) {  // no runs directory yet
      std::string error;
      if (!make_dirs(*handle, runs_, nullptr, until, error)) {
        throw BackendUnavailable(fmt::format("backend {}: {}", config_.name, error));
      }
      continue;
    }
    if (now.rc == ZOK) {
      // A record is there: an earlier run's, unless kept past its time.
      Millis kept{0};
      const std::int64_t server_now = server_time_ms(*handle, until);
      RunRecord earlier = run_record(now, server_now, &kept);
      if (now.stat.ctime + kept.count() > server_now) return {ClaimStatus::kAlreadyRan, earlier};
      replace = now.stat.version;
      continue;
    }
    if (now.rc != ZNONODE) throw unreachable(now.rc);
    replace.reset();  // deleted meanwhile
  }
  throw BackendUnavailable(
      fmt::format("backend {}: the run record of {} kept changing", config_.name,
                  printable(key.str())));
}

bool ZookeeperBackend::finish_run(const Key& key, std::string_view owner,
                                  std::string_view outcome) noexcept {
  try {
    const auto until = deadline();
    std::string error;
    const auto handle = session_->handle(until, error);
    if (!handle) return false;
    const std::string path = run_of(key);
    ZkBatch batch;
    const std::size_t read = batch.get(*handle, path);
    batch.wait(until);
    const ZkAnswer& answer = batch.answer(read);
    if (answer.rc != ZOK) return false;
    Millis keep{0};
    RunRecord record = run_record(answer, 0, &keep);
    if (record.owner != owner) return false;
    record.outcome = std::string(outcome);
    ZkBatch write;
    const std::size_t set = write.set(*handle, path, run_data(record, keep), answer.stat.version);
    write.wait(until);
    return write.answer(set).rc == ZOK;
  } catch (...) {
    return false;
  }
}

std::vector<RunRecord> ZookeeperBackend::list_runs(std::string_view pattern) {
  const auto until = deadline();
  const auto handle = handle_or_throw(until);
  ZkBatch batch;
  const std::size_t listed = batch.children(*handle, runs_);
  batch.wait(until);
  const ZkAnswer& names = batch.answer(listed);
  if (names.rc == ZNONODE) return {};
  if (names.rc != ZOK) {
    throw unreachable(names.rc);
  }
  const std::int64_t server_now = server_time_ms(*handle, until);
  ZkBatch reads;
  std::vector<std::size_t> asked;
  for (const std::string& name : names.children) {
    asked.push_back(reads.get(*handle, runs_ + "/" + name));
  }
  reads.wait(until);
  std::vector<RunRecord> out;
  for (std::size_t i = 0; i < names.children.size(); ++i) {
    const ZkAnswer& answer = reads.answer(asked[i]);
    if (answer.rc == ZNONODE) continue;
    if (answer.rc != ZOK) {
      throw unreachable(answer.rc);
    }
    Millis keep{0};
    RunRecord record = run_record(answer, server_now, &keep);
    // Past its time: left out (claim_run replaces it, under the lock; deleting it here could
    // delete a record claimed meanwhile).
    if (answer.stat.ctime + keep.count() <= server_now) continue;
    if (glob_match(pattern, record.key)) out.push_back(std::move(record));
  }
  return out;
}

}  // namespace dlock::internal
