#include "dlock/schedule.hpp"

#include <fmt/format.h>

#include <exception>
#include <stdexcept>

#include "client_core.hpp"
#include "engine.hpp"
#include "dlock/dlock.hpp"
#include "lease_state.hpp"
#include "log.hpp"
#include "owner.hpp"

namespace dlock {
namespace {

// Floor division for slot numbers before the epoch too.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// The run store of `backend`; NotSupported when its topology keeps no runs.
internal::RunStore& runs_of(const Client& client, const std::string& backend) {
  return internal::runs_of(client.core()->engine(backend));
}

Slot slot_at(const Client& client, std::chrono::milliseconds period, const std::string& backend,
             bool nearest) {
  if (period.count() <= 0) {
    throw std::invalid_argument(
        fmt::format("schedule period must be positive, got {}ms", period.count()));
  }
  internal::RunStore& runs = runs_of(client, backend);
  const auto before = std::chrono::steady_clock::now();
  const std::int64_t now_ms = runs.server_time_ms();
  const auto after = std::chrono::steady_clock::now();
  const std::int64_t p = period.count();
  Slot slot;
  slot.period = period;
  slot.server_now_ms = now_ms;
  slot.index = floor_div(nearest ? now_ms + p / 2 : now_ms, p);
  slot.starts_at_ms = slot.index * p;
  // The server read its clock somewhere in [before, after]: take the middle.
  const auto read_at = before + (after - before) / 2;
  slot.next_starts_at = read_at + std::chrono::milliseconds(slot.starts_at_ms + p - now_ms);
  return slot;
}

}  // namespace

Slot nearest_slot(const Client& client, std::chrono::milliseconds period,
                  const std::string& backend) {
  return slot_at(client, period, backend, true);
}
Slot nearest_slot(std::chrono::milliseconds period, const std::string& backend) {
  return nearest_slot(client(), period, backend);
}
Slot current_slot(const Client& client, std::chrono::milliseconds period,
                  const std::string& backend) {
  return slot_at(client, period, backend, false);
}
Slot current_slot(std::chrono::milliseconds period, const std::string& backend) {
  return current_slot(client(), period, backend);
}

std::int64_t server_time_ms(const Client& client, const std::string& backend) {
  return runs_of(client, backend).server_time_ms();
}

const char* to_string(ClaimStatus status) noexcept {
  switch (status) {
    case ClaimStatus::kClaimed:
      return "claimed";
    case ClaimStatus::kAlreadyRan:
      return "already_ran";
    case ClaimStatus::kNotHeld:
      return "not_held";
  }
  return "unknown";
}

RunClaim::RunClaim(ClaimStatus status, RunRecord record, LeaseView lease)
    : status_(status),
      record_(std::move(record)),
      lease_(std::move(lease)),
      exceptions_(std::uncaught_exceptions()),
      finished_(status != ClaimStatus::kClaimed) {}

RunClaim::RunClaim(RunClaim&& other) noexcept
    : status_(other.status_),
      record_(std::move(other.record_)),
      lease_(std::move(other.lease_)),
      exceptions_(other.exceptions_),
      finished_(std::exchange(other.finished_, true)) {}

RunClaim& RunClaim::operator=(RunClaim&& other) noexcept {
  if (this != &other) {
    finish(std::uncaught_exceptions() > exceptions_ ? "failed" : "ok");
    status_ = other.status_;
    record_ = std::move(other.record_);
    lease_ = std::move(other.lease_);
    exceptions_ = other.exceptions_;
    finished_ = std::exchange(other.finished_, true);
  }
  return *this;
}

RunClaim::~RunClaim() { finish(std::uncaught_exceptions() > exceptions_ ? "failed" : "ok"); }

bool RunClaim::finish(std::string_view outcome) noexcept {
  if (finished_) return false;
  finished_ = true;
  try {
    const auto& state = lease_.state();
    // A run whose lease was lost may have overlapped another holder: say so.
    const std::string_view recorded = state->lost() && outcome == "ok" ? "lost" : outcome;
    internal::RunStore& runs = internal::runs_of(state->core->engine(state->settings.backend));
    const bool done = runs.finish_run(state->key, state->owner, recorded);
    record_.outcome = recorded;
    internal::log(done ? LogLevel::kInfo : LogLevel::kWarn,
                  "event=run_finished name={} key={} token={} outcome={}{}",
                  internal::name_field(record_.name), internal::printable(record_.key),
                  record_.token, recorded,
                  done ? "" : " detail=\"the run record could not be updated\"");
    return done;
  } catch (...) {
    return false;
  }
}

RunClaim claim_run(const LeaseView& lease, const RunOptions& options) {
  if (!lease)
    throw std::logic_error(
        "dlock::claim_run: no lease (call it inside a guarded function or pass one)");
  const auto& state = lease.state();
  RunRecord mine;
  mine.key = state->key.str();
  mine.name = state->name;
  mine.label = options.label;
  mine.owner = state->owner;
  mine.token = state->token;
  mine.host = internal::host_name();
  mine.pid = internal::process_id();
  if (state->lost()) return RunClaim(ClaimStatus::kNotHeld, {}, lease);
  internal::RunStore& runs = internal::runs_of(state->core->engine(state->settings.backend));
  internal::RunClaimReply reply = runs.claim_run(state->key, mine, options.keep);
  switch (reply.status) {
    case ClaimStatus::kClaimed:
      internal::log(LogLevel::kInfo, "event=run_claimed name={} key={} token={} label={}",
                    internal::name_field(state->name), internal::printable(mine.key), state->token,
                    internal::printable(options.label));
      break;
    case ClaimStatus::kAlreadyRan:
      internal::log(LogLevel::kInfo,
                    "event=run_skipped name={} key={} ran_by={}@{} pid={} token={} outcome={}",
                    internal::name_field(state->name), internal::printable(mine.key),
                    internal::printable(reply.record.label), reply.record.host, reply.record.pid,
                    reply.record.token, reply.record.outcome);
      internal::bump(state->series->skipped);
      break;
    case ClaimStatus::kNotHeld:
      internal::log(LogLevel::kWarn,
                    "event=run_refused name={} key={} detail=\"the lease is no longer held\"",
                    internal::name_field(state->name), internal::printable(mine.key));
      break;
  }
  return RunClaim(reply.status, std::move(reply.record), lease);
}

RunClaim claim_run(const RunOptions& options) { return claim_run(current_lease(), options); }

}  // namespace dlock
