#include "dlock/codegen/header_cache.hpp"

#include <llvm/Support/xxhash.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

namespace dlock::codegen {
namespace {

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// Appends `part` with its length, so that no two lists of parts digest alike.
void add(std::string& digest_input, std::string_view part) {
  digest_input += std::to_string(part.size());
  digest_input += ':';
  digest_input += part;
}

}  // namespace

std::string generator_context(const std::vector<std::string>& compiler_flags) {
  std::string context;
  add(context, DLOCK_CODEGEN_VERSION);
  // A rebuilt generator may weave differently under the same version.
  struct stat self {};
  if (::stat("/proc/self/exe", &self) == 0) {
    add(context, std::to_string(self.st_size) + "." + std::to_string(self.st_mtim.tv_sec) + "." +
                     std::to_string(self.st_mtim.tv_nsec));
  }
  for (const std::string& flag : compiler_flags) add(context, flag);
  return context;
}

std::string copy_key(const std::vector<CopiedFile>& files, std::size_t file,
                     std::string_view context) {
  std::set<std::size_t> reached{file};
  std::vector<std::size_t> pending{file};
  while (!pending.empty()) {
    const std::size_t next = pending.back();
    pending.pop_back();
    for (const std::size_t included : files[next].includes) {
      if (reached.insert(included).second) pending.push_back(included);
    }
  }
  std::vector<std::size_t> order(reached.begin(), reached.end());
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return files[a].path < files[b].path; });
  std::string input;
  add(input, context);
  add(input, files[file].path);
  for (const std::size_t each : order) {
    add(input, files[each].path);
    add(input, files[each].text);
  }
  const llvm::XXH128_hash_t digest = llvm::xxh3_128bits(
      llvm::ArrayRef(reinterpret_cast<const std::uint8_t*>(input.data()), input.size()));
  return hex(digest.high64) + hex(digest.low64);
}

std::string shared_copy_path(const std::string& dir, std::string_view key,
                             const std::string& original) {
  return dir + "/" + std::string(key) + "/" +
         std::filesystem::path(original).filename().string();
}

std::string own_copy_path(const std::string& dir, const std::string& original) {
  return shared_copy_path(dir, hex(llvm::xxh3_64bits(original)).substr(0, 8), original);
}

}  // namespace dlock::codegen
