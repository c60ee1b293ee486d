#include "analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <unordered_map>

namespace checker {
namespace {

// Tokens are decimal numbers below 2^64, written without sign or leading zeros.
std::uint64_t token_value(const std::string& token) { return std::stoull(token); }

// "a,b,c" -> {"a", "b", "c"}.
std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  return parts;
}

}  // namespace

WorkerHistory parse_history(int worker, const std::string& text, long long killed_at, long long run_end) {
  WorkerHistory history;
  std::istringstream in(text);
  std::string line;
  bool open = false;
  Hold current;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    char kind = 0;
    long sequence = 0;
    fields >> kind >> sequence;
    if (!fields) continue;  // a line cut short by a kill
    if (kind == 'B') {
      Hold hold;
      hold.worker = worker;
      hold.sequence = sequence;
      if (!(fields >> hold.token >> hold.begin)) continue;
      std::string keys, tokens;
      if (fields >> hold.kind >> keys >> tokens >> hold.call >> hold.answer) {
        hold.keys = split(keys);
        hold.tokens = split(tokens);
        long long valid_ms = 0;
        if (fields >> valid_ms && valid_ms >= 0) hold.valid_until = hold.begin + valid_ms * 1'000'000;
      } else {
        hold.kind = "exclusive";
      }
      if (open) {  // a B without its end: cannot happen unless a line was lost
        current.end = hold.begin;
        history.holds.push_back(current);
      }
      current = hold;
      open = true;
    } else if (kind == 'E') {
      std::string token, result;
      long long t_read = 0, t_sent = 0, t_done = 0, t_end = 0;
      if (!(fields >> token >> t_read >> t_sent >> t_done >> result >> t_end)) continue;
      if (!open || current.sequence != sequence) continue;
      current.end = t_end;
      current.completed = true;
      current.write = result;
      std::string validity;
      current.valid_at_end = !(fields >> validity) || validity != "expired";
      history.holds.push_back(current);
      open = false;
    } else if (kind == 'V') {
      long long at = 0, valid_ms = 0;
      // Nothing left at `at` says nothing of when it lapsed: only time left extends the hold.
      // (Time left at `at` means held from the begin to then, but for a renewal answered
      // after the client's deadline passed and before the watchdog declared the lease lost,
      // which restores it: a gap of at most a renewal's round trip, counted held here.)
      if (!(fields >> at >> valid_ms) || valid_ms <= 0) continue;
      if (open && current.sequence == sequence) {
        current.valid_until = std::max(current.valid_until, at + valid_ms * 1'000'000);
      }
    } else if (kind == 'X') {
      std::string reason;
      long long at = 0;
      if (!(fields >> reason >> at)) continue;
      if (reason == "busy") ++history.busy;
      else if (reason == "unavailable") ++history.unavailable;
      else ++history.errors;
      if (open && current.sequence == sequence) {  // the body failed half-way
        current.end = at;
        history.holds.push_back(current);
        open = false;
      }
    }
  }
  if (open) {
    current.killed = killed_at > 0;
    current.end = killed_at > 0 ? killed_at : run_end;
    history.holds.push_back(current);
  }
  return history;
}

std::vector<StoreOp> parse_store_log(const std::vector<std::string>& lines) {
  std::vector<StoreOp> ops;
  ops.reserve(lines.size());
  for (const auto& line : lines) {
    std::istringstream fields(line);
    StoreOp op;
    std::string kind;
    if (!(fields >> kind >> op.token >> op.outcome) || kind.size() != 1) {
      throw std::runtime_error("fenced store: malformed log entry '" + line + "'");
    }
    op.op = kind[0];
    ops.push_back(op);
  }
  return ops;
}

Verdict analyse(const std::vector<WorkerHistory>& workers, const std::vector<StoreOp>& store,
                const std::vector<Fault>& faults, long fenced_counter, long raw_counter,
                long store_accepted, long store_rejected, long stale_reads, long long lease_ns) {
  Verdict v;
  v.fenced_counter = fenced_counter;
  v.raw_counter = raw_counter;
  v.store_accepted = store_accepted;
  v.store_rejected = store_rejected;
  v.stale_reads = stale_reads;

  std::vector<Hold> holds;
  long history_accepted = 0, history_rejected = 0, incomplete = 0;
  for (const auto& w : workers) {
    v.busy += w.busy;
    v.unavailable += w.unavailable;
    v.errors += w.errors;
    for (const auto& h : w.holds) {
      // Only exclusive writers of the one key are judged by the store (analyse_kinds does
      // the rest); a hold that did not write counts as a section, not as a write.
      if (h.fenced()) holds.push_back(h);
      ++v.sections;
      if (h.completed) ++v.completed;
      if (h.completed && h.fenced()) ++v.writers_completed;
      else ++incomplete;
      if (h.killed) ++v.cut_by_kill;
      if (h.write == "accepted") ++history_accepted;
      if (h.write == "rejected") ++history_rejected;
    }
  }

  // The store's order: where each token first read, and where its write was accepted.
  std::unordered_map<std::string, std::size_t> first_read, accepted_write;
  std::uint64_t highest = 0;
  for (std::size_t i = 0; i < store.size(); ++i) {
    const StoreOp& op = store[i];
    const std::uint64_t t = token_value(op.token);
    if (op.op == 'R') first_read.emplace(op.token, i);
    if (op.op == 'W' && op.outcome == "accepted") {
      accepted_write.emplace(op.token, i);
      if (t < highest) ++v.stale_writes_accepted;  // replayed independently of the script
    }
    highest = std::max(highest, t);
  }

  // Overlaps: bodies that ran at the same time, found with a sweep over begin times.
  std::sort(holds.begin(), holds.end(), [](const Hold& a, const Hold& b) { return a.begin < b.begin; });
  std::vector<const Hold*> active;
  std::set<std::pair<int, long>> stale_sides;
  for (const Hold& h : holds) {
    active.erase(std::remove_if(active.begin(), active.end(), [&](const Hold* a) { return a->end <= h.begin; }),
                 active.end());
    for (const Hold* a : active) {
      ++v.overlaps;
      const std::uint64_t ta = token_value(a->token), th = token_value(h.token);
      if (ta == th) {
        ++v.duplicate_tokens;
        ++v.overlaps_uncaught;
        continue;
      }
      const Hold& stale = ta < th ? *a : h;
      const Hold& newer = ta < th ? h : *a;
      stale_sides.emplace(stale.worker, stale.sequence);
      const auto stale_write = accepted_write.find(stale.token);
      const auto newer_read = first_read.find(newer.token);
      if (stale_write == accepted_write.end()) {
        ++v.overlaps_caught;
      } else if (newer_read == first_read.end() || stale_write->second < newer_read->second) {
        ++v.overlaps_serialized;
      } else {
        ++v.overlaps_uncaught;
      }
      // Attributed to the last fault under way (or just over) when the later body began.
      std::string cause = "none";
      for (const Fault& f : faults) {
        if (f.begin <= h.begin && h.begin <= f.end + lease_ns + 1'000'000'000LL) cause = f.kind;
      }
      ++v.overlaps_by_fault[cause];
    }
    active.push_back(&h);
  }

  v.stale_holds = static_cast<long>(stale_sides.size());

  // Token order: a hold that began after another ended must carry a higher token.
  std::vector<const Hold*> by_end;
  by_end.reserve(holds.size());
  for (const Hold& h : holds) by_end.push_back(&h);
  std::sort(by_end.begin(), by_end.end(), [](const Hold* a, const Hold* b) { return a->end < b->end; });
  std::size_t ended = 0;
  std::uint64_t highest_ended = 0;
  for (const Hold& h : holds) {
    while (ended < by_end.size() && by_end[ended]->end < h.begin) {
      highest_ended = std::max(highest_ended, token_value(by_end[ended]->token));
      ++ended;
    }
    if (token_value(h.token) <= highest_ended) ++v.token_regressions;
  }

  v.counter_exact = fenced_counter == store_accepted;
  // A body cut short (killed, or failed half-way) may have had its write applied unrecorded.
  v.history_matches_store = history_accepted <= store_accepted &&
                            store_accepted <= history_accepted + incomplete &&
                            history_rejected <= store_rejected &&
                            store_rejected <= history_rejected + incomplete;

  if (!v.counter_exact) {
    v.violations.push_back(fmt::format("lost updates: fenced counter {} but {} accepted writes",
                                       fenced_counter, store_accepted));
  }
  if (v.stale_writes_accepted > 0) {
    v.violations.push_back(fmt::format("{} stale writes accepted by the store", v.stale_writes_accepted));
  }
  if (v.overlaps_uncaught > 0) {
    v.violations.push_back(fmt::format(
        "{} overlaps not caught by fencing (the stale holder's write was accepted after the newer "
        "holder's read, or both held one token)", v.overlaps_uncaught));
  }
  if (v.duplicate_tokens > 0) {
    v.violations.push_back(fmt::format("{} pairs of overlapping holds shared a token", v.duplicate_tokens));
  }
  if (v.token_regressions > 0) {
    v.violations.push_back(fmt::format("{} holds got a token not above that of a hold that ended before",
                                       v.token_regressions));
  }
  if (!v.history_matches_store) {
    v.violations.push_back(fmt::format(
        "histories and store disagree: {} accepted / {} rejected recorded, {} / {} in the store, "
        "{} sections cut short", history_accepted, history_rejected, store_accepted, store_rejected,
        incomplete));
  }
  return v;
}

}  // namespace checker
