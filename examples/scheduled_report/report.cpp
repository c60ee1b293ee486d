#include "report.hpp"

#include <dlock/dlock.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

namespace reports {
namespace {

// One line per event, appended with a single write() so that a kill never leaves half a
// line: "<event> <slot> <instance> <token> <server ms>".
void journal(const Instance& self, std::string_view event, std::int64_t slot, std::uint64_t token,
             std::int64_t at_ms) {
  if (self.log_path.empty()) return;
  const std::string line = fmt::format("{} {} {} {} {}\n", event, slot, self.name, token, at_ms);
  const int fd = ::open(self.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  [[maybe_unused]] const auto written = ::write(fd, line.data(), line.size());
  ::close(fd);
}

}  // namespace

// The recipe (docs/SCHEDULING.md): the slot in the key; skip when busy; min_hold longer
// than the clock difference between instances, so a quick run keeps its slot's lock until
// late instances have fired; max_hold as the longest a report may take; and claim_run,
// which refuses a second run of the slot even after its lock is gone.
[[dlock::guard("report:<slot>", on_busy=skip, lease=3s, min_hold=1s, max_hold=20s)]]
bool produce_report(std::int64_t slot, const Instance& self) {
  dlock::RunClaim run = dlock::claim_run({self.name, std::chrono::minutes(10)});
  if (!run) return false;  // already ran: the lock had expired, the record had not
  journal(self, "ran", slot, run.record().token, run.record().started_at_ms);
  static thread_local std::mt19937 rng(static_cast<unsigned>(::getpid()));
  const int span = std::max(0, self.work_max_ms - self.work_min_ms);
  std::this_thread::sleep_for(std::chrono::milliseconds(self.work_min_ms + static_cast<int>(rng() % (span + 1))));
  journal(self, "done", slot, run.record().token, 0);
  return true;
}

}  // namespace reports
