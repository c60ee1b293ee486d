#include "dlock/admin.hpp"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "client_core.hpp"
#include "engine.hpp"
#include "owner.hpp"

namespace dlock {
namespace {

std::string os_user() {
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[4096];
  if (getpwuid_r(geteuid(), &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr &&
      found->pw_name != nullptr) {
    return found->pw_name;
  }
  if (const char* user = std::getenv("USER"); user != nullptr && *user != '\0') return user;
  return "uid " + std::to_string(geteuid());
}

// `[...]` at pattern[i] (just past '['): whether it matches c; advances i past ']'.
// Returns nullopt for an unterminated class (then '[' is an ordinary byte).
std::optional<bool> match_class(std::string_view p, std::size_t& i, unsigned char c) {
  std::size_t j = i;
  bool negate = false;
  if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
    negate = true;
    ++j;
  }
  bool matched = false;
  bool first = true;
  while (j < p.size() && (p[j] != ']' || first)) {
    first = false;
    unsigned char lo = static_cast<unsigned char>(p[j]);
    if (lo == '\\' && j + 1 < p.size()) lo = static_cast<unsigned char>(p[++j]);
    unsigned char hi = lo;
    if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
      hi = static_cast<unsigned char>(p[j + 2]);
      if (hi == '\\' && j + 3 < p.size()) {
        hi = static_cast<unsigned char>(p[j + 3]);
        ++j;
      }
      j += 2;
    }
    if (lo <= c && c <= hi) matched = true;
    ++j;
  }
  if (j >= p.size()) return std::nullopt;
  i = j + 1;
  return matched != negate;
}

// The admin seam of `backend`; AdminNotSupported when its topology has none.
internal::AdminBackend& admin_of(const Client& client, const std::string& backend) {
  return internal::admin_of(client.core()->engine(backend));
}

}  // namespace

bool glob_match(std::string_view p, std::string_view t) noexcept {
  // Iterative matching with backtracking to the last '*'.
  std::size_t pi = 0, ti = 0;
  std::size_t star = std::string_view::npos, star_t = 0;
  while (ti < t.size()) {
    if (pi < p.size()) {
      const char pc = p[pi];
      if (pc == '*') {
        star = pi++;
        star_t = ti;
        continue;
      }
      if (pc == '?') {
        ++pi;
        ++ti;
        continue;
      }
      if (pc == '[') {
        std::size_t next = pi + 1;
        const auto m = match_class(p, next, static_cast<unsigned char>(t[ti]));
        if (m.has_value()) {
          if (*m) {
            pi = next;
            ++ti;
            continue;
          }
        } else if (t[ti] == '[') {
          ++pi;
          ++ti;
          continue;
        }
      } else {
        char literal = pc;
        std::size_t width = 1;
        if (pc == '\\' && pi + 1 < p.size()) {
          literal = p[pi + 1];
          width = 2;
        }
        if (literal == t[ti]) {
          pi += width;
          ++ti;
          continue;
        }
      }
    }
    if (star == std::string_view::npos) return false;
    pi = star + 1;
    ti = ++star_t;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

Admin::Admin(Client client) : client_(std::move(client)) {}

std::vector<LockInfo> Admin::list(std::string_view pattern, const std::string& backend) const {
  std::vector<LockInfo> out = admin_of(client_, backend).list(pattern);
  std::sort(out.begin(), out.end(),
            [](const LockInfo& a, const LockInfo& b) { return a.key < b.key; });
  return out;
}

std::optional<LockInfo> Admin::inspect(const Key& key, const std::string& backend) const {
  return admin_of(client_, backend).inspect(key);
}

std::optional<LockInfo> Admin::force_release(const Key& key, std::string_view note,
                                             const std::string& backend) const {
  AuditEntry who;
  who.id = internal::new_owner_id();
  who.user = os_user();
  who.host = internal::host_name();
  who.pid = internal::process_id();
  who.note = std::string(note);
  return admin_of(client_, backend).force_release(key, who);
}

std::vector<AuditEntry> Admin::history(std::size_t limit, const std::string& backend) const {
  return admin_of(client_, backend).history(limit);
}

std::vector<RunRecord> Admin::runs(std::string_view pattern, const std::string& backend) const {
  std::vector<RunRecord> out =
      internal::runs_of(client_.core()->engine(backend)).list_runs(pattern);
  std::sort(out.begin(), out.end(),
            [](const RunRecord& a, const RunRecord& b) { return a.key < b.key; });
  return out;
}

}  // namespace dlock
