// Reading Redis replies: typed views over a Reply (connection.hpp) and the helpers every
// topology uses to send a few commands and check what came back. With connection.cpp, the
// only code that looks inside a hiredis reply; no backend walks `redisReply` itself.
//
//   std::vector<Reply> replies = pipeline(conn, {{"HGETALL", key}, {"PTTL", key}});
//   if (!answered(replies[0])) return describe(replies[0]);
//   for (const auto& [field, value] : fields_of(ReplyView(replies[0]))) ...
//   const long long pttl = ReplyView(replies[1]).integer().value_or(0);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/connection.hpp"

namespace dlock::internal {

/// A read-only view of a reply or of one element of an array reply; a null view (no reply,
/// an element out of range) reads as empty.
class ReplyView {
 public:
  ReplyView() = default;
  explicit ReplyView(const Reply& reply) : raw_(reply.get()) {}
  explicit ReplyView(const redisReply* raw) : raw_(raw) {}

  [[nodiscard]] bool is_array() const noexcept;
  [[nodiscard]] bool is_integer() const noexcept;
  /// A bulk string (not a status or an error).
  [[nodiscard]] bool is_string() const noexcept;
  /// Elements of an array; 0 for anything else.
  [[nodiscard]] std::size_t size() const noexcept;
  /// Element `i` of an array; a null view when out of range or not an array.
  [[nodiscard]] ReplyView operator[](std::size_t i) const noexcept;
  /// The text of a string, status or error reply; empty for anything else.
  [[nodiscard]] std::string_view text() const noexcept;
  /// An integer reply's value; nothing for anything else.
  [[nodiscard]] std::optional<long long> integer() const noexcept;

 private:
  const redisReply* raw_ = nullptr;
};

/// The field/value pairs of a flat array (HGETALL, a script's hash) from element `first`.
[[nodiscard]] std::vector<std::pair<std::string_view, std::string_view>> fields_of(
    ReplyView array, std::size_t first = 0);

/// How one hash field is read into a `Record`: a table of these names every field read.
template <typename Record>
struct FieldReader {
  std::string_view name;
  void (*read)(Record& record, std::string_view value);
};

/// Sets the field `name` of `record` to `value` by `table`; an unknown name is ignored.
template <typename Record, std::size_t N>
void read_field(const FieldReader<Record> (&table)[N], std::string_view name,
                std::string_view value, Record& record) {
  for (const auto& field : table) {
    if (field.name == name) return field.read(record, value);
  }
}

/// Fills `record` from the field/value pairs of `array` from element `first`, by `table`.
template <typename Record, std::size_t N>
void read_fields(const FieldReader<Record> (&table)[N], ReplyView array, std::size_t first,
                 Record& record) {
  for (const auto& [name, value] : fields_of(array, first)) read_field(table, name, value, record);
}

/// Decimal text as a number, 0 when it is none (hash fields written by dlock's scripts).
[[nodiscard]] long long to_ll(std::string_view text);
[[nodiscard]] std::uint64_t to_ull(std::string_view text);

/// Whether the server answered with something other than an error reply.
[[nodiscard]] bool answered(const Reply& reply) noexcept;
/// Why a reply that did not answer failed: the error reply's text or the connection's error.
[[nodiscard]] std::string describe(const Reply& reply);
/// Throws BackendUnavailable ("backend '<backend>': <what>: <why>") unless `reply` answered.
void require(const Reply& reply, const std::string& backend, std::string_view what);

/// HGETALL and PTTL of one hash: `reply` is the first failing reply, or the HGETALL reply;
/// `pttl` is set when the hash exists (and did not expire between the two commands).
struct HashRead {
  Reply reply;
  std::optional<long long> pttl;
};
HashRead read_hash(Connection& conn, const std::string& key, bool asking = false);

/// Reads the hash `redis_key` into `out` by `table`, with `user_key` as its key and PTTL as
/// its ttl; nothing when it does not exist. Returns the first failing reply, or HGETALL's.
template <typename Record, std::size_t N>
Reply read_record(Connection& conn, const std::string& redis_key, const std::string& user_key,
                  const FieldReader<Record> (&table)[N], std::optional<Record>& out, bool asking) {
  out.reset();
  HashRead hash = read_hash(conn, redis_key, asking);
  if (hash.pttl) {
    Record record;
    record.key = user_key;
    read_fields(table, ReplyView(hash.reply), 0, record);
    record.ttl = Millis{*hash.pttl};
    out = std::move(record);
  }
  return std::move(hash.reply);
}

/// Sends `commands` as one pipeline, each preceded by ASKING when `asking`; one reply per
/// command. After a failed read the remaining replies carry that failure.
std::vector<Reply> pipeline(Connection& conn,
                            const std::vector<std::vector<std::string_view>>& commands,
                            bool asking = false);

}  // namespace dlock::internal
