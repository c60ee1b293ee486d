#include "output.hpp"

#include <dlock/common/text.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace dlockctl {

std::string printable(std::string_view bytes) {
  return dlock::common::printable(bytes, dlock::common::kTerminalText);
}

std::string json_string(std::string_view bytes) {
  std::string out = "\"";
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\u{:04x}", c);
    else out += ch;
  }
  return out + "\"";
}

std::string iso_time(std::int64_t ms) {
  if (ms <= 0) return "-";
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buffer, static_cast<int>(ms % 1000));
}

std::string duration_text(std::chrono::milliseconds d) {
  if (d.count() < 0) return "none";
  if (d.count() < 1000) return fmt::format("{}ms", d.count());
  return fmt::format("{:.1f}s", static_cast<double>(d.count()) / 1000.0);
}

namespace {

std::string json_bool(bool b) { return b ? "true" : "false"; }

// "[a,b,...]" of each item's JSON.
template <typename T, typename F>
std::string json_array(const std::vector<T>& items, F json_of) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : ",") + json_of(items[i]);
  return out + "]";
}

std::string json_instance(const dlock::InstanceLockInfo& n) {
  return fmt::format(
      "{{\"endpoint\":{},\"answered\":{},\"held\":{},\"owner\":{},\"token\":{},\"ttl_ms\":{},"
      "\"error\":{}}}",
      json_string(n.endpoint), json_bool(n.answered), json_bool(n.held), json_string(n.owner),
      n.token, n.ttl.count(), json_string(n.error));
}

std::string json_holder(const dlock::HolderInfo& h) {
  return fmt::format(
      "{{\"owner\":{},\"host\":{},\"pid\":{},\"thread\":{},\"name\":{},\"token\":{},"
      "\"acquired_at_ms\":{},\"acquired_at\":{},\"ttl_ms\":{},\"min_hold\":{}}}",
      json_string(h.owner), json_string(h.host), h.pid, h.thread, json_string(h.name), h.token,
      h.acquired_at_ms, json_string(iso_time(h.acquired_at_ms)), h.ttl.count(),
      json_bool(h.min_hold));
}

std::string json_waiter(const dlock::WaiterInfo& w) {
  return fmt::format("{{\"owner\":{},\"mode\":{},\"fair\":{},\"ttl_ms\":{}}}",
                     json_string(w.owner), json_string(w.mode), json_bool(w.fair), w.ttl.count());
}

}  // namespace

std::string json_lock(const dlock::LockInfo& l) {
  return fmt::format(
      "{{\"key\":{},\"owner\":{},\"host\":{},\"pid\":{},\"thread\":{},\"name\":{},\"token\":{},"
      "\"acquired_at_ms\":{},\"acquired_at\":{},\"lease_ms\":{},\"ttl_ms\":{},\"min_hold\":{},"
      "\"instances\":{},\"mode\":{},\"permits\":{},\"holders\":{},\"queue\":{}}}",
      json_string(l.key), json_string(l.owner), json_string(l.host), l.pid, l.thread,
      json_string(l.name), l.token, l.acquired_at_ms, json_string(iso_time(l.acquired_at_ms)),
      l.lease.count(), l.ttl.count(), json_bool(l.min_hold), json_array(l.instances, json_instance),
      json_string(l.mode), l.permits, json_array(l.holders, json_holder),
      json_array(l.queue, json_waiter));
}

std::string mode_text(const dlock::LockInfo& l) {
  const std::size_t held = std::max<std::size_t>(l.holders.size(), 1);
  std::string text = "X";
  if (l.mode == "shared") text = fmt::format("Sx{}", held);
  if (l.mode == "permits") text = fmt::format("P {}/{}", held, l.permits);
  const bool fair = std::any_of(l.queue.begin(), l.queue.end(),
                                [](const dlock::WaiterInfo& w) { return w.fair; });
  return fair ? text + "+fair" : text;
}

std::vector<std::vector<std::string>> list_rows(const std::vector<dlock::LockInfo>& locks) {
  std::vector<std::vector<std::string>> rows = {
      {"KEY", "MODE", "OWNER", "HOST", "PID", "NAME", "TOKEN", "TTL"}};
  for (const auto& l : locks) {
    rows.push_back({printable(l.key), mode_text(l), l.owner, printable(l.host),
                    std::to_string(l.pid), l.name.empty() ? "-" : printable(l.name),
                    std::to_string(l.token),
                    duration_text(l.ttl) + (l.min_hold ? " (min_hold)" : "")});
  }
  return rows;
}

std::string json_audit(const dlock::AuditEntry& e) {
  return fmt::format(
      "{{\"id\":{},\"at_ms\":{},\"at\":{},\"user\":{},\"host\":{},\"pid\":{},\"note\":{},\"key\":{}"
      ","
      "\"owner\":{},\"token\":{},\"owner_host\":{},\"owner_pid\":{},\"owner_name\":{}}}",
      json_string(e.id), e.at_ms, json_string(iso_time(e.at_ms)), json_string(e.user),
      json_string(e.host), e.pid, json_string(e.note), json_string(e.key), json_string(e.owner),
      e.token, json_string(e.owner_host), e.owner_pid, json_string(e.owner_name));
}

std::string json_run(const dlock::RunRecord& r, bool abandoned) {
  return fmt::format(
      "{{\"key\":{},\"name\":{},\"label\":{},\"owner\":{},\"token\":{},\"host\":{},\"pid\":{},"
      "\"started_at_ms\":{},\"started_at\":{},\"finished_at_ms\":{},\"outcome\":{},\"abandoned\":{}"
      ","
      "\"ttl_ms\":{}}}",
      json_string(r.key), json_string(r.name), json_string(r.label), json_string(r.owner), r.token,
      json_string(r.host), r.pid, r.started_at_ms, json_string(iso_time(r.started_at_ms)),
      r.finished_at_ms, json_string(r.outcome), abandoned ? "true" : "false", r.ttl.count());
}

std::string header(const dlock::Config& config, const std::string& backend) {
  return fmt::format("\"service\":{},\"backend\":{}", json_string(config.service),
                     json_string(backend));
}

std::string table_text(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string text;
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      text += row[c];
      if (c + 1 < row.size()) text += std::string(width[c] - row[c].size() + 2, ' ');
    }
    text += '\n';
  }
  return text;
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::fputs(table_text(rows).c_str(), stdout);
}

namespace {

std::string instances_text(const std::vector<dlock::InstanceLockInfo>& instances) {
  std::vector<std::vector<std::string>> rows = {{"  ENDPOINT", "STATE", "OWNER", "TOKEN", "TTL"}};
  for (const auto& n : instances) {
    rows.push_back({"  " + n.endpoint, !n.answered ? "unreachable" : n.held ? "held" : "free",
                    n.held ? n.owner : "-", n.held ? std::to_string(n.token) : "-",
                    n.held ? duration_text(n.ttl) : "-"});
  }
  return "instances:\n" + table_text(rows);
}

std::string holders_text(const std::vector<dlock::HolderInfo>& holders) {
  std::vector<std::vector<std::string>> rows = {
      {"  OWNER", "HOST", "PID", "NAME", "TOKEN", "TTL", "MIN_HOLD"}};
  for (const auto& h : holders) {
    rows.push_back({"  " + h.owner, printable(h.host), std::to_string(h.pid),
                    h.name.empty() ? "-" : printable(h.name), std::to_string(h.token),
                    duration_text(h.ttl), h.min_hold ? "yes" : "no"});
  }
  return "holders:\n" + table_text(rows);
}

std::string queue_text(const std::vector<dlock::WaiterInfo>& queue) {
  std::vector<std::vector<std::string>> rows = {{"  OWNER", "MODE", "FAIR", "TTL"}};
  for (const auto& w : queue) {
    rows.push_back({"  " + w.owner, w.mode, w.fair ? "yes" : "no", duration_text(w.ttl)});
  }
  return "queue:\n" + table_text(rows);
}

}  // namespace

std::string lock_detail_text(const dlock::LockInfo& l) {
  // Engines that keep one holder per key leave `holders` empty: the fields say it all.
  const bool several = l.holders.size() > 1 || l.mode != "exclusive";
  std::vector<std::vector<std::string>> rows = {
      {"key:", printable(l.key)},
      {"owner:", l.owner},
      {"host:", printable(l.host)},
      {"pid:", std::to_string(l.pid)},
      {"thread:", std::to_string(l.thread)},
      {"name:", printable(l.name)},
      {"token:", std::to_string(l.token)},
      {"acquired at:", iso_time(l.acquired_at_ms) + " (server clock)"},
      {"lease:", duration_text(l.lease)},
      {"ttl:", duration_text(l.ttl)},
      {"min_hold:", l.min_hold ? "released by its owner, kept until min_hold ends" : "no"},
  };
  if (several) rows.push_back({"mode:", mode_text(l)});
  std::string text = table_text(rows);
  if (!l.instances.empty()) text += instances_text(l.instances);
  if (several && !l.holders.empty()) text += holders_text(l.holders);
  if (!l.queue.empty()) text += queue_text(l.queue);
  return text;
}

void print_lock_detail(const dlock::LockInfo& l) {
  std::fputs(lock_detail_text(l).c_str(), stdout);
}

}  // namespace dlockctl
