// A YAML file in the temporary directory, for programs that read their configuration from a
// path (workers, dlockctl, the examples); removed with the object.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

namespace dlock::test {

class YamlFile {
 public:
  explicit YamlFile(const std::string& text)
      : path_(std::filesystem::temp_directory_path() /
              ("dlock-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++) + ".yaml")) {
    std::ofstream(path_) << text;
  }
  ~YamlFile() { std::filesystem::remove(path_); }
  YamlFile(const YamlFile&) = delete;
  YamlFile& operator=(const YamlFile&) = delete;

  [[nodiscard]] std::string path() const { return path_.string(); }

 private:
  static std::atomic<int>& counter() {
    static std::atomic<int> n{0};
    return n;
  }
  std::filesystem::path path_;
};

}  // namespace dlock::test
