#include "dlock/codegen/depfile.hpp"

namespace dlock::codegen {

std::string escape_make_path(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (std::size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == ' ' || c == '\t') {
      // Make needs the backslashes in front of a space doubled, then the space escaped.
      for (std::size_t j = i; j > 0 && path[j - 1] == '\\'; --j) out += '\\';
      out += '\\';
    } else if (c == '#') {
      out += '\\';
    } else if (c == '$') {
      out += '$';
    }
    out += c;
  }
  return out;
}

std::string make_depfile(std::string_view target, const std::vector<std::string>& dependencies) {
  std::string text = escape_make_path(target) + ":";
  for (const std::string& dependency : dependencies) {
    text += " \\\n  " + escape_make_path(dependency);
  }
  text += "\n";
  return text;
}

}  // namespace dlock::codegen
