// dlockctl against real redis-servers: every command, locks held by other processes, a
// forced release that wakes a waiter and is recorded, a bad configuration, an unknown key,
// unreachable servers, the --json output parsed field by field, and a Redlock group. Also
// dlock::Admin on the memory backend, and the output of lock kinds formatted from its locks.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/admin.hpp"
#include "output.hpp"
#include "dlock/schedule.hpp"
#include "ha_fixtures.hpp"

namespace dlock::test {
namespace {

const std::string kCtl = DLOCK_CTL;

/// Runs dlockctl; stdout only (stderr inherited) unless `merge`.
CommandResult ctl(const std::vector<std::string>& args, bool merge = false) {
  std::vector<std::string> argv{kCtl};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, 15s, ChildOptions{.env = {}, .merge_stderr = merge});
}

/// Parses a JSON document with python3 and flattens it into "path" -> JSON text of the
/// leaf (strings as json.dumps writes them, ASCII only), e.g. "locks.0.key" -> "\"a\"".
/// Throws if the document does not parse.
std::map<std::string, std::string> parse_json(const std::string& document) {
  static const char* kFlatten = R"(
import json, sys
def walk(path, v):
    if isinstance(v, dict):
        print(path + ('.' if path else '') + '#', len(v))
        for k, x in v.items(): walk(path + ('.' if path else '') + k, x)
    elif isinstance(v, list):
        print(path + '.#', len(v))
        for i, x in enumerate(v): walk(path + '.' + str(i), x)
    else:
        print(path, json.dumps(v))
walk('', json.loads(sys.argv[1]))
)";
  const CommandResult r = run_command({"python3", "-c", kFlatten, document}, 15s);
  if (r.status != 0) throw std::runtime_error("not JSON: " + document + "\n" + r.output);
  std::map<std::string, std::string> out;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    const auto space = line.find(' ');
    out[line.substr(0, space)] = line.substr(space + 1);
  }
  return out;
}

std::string json_text(const std::string& s) { return "\"" + s + "\""; }

class Dlockctl : public ::testing::Test {
 protected:
  void SetUp() override { server.start(); }

  std::string write_config(const std::string& extra = "") {
    files.emplace_back(std::make_unique<YamlFile>(
        "service: \"" + unique_service() + "\"\nbackends:\n  default:\n    topology: single\n    address: " +
        server.address() + "\n    poll_interval: 250ms\n    connect_timeout: 500ms\n    command_timeout: 500ms\n" +
        extra));
    return files.back()->path();
  }

  /// A lock_worker holding `key` until killed; returns its token.
  std::string hold(ChildProcess& worker) {
    const auto line = worker.read_line(10s);
    EXPECT_TRUE(line && line->rfind("acquired ", 0) == 0) << line.value_or("<none>");
    return line ? line->substr(9) : "";
  }

  RedisServer server;
  std::vector<std::unique_ptr<YamlFile>> files;
};

TEST_F(Dlockctl, HelpAndUsageErrors) {
  auto help = ctl({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("release KEY --force"), std::string::npos);
  EXPECT_EQ(ctl({}, true).status, 2);
  EXPECT_EQ(ctl({"frobnicate"}, true).status, 2);
  EXPECT_EQ(ctl({"--bogus", "list"}, true).status, 2);
  EXPECT_EQ(ctl({"--config"}, true).status, 2);
  EXPECT_EQ(ctl({"--config", write_config(), "inspect"}, true).status, 2);
}

TEST_F(Dlockctl, CheckConfigAcceptsAGoodFileAndNamesLineAndColumnOfABadOne) {
  const std::string good = write_config();
  auto ok = ctl({"--config", good, "check-config"});
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("ok"), std::string::npos);
  auto json = parse_json(ctl({"--json", "--config", good, "check-config"}).output);
  EXPECT_EQ(json["ok"], "true");
  EXPECT_EQ(json["service"], json_text(unique_service()));
  EXPECT_EQ(json["backends.0.topology"], "\"single\"");
  EXPECT_EQ(json["backends.0.endpoints.0"], json_text(server.endpoint()));

  YamlFile bad("service: x\nbackends:\n  default:\n    topology: single\n    adress: redis://127.0.0.1:1\n");
  auto r = ctl({"--config", bad.path(), "check-config"}, true);
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find(bad.path() + ":5:5:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("adress"), std::string::npos) << r.output;
  // Every command refuses a bad file the same way; so does $DLOCK_CONFIG.
  EXPECT_EQ(ctl({"--config", bad.path(), "list"}, true).status, 3);
  auto env = run_command({kCtl, "list"}, 15s, ChildOptions{.env = {"DLOCK_CONFIG=" + bad.path()}, .merge_stderr = true});
  EXPECT_EQ(env.status, 3) << env.output;
  EXPECT_EQ(ctl({"--config", "/nonexistent/dlock.yaml", "check-config"}, true).status, 3);
  EXPECT_EQ(ctl({"--config", good, "--backend", "nope", "list"}, true).status, 3);
}

TEST_F(Dlockctl, ListAndInspectShowLocksHeldByAnotherProcess) {
  const std::string config = write_config();
  ChildProcess worker({worker_program(), config, "hold", "order:{7}", "30000", "0"});
  const std::string token = hold(worker);
  ChildProcess other({worker_program(), config, "hold", "report:2026", "20000", "0"});
  hold(other);

  auto table = ctl({"--config", config, "list"});
  ASSERT_EQ(table.status, 0);
  EXPECT_NE(table.output.find("KEY"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("order:{7}"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find(token), std::string::npos) << table.output;
  EXPECT_NE(table.output.find(std::to_string(worker.pid())), std::string::npos) << table.output;
  EXPECT_EQ(table.output.rfind("KEY          MODE  OWNER", 0), 0u) << table.output;
  EXPECT_NE(table.output.find("order:{7}    X     "), std::string::npos) << table.output;

  auto list = parse_json(ctl({"--config", config, "--json", "list", "order:*"}).output);
  ASSERT_EQ(list["locks.#"], "1");
  EXPECT_EQ(list["service"], json_text(unique_service()));
  EXPECT_EQ(list["backend"], "\"default\"");
  EXPECT_EQ(list["pattern"], "\"order:*\"");
  EXPECT_EQ(list["locks.0.key"], "\"order:{7}\"");
  EXPECT_GT(list["locks.0.owner"].size(), 10u);
  EXPECT_EQ(list["locks.0.pid"], std::to_string(worker.pid()));
  EXPECT_EQ(list["locks.0.name"], "\"holder\"");
  EXPECT_EQ(list["locks.0.token"], token);
  EXPECT_EQ(list["locks.0.lease_ms"], "30000");
  const long ttl = std::stol(list["locks.0.ttl_ms"]);
  EXPECT_GT(ttl, 20000);
  EXPECT_LE(ttl, 30000);
  EXPECT_EQ(list["locks.0.min_hold"], "false");
  EXPECT_EQ(list["locks.0.instances.#"], "0");
  // Redis keeps one holder per key: the fields above are it.
  EXPECT_EQ(list["locks.0.mode"], "\"exclusive\"");
  EXPECT_EQ(list["locks.0.permits"], "0");
  EXPECT_EQ(list["locks.0.holders.#"], "0");
  EXPECT_EQ(list["locks.0.queue.#"], "0");
  EXPECT_GT(std::stoll(list["locks.0.acquired_at_ms"]), 1'600'000'000'000LL);
  EXPECT_NE(list["locks.0.host"], "\"\"");

  auto all = parse_json(ctl({"--config", config, "--json", "list"}).output);
  EXPECT_EQ(all["locks.#"], "2");
  EXPECT_EQ(all["locks.1.key"], "\"report:2026\"");
  EXPECT_EQ(parse_json(ctl({"--config", config, "--json", "list", "nothing*"}).output)["locks.#"], "0");

  auto inspect = ctl({"--config", config, "inspect", "order:{7}"});
  EXPECT_EQ(inspect.status, 0);
  EXPECT_NE(inspect.output.find(token), std::string::npos) << inspect.output;
  EXPECT_EQ(inspect.output.find("mode:"), std::string::npos) << "as before: " << inspect.output;
  auto one = parse_json(ctl({"--config", config, "--json", "inspect", "order:{7}"}).output);
  EXPECT_EQ(one["lock.owner"], list["locks.0.owner"]);
  EXPECT_EQ(one["lock.token"], token);
}

TEST_F(Dlockctl, KeysOfAnyBytesAreListedAndEscapedInJson) {
  const std::string config = write_config();
  Client client(load_config(config));
  const std::string key = std::string("bin\xff\x01:*?{x}\"\\", 13);
  Lease lease = client.try_acquire(key, settings(10s), "bytes");
  ASSERT_TRUE(lease) << lease.error();
  Lease star = client.try_acquire(std::string("a*b"), settings(10s));
  ASSERT_TRUE(star);

  auto json = parse_json(ctl({"--config", config, "--json", "list", "bin*"}).output);
  ASSERT_EQ(json["locks.#"], "1");
  EXPECT_EQ(json["locks.0.key"], R"("bin\u00ff\u0001:*?{x}\"\\")");
  EXPECT_EQ(json["locks.0.token"], std::to_string(lease.token()));
  // Glob characters in the pattern match literally when escaped.
  EXPECT_EQ(parse_json(ctl({"--config", config, "--json", "list", "a\\*b"}).output)["locks.#"], "1");
  EXPECT_EQ(parse_json(ctl({"--config", config, "--json", "list", "a\\*"}).output)["locks.#"], "0");
  auto table = ctl({"--config", config, "list", "bin*"});
  EXPECT_NE(table.output.find("bin\\xff\\x01:*?{x}\"\\\\"), std::string::npos) << table.output;
}

TEST_F(Dlockctl, InspectOfAnUnknownKeyExitsOne) {
  const std::string config = write_config();
  auto r = ctl({"--config", config, "inspect", "no-such-key"}, true);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("no lock held on 'no-such-key'"), std::string::npos) << r.output;
  auto json = ctl({"--config", config, "--json", "inspect", "no-such-key"});
  EXPECT_EQ(json.status, 1);
  EXPECT_EQ(parse_json(json.output)["lock"], "null");
  EXPECT_EQ(ctl({"--config", config, "release", "no-such-key", "--force"}, true).status, 1);
}

TEST_F(Dlockctl, ForcedReleaseWakesAWaiterAndIsRecordedInHistory) {
  const std::string config = write_config();
  ChildProcess holder({worker_program(), config, "hold", "job:1", "30000", "0"});
  const std::string token = hold(holder);
  auto before = parse_json(ctl({"--config", config, "--json", "inspect", "job:1"}).output);
  // A second process waits (up to 30 s) for the lock.
  ChildProcess waiter({worker_program(), config, "hold", "job:1", "30000", "100"});
  EXPECT_FALSE(waiter.read_line(300ms).has_value());

  auto refused = ctl({"--config", config, "release", "job:1"}, true);
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.output.find("--force"), std::string::npos);
  EXPECT_EQ(ctl({"--config", config, "inspect", "job:1"}).status, 0) << "refused, so still held";

  const auto start = Clock::now();
  auto released = ctl({"--config", config, "--json", "release", "job:1", "--force", "--note", "stuck \"job\""});
  ASSERT_EQ(released.status, 0);
  auto r = parse_json(released.output);
  EXPECT_EQ(r["released"], "true");
  EXPECT_EQ(r["lock.token"], token);
  EXPECT_EQ(r["lock.owner"], before["lock.owner"]);

  const auto line = waiter.read_line(5s);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(line->rfind("acquired ", 0), 0u) << *line;
  EXPECT_LT(elapsed_ms(start), 2000);
  EXPECT_GT(std::stoull(line->substr(9)), std::stoull(token));

  auto history = parse_json(ctl({"--config", config, "--json", "history"}).output);
  ASSERT_EQ(history["entries.#"], "1");
  EXPECT_EQ(history["entries.0.key"], "\"job:1\"");
  EXPECT_EQ(history["entries.0.owner"], before["lock.owner"]);
  EXPECT_EQ(history["entries.0.token"], token);
  EXPECT_EQ(history["entries.0.owner_pid"], std::to_string(holder.pid()));
  EXPECT_EQ(history["entries.0.owner_name"], "\"holder\"");
  EXPECT_EQ(history["entries.0.note"], R"("stuck \"job\"")");
  EXPECT_NE(history["entries.0.user"], "\"\"");
  EXPECT_NE(history["entries.0.host"], "\"\"");
  EXPECT_GT(std::stoll(history["entries.0.pid"]), 0);
  EXPECT_GT(std::stoll(history["entries.0.at_ms"]), std::stoll(before["lock.acquired_at_ms"]));
  auto table = ctl({"--config", config, "history"});
  EXPECT_EQ(table.status, 0);
  EXPECT_NE(table.output.find("job:1"), std::string::npos) << table.output;

  // Nothing left to release once the waiter is done with it.
  EXPECT_EQ(waiter.wait(5s), 0);
  EXPECT_EQ(ctl({"--config", config, "release", "job:1", "--force"}, true).status, 1);
}

TEST_F(Dlockctl, RunsListsScheduledRunsAndMarksAbandonedOnes) {
  const std::string config = write_config();
  Client client(load_config(config));
  LockSettings s;
  s.lease = 10s;
  std::uint64_t first_token = 0;
  {
    Lease lease = client.acquire("report:1", s, "report");
    ASSERT_TRUE(lease);
    first_token = lease.token();
    RunClaim run = claim_run(lease.view(), RunOptions{"i1", 60s});
    ASSERT_TRUE(run);
  }  // finished: ok
  std::this_thread::sleep_for(5ms);  // a later start time for the second run
  Lease second = client.acquire("report:2", s, "report");
  ASSERT_TRUE(second);
  RunClaim abandoned = claim_run(second.view(), RunOptions{"i2", 60s});
  ASSERT_TRUE(abandoned);
  // Its holder is gone (here: its lock removed by hand); the record still says running.
  ASSERT_EQ(ctl({"--config", config, "release", "report:2", "--force"}).status, 0);

  const auto table = ctl({"--config", config, "runs", "report:*"});
  EXPECT_EQ(table.status, 0) << table.output;
  const auto row = [&](const std::string& key) {
    const auto at = table.output.find(key);
    return at == std::string::npos ? std::string() : table.output.substr(at, table.output.find('\n', at) - at);
  };
  EXPECT_NE(row("report:1").find(" ok"), std::string::npos) << table.output;
  EXPECT_NE(row("report:1").find(std::to_string(first_token)), std::string::npos) << table.output;
  EXPECT_NE(row("report:2").find("abandoned"), std::string::npos) << table.output;

  auto json = parse_json(ctl({"--config", config, "--json", "runs"}).output);
  EXPECT_EQ(json["runs.#"], "2");
  EXPECT_EQ(json["runs.0.key"], json_text("report:1"));
  EXPECT_EQ(json["runs.0.label"], json_text("i1"));
  EXPECT_EQ(json["runs.0.name"], json_text("report"));
  EXPECT_EQ(json["runs.0.outcome"], json_text("ok"));
  EXPECT_EQ(json["runs.0.token"], std::to_string(first_token));
  EXPECT_EQ(json["runs.0.abandoned"], "false");
  EXPECT_EQ(json["runs.1.key"], json_text("report:2"));
  EXPECT_EQ(json["runs.1.outcome"], json_text("running"));
  EXPECT_EQ(json["runs.1.abandoned"], "true");
  EXPECT_NE(json["runs.1.started_at_ms"], "0");

  // --limit keeps the most recent; a pattern that matches nothing is not an error.
  json = parse_json(ctl({"--config", config, "--json", "runs", "--limit", "1"}).output);
  EXPECT_EQ(json["runs.#"], "1");
  EXPECT_EQ(json["runs.0.key"], json_text("report:2"));
  const auto none = ctl({"--config", config, "runs", "nothing:*"});
  EXPECT_EQ(none.status, 0);
  EXPECT_NE(none.output.find("no runs recorded"), std::string::npos) << none.output;
}

TEST_F(Dlockctl, UnreachableServerExitsFourWithinTheTimeouts) {
  const std::string config = write_config();
  // Paused: connections hang, so only the timeouts end the wait.
  server.pause();
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"list"}, {"inspect", "k"}, {"release", "k", "--force"}, {"history"}, {"runs"}}) {
    std::vector<std::string> args{"--config", config};
    args.insert(args.end(), command.begin(), command.end());
    const auto start = Clock::now();
    auto r = ctl(args, true);
    EXPECT_EQ(r.status, 4) << command[0] << ": " << r.output;
    EXPECT_NE(r.output.find("unreachable"), std::string::npos) << r.output;
    EXPECT_LT(elapsed_ms(start), 3000) << command[0];
  }
  server.resume();
  server.stop();
  auto r = ctl({"--config", config, "list"}, true);
  EXPECT_EQ(r.status, 4) << r.output;
  EXPECT_NE(r.output.find("Connection refused"), std::string::npos) << r.output;
}

Config memory_config() {
  Config config;
  config.service = unique_service();
  BackendConfig memory;
  memory.name = "default";
  memory.topology = Topology::kMemory;
  config.backends["default"] = memory;
  return config;
}

TEST(DlockctlMemory, AdminOnTheMemoryBackend) {
  Client client(memory_config());
  Admin admin(client);
  Lease a = client.try_acquire(std::string("m:1"), settings(10s), "first");
  Lease b = client.try_acquire(std::string("n:1"), settings(10s));
  ASSERT_TRUE(a && b);
  ASSERT_EQ(admin.list().size(), 2u);
  const auto listed = admin.list("m:*");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "first");
  EXPECT_EQ(listed[0].token, a.token());
  EXPECT_GT(listed[0].ttl.count(), 9000);
  EXPECT_FALSE(admin.inspect("nope").has_value());
  const auto removed = admin.force_release("m:1", "test");
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->token, a.token());
  EXPECT_FALSE(admin.inspect("m:1").has_value());
  EXPECT_FALSE(admin.force_release("m:1").has_value());
  const auto history = admin.history();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].key, "m:1");
  EXPECT_EQ(history[0].note, "test");
  Lease again = client.try_acquire(std::string("m:1"), settings(10s));
  EXPECT_TRUE(again) << "free after the forced release";
}

// ---- lock kinds: the output functions on locks of the memory backend ----------------------

LockSettings kind(Millis lease, LockMode mode, int permits = 0, bool fair = false,
                  Millis wait = 0ms) {
  LockSettings s = settings(lease, wait);
  s.mode = mode;
  s.permits = permits;
  s.fair = fair;
  return s;
}

// An engine that keeps one holder per key (Redis, PostgreSQL, ZooKeeper, etcd): no holders.
LockInfo one_holder_lock() {
  LockInfo l;
  l.key = "order:{7}";
  l.owner = "0216:0";
  l.host = "vm";
  l.pid = 11043;
  l.thread = 11044;
  l.name = "holder";
  l.token = 17;
  l.acquired_at_ms = 1795247436959;
  l.lease = 30s;
  l.ttl = 28200ms;
  return l;
}

TEST(DlockctlKinds, APlainLockPrintsAsBeforeWithModeX) {
  const LockInfo l = one_holder_lock();
  EXPECT_EQ(dlockctl::mode_text(l), "X");
  EXPECT_EQ(dlockctl::table_text(dlockctl::list_rows({l})),
            "KEY        MODE  OWNER   HOST  PID    NAME    TOKEN  TTL\n"
            "order:{7}  X     0216:0  vm    11043  holder  17     28.2s\n");
  EXPECT_EQ(dlockctl::lock_detail_text(l),
            "key:          order:{7}\n"
            "owner:        0216:0\n"
            "host:         vm\n"
            "pid:          11043\n"
            "thread:       11044\n"
            "name:         holder\n"
            "token:        17\n"
            "acquired at:  2026-11-21T07:50:36.959Z (server clock)\n"
            "lease:        30.0s\n"
            "ttl:          28.2s\n"
            "min_hold:     no\n");
  auto json = parse_json(dlockctl::json_lock(l));
  EXPECT_EQ(json["mode"], "\"exclusive\"");
  EXPECT_EQ(json["permits"], "0");
  EXPECT_EQ(json["holders.#"], "0");
  EXPECT_EQ(json["queue.#"], "0");
}

TEST(DlockctlKinds, SharedHoldersAreCountedAndEachListed) {
  const Config config = memory_config();
  Client a(config), b(config), c(config);
  Admin admin(a);
  Lease one = a.try_acquire(std::string("doc:1"), kind(10s, LockMode::kShared), "reader");
  Lease two = b.try_acquire(std::string("doc:1"), kind(10s, LockMode::kShared), "reader");
  Lease three = c.try_acquire(std::string("doc:1"), kind(10s, LockMode::kShared));
  Lease plain = a.try_acquire(std::string("plain:1"), settings(10s), "writer");
  ASSERT_TRUE(one && two && three && plain);
  const auto locks = admin.list();
  ASSERT_EQ(locks.size(), 2u);
  EXPECT_EQ(dlockctl::mode_text(locks[0]), "Sx3");
  EXPECT_EQ(dlockctl::mode_text(locks[1]), "X");
  const auto rows = dlockctl::list_rows(locks);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][1], "MODE");
  EXPECT_EQ(rows[1][0], "doc:1");
  EXPECT_EQ(rows[1][1], "Sx3");
  EXPECT_EQ(rows[1][6], std::to_string(one.token()));  // the first holder's fields

  const std::string detail = dlockctl::lock_detail_text(locks[0]);
  EXPECT_NE(detail.find("mode:         Sx3\n"), std::string::npos) << detail;
  EXPECT_NE(detail.find("holders:\n  OWNER"), std::string::npos) << detail;
  for (const Lease* lease : {&one, &two, &three}) {
    EXPECT_NE(detail.find(std::to_string(lease->token())), std::string::npos) << detail;
  }
  EXPECT_EQ(detail.find("queue:"), std::string::npos) << detail;
  // A plain lock of the memory backend (one holder) prints as on every other engine.
  const std::string plain_detail = dlockctl::lock_detail_text(locks[1]);
  EXPECT_EQ(plain_detail.find("mode:"), std::string::npos) << plain_detail;
  EXPECT_EQ(plain_detail.find("holders:"), std::string::npos) << plain_detail;

  auto json = parse_json(dlockctl::json_lock(locks[0]));
  EXPECT_EQ(json["mode"], "\"shared\"");
  EXPECT_EQ(json["permits"], "0");
  ASSERT_EQ(json["holders.#"], "3");
  EXPECT_EQ(json["holders.0.token"], std::to_string(one.token()));
  EXPECT_EQ(json["holders.2.token"], std::to_string(three.token()));
  EXPECT_EQ(json["holders.0.name"], "\"reader\"");
  EXPECT_EQ(json["holders.2.name"], "\"\"");
  EXPECT_EQ(json["holders.1.pid"], std::to_string(::getpid()));
  EXPECT_EQ(json["holders.1.min_hold"], "false");
  EXPECT_GT(std::stol(json["holders.1.ttl_ms"]), 9000);
  EXPECT_EQ(json["queue.#"], "0");
}

TEST(DlockctlKinds, PermitsShowUsedOfAllAndAFairWaiterIsQueued) {
  const Config config = memory_config();
  Client a(config), b(config), w(config);
  Admin admin(a);
  Lease one = a.try_acquire(std::string("stock:1"), kind(10s, LockMode::kExclusive, 3));
  Lease two = b.try_acquire(std::string("stock:1"), kind(10s, LockMode::kExclusive, 3));
  Lease held = a.try_acquire(std::string("turn:1"), settings(10s));
  ASSERT_TRUE(one && two && held);
  std::thread waiter([&] {
    EXPECT_TRUE(w.acquire(std::string("turn:1"), kind(10s, LockMode::kExclusive, 0, true, 8s)));
  });
  ASSERT_TRUE(wait_until([&] { return !admin.inspect("turn:1")->queue.empty(); }, 3s, 5ms));
  const auto locks = admin.list();
  ASSERT_EQ(locks.size(), 2u);
  EXPECT_EQ(dlockctl::mode_text(locks[0]), "P 2/3");
  EXPECT_EQ(dlockctl::mode_text(locks[1]), "X+fair");
  EXPECT_NE(dlockctl::lock_detail_text(locks[0]).find("mode:         P 2/3\n"), std::string::npos);
  const std::string detail = dlockctl::lock_detail_text(locks[1]);
  EXPECT_EQ(detail.find("holders:"), std::string::npos) << detail;
  EXPECT_NE(detail.find("queue:\n  OWNER"), std::string::npos) << detail;
  EXPECT_NE(detail.find("  exclusive  yes   "), std::string::npos) << detail;

  auto permits = parse_json(dlockctl::json_lock(locks[0]));
  EXPECT_EQ(permits["mode"], "\"permits\"");
  EXPECT_EQ(permits["permits"], "3");
  EXPECT_EQ(permits["holders.#"], "2");
  auto fair = parse_json(dlockctl::json_lock(locks[1]));
  ASSERT_EQ(fair["queue.#"], "1");
  EXPECT_EQ(fair["queue.0.mode"], "\"exclusive\"");
  EXPECT_EQ(fair["queue.0.fair"], "true");
  EXPECT_GT(std::stol(fair["queue.0.ttl_ms"]), 0);
  held.release();
  waiter.join();
}

TEST(DlockctlGlob, MatchesLikeTheShell) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("order:*", "order:{7}"));
  EXPECT_FALSE(glob_match("order:*", "report:1"));
  EXPECT_TRUE(glob_match("a?c", "abc"));
  EXPECT_TRUE(glob_match("[ab]x", "bx"));
  EXPECT_FALSE(glob_match("[!ab]x", "bx"));
  EXPECT_TRUE(glob_match("[a-c]*z", "c12z"));
  EXPECT_TRUE(glob_match("a\\*b", "a*b"));
  EXPECT_FALSE(glob_match("a\\*b", "axb"));
  EXPECT_TRUE(glob_match("*\xff*", std::string("x\xff\0y", 4)));
  EXPECT_TRUE(glob_match("x*y*z", "xaaybbz"));
  EXPECT_FALSE(glob_match("x*y*z", "xaaybb"));
}

TEST(DlockctlRedlock, ListInspectReleaseAndHistoryOnThreeInstances) {
  RedlockGroup group(3);
  group.start();
  YamlFile config("service: \"" + unique_service() + "\"\nbackends:\n  default:\n    topology: redlock\n    instances: " +
                  yaml_list(group.endpoints()) + "\n    connect_timeout: 500ms\n    command_timeout: 500ms\n");
  ChildProcess holder({worker_program(), config.path(), "hold", "rl:1", "30000", "0"});
  const auto line = holder.read_line(10s);
  ASSERT_TRUE(line && line->rfind("acquired ", 0) == 0) << line.value_or("<none>");
  const std::string token = line->substr(9);

  auto list = parse_json(ctl({"--config", config.path(), "--json", "list"}).output);
  ASSERT_EQ(list["locks.#"], "1");
  EXPECT_EQ(list["locks.0.key"], "\"rl:1\"");
  EXPECT_EQ(list["locks.0.token"], token);
  EXPECT_EQ(list["locks.0.pid"], std::to_string(holder.pid()));

  // One instance down: still a majority, and inspect shows each instance.
  group.instance(2).stop();
  auto inspect = parse_json(ctl({"--config", config.path(), "--json", "inspect", "rl:1"}).output);
  ASSERT_EQ(inspect["lock.instances.#"], "3");
  EXPECT_EQ(inspect["lock.instances.0.held"], "true");
  EXPECT_EQ(inspect["lock.instances.1.held"], "true");
  EXPECT_EQ(inspect["lock.instances.2.answered"], "false");
  EXPECT_EQ(inspect["lock.instances.0.endpoint"], json_text(group.endpoints()[0]));
  auto table = ctl({"--config", config.path(), "inspect", "rl:1"});
  EXPECT_NE(table.output.find("unreachable"), std::string::npos) << table.output;

  EXPECT_EQ(ctl({"--config", config.path(), "release", "rl:1", "--force"}).status, 0);
  EXPECT_EQ(ctl({"--config", config.path(), "inspect", "rl:1"}, true).status, 1);
  auto history = parse_json(ctl({"--config", config.path(), "--json", "history"}).output);
  ASSERT_EQ(history["entries.#"], "1");
  EXPECT_EQ(history["entries.0.owner"], list["locks.0.owner"]);
  // The grant's token is the highest of the instances' tokens; the one that is down may
  // have had it.
  EXPECT_LE(std::stoull(history["entries.0.token"]), std::stoull(token));

  // Two of three down: no quorum to answer with.
  group.instance(1).stop();
  auto r = ctl({"--config", config.path(), "list"}, true);
  EXPECT_EQ(r.status, 4) << r.output;
  EXPECT_NE(r.output.find("quorum"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dlock::test

namespace dlock::test {
namespace {

TEST(DlockctlCluster, ListScansEveryMasterAndReleaseIsRecorded) {
  RedisClusterGroup cluster(RedisClusterGroup::Options{.masters = 3, .replicas_per_master = 0});
  cluster.start();
  YamlFile config("service: \"" + unique_service() + "\"\nbackends:\n  default:\n    topology: cluster\n    nodes: " +
                  yaml_list({cluster.node(0).endpoint()}) + "\n    connect_timeout: 500ms\n    command_timeout: 1s\n");
  Client client(load_config(config.path()));
  // Enough keys that every master holds some.
  std::vector<Lease> leases;
  for (int i = 0; i < 12; ++i) {
    leases.push_back(client.try_acquire("c:" + std::to_string(i), settings(20s), "clustered"));
    ASSERT_TRUE(leases.back()) << leases.back().error();
  }
  auto list = parse_json(ctl({"--config", config.path(), "--json", "list", "c:*"}).output);
  ASSERT_EQ(list["locks.#"], "12");
  EXPECT_EQ(list["locks.0.key"], "\"c:0\"");
  EXPECT_EQ(list["locks.0.token"], std::to_string(leases[0].token()));
  EXPECT_EQ(list["locks.0.name"], "\"clustered\"");

  auto released = ctl({"--config", config.path(), "release", "c:5", "--force", "--note", "cluster"});
  EXPECT_EQ(released.status, 0) << released.output;
  EXPECT_EQ(ctl({"--config", config.path(), "inspect", "c:5"}, true).status, 1);
  EXPECT_EQ(ctl({"--config", config.path(), "inspect", "c:6"}).status, 0);
  auto history = parse_json(ctl({"--config", config.path(), "--json", "history"}).output);
  ASSERT_EQ(history["entries.#"], "1");
  EXPECT_EQ(history["entries.0.key"], "\"c:5\"");
  EXPECT_EQ(history["entries.0.token"], std::to_string(leases[5].token()));
}

}  // namespace
}  // namespace dlock::test
