// Redlock's instances and the one way every Redlock call asks them: ask all, collect what
// each answered and the first failure, then count against the quorum (N/2+1). The lock calls
// go to every instance at once (fan_out.hpp) within one deadline; scheduled runs and admin
// ask one instance after the other (they happen once per run or per command, not once per
// lock). Every answer is returned to the caller, never kept here, so any thread may ask at
// any time.
//
//   RedlockQuorum::Round round = quorum.borrow();
//   for (std::size_t i = 0; i < quorum.size(); ++i) round.ask(i, &call);
//   quorum.send(round, deadline);
//   ... release_outcome_of(round.reply(i, 0)) ...
//
//   auto times = quorum.ask_each<std::int64_t>(
//       [](Connection& conn, std::int64_t& ms) { return runs::read_time_ms(conn, ms); });
//   quorum.require_quorum(times, "TIME");   // throws BackendUnavailable
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/fan_out.hpp"
#include "redis/pool.hpp"

namespace dlock::internal {

/// Tallies of an owner-checked call (renew, release) over the instances.
struct OwnerTally {
  std::size_t ours = 0;   ///< renewed, released or kept for the owner
  std::size_t gone = 0;   ///< no key there
  std::size_t taken = 0;  ///< another owner's key there
};

/// What a tally means: the owner's call held on a quorum, may still hold (too many did not
/// answer), or did not hold because the key is another owner's or gone.
enum class OwnerVerdict { kOurs, kUnknown, kTaken, kGone };

class RedlockQuorum {
 public:
  explicit RedlockQuorum(BackendConfig config);
  ~RedlockQuorum();
  RedlockQuorum(const RedlockQuorum&) = delete;
  RedlockQuorum& operator=(const RedlockQuorum&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return instances_.size(); }
  /// N/2+1 of the N instances.
  [[nodiscard]] std::size_t quorum() const noexcept { return quorum_; }
  /// How many of the N instances must hold a grant of a key that `permits` holders may hold
  /// at once (0 or 1: a lock, or a shared hold, which needs quorum()). For P permits, the
  /// least q with (P+1)·q > P·N: P+1 holders, each on q instances, would need more than P
  /// holders on some instance, which no instance admits. floor(P·N/(P+1)) + 1, at most N.
  [[nodiscard]] std::size_t quorum_for(int permits) const noexcept;
  /// The instance that keeps the order of the fair waiters of the lock at `lock_key`: by its
  /// slot among the instances sorted by address, so the same for every process whatever
  /// order its configuration lists the instances in.
  [[nodiscard]] std::size_t order_instance(std::string_view lock_key) const noexcept;
  [[nodiscard]] const BackendConfig& config() const noexcept { return config_; }
  [[nodiscard]] const Endpoint& endpoint(std::size_t i) const { return config_.endpoints.at(i); }

  // --- The lock calls: every instance at once -------------------------------------------

  /// One parallel round: a connection per instance (an empty handle where none could be
  /// had), the calls for each and, after send(), their replies.
  struct Round {
    std::vector<ConnectionPool::Handle> handles;
    std::vector<FanOutRequest> requests;
    ConnectionPool::Lane lane = ConnectionPool::Lane::kShared;  ///< where the handles came from

    /// Adds `call` to what instance `i` is asked, if it has a connection.
    void ask(std::size_t i, const ScriptCall* call);
    /// Whether instance `i` has a usable connection (for a follow-up on the same one).
    [[nodiscard]] bool usable(std::size_t i) const;
    /// Reply `k` of instance `i`; a kNotSent "no connection" reply where nothing was sent.
    [[nodiscard]] const Reply& reply(std::size_t i, std::size_t k) const;
  };

  /// A connection to every instance that can have one: idle ones at once; new ones are
  /// opened in the background, one at a time per instance. Instances whose last call or
  /// open failed are waited for no longer than `wait` (the per-node timeout), and only while
  /// fewer than a quorum of connections are in hand; the others up to `open_wait` (a share
  /// of the lease). An instance that stalls (accepts TCP, answers nothing) therefore costs
  /// a round at most `wait` once it has failed, never the connect and command timeouts of
  /// an open; a connection opened after the wait joins the pool.
  /// Renewals borrow with Lane::kRenewal: each instance's renewal connection, which
  /// acquirers holding every shared one cannot take from them.
  /// `needed`: how many connections make the round worth sending (0: quorum()).
  Round borrow(Clock::duration wait, Clock::duration open_wait,
               ConnectionPool::Lane lane = ConnectionPool::Lane::kShared,
               std::size_t needed = 0);
  /// Sends each instance's calls of `round` and collects the replies until `deadline`, or
  /// shortly after `enough` (fan_out.hpp) says a quorum settled the question. An instance
  /// whose pooled connection turned out dead (it restarted since it was last used) is asked
  /// once more on a fresh connection.
  void send(Round& round, Clock::time_point deadline, const FanOutEnough& enough = {});
  /// What `tally` means against `needed` instances (0: quorum()).
  [[nodiscard]] OwnerVerdict verdict(const OwnerTally& tally,
                                     std::size_t needed = 0) const noexcept;

  // --- Scheduled runs and admin: one instance after the other ---------------------------

  /// What every instance answered to one question.
  template <typename T>
  struct Answers {
    std::vector<std::optional<T>> per;  ///< per instance: its answer, or none
    std::string first_error;  ///< `host:port: why` of the first failure

    [[nodiscard]] bool answered_by(std::size_t i) const { return per[i].has_value(); }
    /// How many instances answered.
    [[nodiscard]] std::size_t answered() const {
      return static_cast<std::size_t>(
          std::count_if(per.begin(), per.end(), [](const auto& a) { return a.has_value(); }));
    }
    [[nodiscard]] std::vector<bool> answered_mask() const {
      std::vector<bool> mask(per.size());
      for (std::size_t i = 0; i < per.size(); ++i) mask[i] = answered_by(i);
      return mask;
    }
  };

  /// Runs `ask(conn, T& out)` on every instance not skipped (`skip[i]`); an instance
  /// answered when the reply `ask` returns is neither a failure nor an error reply.
  template <typename T, typename Ask>
  Answers<T> ask_each(const Ask& ask, const std::vector<bool>& skip = {}) const {
    Answers<T> out;
    out.per.resize(size());
    for (std::size_t i = 0; i < size(); ++i) {
      if (i < skip.size() && skip[i]) continue;
      T value{};
      const Reply reply = run_on(i, [&](Connection& conn) {
        value = T{};
        return ask(conn, value);
      });
      if (note(reply, i, out.first_error)) out.per[i] = std::move(value);
    }
    return out;
  }

  /// Throws BackendUnavailable ("<what>: only 2 of 5 instances answered; a quorum is 3")
  /// unless a quorum answered.
  template <typename T>
  void require_quorum(const Answers<T>& answers, std::string_view what) const {
    require(answers.answered(), quorum_, answers.first_error, what);
  }
  /// Throws BackendUnavailable unless at least one instance answered.
  template <typename T>
  void require_any(const Answers<T>& answers, std::string_view what) const {
    require(answers.answered(), 1, answers.first_error, what);
  }

 private:
  struct Instance;
  struct Delivery;

  /// Opens a connection to instance `i` in the background (for a failing instance only if
  /// no open is under way; else returns false); hands it to `delivery` if that still waits,
  /// else to the pool.
  bool start_open(std::size_t i, std::shared_ptr<Delivery> delivery, bool required);
  void open_in_background(Instance& instance, std::size_t i, Delivery& delivery, bool required);

  Reply run_on(std::size_t i, const std::function<Reply(Connection&)>& call) const;
  /// Whether `reply` is an answer; otherwise keeps the first failure in `first_error`.
  bool note(const Reply& reply, std::size_t i, std::string& first_error) const;
  void require(std::size_t answered, std::size_t needed, const std::string& first_error,
               std::string_view what) const;

  const BackendConfig config_;
  const std::size_t quorum_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<std::size_t> by_address_;  ///< the instances' indexes, sorted by address
};

}  // namespace dlock::internal
