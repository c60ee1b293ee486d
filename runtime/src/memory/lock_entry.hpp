// One key of the memory backend: its holders and its queue of waiters, and the rules of
// DESIGN §7 that decide who may hold it (one exclusive holder, shared holders, or up to N
// permits; fair order; writer preference), on this process's steady clock.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"

namespace dlock::internal::memory {

struct Holder {
  std::string owner;
  std::uint64_t token = 0;
  Clock::time_point expires_at;
  std::string name;
  long thread = 0;
  std::int64_t acquired_at_ms = 0;
  Millis lease{0};
  bool released = false;  // kept until its min_hold ends
};

struct Waiter {
  std::string owner;
  LockKind kind = LockKind::kExclusive;
  bool fair = false;
  Clock::time_point until;  // its place lapses unless it tries again
};

struct Entry {
  LockKind kind = LockKind::kExclusive;  // of the holders
  int permits = 0;                       // kPermit: as the last grant asked
  std::vector<Holder> holders;           // one, unless shared or permits
  std::vector<Waiter> queue;             // in order of arrival
  Clock::time_point expires_at;          // no holder or place lasts longer
};

inline Holder* holder_of(Entry& entry, std::string_view owner) {
  for (Holder& holder : entry.holders) {
    if (holder.owner == owner) return &holder;
  }
  return nullptr;
}

// Whether `owner` may hold the key now as `kind`. Waiters ahead of it (all of them when it
// has no place yet) come first when either side is fair, and a waiting exclusive request
// comes before new shared ones (writer preference); otherwise a request may pass waiters.
inline bool grantable(const Entry& entry, std::string_view owner, LockKind kind, int permits,
                      bool fair) {
  std::size_t taken = entry.holders.size();
  for (const Waiter& waiter : entry.queue) {
    if (waiter.owner == owner) break;
    if (fair || waiter.fair) {
      if (kind == LockKind::kShared && waiter.kind == LockKind::kShared) continue;
      if (kind == LockKind::kPermit && waiter.kind == LockKind::kPermit) {
        ++taken;
        continue;
      }
      return false;
    }
    if (kind == LockKind::kShared && waiter.kind == LockKind::kExclusive) return false;
  }
  switch (kind) {
    case LockKind::kExclusive: return entry.holders.empty();
    case LockKind::kShared:
      return entry.holders.empty() || entry.kind == LockKind::kShared;
    case LockKind::kPermit: return taken < static_cast<std::size_t>(permits);
  }
  return false;
}

inline void keep_place(Entry& entry, const GrantRequest& request, Clock::time_point until) {
  for (Waiter& waiter : entry.queue) {
    if (waiter.owner == request.owner) {
      waiter.until = until;
      entry.expires_at = std::max(entry.expires_at, until);
      return;
    }
  }
  entry.queue.push_back(Waiter{std::string(request.owner), request.kind, request.fair, until});
  entry.expires_at = std::max(entry.expires_at, until);
}

// After a release, with fair waiters queued: the waiters whose turn it is, first first (the
// run that the key now admits); empty when a plain release announcement is due instead.
inline std::vector<std::string> next_turns(const Entry& entry) {
  const bool ordered = std::any_of(entry.queue.begin(), entry.queue.end(),
                                   [](const Waiter& w) { return w.fair; });
  std::vector<std::string> turns;
  if (!ordered) return turns;
  for (const Waiter& waiter : entry.queue) {
    const int permits = waiter.kind == LockKind::kPermit ? std::max(entry.permits, 1) : 0;
    if (!grantable(entry, waiter.owner, waiter.kind, permits, true)) break;
    turns.push_back(waiter.owner);
  }
  return turns;
}

// Drops the holders and places that have run out.
inline void refresh_expiry(Entry& entry);

inline void prune(Entry& entry, Clock::time_point now) {
  if (entry.expires_at > now && std::all_of(entry.holders.begin(), entry.holders.end(),
                                            [&](const Holder& h) { return h.expires_at > now; }) &&
      std::all_of(entry.queue.begin(), entry.queue.end(),
                  [&](const Waiter& w) { return w.until > now; })) {
    return;
  }
  std::erase_if(entry.holders, [&](const Holder& h) { return h.expires_at <= now; });
  std::erase_if(entry.queue, [&](const Waiter& w) { return w.until <= now; });
  refresh_expiry(entry);
}

// The entry lasts as long as its longest holder or place.
inline void refresh_expiry(Entry& entry) {
  entry.expires_at = Clock::time_point{};
  for (const Holder& h : entry.holders) entry.expires_at = std::max(entry.expires_at, h.expires_at);
  for (const Waiter& w : entry.queue) entry.expires_at = std::max(entry.expires_at, w.until);
}

}  // namespace dlock::internal::memory
