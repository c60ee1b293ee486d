#include "dlock/codegen/files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dlock::codegen {
namespace fs = std::filesystem;

bool write_file_atomically(const std::string& path, std::string_view content, std::string& error) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) {
    error = "cannot create directory '" + target.parent_path().string() + "': " + ec.message();
    return false;
  }
  // Same directory, so that the rename cannot cross file systems; the pid keeps two
  // concurrent runs from sharing a temporary.
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) {
      error = "cannot write '" + temporary + "': " + std::strerror(errno);
      fs::remove(temporary, ec);
      return false;
    }
  }
  fs::rename(temporary, target, ec);
  if (ec) {
    error = "cannot rename '" + temporary + "' to '" + path + "': " + ec.message();
    fs::remove(temporary, ec);
    return false;
  }
  return true;
}

bool write_file_if_absent(const std::string& path, std::string_view content,
                          std::string& error) {
  const std::string temporary = path + ".new." + std::to_string(::getpid());
  if (!write_file_atomically(temporary, content, error)) return false;
  // link() fails with EEXIST when another run was first: its file (the same text) stays,
  // with its time.
  const bool linked = ::link(temporary.c_str(), path.c_str()) == 0 || errno == EEXIST;
  if (!linked) error = "cannot create '" + path + "': " + std::strerror(errno);
  std::error_code ec;
  fs::remove(temporary, ec);
  return linked;
}

void remove_file(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);  // absent is fine; anything else shows up when writing
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);  // as remove_file
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  return absolute.lexically_normal().string();
}

bool read_file(const std::string& path, std::string& content, std::string& error) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    error = "cannot read '" + path + "': is a directory";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    error = "cannot read '" + path + "'";
    return false;
  }
  content = std::move(buffer).str();
  return true;
}

}  // namespace dlock::codegen
