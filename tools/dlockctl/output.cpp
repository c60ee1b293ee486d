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

std::string json_lock(const dlock::LockInfo& l) {
  std::string out = fmt::format(
      "{{\"key\":{},\"owner\":{},\"host\":{},\"pid\":{},\"thread\":{},\"name\":{},\"token\":{},"
      "\"acquired_at_ms\":{},\"acquired_at\":{},\"lease_ms\":{},\"ttl_ms\":{},\"min_hold\":{},"
      "\"instances\":[",
      json_string(l.key), json_string(l.owner), json_string(l.host), l.pid, l.thread,
      json_string(l.name), l.token, l.acquired_at_ms, json_string(iso_time(l.acquired_at_ms)),
      l.lease.count(), l.ttl.count(), l.min_hold ? "true" : "false");
  for (std::size_t i = 0; i < l.instances.size(); ++i) {
    const auto& n = l.instances[i];
    out += fmt::format(
        "{}{{\"endpoint\":{},\"answered\":{},\"held\":{},\"owner\":{},\"token\":{},\"ttl_ms\":{},"
        "\"error\":{}}}",
        i == 0 ? "" : ",", json_string(n.endpoint), n.answered ? "true" : "false",
        n.held ? "true" : "false", json_string(n.owner), n.token, n.ttl.count(),
        json_string(n.error));
  }
  return out + "]}";
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

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    std::puts(line.c_str());
  }
}

void print_lock_detail(const dlock::LockInfo& l) {
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
  print_table(rows);
  if (!l.instances.empty()) {
    std::puts("instances:");
    std::vector<std::vector<std::string>> inst = {{"  ENDPOINT", "STATE", "OWNER", "TOKEN", "TTL"}};
    for (const auto& n : l.instances) {
      inst.push_back({"  " + n.endpoint, !n.answered ? "unreachable" : n.held ? "held" : "free",
                      n.held ? n.owner : "-", n.held ? std::to_string(n.token) : "-",
                      n.held ? duration_text(n.ttl) : "-"});
    }
    print_table(inst);
  }
}

}  // namespace dlockctl
