// Script calls sent to several servers at once, from the calling thread: everything is
// written first, then one poll() over all the sockets collects the replies until one
// deadline. Redlock asks its instances this way, so a call costs the slowest instance's
// round trip, not the sum of them.
//
//   std::vector<FanOutRequest> requests(n);
//   requests[i].conn = &*handle[i];  requests[i].calls = {&call_for[i]};
//   fan_out(requests, Clock::now() + per_node_timeout);
//   // requests[i].replies: one per call; kTimeout for those not answered in time
#pragma once

#include <functional>
#include <vector>

#include "redis/scripts.hpp"

namespace dlock::internal {

struct FanOutRequest {
  Connection* conn = nullptr;  ///< null: nothing is sent; every reply is kNotSent
  std::vector<const ScriptCall*> calls;
  std::vector<Reply> replies;  ///< out: one per call, in order
};

/// Whether the replies so far settle the question (a quorum answered): `complete[i]` says
/// that request i has calls and all their replies.
using FanOutEnough = std::function<bool(const std::vector<FanOutRequest>& requests,
                                        const std::vector<bool>& complete)>;

/// Sends every request's calls as a pipeline (EVALSHA; calls answered NOSCRIPT go again as
/// EVAL) and waits for the replies until `deadline`. A connection that did not answer in
/// time is left broken, so its pool drops it. With `enough`, the wait ends once it returns
/// true: the stragglers then get twice as long as the answers so far took (at least 20 ms;
/// a healthy one answers within that), never past `deadline`; those still silent count as
/// timed out.
void fan_out(std::vector<FanOutRequest>& requests, Clock::time_point deadline,
             const FanOutEnough& enough = {});

}  // namespace dlock::internal
