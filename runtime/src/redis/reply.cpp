#include "redis/reply.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <cstdlib>

#include "dlock/errors.hpp"

namespace dlock::internal {

bool ReplyView::is_array() const noexcept {
  return raw_ != nullptr && raw_->type == REDIS_REPLY_ARRAY;
}
bool ReplyView::is_integer() const noexcept {
  return raw_ != nullptr && raw_->type == REDIS_REPLY_INTEGER;
}
bool ReplyView::is_string() const noexcept {
  return raw_ != nullptr && raw_->type == REDIS_REPLY_STRING;
}

std::size_t ReplyView::size() const noexcept { return is_array() ? raw_->elements : 0; }

ReplyView ReplyView::operator[](std::size_t i) const noexcept {
  return ReplyView(i < size() ? raw_->element[i] : nullptr);
}

std::string_view ReplyView::text() const noexcept {
  if (raw_ == nullptr || raw_->str == nullptr) return {};
  return {raw_->str, raw_->len};
}

std::optional<long long> ReplyView::integer() const noexcept {
  if (!is_integer()) return std::nullopt;
  return raw_->integer;
}

std::vector<std::pair<std::string_view, std::string_view>> fields_of(ReplyView array,
                                                                     std::size_t first) {
  std::vector<std::pair<std::string_view, std::string_view>> out;
  for (std::size_t i = first; i + 1 < array.size(); i += 2) {
    out.emplace_back(array[i].text(), array[i + 1].text());
  }
  return out;
}

long long to_ll(std::string_view text) {
  return std::strtoll(std::string(text).c_str(), nullptr, 10);
}

std::uint64_t to_ull(std::string_view text) {
  return std::strtoull(std::string(text).c_str(), nullptr, 10);
}

bool answered(const Reply& reply) noexcept { return reply.ok() && !reply.is_error(); }

std::string describe(const Reply& reply) {
  return reply.ok() ? std::string(reply.text()) : reply.error();
}

void require(const Reply& reply, const std::string& backend, std::string_view what) {
  if (!answered(reply)) {
    throw BackendUnavailable(fmt::format("backend '{}': {}: {}", backend, what, describe(reply)));
  }
}

HashRead read_hash(Connection& conn, const std::string& key, bool asking) {
  std::vector<Reply> replies = pipeline(conn, {{"HGETALL", key}, {"PTTL", key}}, asking);
  for (auto& reply : replies) {
    if (!answered(reply)) return {std::move(reply), std::nullopt};
  }
  const long long pttl = ReplyView(replies[1]).integer().value_or(0);
  // An empty reply: no such hash; -2: it expired between the two commands.
  if (ReplyView(replies[0]).size() == 0 || pttl == -2) return {std::move(replies[0]), std::nullopt};
  return {std::move(replies[0]), pttl};
}

std::vector<Reply> pipeline(Connection& conn,
                            const std::vector<std::vector<std::string_view>>& commands,
                            bool asking) {
  for (const auto& command : commands) {
    if (asking) conn.append({"ASKING"});
    conn.append(command);
  }
  std::vector<Reply> replies;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (asking) {
      Reply ok = conn.read_reply();
      if (!ok.ok()) {
        while (replies.size() < commands.size())
          replies.push_back(Reply::failed(ok.status(), ok.error()));
        return replies;
      }
    }
    Reply reply = conn.read_reply();
    if (!reply.ok()) {
      while (replies.size() < commands.size())
        replies.push_back(Reply::failed(reply.status(), reply.error()));
      return replies;
    }
    replies.push_back(std::move(reply));
  }
  return replies;
}

}  // namespace dlock::internal
