// What the configuration tests share: a file's first error and its warnings, and the table
// of malformed files.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/log.hpp"

namespace dlock {

// The name the tests give parse_config for the file.
inline constexpr const char* kSource = "test.yaml";

// Every secret in the configuration tests is this word, so one check proves none reaches a
// message.
inline constexpr const char* kSecret = "hunter2";

// A malformed file: the text, where the error must point, and what it must say. Each table of
// them is an instantiation of MalformedFile (config_test.cpp).
struct BadFile {
  const char* name;
  const char* yaml;
  const char* where;    // "line:col", 1-based
  const char* message;  // "key.path: message" or part of it
};

inline void PrintTo(const BadFile& row, std::ostream* out) { *out << row.name; }

inline std::string row_name(const testing::TestParamInfo<BadFile>& info) { return info.param.name; }

class MalformedFile : public testing::TestWithParam<BadFile> {};

// The text of the ConfigError that `yaml` raises, or "<no error>".
inline std::string error_of(const std::string& yaml) {
  try {
    (void)parse_config(yaml, kSource);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "<no error>";
}

// `text` split at each newline.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  lines.push_back(text.substr(start));
  return lines;
}

// The warnings logged while `yaml` loads; a ConfigError passes through.
inline std::vector<std::string> warnings_of(const std::string& yaml) {
  std::vector<std::string> lines;
  set_log_sink([&](LogLevel level, std::string_view line) {
    if (level == LogLevel::kWarn) lines.emplace_back(line);
  });
  try {
    (void)parse_config(yaml, kSource);
  } catch (...) {
    set_log_sink({});
    throw;
  }
  set_log_sink({});
  return lines;
}

}  // namespace dlock
