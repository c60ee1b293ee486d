// What the lock kinds promise, over the holds the workers recorded (analysis.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "analysis.hpp"

namespace checker {
namespace {

constexpr long long kFaultAfterglowNs = 1'000'000'000LL;

// Faults past what a topology promises (TOPOLOGIES.md): the server's clock stepped, a single
// server restarted without its data. Only fencing protects a holder from them.
bool beyond_promise(const std::string& fault) { return fault == "clock-step" || fault == "restart-server"; }

std::string describe(const Hold& h) {
  const char* end = !h.completed ? " (no end line)" : h.valid_at_end ? "" : " expired";
  return fmt::format("worker {} seq {} {} tokens {} [{}, {}]{}{}", h.worker, h.sequence, h.kind,
                     fmt::join(h.tokens, ","), h.begin, h.end, end,
                     h.valid_until > 0 ? fmt::format(" counted held until {}", h.valid_until) : "");
}

// The fault under way (or just over) at `at`, or "".
std::string fault_at(const std::vector<Fault>& faults, long long from, long long to, long long lease_ns) {
  std::string cause;
  for (const Fault& f : faults) {
    if (f.begin <= to && from <= f.end + lease_ns + kFaultAfterglowNs) cause = f.kind;
  }
  return cause;
}

// Whether the kinds of two holds of one key exclude each other. Two writers of the fenced
// store are left to it (analyse): an overlap there is a violation only if fencing missed it.
bool excludes(const Hold& a, const Hold& b) {
  if (a.kind == "permit" || b.kind == "permit") return false;  // counted apart
  if (a.fenced() && b.fenced()) return false;
  return a.kind == "exclusive" || b.kind == "exclusive";
}

// The holds of each key: a hold of several keys is a hold of each of them.
std::map<std::string, std::vector<const Hold*>> by_key(const std::vector<const Hold*>& holds) {
  std::map<std::string, std::vector<const Hold*>> keys;
  for (const Hold* h : holds) {
    if (h->keys.empty()) keys[""].push_back(h);
    for (const auto& key : std::set<std::string>(h->keys.begin(), h->keys.end())) keys[key].push_back(h);
  }
  for (auto& [key, list] : keys) {
    std::sort(list.begin(), list.end(), [](const Hold* a, const Hold* b) { return a->begin < b->begin; });
  }
  return keys;
}

// Exclusion and permits over the holds of one key, sorted by begin.
void check_key(const std::string& key, const std::vector<const Hold*>& holds, const std::vector<Fault>& faults,
               long permits, long long lease_ns, KindVerdict& v) {
  std::vector<const Hold*> active;
  for (const Hold* h : holds) {
    active.erase(std::remove_if(active.begin(), active.end(), [&](const Hold* a) { return a->end <= h->begin; }),
                 active.end());
    active.push_back(h);
    long permits_now = 0, permits_held = 0;
    for (const Hold* a : active) {
      if (a->kind == "permit") {
        ++permits_now;
        if (a->held_at(h->begin)) ++permits_held;
      }
      if (a == h || !excludes(*a, *h)) continue;
      ++v.overlaps_by_kind[h->kind];
      // Judged where the overlap starts: both clients counted their leases held then.
      if (!a->held_at(h->begin) || !h->held_at(h->begin)) {
        ++v.overlaps_expired;
      } else if (beyond_promise(fault_at(faults, h->begin, h->begin, lease_ns))) {
        ++v.overlaps_beyond_promise;
      } else {
        if (v.overlaps_held++ == 0) {
          v.examples.push_back(fmt::format("key '{}': {} overlaps {}", key, describe(*a), describe(*h)));
        }
      }
    }
    v.most_permits = std::max(v.most_permits, permits_now);
    if (permits == 0 || permits_now <= permits) continue;
    ++v.overlaps_by_kind["permit"];
    if (permits_held <= permits) {
      ++v.overlaps_expired;
    } else if (beyond_promise(fault_at(faults, h->begin, h->begin, lease_ns))) {
      ++v.overlaps_beyond_promise;
    } else {
      if (v.over_permits_held++ == 0) {
        v.examples.push_back(fmt::format("key '{}': {} permits of {} held when {} began", key, permits_held,
                                         permits, describe(*h)));
      }
    }
  }
}

// Fair order: if a's first try was answered before b called, and both were granted, a was
// granted first. Answers, calls and grants are the clients' own observations: a's answer is
// an upper bound on its arrival at the server, b's call a lower bound on its arrival.
void check_fair(std::vector<const Hold*> holds, const std::vector<Fault>& faults, long long lease_ns,
                KindVerdict& v) {
  holds.erase(std::remove_if(holds.begin(), holds.end(), [](const Hold* h) { return h->call == 0; }), holds.end());
  std::vector<const Hold*> by_answer = holds;
  std::sort(by_answer.begin(), by_answer.end(), [](const Hold* a, const Hold* b) { return a->answer < b->answer; });
  std::sort(holds.begin(), holds.end(), [](const Hold* a, const Hold* b) { return a->call < b->call; });
  std::vector<long long> begins;
  for (const Hold* h : holds) begins.push_back(h->begin);
  std::sort(begins.begin(), begins.end());
  std::size_t answered = 0;
  const Hold* latest = nullptr;  // the answered hold granted last
  for (const Hold* b : holds) {
    while (answered < by_answer.size() && by_answer[answered]->answer < b->call) {
      const Hold* a = by_answer[answered++];
      if (latest == nullptr || a->begin > latest->begin) latest = a;
    }
    // Holds answered before b called and granted after it: a waited when b arrived.
    const auto granted_before = std::upper_bound(begins.begin(), begins.end(), b->call) - begins.begin();
    v.fair_pairs += std::max<long>(0, static_cast<long>(answered) - static_cast<long>(granted_before));
    if (latest == nullptr || latest->begin <= b->begin) continue;
    const std::string fault = fault_at(faults, latest->call, b->begin, lease_ns);
    if (!fault.empty()) ++v.fair_inversions_by_fault[fault];
    const long seen = fault.empty() ? v.fair_inversions++ : v.fair_inversions_in_faults++;
    if (seen == 0) {
      v.examples.push_back(fmt::format("fair{}: {} (called {}, answered {}) granted after {} (called {})",
                                       fault.empty() ? "" : " during " + fault, describe(*latest), latest->call,
                                       latest->answer, describe(*b), b->call));
    }
  }
}

}  // namespace

KindVerdict analyse_kinds(const std::vector<WorkerHistory>& workers, const std::vector<Fault>& faults,
                          long permits, bool fair, long long lease_ns) {
  KindVerdict v;
  std::vector<const Hold*> holds;
  for (const auto& w : workers) {
    for (const auto& h : w.holds) holds.push_back(&h);
  }
  for (const auto& [key, list] : by_key(holds)) check_key(key, list, faults, permits, lease_ns, v);
  if (fair) check_fair(holds, faults, lease_ns, v);
  if (v.overlaps_held > 0) {
    v.violations.push_back(fmt::format(
        "{} pairs of holds of one key overlapped while both clients held their leases, in kinds that "
        "exclude each other", v.overlaps_held));
  }
  if (v.over_permits_held > 0) {
    v.violations.push_back(fmt::format("{} times more than {} permits were held at once", v.over_permits_held,
                                       permits));
  }
  if (v.fair_inversions > 0) {
    v.violations.push_back(fmt::format("{} fair sections were granted before a section that arrived earlier",
                                       v.fair_inversions));
  }
  return v;
}

}  // namespace checker
