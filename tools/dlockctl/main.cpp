// dlockctl: inspect and manage the locks of a dlock service. See docs/CLI.md.
//
//   dlockctl [--config FILE] [--backend NAME] [--json] COMMAND [ARGS]
//
// Exit codes: 0 ok, 1 no such lock (nothing to inspect or release), 2 usage, 3 bad
// configuration, 4 lock server unreachable (or failing), 5 not supported by the backend,
// 10 unexpected error.
#include <dlock/admin.hpp>
#include <dlock/client.hpp>
#include <dlock/common/text.hpp>
#include <dlock/config.hpp>
#include <dlock/errors.hpp>
#include <dlock/log.hpp>
#include <fmt/format.h>

#include "output.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace dlockctl;  // the text and JSON output (output.hpp)

enum Exit : int {
  kOk = 0,
  kNotFound = 1,
  kUsage = 2,
  kBadConfig = 3,
  kUnreachable = 4,
  kUnsupported = 5,
  kInternal = 10,
};

constexpr std::string_view kUsageText =
    R"(usage: dlockctl [--config FILE] [--backend NAME] [--json] COMMAND [ARGS]

Commands:
  check-config            validate the configuration (exit 0, or 3 with file:line:col)
  list [PATTERN]          locks held now; PATTERN is a shell glob on the key (default *)
  inspect KEY             one lock in detail (redlock: every instance's view)
  release KEY --force     delete the lock whoever holds it, wake its waiters and record
      [--note TEXT]       who did it in the audit history
  history [--limit N]     the recorded forced releases, newest first (default 20)
  runs [PATTERN]          recorded scheduled runs (dlock::claim_run) whose key matches,
      [--limit N]         the N most recent by start, oldest first (default 20)

Options:
  --config FILE     configuration file (default: $DLOCK_CONFIG, else built-in:
                    one Redis at 127.0.0.1:6379, service "default")
  --backend NAME    backend of the configuration to use (default: "default")
  --json            one JSON document on stdout instead of a table
  -h, --help        this text

Exit codes: 0 ok, 1 no such lock, 2 usage, 3 bad configuration, 4 lock server
unreachable or failing, 5 not supported by the backend, 10 unexpected error.
See docs/CLI.md.
)";

struct Options {
  std::optional<std::string> config_path;
  std::string backend = "default";
  bool json = false;
  bool force = false;
  bool help = false;
  std::optional<std::string> note;
  std::size_t limit = 20;
  std::vector<std::string> positional;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Options parse_args(int argc, char** argv) {
  Options o;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string_view name) -> std::string {
      const std::string prefix = std::string(name) + "=";
      if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
      if (i + 1 >= argc) throw UsageError(fmt::format("{} needs a value", name));
      return argv[++i];
    };
    auto is = [&](std::string_view name) {
      return arg == name || arg.rfind(std::string(name) + "=", 0) == 0;
    };
    if (options_done || arg.empty() || arg[0] != '-' || arg == "-") {
      o.positional.push_back(arg);
    } else if (arg == "--") {
      options_done = true;
    } else if (arg == "-h" || arg == "--help") {
      o.help = true;
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--force") {
      o.force = true;
    } else if (is("--config")) {
      o.config_path = value("--config");
    } else if (is("--backend")) {
      o.backend = value("--backend");
    } else if (is("--note")) {
      o.note = value("--note");
    } else if (is("--limit")) {
      const std::string text = value("--limit");
      char* end = nullptr;
      const long n = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || n <= 0)
        throw UsageError("--limit needs a positive number");
      o.limit = static_cast<std::size_t>(n);
    } else {
      throw UsageError(fmt::format("unknown option '{}'", arg));
    }
  }
  return o;
}

// ---- commands -------------------------------------------------------------------------

dlock::Config load(const Options& o) {
  if (o.config_path) return dlock::load_config(*o.config_path);
  if (const char* env = std::getenv("DLOCK_CONFIG"); env != nullptr && *env != '\0') {
    return dlock::load_config(env);
  }
  return dlock::Config::builtin();
}

std::string endpoint_text(const dlock::Endpoint& e) {
  return dlock::common::endpoint_text(e.host, e.port);
}

int check_config(const Options& o, const dlock::Config& config) {
  // Building a client also checks what loading cannot (a topology this build lacks).
  dlock::Client client(config);
  (void)client;
  if (o.json) {
    std::string backends;
    for (const auto& [name, b] : config.backends) {
      std::string endpoints;
      for (const auto& e : b.endpoints)
        endpoints += (endpoints.empty() ? "" : ",") + json_string(endpoint_text(e));
      backends += fmt::format("{}{{\"name\":{},\"topology\":\"{}\",\"endpoints\":[{}]}}",
                              backends.empty() ? "" : ",", json_string(name),
                              dlock::to_string(b.topology), endpoints);
    }
    std::puts(fmt::format("{{\"ok\":true,\"source\":{},\"service\":{},\"backends\":[{}]}}",
                          json_string(config.source), json_string(config.service), backends)
                  .c_str());
    return kOk;
  }
  std::puts(
      fmt::format("{}: ok (service \"{}\")", config.source, printable(config.service)).c_str());
  for (const auto& [name, b] : config.backends) {
    std::string endpoints;
    for (const auto& e : b.endpoints)
      endpoints += (endpoints.empty() ? "" : " ") + endpoint_text(e);
    std::puts(
        fmt::format("  backend {}: {} {}", name, dlock::to_string(b.topology), endpoints).c_str());
  }
  return kOk;
}

// A listing as one JSON document: {header, "pattern": ..., "<field>": [items]}.
int print_json_listing(const dlock::Config& config, const Options& o, const std::string& pattern,
                       std::string_view field, const std::string& items) {
  std::puts(fmt::format("{{{},\"pattern\":{},\"{}\":[{}]}}", header(config, o.backend),
                        json_string(pattern), field, items)
                .c_str());
  return kOk;
}

// An empty listing, said in words: "no <what> matching ...".
int print_none_matching(const dlock::Config& config, const Options& o, const std::string& pattern,
                        std::string_view what) {
  std::puts(fmt::format("no {} matching '{}' (service \"{}\", backend {})", what,
                        printable(pattern), printable(config.service), o.backend)
                .c_str());
  return kOk;
}

int list(const Options& o, const dlock::Config& config, const dlock::Admin& admin) {
  if (o.positional.size() > 2) throw UsageError("list takes at most one PATTERN");
  const std::string pattern = o.positional.size() == 2 ? o.positional[1] : "*";
  const auto locks = admin.list(pattern, o.backend);
  if (o.json) {
    std::string items;
    for (const auto& l : locks) items += (items.empty() ? "" : ",") + json_lock(l);
    return print_json_listing(config, o, pattern, "locks", items);
  }
  if (locks.empty()) return print_none_matching(config, o, pattern, "locks held");
  print_table(list_rows(locks));
  return kOk;
}

int inspect(const Options& o, const dlock::Config& config, const dlock::Admin& admin) {
  if (o.positional.size() != 2) throw UsageError("inspect needs exactly one KEY");
  const std::string& key = o.positional[1];
  const auto lock = admin.inspect(key, o.backend);
  if (o.json) {
    std::puts(fmt::format("{{{},\"key\":{},\"lock\":{}}}", header(config, o.backend),
                          json_string(key), lock ? json_lock(*lock) : "null")
                  .c_str());
  } else if (lock) {
    print_lock_detail(*lock);
  }
  if (!lock) {
    std::fputs(fmt::format("dlockctl: no lock held on '{}' (service \"{}\", backend {})\n",
                           printable(key), printable(config.service), o.backend)
                   .c_str(),
               stderr);
    return kNotFound;
  }
  return kOk;
}

int release(const Options& o, const dlock::Config& config, const dlock::Admin& admin) {
  if (o.positional.size() != 2) throw UsageError("release needs exactly one KEY");
  if (!o.force) {
    throw UsageError(
        "release deletes a lock that someone else holds: add --force to do it (it is recorded)");
  }
  const std::string& key = o.positional[1];
  const auto removed = admin.force_release(key, o.note.value_or(""), o.backend);
  if (o.json) {
    std::puts(fmt::format("{{{},\"key\":{},\"released\":{},\"lock\":{}}}",
                          header(config, o.backend), json_string(key), removed ? "true" : "false",
                          removed ? json_lock(*removed) : "null")
                  .c_str());
  } else if (removed) {
    std::puts(
        fmt::format(
            "released '{}': owner {} (host {}, pid {}, name {}), token {}; recorded in history",
            printable(key), removed->owner, printable(removed->host), removed->pid,
            removed->name.empty() ? "-" : printable(removed->name), removed->token)
            .c_str());
  }
  if (!removed) {
    std::fputs(
        fmt::format("dlockctl: nothing to release: no lock held on '{}'\n", printable(key)).c_str(),
        stderr);
    return kNotFound;
  }
  return kOk;
}

int history(const Options& o, const dlock::Config& config, const dlock::Admin& admin) {
  if (o.positional.size() != 1) throw UsageError("history takes no arguments");
  const auto entries = admin.history(o.limit, o.backend);
  if (o.json) {
    std::string items;
    for (const auto& e : entries) items += (items.empty() ? "" : ",") + json_audit(e);
    std::puts(fmt::format("{{{},\"entries\":[{}]}}", header(config, o.backend), items).c_str());
    return kOk;
  }
  if (entries.empty()) {
    std::puts("no forced releases recorded");
    return kOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"AT", "BY", "KEY", "OWNER", "HOLDER", "TOKEN", "NOTE"}};
  for (const auto& e : entries) {
    rows.push_back(
        {iso_time(e.at_ms), fmt::format("{}@{}:{}", e.user, printable(e.host), e.pid),
         printable(e.key), e.owner,
         fmt::format("{}:{} {}", printable(e.owner_host), e.owner_pid, printable(e.owner_name)),
         std::to_string(e.token), e.note.empty() ? "-" : printable(e.note)});
  }
  print_table(rows);
  return kOk;
}

// A run still marked running whose owner no longer holds the lock ended without saying so
// (its process died or lost the lease and never came back).
bool abandoned(const dlock::RunRecord& r, const dlock::Admin& admin, const std::string& backend) {
  if (r.outcome != "running") return false;
  const auto lock = admin.inspect(r.key, backend);
  return !lock || lock->owner != r.owner;
}

int runs(const Options& o, const dlock::Config& config, const dlock::Admin& admin) {
  if (o.positional.size() > 2) throw UsageError("runs takes at most one PATTERN");
  const std::string pattern = o.positional.size() == 2 ? o.positional[1] : "*";
  auto records = admin.runs(pattern, o.backend);
  std::stable_sort(records.begin(), records.end(),
                   [](const dlock::RunRecord& a, const dlock::RunRecord& b) {
                     return a.started_at_ms < b.started_at_ms;
                   });
  if (records.size() > o.limit)
    records.erase(records.begin(), records.end() - static_cast<std::ptrdiff_t>(o.limit));
  if (o.json) {
    std::string items;
    for (const auto& r : records)
      items += (items.empty() ? "" : ",") + json_run(r, abandoned(r, admin, o.backend));
    return print_json_listing(config, o, pattern, "runs", items);
  }
  if (records.empty()) return print_none_matching(config, o, pattern, "runs recorded");
  std::vector<std::vector<std::string>> rows = {
      {"KEY", "LABEL", "HOST", "PID", "TOKEN", "STARTED", "TOOK", "OUTCOME"}};
  for (const auto& r : records) {
    const std::string took =
        r.finished_at_ms >= r.started_at_ms && r.finished_at_ms > 0
            ? duration_text(std::chrono::milliseconds(r.finished_at_ms - r.started_at_ms))
            : "-";
    rows.push_back({printable(r.key), r.label.empty() ? "-" : printable(r.label), printable(r.host),
                    std::to_string(r.pid), std::to_string(r.token), iso_time(r.started_at_ms), took,
                    abandoned(r, admin, o.backend) ? "abandoned" : printable(r.outcome)});
  }
  print_table(rows);
  return kOk;
}

int fail(int code, std::string_view message) {
  std::fputs(fmt::format("dlockctl: {}\n", message).c_str(), stderr);
  return code;
}

int run(int argc, char** argv) {
  Options o;
  try {
    o = parse_args(argc, argv);
  } catch (const UsageError& e) {
    return fail(kUsage, fmt::format("{} (try --help)", e.what()));
  }
  if (o.help) {
    std::fputs(std::string(kUsageText).c_str(), stdout);
    return kOk;
  }
  if (o.positional.empty()) {
    std::fputs(std::string(kUsageText).c_str(), stderr);
    return kUsage;
  }
  const std::string& command = o.positional[0];
  if (command != "check-config" && command != "list" && command != "inspect" &&
      command != "release" && command != "history" && command != "runs") {
    return fail(kUsage, fmt::format("unknown command '{}' (try --help)", command));
  }
  // The runtime logs to stderr; warnings (a forced release) and errors only.
  dlock::set_log_level(dlock::LogLevel::kWarn);
  try {
    const dlock::Config config = load(o);
    if (command == "check-config") return check_config(o, config);
    if (config.backends.find(o.backend) == config.backends.end()) {
      return fail(kBadConfig, fmt::format("{}: no backend named '{}'", config.source, o.backend));
    }
    const dlock::Admin admin{dlock::Client(config)};
    if (command == "list") return list(o, config, admin);
    if (command == "inspect") return inspect(o, config, admin);
    if (command == "release") return release(o, config, admin);
    if (command == "runs") return runs(o, config, admin);
    return history(o, config, admin);
  } catch (const UsageError& e) {
    return fail(kUsage, fmt::format("{} (try --help)", e.what()));
  } catch (const dlock::ConfigError& e) {
    return fail(kBadConfig, e.what());
  } catch (const dlock::BackendUnavailable& e) {
    return fail(kUnreachable, fmt::format("lock server unreachable: {}", e.what()));
  } catch (const dlock::NotSupported& e) {
    return fail(kUnsupported, e.what());
  } catch (const std::exception& e) {
    return fail(kInternal, fmt::format("unexpected error: {}", e.what()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (...) {
    return fail(kInternal, "unexpected error");
  }
}
