#include "postgres/pg_rows.hpp"

#include <algorithm>

#include "admin_backend.hpp"

namespace dlock::internal {
namespace {

using Status = PgResult::Status;

std::uint64_t token_of(const PgResult& result, int row, int column) {
  return static_cast<std::uint64_t>(result.number(row, column));
}

}  // namespace

int kind_code(LockKind kind) {
  return kind == LockKind::kShared ? 1 : kind == LockKind::kPermit ? 2 : 0;
}

LockKind lock_kind(std::int64_t code) {
  return code == 1 ? LockKind::kShared : code == 2 ? LockKind::kPermit : LockKind::kExclusive;
}

std::string array_of(const std::vector<std::string>& items) {
  std::string out = "{";
  for (const std::string& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : item) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

LockInfo lock_info(const PgResult& result, int row) {
  LockInfo info;
  info.key = unhex(result.text(row, 0));
  info.owner = result.text(row, 1);
  info.host = unhex(result.text(row, 2));
  info.pid = result.number(row, 3);
  info.thread = result.number(row, 4);
  info.name = unhex(result.text(row, 5));
  info.token = token_of(result, row, 6);
  info.acquired_at_ms = result.number(row, 7);
  info.lease = Millis{result.number(row, 8)};
  info.ttl = Millis{result.number(row, 9)};
  info.min_hold = result.text(row, 10) == "t";
  return info;
}

namespace {

// Columns of kEntryColumns, after the 11 of kLockColumns.
enum EntryColumn { kHeld = 11, kOwner, kKind, kPermits, kFair, kToken, kLeft, kReleased,
                   kArrived, kLease, kHost, kPid, kThread, kName };

// The lock of rows [first, end) of one key.
LockInfo lock_at(const PgResult& result, int first, int end) {
  std::vector<LockInfo> entries;
  std::vector<Queued> kinds;
  std::vector<bool> fair;
  for (int row = first; row < end; ++row) {
    if (result.is_null(row, kOwner)) continue;  // no queue
    LockInfo entry;
    entry.key = unhex(result.text(row, 0));
    entry.owner = result.text(row, kOwner);
    entry.token = token_of(result, row, kToken);
    entry.ttl = Millis{result.number(row, kLeft)};
    entry.min_hold = result.number(row, kReleased) == 1;
    entry.acquired_at_ms = result.number(row, kArrived);
    entry.lease = Millis{result.number(row, kLease)};
    entry.host = unhex(result.text(row, kHost));
    entry.pid = result.number(row, kPid);
    entry.thread = result.number(row, kThread);
    entry.name = unhex(result.text(row, kName));
    entries.push_back(std::move(entry));
    kinds.push_back(Queued{lock_kind(result.number(row, kKind)),
                           static_cast<int>(result.number(row, kPermits))});
    fair.push_back(result.number(row, kFair) == 1);
  }
  if (result.number(first, kHeld) == 1) {  // the row's own holder, before every entry
    LockInfo info = lock_info(result, first);
    info.holders.push_back(holder_described_by(info));
    for (std::size_t i = 0; i < entries.size(); ++i) {
      info.queue.push_back(
          WaiterInfo{entries[i].owner, to_string(kinds[i].kind), fair[i], entries[i].ttl});
    }
    return info;
  }
  if (entries.empty()) return lock_info(result, first);  // expired between the two reads
  return lock_of_queue(entries, kinds, fair);
}

}  // namespace

std::vector<LockInfo> locks_of(const PgResult& result) {
  std::vector<LockInfo> out;
  for (int first = 0; first < result.rows();) {
    int end = first + 1;
    while (end < result.rows() && result.text(end, 0) == result.text(first, 0)) ++end;
    out.push_back(lock_at(result, first, end));
    first = end;
  }
  return out;
}

QueueAnswer queue_of(const PgResult& result) {
  QueueAnswer answer;
  for (int row = 0; row < result.rows(); ++row) {
    answer.held = result.number(row, 0) == 1;
    answer.held_for = Millis{result.number(row, 1)};
    answer.entries.push_back(QueueRow{
        result.text(row, 2),
        Queued{lock_kind(result.number(row, 3)), static_cast<int>(result.number(row, 4))},
        token_of(result, row, 5), result.number(row, 6), Millis{result.number(row, 7)}});
  }
  return answer;
}

RunRecord run_record(const PgResult& result, int row, int first) {
  RunRecord record;
  record.key = unhex(result.text(row, first));
  record.name = unhex(result.text(row, first + 1));
  record.label = unhex(result.text(row, first + 2));
  record.owner = result.text(row, first + 3);
  record.token = token_of(result, row, first + 4);
  record.host = unhex(result.text(row, first + 5));
  record.pid = result.number(row, first + 6);
  record.started_at_ms = result.number(row, first + 7);
  record.finished_at_ms = result.number(row, first + 8);
  record.outcome = unhex(result.text(row, first + 9));
  record.ttl = Millis{result.number(row, first + 10)};
  return record;
}

AuditEntry audit_entry(const PgResult& result, int row) {
  AuditEntry entry;
  entry.id = result.text(row, 0);
  entry.at_ms = result.number(row, 1);
  entry.user = unhex(result.text(row, 2));
  entry.host = unhex(result.text(row, 3));
  entry.pid = result.number(row, 4);
  entry.note = unhex(result.text(row, 5));
  entry.key = unhex(result.text(row, 6));
  entry.owner = result.text(row, 7);
  entry.token = token_of(result, row, 8);
  entry.owner_host = unhex(result.text(row, 9));
  entry.owner_pid = result.number(row, 10);
  entry.owner_name = unhex(result.text(row, 11));
  return entry;
}

GrantReply grant_of(const PgResult& result) {
  GrantReply reply;
  if (result.status != Status::kOk) {
    reply.error = result.error;
    reply.outcome_unknown = result.status == Status::kUnknown;
    return reply;
  }
  reply.kind = GrantReply::Kind::kBusy;  // no row: refused (kBusy or kNoteWaiter says why)
  if (result.rows() == 0) return reply;
  reply.kind = GrantReply::Kind::kAcquired;
  reply.token = token_of(result, 0, 0);
  reply.ttl = Millis{result.number(0, 1)};
  return reply;
}

BusyAnswer busy_of(const PgResult& result) {
  BusyAnswer answer;
  if (result.status != Status::kOk || result.rows() != 1) return answer;
  answer.known = true;
  answer.late = result.number(0, 0) == 1;
  answer.last_token = token_of(result, 0, 1);
  answer.ttl = Millis{result.number(0, 2)};
  answer.first_permits = static_cast<int>(result.number(0, 3));
  return answer;
}

ReleaseOutcome release_outcome_of(const PgResult& result) {
  if (result.status != Status::kOk || result.rows() > 1) return ReleaseOutcome::kUnavailable;
  if (result.rows() == 0) return ReleaseOutcome::kGone;  // kReleaseMissed tells gone or taken
  return result.number(0, 0) == 1 ? ReleaseOutcome::kKept : ReleaseOutcome::kReleased;
}

ReleaseOutcome missed_outcome_of(const PgResult& result) {
  const bool taken = result.status == Status::kOk && result.rows() == 1 && result.number(0, 0) == 3;
  return taken ? ReleaseOutcome::kTaken : ReleaseOutcome::kGone;
}

bool usable_service(std::string_view service) {
  if (service.size() > 1024) return false;
  for (std::size_t i = 0; i < service.size();) {
    const auto c = static_cast<unsigned char>(service[i]);
    const std::size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3
                             : (c >> 3) == 0x1E ? 4 : 0;
    if (c == 0 || length == 0 || i + length > service.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(service[i + k]) >> 6) != 0x2) return false;
    }
    i += length;
  }
  return true;
}

}  // namespace dlock::internal
