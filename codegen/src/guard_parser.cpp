#include "dlock/codegen/guard_parser.hpp"

#include <map>

#include "dlock/codegen/edit_distance.hpp"

namespace dlock::codegen {
namespace {

constexpr const char* kDurationHint = "; write a whole number and a unit: 250ms, 30s, 10m, 1h";
constexpr const char* kKeyExample = "e.g. [[dlock::guard(\"order:<id>\")]]";

// One comma-separated argument; `start` is where it begins (its comma's offset for an empty one).
struct Argument {
  std::vector<const ArgToken*> tokens;
  std::size_t start = 0;
};

std::vector<Argument> split_arguments(const std::vector<ArgToken>& tokens) {
  std::vector<Argument> arguments(1);
  arguments.back().start = tokens.empty() ? 0 : tokens.front().offset;
  int depth = 0;
  for (const ArgToken& token : tokens) {
    if (token.kind == TokenKind::kOpen) ++depth;
    if (token.kind == TokenKind::kClose) --depth;
    if (token.kind == TokenKind::kComma && depth == 0) {
      arguments.emplace_back();
      arguments.back().start = token.offset;
      continue;
    }
    arguments.back().tokens.push_back(&token);
  }
  return arguments;
}

std::size_t span_length(const std::vector<const ArgToken*>& tokens, std::size_t first) {
  const ArgToken& last = *tokens.back();
  return last.offset + last.text.size() - tokens[first]->offset;
}

std::string join_spellings(const std::vector<const ArgToken*>& tokens, std::size_t first) {
  std::string text;
  for (std::size_t i = first; i < tokens.size(); ++i) {
    if (i > first) text += ' ';
    text += tokens[i]->text;
  }
  return text;
}

// Where an option's value is written, for the checks that relate two options.
struct ValueSite {
  std::size_t offset = 0;
  std::size_t length = 0;
  std::string spelling;
};

class Parser {
 public:
  explicit Parser(GuardParse& result) : result_(result) {}

  void parse_key(const Argument& argument, bool alone, std::size_t close_offset) {
    if (argument.tokens.empty()) {
      // With nothing at all, point at the ')'; before a ',' point at the ','.
      problem(alone ? close_offset : argument.start, 0,
              std::string("missing lock key; ") + kKeyExample);
      return;
    }
    for (const ArgToken* token : argument.tokens) {
      if (token->kind != TokenKind::kString) {
        problem(token->offset, token->text.size(),
                std::string("the lock key must be a string literal, ") + kKeyExample);
        return;
      }
    }
    for (const ArgToken* token : argument.tokens) {
      append_key_literal(token->text, token->offset, result_.spec.key, result_.problems);
    }
  }

  void parse_option(const Argument& argument) {
    const auto& tokens = argument.tokens;
    if (tokens.empty()) {
      problem(argument.start, 1, "expected an option after ','");
      return;
    }
    const ArgToken& name = *tokens[0];
    if (name.kind != TokenKind::kIdentifier) {
      problem(name.offset, name.text.size(), "expected an option name, one of " + option_list());
      return;
    }
    if (!is_known_option(name.text)) {
      report_unknown_option(name);
      return;
    }
    if (tokens.size() < 2 || tokens[1]->kind != TokenKind::kEqual) {
      const std::size_t offset =
          tokens.size() < 2 ? name.offset + name.text.size() : tokens[1]->offset;
      problem(offset, 0, "expected '=' after '" + name.text + "'");
      return;
    }
    if (tokens.size() < 3) {
      problem(tokens[1]->offset + 1, 0, "expected a value for '" + name.text + "'");
      return;
    }
    if (const auto first = first_seen_.find(name.text); first != first_seen_.end()) {
      Problem duplicate{name.offset, name.text.size(), "duplicate option '" + name.text + "'",
                        std::nullopt, {{first->second, "'" + name.text + "' first given here"}}};
      result_.problems.push_back(std::move(duplicate));
      return;
    }
    first_seen_.emplace(name.text, name.offset);
    values_[name.text] = {tokens[2]->offset, span_length(tokens, 2), join_spellings(tokens, 2)};
    parse_value(name.text, tokens);
  }

  void check_relations() {
    auto& spec = result_.spec;
    if (spec.options.lease && spec.options.lease->count() == 0) {
      value_problem("lease", "'lease' must be longer than zero");
    }
    if (spec.options.max_hold && spec.options.max_hold->count() == 0) {
      value_problem("max_hold", "'max_hold' must be longer than zero");
    }
    if (spec.options.min_hold && spec.options.max_hold &&
        *spec.options.min_hold > *spec.options.max_hold) {
      const ValueSite& min = values_.at("min_hold");
      const ValueSite& max = values_.at("max_hold");
      result_.problems.push_back({min.offset, min.length,
                                  "'min_hold' (" + min.spelling + ") is longer than 'max_hold' (" +
                                      max.spelling + ")",
                                  std::nullopt,
                                  {{max.offset, "'max_hold' given here"}}});
    }
  }

 private:
  static bool is_known_option(const std::string& name) {
    for (const std::string& known : option_names()) {
      if (known == name) return true;
    }
    return false;
  }

  static std::string option_list() {
    std::string list;
    for (const std::string& known : option_names()) {
      if (!list.empty()) list += ", ";
      list += known;
    }
    return list;
  }

  void report_unknown_option(const ArgToken& name) {
    if (auto suggestion = closest_match(name.text, option_names())) {
      result_.problems.push_back({name.offset, name.text.size(),
                                  "unknown option '" + name.text + "'; did you mean '" +
                                      *suggestion + "'?",
                                  *suggestion,
                                  {}});
    } else {
      problem(name.offset, name.text.size(),
              "unknown option '" + name.text + "'; options are " + option_list());
    }
  }

  void parse_value(const std::string& name, const std::vector<const ArgToken*>& tokens) {
    const ValueSite& site = values_[name];
    const bool single = tokens.size() == 3;
    const ArgToken& value = *tokens[2];
    auto& spec = result_.spec;
    if (name == "lease" || name == "wait" || name == "min_hold" || name == "max_hold") {
      DurationParse duration;
      if (single && value.kind == TokenKind::kNumber) {
        duration = parse_duration(value.text);
      } else {
        duration.error = "not a duration";
      }
      if (!duration.value) {
        problem(site.offset, site.length,
                "bad duration '" + site.spelling + "' for '" + name + "': " + duration.error +
                    kDurationHint);
        return;
      }
      if (name == "lease") spec.options.lease = duration.value;
      if (name == "wait") spec.options.wait = duration.value;
      if (name == "min_hold") spec.options.min_hold = duration.value;
      if (name == "max_hold") spec.options.max_hold = duration.value;
    } else if (name == "on_busy") {
      parse_on_busy(site, single && value.kind == TokenKind::kIdentifier);
    } else {
      if (!single || value.kind != TokenKind::kString) {
        problem(site.offset, site.length, "'" + name + "' takes a string literal");
        return;
      }
      std::string bytes;
      if (!decode_string_literal(value.text, value.offset, bytes, result_.problems)) return;
      if (bytes.empty()) {
        problem(site.offset, site.length, "'" + name + "' must not be empty");
        return;
      }
      (name == "policy" ? spec.policy : spec.name) = std::move(bytes);
    }
  }

  void parse_on_busy(const ValueSite& site, bool is_identifier) {
    static const std::vector<std::string> kActions{"throw", "skip"};
    if (is_identifier && (site.spelling == "throw" || site.spelling == "skip")) {
      result_.spec.options.on_busy =
          site.spelling == "skip" ? BusyAction::kSkip : BusyAction::kThrow;
      result_.spec.on_busy_offset = site.offset;
      result_.spec.on_busy_length = site.length;
      return;
    }
    std::string message =
        "bad value '" + site.spelling + "' for 'on_busy'; expected 'throw' or 'skip'";
    std::optional<std::string> fix;
    if (is_identifier) fix = closest_match(site.spelling, kActions);
    if (fix)
      message = "bad value '" + site.spelling + "' for 'on_busy'; did you mean '" + *fix + "'?";
    result_.problems.push_back({site.offset, site.length, std::move(message), fix, {}});
  }

  void value_problem(const std::string& name, std::string message) {
    const ValueSite& site = values_.at(name);
    problem(site.offset, site.length, std::move(message));
  }

  void problem(std::size_t offset, std::size_t length, std::string message) {
    result_.problems.push_back({offset, length, std::move(message), std::nullopt, {}});
  }

  GuardParse& result_;
  std::map<std::string, std::size_t> first_seen_;
  std::map<std::string, ValueSite> values_;
};

}  // namespace

const std::vector<std::string>& option_names() {
  static const std::vector<std::string> kNames{"lease",    "wait",   "on_busy", "min_hold",
                                               "max_hold", "policy", "name"};
  return kNames;
}

GuardParse parse_guard_arguments(const std::vector<ArgToken>& tokens, std::size_t close_offset) {
  GuardParse result;
  Parser parser(result);
  const std::vector<Argument> arguments = split_arguments(tokens);
  parser.parse_key(arguments.front(), arguments.size() == 1, close_offset);
  for (std::size_t i = 1; i < arguments.size(); ++i) parser.parse_option(arguments[i]);
  parser.check_relations();
  return result;
}

}  // namespace dlock::codegen
