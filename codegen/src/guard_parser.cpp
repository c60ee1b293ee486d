#include "dlock/codegen/guard_parser.hpp"

#include <algorithm>
#include <map>
#include <optional>

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
    KeyTemplate key;
    key.offset = argument.tokens.front()->offset;
    key.length = span_length(argument.tokens, 0);
    for (const ArgToken* token : argument.tokens) {
      append_key_literal(token->text, token->offset, key, result_.problems);
    }
    const std::string text = key_text(key);
    for (const KeyTemplate& earlier : result_.spec.keys) {
      if (key_text(earlier) == text) {
        result_.problems.push_back({key.offset,
                                    key.length,
                                    "lock key \"" + text + "\" is given twice",
                                    std::nullopt,
                                    {{earlier.offset, "first given here"}}});
        return;
      }
    }
    result_.spec.keys.push_back(std::move(key));
  }

  // Every leading string-literal argument is a key; one after an option is misplaced.
  static bool is_key(const Argument& argument) {
    return !argument.tokens.empty() && argument.tokens.front()->kind == TokenKind::kString;
  }

  void misplaced_key(const Argument& argument) {
    problem(argument.tokens.front()->offset, span_length(argument.tokens, 0),
            "a lock key must come before the options");
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
    if (spec.options.permits && spec.options.mode == ::dlock::LockMode::kShared) {
      result_.problems.push_back({first_seen_.at("permits"),
                                  std::string("permits").size(),
                                  "'permits' cannot be used with 'mode=shared': every permit is "
                                  "an exclusive hold",
                                  std::nullopt,
                                  {{first_seen_.at("mode"), "'mode' given here"}}});
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
    const bool identifier = tokens.size() == 3 && tokens[2]->kind == TokenKind::kIdentifier;
    auto& options = result_.spec.options;
    if (name == "lease" || name == "wait" || name == "min_hold" || name == "max_hold") {
      parse_duration_value(name, site, tokens);
    } else if (name == "on_busy") {
      if (auto choice = parse_choice(site, name, identifier, {"throw", "skip"})) {
        options.on_busy = *choice == 1 ? BusyAction::kSkip : BusyAction::kThrow;
        result_.spec.on_busy_offset = site.offset;
        result_.spec.on_busy_length = site.length;
      }
    } else if (name == "mode") {
      if (auto choice = parse_choice(site, name, identifier, {"shared", "exclusive"})) {
        options.mode = *choice == 0 ? ::dlock::LockMode::kShared : ::dlock::LockMode::kExclusive;
      }
    } else if (name == "fair") {
      if (auto choice = parse_choice(site, name, identifier, {"true", "false"})) {
        options.fair = *choice == 0;
      }
    } else if (name == "permits") {
      parse_permits(site, tokens);
    } else {
      parse_string_value(name, site, tokens);
    }
  }

  void parse_duration_value(const std::string& name, const ValueSite& site,
                            const std::vector<const ArgToken*>& tokens) {
    DurationParse duration;
    if (tokens.size() == 3 && tokens[2]->kind == TokenKind::kNumber) {
      duration = parse_duration(tokens[2]->text);
    } else {
      duration.error = "not a duration";
    }
    if (!duration.value) {
      problem(site.offset, site.length,
              "bad duration '" + site.spelling + "' for '" + name + "': " + duration.error +
                  kDurationHint);
      return;
    }
    auto& options = result_.spec.options;
    if (name == "lease") options.lease = duration.value;
    if (name == "wait") options.wait = duration.value;
    if (name == "min_hold") options.min_hold = duration.value;
    if (name == "max_hold") options.max_hold = duration.value;
  }

  // `policy="..."` and `name="..."`.
  void parse_string_value(const std::string& name, const ValueSite& site,
                          const std::vector<const ArgToken*>& tokens) {
    const ArgToken& value = *tokens[2];
    if (tokens.size() != 3 || value.kind != TokenKind::kString) {
      problem(site.offset, site.length, "'" + name + "' takes a string literal");
      return;
    }
    std::string bytes;
    if (!decode_string_literal(value.text, value.offset, bytes, result_.problems)) return;
    if (bytes.empty()) {
      problem(site.offset, site.length, "'" + name + "' must not be empty");
      return;
    }
    (name == "policy" ? result_.spec.policy : result_.spec.name) = std::move(bytes);
  }

  // A value that is one of two words: its index, or nullopt after a problem (with a fix-it
  // when the value is a likely typo of one of them).
  std::optional<std::size_t> parse_choice(const ValueSite& site, const std::string& name,
                                          bool is_identifier,
                                          const std::vector<std::string>& words) {
    for (std::size_t i = 0; is_identifier && i < words.size(); ++i) {
      if (site.spelling == words[i]) return i;
    }
    const std::string start = "bad value '" + site.spelling + "' for '" + name + "'; ";
    std::optional<std::string> fix;
    if (is_identifier) fix = closest_match(site.spelling, words);
    std::string message = fix ? start + "did you mean '" + *fix + "'?"
                              : start + "expected '" + words[0] + "' or '" + words[1] + "'";
    result_.problems.push_back({site.offset, site.length, std::move(message), fix, {}});
    return std::nullopt;
  }

  // `permits=N`: a whole number from 1 to kMaxPermits; `-N` is read as below 1.
  void parse_permits(const ValueSite& site, const std::vector<const ArgToken*>& tokens) {
    const bool negative = tokens.size() == 4 && tokens[2]->text == "-";
    const ArgToken& value = *tokens.back();
    const bool digits = (tokens.size() == 3 || negative) && value.kind == TokenKind::kNumber &&
                        value.text.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) {
      problem(site.offset, site.length,
              "bad value '" + site.spelling +
                  "' for 'permits'; expected a whole number from 1 to " +
                  std::to_string(::dlock::kMaxPermits));
      return;
    }
    long long permits = 0;
    for (char c : value.text) {
      permits = std::min<long long>(permits * 10 + (c - '0'), ::dlock::kMaxPermits + 1LL);
    }
    if (negative || permits < 1) {
      problem(site.offset, site.length, "'permits' must be at least 1");
    } else if (permits > ::dlock::kMaxPermits) {
      problem(site.offset, site.length,
              "'permits' must be at most " + std::to_string(::dlock::kMaxPermits));
    } else {
      result_.spec.options.permits = static_cast<int>(permits);
    }
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
  static const std::vector<std::string> kNames{"lease",  "wait", "on_busy", "min_hold", "max_hold",
                                               "policy", "name", "mode",    "fair",     "permits"};
  return kNames;
}

GuardParse parse_guard_arguments(const std::vector<ArgToken>& tokens, std::size_t close_offset) {
  GuardParse result;
  Parser parser(result);
  const std::vector<Argument> arguments = split_arguments(tokens);
  parser.parse_key(arguments.front(), arguments.size() == 1, close_offset);
  std::size_t i = 1;
  for (; i < arguments.size() && Parser::is_key(arguments[i]); ++i) {
    parser.parse_key(arguments[i], false, close_offset);
  }
  for (; i < arguments.size(); ++i) {
    if (Parser::is_key(arguments[i])) {
      parser.misplaced_key(arguments[i]);
    } else {
      parser.parse_option(arguments[i]);
    }
  }
  parser.check_relations();
  return result;
}

}  // namespace dlock::codegen
