// The metrics registry, its Prometheus rendering and the event log lines, checked against
// known activity on the memory backend; the counters of the lock kinds on a client of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;

// --- A small parser for the Prometheus text exposition format 0.0.4 -----------------------

struct Sample {
  std::string metric;
  std::map<std::string, std::string> labels;
  std::string value;  // as written: "+Inf" bounds and integers are compared as text
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> counter | histogram | ...
  std::map<std::string, std::string> help;
  std::vector<Sample> samples;
  std::vector<std::string> errors;

  [[nodiscard]] std::vector<const Sample*> find(const std::string& metric,
                                                const std::string& name) const {
    std::vector<const Sample*> out;
    for (const auto& s : samples) {
      auto it = s.labels.find("name");
      if (s.metric == metric && it != s.labels.end() && it->second == name) out.push_back(&s);
    }
    return out;
  }
  [[nodiscard]] double value(const std::string& metric, const std::string& name) const {
    auto found = find(metric, name);
    if (found.size() != 1) {
      ADD_FAILURE() << metric << "{name=" << name << "}: " << found.size() << " samples";
      return -1;
    }
    return std::stod(found[0]->value);
  }
  /// A client-wide counter: the one sample of `metric` without labels.
  [[nodiscard]] double value(const std::string& metric) const {
    std::vector<const Sample*> found;
    for (const auto& s : samples) {
      if (s.metric == metric && s.labels.empty()) found.push_back(&s);
    }
    if (found.size() != 1) {
      ADD_FAILURE() << metric << ": " << found.size() << " samples";
      return -1;
    }
    return std::stod(found[0]->value);
  }
};

Exposition parse(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = "line " + std::to_string(number) + ": " + line;
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0 || line.rfind("# HELP ", 0) == 0) {
      const auto space = line.find(' ', 7);
      if (space == std::string::npos) {
        e.errors.push_back("no text after the family: " + where);
        continue;
      }
      auto& table = line[2] == 'T' ? e.types : e.help;
      if (!table.emplace(line.substr(7, space - 7), line.substr(space + 1)).second) {
        e.errors.push_back("repeated: " + where);
      }
      continue;
    }
    if (line[0] == '#') continue;
    Sample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.metric.push_back(line[i++]);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const auto eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          e.errors.push_back("bad label: " + where);
          break;
        }
        const std::string label = line.substr(i, eq - i);
        std::string value;
        for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] != '\\') {
            value.push_back(line[i]);
            continue;
          }
          if (++i >= line.size()) break;
          switch (line[i]) {
            case '\\': value.push_back('\\'); break;
            case '"': value.push_back('"'); break;
            case 'n': value.push_back('\n'); break;
            default: e.errors.push_back("bad escape: " + where);
          }
        }
        if (i >= line.size()) {
          e.errors.push_back("unterminated label value: " + where);
          break;
        }
        ++i;  // closing quote
        s.labels[label] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // closing brace
    }
    if (i >= line.size() || line[i] != ' ') {
      e.errors.push_back("no value: " + where);
      continue;
    }
    s.value = line.substr(i + 1);
    if (s.value.empty() || s.value.find(' ') != std::string::npos) {
      e.errors.push_back("bad value: " + where);
    }
    e.samples.push_back(std::move(s));
  }
  return e;
}

std::string family_of(const Exposition& e, const std::string& metric) {
  if (e.types.count(metric)) return metric;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (metric.size() > s.size() && metric.compare(metric.size() - s.size(), s.size(), s) == 0) {
      const std::string base = metric.substr(0, metric.size() - s.size());
      if (e.types.count(base) && e.types.at(base) == "histogram") return base;
    }
  }
  return {};
}

// --- Known activity -------------------------------------------------------------------------

constexpr const char* kAwkward = "we\"ird\\na\nme";

struct Captured {
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;
  std::vector<std::pair<LogLevel, std::string>> with(const std::string& needle) {
    std::lock_guard lock(mutex);
    std::vector<std::pair<LogLevel, std::string>> out;
    for (const auto& l : lines) {
      if (l.second.find(needle) != std::string::npos) out.push_back(l);
    }
    return out;
  }
};

Config memory_config(const std::string& service) {
  Config config;
  config.service = service;
  BackendConfig backend;
  backend.name = "default";
  backend.topology = Topology::kMemory;
  config.backends["default"] = backend;
  return config;
}

class Observability : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    captured_ = new Captured;
    set_log_level(LogLevel::kDebug);
    set_log_sink([](LogLevel level, std::string_view line) {
      std::lock_guard lock(captured_->mutex);
      captured_->lines.emplace_back(level, std::string(line));
    });
    init(memory_config("observability-test"));
    run_known_activity();
    text_ = new std::string(prometheus_text(client()));
  }
  static void TearDownTestSuite() {
    shutdown();
    set_log_sink({});
    set_log_level(LogLevel::kInfo);
  }

  static LockSettings settings(std::chrono::milliseconds wait) {
    LockSettings s;
    s.lease = 10s;
    s.wait = wait;
    return s;
  }

  static void run_known_activity() {
    // Three acquire/release cycles of A.
    for (int i = 0; i < 3; ++i) {
      Lease lease = client().acquire("order:7", settings(0ms), "A");
      ASSERT_TRUE(lease);
      std::this_thread::sleep_for(2ms);
    }
    // One busy acquire of A, and one skipped guarded call, while another thread holds them.
    std::atomic<bool> holding{false}, done{false};
    std::thread holder([&] {
      Lease order = client().acquire("order:7", settings(0ms), "holder");
      Lease job = client().acquire("report:1", settings(0ms), "holder");
      holding = true;
      while (!done) std::this_thread::sleep_for(1ms);
    });
    while (!holding) std::this_thread::sleep_for(1ms);
    {
      Lease busy = client().acquire("order:7", settings(30ms), "A");
      EXPECT_EQ(busy.status(), AcquireStatus::kBusy);
    }
    {
      LockOverrides skip;
      skip.on_busy = OnBusy::kSkip;
      skip.wait = 0ms;
      static const GuardSite site{"shop::report", "", skip, true, __FILE__, __LINE__};
      Guard guard(site, Key("report:1"));
      EXPECT_FALSE(guard.entered());
    }
    done = true;
    holder.join();
    // One loss at max_hold.
    {
      LockSettings s = settings(0ms);
      s.lease = 150ms;
      s.max_hold = 150ms;
      Lease lease = client().acquire("lost:1", s, "L");
      ASSERT_TRUE(lease);
      for (int i = 0; i < 200 && !lease.lost(); ++i) std::this_thread::sleep_for(5ms);
      ASSERT_TRUE(lease.lost());
    }
    // Names that need escaping, and no name at all.
    { Lease lease = client().acquire("awkward", settings(0ms), kAwkward); }
    { Lease lease = client().acquire("nameless", settings(0ms)); }
  }

  static inline Captured* captured_ = nullptr;
  static inline std::string* text_ = nullptr;
};

TEST_F(Observability, TheTextParsesAndEverySeriesBelongsToATypedFamily) {
  const Exposition e = parse(*text_);
  EXPECT_TRUE(e.errors.empty()) << ::testing::PrintToString(e.errors) << "\n" << *text_;
  ASSERT_FALSE(e.samples.empty());
  for (const auto& s : e.samples) {
    const std::string family = family_of(e, s.metric);
    EXPECT_FALSE(family.empty()) << s.metric << " has no # TYPE";
    EXPECT_EQ(e.help.count(family), 1u) << family << " has no # HELP";
  }
  EXPECT_EQ(e.types.at("dlock_acquisitions_total"), "counter");
  EXPECT_EQ(e.types.at("dlock_hold_seconds"), "histogram");
}

TEST_F(Observability, CountersMatchTheKnownActivity) {
  const Exposition e = parse(*text_);
  EXPECT_EQ(e.value("dlock_acquisitions_total", "A"), 3);
  EXPECT_EQ(e.value("dlock_releases_total", "A"), 3);
  EXPECT_EQ(e.value("dlock_busy_total", "A"), 1);
  EXPECT_GE(e.value("dlock_contention_total", "A"), 1);
  EXPECT_EQ(e.value("dlock_lost_leases_total", "A"), 0);
  EXPECT_EQ(e.value("dlock_skipped_runs_total", "A"), 0);
  EXPECT_EQ(e.value("dlock_acquisitions_total", "holder"), 2);

  EXPECT_EQ(e.value("dlock_skipped_runs_total", "shop::report"), 1);
  EXPECT_EQ(e.value("dlock_busy_total", "shop::report"), 1);
  EXPECT_EQ(e.value("dlock_acquisitions_total", "shop::report"), 0);

  EXPECT_EQ(e.value("dlock_lost_leases_total", "L"), 1);
  EXPECT_EQ(e.value("dlock_acquisitions_total", "L"), 1);
  EXPECT_EQ(e.value("dlock_releases_total", "L"), 0) << "releasing a lost lease is not a release";
  EXPECT_EQ(e.value("dlock_acquisitions_total", "(unnamed)"), 1);

  // The client-wide snapshot agrees with the per-name sums.
  const MetricsSnapshot m = client().metrics();
  std::uint64_t acquisitions = 0, losses = 0, busy = 0;
  for (const LockMetrics& lock : m.by_name) {
    acquisitions += lock.acquisitions;
    losses += lock.losses;
    busy += lock.busy;
  }
  EXPECT_EQ(acquisitions, m.acquisitions);
  EXPECT_EQ(losses, m.losses);
  EXPECT_EQ(busy, m.acquire_busy);
  EXPECT_TRUE(std::is_sorted(m.by_name.begin(), m.by_name.end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
}

TEST_F(Observability, HistogramsAreCumulativeAndCountEveryObservation) {
  const Exposition e = parse(*text_);
  const std::map<std::pair<std::string, std::string>, double> expected_counts{
      {{"dlock_acquire_latency_seconds", "A"}, 4},  // 3 grants and the busy call
      {{"dlock_wait_seconds", "A"}, 1},             // only the busy call met a held lock
      {{"dlock_hold_seconds", "A"}, 3},
      {{"dlock_hold_seconds", "L"}, 1},
      {{"dlock_wait_seconds", "shop::report"}, 1},
  };
  for (const auto& [key, count] : expected_counts) {
    EXPECT_EQ(e.value(key.first + "_count", key.second), count) << key.first << " " << key.second;
  }
  EXPECT_GE(e.value("dlock_hold_seconds_sum", "A"), 3 * 0.002);
  EXPECT_GE(e.value("dlock_wait_seconds_sum", "A"), 0.025);
  EXPECT_GE(e.value("dlock_renewal_lag_seconds_count", "L"), 1) << "the max_hold check is a renewal turn";

  int histograms = 0;
  for (const auto& [family, type] : e.types) {
    if (type != "histogram") continue;
    for (const LockMetrics& lock : client().metrics().by_name) {
      auto buckets = e.find(family + "_bucket", lock.name);
      ASSERT_GE(buckets.size(), 2u) << family << " " << lock.name;
      double previous_bound = 0, previous_count = 0;
      for (const Sample* b : buckets) {
        ASSERT_EQ(b->labels.count("le"), 1u);
        const double bound = b->labels.at("le") == "+Inf" ? 1e300 : std::stod(b->labels.at("le"));
        const double count = std::stod(b->value);
        EXPECT_GT(bound, previous_bound) << family;
        EXPECT_GE(count, previous_count) << family << " " << lock.name;
        previous_bound = bound;
        previous_count = count;
      }
      EXPECT_EQ(buckets.back()->labels.at("le"), "+Inf");
      EXPECT_EQ(std::stod(buckets.back()->value), e.value(family + "_count", lock.name));
      ++histograms;
    }
  }
  EXPECT_EQ(histograms, 4 * int(client().metrics().by_name.size()));
}

TEST_F(Observability, LabelValuesAreEscaped) {
  EXPECT_NE(text_->find(R"(dlock_acquisitions_total{name="we\"ird\\na\nme"} 1)"), std::string::npos)
      << *text_;
  const Exposition e = parse(*text_);
  EXPECT_EQ(e.value("dlock_acquisitions_total", kAwkward), 1) << "the parsed label is the name itself";
}

TEST_F(Observability, AnAcquireReleasePairIsLoggedAtDebugWithNameKeyTokenAndTimings) {
  const auto acquired = captured_->with("event=acquired name=A key=order:7 ");
  const auto released = captured_->with("event=released name=A key=order:7 ");
  ASSERT_EQ(acquired.size(), 3u);
  ASSERT_EQ(released.size(), 3u);
  for (const auto& [level, line] : acquired) {
    EXPECT_EQ(level, LogLevel::kDebug);
    EXPECT_NE(line.find(" token="), std::string::npos) << line;
    EXPECT_NE(line.find(" waited_ms="), std::string::npos) << line;
    EXPECT_NE(line.find(" lease_ms=10000"), std::string::npos) << line;
  }
  // The pair carries the same token.
  const auto token_of = [](const std::string& line) {
    const auto at = line.find(" token=") + 7;
    return line.substr(at, line.find(' ', at) - at);
  };
  EXPECT_EQ(token_of(acquired[0].second), token_of(released[0].second));
  EXPECT_EQ(released[0].first, LogLevel::kDebug);
  EXPECT_NE(released[0].second.find(" held_ms="), std::string::npos) << released[0].second;
}

TEST_F(Observability, BusySkipAndLossAreLoggedAtTheirLevels) {
  const auto busy = captured_->with("event=busy name=A key=order:7 waited_ms=");
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy[0].first, LogLevel::kWarn);

  const auto skipped = captured_->with("event=skipped name=shop::report key=report:1");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].first, LogLevel::kInfo);

  const auto lost = captured_->with("event=lost name=L key=lost:1 token=");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].first, LogLevel::kWarn) << "reaching max_hold is configured, so a warning";
  EXPECT_NE(lost[0].second.find(" reason=max_hold "), std::string::npos) << lost[0].second;
  EXPECT_NE(lost[0].second.find(" held_ms="), std::string::npos) << lost[0].second;

  const auto unnamed = captured_->with("event=acquired name=(unnamed) key=nameless ");
  EXPECT_EQ(unnamed.size(), 1u);
  const auto awkward = captured_->with("event=acquired name=\"we\\x22ird\\x5cna\\x0ame\" key=awkward ");
  EXPECT_EQ(awkward.size(), 1u) << "names are printable and quoted, so lines split on spaces";
}

// The counters of the lock kinds, on a client of their own (the suite's client keeps its
// known activity): a shared hold, a permit, a fair grant, a lease of two keys, a downgrade
// (shared inside the thread's exclusive hold) and a refused upgrade (exclusive inside its
// shared hold).
TEST(ObservabilityKinds, EachKindMovesItsOwnCounters) {
  Client c(memory_config("observability-kinds"));
  LockSettings exclusive;
  exclusive.lease = 10s;
  LockSettings shared = exclusive;
  shared.mode = LockMode::kShared;
  LockSettings permit = exclusive;
  permit.permits = 2;
  LockSettings fair = exclusive;
  fair.fair = true;
  {
    Lease read = c.acquire("doc:1", shared, "reader");
    ASSERT_TRUE(read) << read.error();
    Lease upgrade = c.acquire("doc:1", exclusive, "reader");
    EXPECT_EQ(upgrade.status(), AcquireStatus::kRefused);
  }
  {
    Lease write = c.acquire("doc:2", exclusive, "writer");
    Lease read = c.acquire("doc:2", shared, "writer");
    ASSERT_TRUE(write && read);
  }
  { ASSERT_TRUE(c.acquire("stock:1", permit, "stock")); }
  { ASSERT_TRUE(c.acquire("turn:1", fair, "turn")); }
  { ASSERT_TRUE(c.acquire(std::vector<Key>{Key("a:1"), Key("b:1")}, exclusive, "pair")); }

  const Exposition e = parse(prometheus_text(c));
  EXPECT_TRUE(e.errors.empty()) << ::testing::PrintToString(e.errors);
  EXPECT_EQ(e.value("dlock_shared_acquisitions_total"), 1) << "the downgrade is no grant";
  EXPECT_EQ(e.value("dlock_permit_acquisitions_total"), 1);
  EXPECT_EQ(e.value("dlock_fair_acquisitions_total"), 1);
  EXPECT_EQ(e.value("dlock_multi_key_acquisitions_total"), 1);
  EXPECT_EQ(e.value("dlock_multi_key_rollbacks_total"), 0);
  EXPECT_EQ(e.value("dlock_downgrades_total"), 1);
  EXPECT_EQ(e.value("dlock_upgrades_refused_total"), 1);
  EXPECT_EQ(e.types.at("dlock_upgrades_refused_total"), "counter");
  EXPECT_EQ(e.value("dlock_refused_total", "reader"), 1);
  EXPECT_EQ(e.value("dlock_acquisitions_total", "reader"), 1) << "a refusal is no grant";
  EXPECT_EQ(e.value("dlock_refused_total", "writer"), 0);
  EXPECT_EQ(e.value("dlock_acquisitions_total", "writer"), 1) << "the downgrade is reentrant";
  EXPECT_EQ(e.value("dlock_acquisitions_total", "pair"), 2) << "each key counts as a grant";
  const MetricsSnapshot m = c.metrics();
  EXPECT_EQ(m.shared_acquisitions, 1u);
  EXPECT_EQ(m.downgrades, 1u);
  EXPECT_EQ(m.upgrades_refused, 1u);
  EXPECT_EQ(m.reentrant_acquisitions, 1u);
}

}  // namespace
}  // namespace dlock
