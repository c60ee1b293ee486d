// Who we are, as stored with every lock.
#pragma once

#include <string>

namespace dlock::internal {

/// A new owner id: 128 random bits fixed for the process, then a per-acquisition counter,
/// so ids never repeat across processes or acquisitions. Hex text.
[[nodiscard]] std::string new_owner_id();

[[nodiscard]] const std::string& host_name();
[[nodiscard]] long process_id();
/// The kernel's id of the calling thread (what `top -H` shows).
[[nodiscard]] long thread_id();

}  // namespace dlock::internal
