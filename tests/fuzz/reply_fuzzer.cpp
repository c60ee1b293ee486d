// Fuzz target: what the runtime makes of whatever a server (or anything listening on its
// port) sends back.
//
// The bytes go through the reply reader every connection uses (hiredis's, with dlock's limits
// on one reply: redis/resp.hpp), fed in chunks as a socket would deliver them;
// every reply it produces is wrapped in the runtime's Reply and interpreted as the answer to
// each lock script (grant_of, renew_outcome_of, release_outcome_of) and as an error reply
// (server_error, redirect). None of it may crash, leak or hit undefined behaviour, and each
// interpretation must stay within what its callers rely on.
//
// The pub/sub, SENTINEL and CLUSTER SLOTS readings of replies are not reachable as
// functions yet (docs/RELIABILITY.md, "Open findings").
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "redis/connection.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/resp.hpp"

namespace {

using dlock::internal::GrantReply;
using dlock::internal::Reply;
using dlock::internal::ServerError;

const redisReply* element(const redisReply* r, std::size_t i) {
  return r->type == REDIS_REPLY_ARRAY && i < r->elements ? r->element[i] : nullptr;
}

void check_accessors(const Reply& reply) {
  const redisReply* raw = reply.get();
  DLOCK_FUZZ_CHECK(reply.ok() && raw != nullptr, "a parsed reply is not ok");
  DLOCK_FUZZ_CHECK(reply.is_error() == (raw->type == REDIS_REPLY_ERROR), "is_error");
  DLOCK_FUZZ_CHECK(reply.is_integer() == (raw->type == REDIS_REPLY_INTEGER), "is_integer");
  if (reply.is_integer()) DLOCK_FUZZ_CHECK(reply.integer() == raw->integer, "integer");
  const std::string_view text = reply.text();
  if (raw->str != nullptr) {
    DLOCK_FUZZ_CHECK(text.data() == raw->str && text.size() == raw->len, "text");
  }
  for (std::size_t i = 0; i <= std::min<std::size_t>(raw->elements, 8) + 1; ++i) {
    DLOCK_FUZZ_CHECK(reply.element(i) == element(raw, i), "element({})", i);
  }
}

void check_scripts(const Reply& reply) {
  const redisReply* first = element(reply.get(), 0);
  const redisReply* second = element(reply.get(), 1);
  const bool two_integers = !reply.is_error() && first != nullptr && second != nullptr &&
                            first->type == REDIS_REPLY_INTEGER &&
                            second->type == REDIS_REPLY_INTEGER;

  const GrantReply grant = dlock::internal::grant_of(reply);
  DLOCK_FUZZ_CHECK(!grant.outcome_unknown, "a reply that came is not of unknown outcome");
  switch (grant.kind) {
    case GrantReply::Kind::kAcquired:
      DLOCK_FUZZ_CHECK(two_integers && first->integer == 1 &&
                           grant.token == static_cast<std::uint64_t>(second->integer),
                       "acquired from a reply that does not say so");
      break;
    case GrantReply::Kind::kBusy:
      DLOCK_FUZZ_CHECK(two_integers && first->integer == 0 && grant.ttl.count() >= 0,
                       "busy from a reply that does not say so, ttl {}", grant.ttl.count());
      break;
    case GrantReply::Kind::kRefused:
      DLOCK_FUZZ_CHECK(two_integers && first->integer == -2 && !grant.error.empty(),
                       "refused from a reply that does not say so");
      break;
    case GrantReply::Kind::kUnavailable:
      // Even an empty error reply ("-\r\n") must leave the refused Lease a reason.
      DLOCK_FUZZ_CHECK(!grant.error.empty(), "unavailable without a reason");
      break;
    default:
      DLOCK_FUZZ_CHECK(false, "grant kind {}", static_cast<int>(grant.kind));
  }

  using dlock::internal::ReleaseOutcome;
  using dlock::internal::RenewOutcome;
  const RenewOutcome renew = dlock::internal::renew_outcome_of(reply);
  DLOCK_FUZZ_CHECK((renew == RenewOutcome::kUnavailable) == !reply.is_integer(), "renew outcome");
  if (renew == RenewOutcome::kRenewed) DLOCK_FUZZ_CHECK(reply.integer() == 1, "renewed");
  const ReleaseOutcome release = dlock::internal::release_outcome_of(reply);
  DLOCK_FUZZ_CHECK((release == ReleaseOutcome::kUnavailable) == !reply.is_integer(),
                   "release outcome");
  if (release == ReleaseOutcome::kReleased) DLOCK_FUZZ_CHECK(reply.integer() == 1, "released");
  if (release == ReleaseOutcome::kKept) DLOCK_FUZZ_CHECK(reply.integer() == 2, "kept");
}

void check_errors(const Reply& reply) {
  const ServerError kind = reply.server_error();
  DLOCK_FUZZ_CHECK((kind == ServerError::kNone) == !reply.is_error(), "server_error");
  const dlock::Endpoint from{"10.0.0.1", 7000};
  const auto redirect = reply.redirect(from);
  if (!redirect) return;
  DLOCK_FUZZ_CHECK(kind == ServerError::kMoved || kind == ServerError::kAsk,
                   "redirect from a reply that is not MOVED or ASK");
  DLOCK_FUZZ_CHECK(!redirect->target.host.empty() && redirect->target.port > 0 &&
                       redirect->target.port <= 65535,
                   "redirect to '{}':{}", redirect->target.host, redirect->target.port);
  // ClusterBackend indexes its slot map with the slot of a MOVED.
  DLOCK_FUZZ_CHECK(redirect->slot >= 0 && redirect->slot < 16384, "redirect to slot {}",
                   redirect->slot);
}

// TIME: two decimal strings, seconds and microseconds below a million, or nothing.
void check_time(const Reply& reply) {
  const std::optional<std::int64_t> us = server_time_us_of(reply);
  const redisReply* raw = reply.get();
  const bool shaped = raw != nullptr && raw->type == REDIS_REPLY_ARRAY && raw->elements == 2 &&
                      raw->element[0]->type == REDIS_REPLY_STRING && raw->element[1]->type == REDIS_REPLY_STRING;
  if (!shaped) {
    DLOCK_FUZZ_CHECK(!us, "a time read from a reply that is not two strings");
    return;
  }
  if (!us) return;
  DLOCK_FUZZ_CHECK(*us >= 0, "negative server time {}", *us);
  const std::string seconds(raw->element[0]->str, raw->element[0]->len);
  const std::string micros(raw->element[1]->str, raw->element[1]->len);
  DLOCK_FUZZ_CHECK(*us / 1000000 == std::stoll(seconds) && *us % 1000000 == std::stoll(micros),
                   "time {} read from '{}' '{}'", *us, seconds, micros);
}

void interpret(Reply reply) {
  check_accessors(reply);
  check_scripts(reply);
  check_errors(reply);
  check_time(reply);
}

// Feeds `bytes` in chunks of `chunk` bytes and interprets every reply; stops at a protocol
// error, as a connection would (it is then dropped).
void read_all(std::string_view bytes, std::size_t chunk) {
  bool too_large = false;
  redisReader* reader = dlock::internal::new_reply_reader(&too_large);
  DLOCK_FUZZ_CHECK(reader != nullptr, "new_reply_reader");
  bool broken = false;
  for (std::size_t at = 0; at < bytes.size() && !broken; at += chunk) {
    const std::string_view piece = bytes.substr(at, chunk);
    if (redisReaderFeed(reader, piece.data(), piece.size()) != REDIS_OK) break;
    for (;;) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
        broken = true;
        break;
      }
      if (raw == nullptr) break;
      interpret(Reply::ok(static_cast<redisReply*>(raw)));
    }
  }
  redisReaderFree(reader);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Input that starts with a RESP type byte (a captured reply) arrives whole; otherwise the
  // first byte says in pieces of how many bytes (1 to 16) the rest arrives.
  std::size_t chunk = size;
  if (!bytes.empty() && std::string_view("+-:$*").find(bytes.front()) == std::string_view::npos) {
    chunk = static_cast<unsigned char>(bytes.front()) % 16 + 1;
    bytes.remove_prefix(1);
  }
  if (bytes.empty()) return 0;
  read_all(bytes, chunk);
  return 0;
}
