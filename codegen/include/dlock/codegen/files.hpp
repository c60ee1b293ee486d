// Files in and out: reading sources, and writing results so that a build never sees a
// half-written or stale file.
//
//   std::string error;
//   if (!write_file_atomically("woven/orders.cpp", text, error)) { ... }
#pragma once

#include <string>
#include <string_view>

namespace dlock::codegen {

/// Writes `content` to a temporary file next to `path` and renames it over `path`; creates
/// missing parent directories. On failure returns false with `error` set and leaves no file.
[[nodiscard]] bool write_file_atomically(const std::string& path, std::string_view content,
                                         std::string& error);

/// Writes `content` to `path` unless a file is there already, which is then left untouched
/// (with its modification time); of two runs racing, one file wins whole. For files whose
/// name says what they hold.
[[nodiscard]] bool write_file_if_absent(const std::string& path, std::string_view content,
                                        std::string& error);

/// Removes `path` if it exists; an absent file is not an error.
void remove_file(const std::string& path);

/// Removes the directory `path` and everything in it, if it exists.
void remove_tree(const std::string& path);

/// `path` made absolute against the current directory, with `.` and `..` removed; symbolic
/// links are kept, so the path still reads as the user wrote it.
[[nodiscard]] std::string absolute_path(const std::string& path);

/// Reads a whole file. Returns false with `error` set when it cannot be read.
[[nodiscard]] bool read_file(const std::string& path, std::string& content, std::string& error);

}  // namespace dlock::codegen
