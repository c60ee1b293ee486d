// dlockctl's text and JSON output: bytes made printable, JSON strings of raw bytes, times,
// durations, the JSON of locks, audit entries and runs, a lock's kind, and tables.
#pragma once

#include <dlock/admin.hpp>
#include <dlock/config.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlockctl {

// Keys may hold any bytes: printable ASCII as is, everything else as \xNN.
std::string printable(std::string_view bytes);

// A JSON string of raw bytes: printable ASCII as is (with " and \ escaped); every other
// byte b as \u00XX, i.e. each byte becomes the code point of the same value (decode with
// .encode('latin-1') to get the bytes back).
std::string json_string(std::string_view bytes);

std::string iso_time(std::int64_t ms);

std::string duration_text(std::chrono::milliseconds d);

std::string json_lock(const dlock::LockInfo& l);

// The MODE column of `list`: "X" (exclusive), "Sx3" (three shared holders), "P 2/3" (two of
// three permits taken), with "+fair" when a fair waiter is queued. ASCII, as every column.
std::string mode_text(const dlock::LockInfo& l);

// The `list` table, header first: KEY MODE OWNER HOST PID NAME TOKEN TTL.
std::vector<std::vector<std::string>> list_rows(const std::vector<dlock::LockInfo>& locks);

std::string json_audit(const dlock::AuditEntry& e);

std::string json_run(const dlock::RunRecord& r, bool abandoned);

std::string header(const dlock::Config& config, const std::string& backend);

// An aligned table: every column as wide as its widest cell; one line each, '\n' ended.
std::string table_text(const std::vector<std::vector<std::string>>& rows);
void print_table(const std::vector<std::vector<std::string>>& rows);

// `inspect`: the lock's fields; its instances (redlock); where the key has several holders
// or is not exclusive, the mode and every holder; the queue of waiters when there is one.
std::string lock_detail_text(const dlock::LockInfo& l);
void print_lock_detail(const dlock::LockInfo& l);

}  // namespace dlockctl
