#include "redis/fan_out.hpp"

#include <poll.h>

#include <algorithm>

#include <fmt/format.h>

namespace dlock::internal {
namespace {

// After `enough`, the stragglers get twice as long as the answers so far took, and at least
// this long (a healthy server's reply can sit behind on a busy host; cutting it off costs a
// reconnect).
constexpr Millis kStragglerFloor{20};

// Which calls of one request go out in this round, and where their replies go.
struct Round {
  std::vector<std::size_t> calls;
  std::size_t received = 0;
};

void fail_rest(FanOutRequest& request, Round& round, Reply::Status status, const std::string& why) {
  for (; round.received < round.calls.size(); ++round.received) {
    request.replies[round.calls[round.received]] = Reply::failed(status, why);
  }
}

bool settled(const std::vector<FanOutRequest>& requests, const std::vector<Round>& rounds,
             const FanOutEnough& enough) {
  if (!enough) return false;
  std::vector<bool> complete(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    complete[i] = !requests[i].calls.empty() && rounds[i].received == rounds[i].calls.size();
    // A reply of an earlier round (before NOSCRIPT) is not complete until retried.
    for (const auto& reply : requests[i].replies) {
      complete[i] = complete[i] && reply.server_error() != ServerError::kNoScript;
    }
  }
  return enough(requests, complete);
}

// Sends every request's calls of the round (as EVAL when `eval`) as one pipeline.
void send_round(std::vector<FanOutRequest>& requests, std::vector<Round>& rounds, bool eval) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto& request = requests[i];
    if (rounds[i].calls.empty()) continue;
    for (std::size_t c : rounds[i].calls) request.calls[c]->append(*request.conn, eval);
    if (!request.conn->flush()) {
      fail_rest(request, rounds[i], Reply::Status::kBroken,
                fmt::format("connection to {} failed: {}", to_string(request.conn->endpoint()),
                            request.conn->error()));
    }
  }
}

// Reads what a connection that poll() found ready has for the round.
void read_ready(FanOutRequest& request, Round& round) {
  request.conn->read_available();
  // Replies that came before a failure (a server that answered, then closed) still count.
  while (round.received < round.calls.size()) {
    auto reply = request.conn->next_reply();
    if (!reply) break;
    request.replies[round.calls[round.received++]] = std::move(*reply);
  }
  if (request.conn->broken()) {  // I/O, a protocol error, a reply too large
    fail_rest(request, round, Reply::Status::kBroken,
              fmt::format("connection to {} failed: {}", to_string(request.conn->endpoint()),
                          request.conn->error()));
  }
}

// Sends the round's calls (as EVAL when `eval`) and reads their replies until `deadline`,
// or shortly after `enough` says the replies settle the question.
void run_round(std::vector<FanOutRequest>& requests, std::vector<Round>& rounds, bool eval,
               Clock::time_point deadline, const FanOutEnough& enough) {
  const auto started = Clock::now();
  bool cut = false;
  send_round(requests, rounds, eval);
  std::vector<pollfd> fds;
  std::vector<std::size_t> owners;
  for (;;) {
    fds.clear();
    owners.clear();
    bool buffered = false;  // bytes TLS holds that poll() cannot see: no waiting this time
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (rounds[i].received < rounds[i].calls.size()) {
        fds.push_back(pollfd{requests[i].conn->fd(), requests[i].conn->poll_events(), 0});
        owners.push_back(i);
        buffered = buffered || requests[i].conn->has_buffered();
      }
    }
    if (fds.empty()) return;
    if (!cut && settled(requests, rounds, enough)) {
      cut = true;
      deadline = std::min(
          deadline,
          Clock::now() + std::max<Clock::duration>(2 * (Clock::now() - started), kStragglerFloor));
    }
    const auto left = std::chrono::ceil<Millis>(deadline - Clock::now()).count();
    if (left <= 0) break;
    if (::poll(fds.data(), fds.size(), buffered ? 0 : static_cast<int>(left)) == 0 && !buffered)
      break;
    for (std::size_t f = 0; f < fds.size(); ++f) {
      if (fds[f].revents == 0 && !requests[owners[f]].conn->has_buffered()) continue;
      read_ready(requests[owners[f]], rounds[owners[f]]);
    }
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (rounds[i].received < rounds[i].calls.size()) {
      requests[i].conn->abandon();
      fail_rest(requests[i], rounds[i], Reply::Status::kTimeout,
                fmt::format("no reply from {} in time", to_string(requests[i].conn->endpoint())));
    }
  }
}

}  // namespace

void fan_out(std::vector<FanOutRequest>& requests, Clock::time_point deadline,
             const FanOutEnough& enough) {
  std::vector<Round> rounds(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto& request = requests[i];
    request.replies.clear();
    request.replies.resize(request.calls.size());
    for (std::size_t c = 0; c < request.calls.size(); ++c) {
      if (request.conn == nullptr) {
        request.replies[c] = Reply::failed(Reply::Status::kNotSent, "no connection");
      } else {
        rounds[i].calls.push_back(c);
      }
    }
  }
  run_round(requests, rounds, false, deadline, enough);
  bool again = false;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    rounds[i] = Round{};
    for (std::size_t c = 0; c < requests[i].calls.size(); ++c) {
      if (requests[i].replies[c].server_error() == ServerError::kNoScript) {
        rounds[i].calls.push_back(c);
        again = true;
      }
    }
  }
  if (again) run_round(requests, rounds, true, deadline, enough);
}

}  // namespace dlock::internal
