// The scheduled task of the example: one report per slot, whichever instance gets to it.
#pragma once

#include <cstdint>
#include <string>

namespace reports {

struct Instance {
  std::string name;      ///< e.g. "i3"; stored with the run record
  std::string log_path;  ///< where runs are journaled (a line per start and end); none if empty
  int work_min_ms = 100;
  int work_max_ms = 300;
};

/// Produces the report of `slot` unless another instance already did (or is doing) it.
/// Returns false when skipped.
bool produce_report(std::int64_t slot, const Instance& self);

}  // namespace reports
