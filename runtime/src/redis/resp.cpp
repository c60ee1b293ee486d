#include "redis/resp.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "redis/connection.hpp"

namespace dlock::internal {
namespace {

// hiredis 0.14's own reply constructors, with limits: the same objects (freeReplyObject
// frees them), refused (NULL, which fails the reader) above kMaxReplyElements elements or
// kMaxReplyString bytes.
struct ReplyLimits {
  static void refuse(const redisReadTask* task) {
    if (task->privdata != nullptr) *static_cast<bool*>(task->privdata) = true;
  }
  static redisReply* make(const redisReadTask* task, int type) {
    auto* r = static_cast<redisReply*>(std::calloc(1, sizeof(redisReply)));
    if (r == nullptr) return nullptr;
    r->type = type;
    if (task->parent != nullptr) {
      static_cast<redisReply*>(task->parent->obj)->element[task->idx] = r;
    }
    return r;
  }
  static void* create_string(const redisReadTask* task, char* str, size_t len) {
    if (len > kMaxReplyString) {
      refuse(task);
      return nullptr;
    }
    auto* buf = static_cast<char*>(std::malloc(len + 1));
    if (buf == nullptr) return nullptr;
    redisReply* r = make(task, task->type);
    if (r == nullptr) {
      std::free(buf);
      return nullptr;
    }
    std::memcpy(buf, str, len);
    buf[len] = '\0';
    r->str = buf;
    r->len = len;
    return r;
  }
  static void* create_array(const redisReadTask* task, int elements) {
    if (elements > kMaxReplyElements) {
      refuse(task);
      return nullptr;
    }
    redisReply** table = nullptr;
    if (elements > 0) {
      table = static_cast<redisReply**>(
          std::calloc(static_cast<size_t>(elements), sizeof(redisReply*)));
      if (table == nullptr) return nullptr;
    }
    redisReply* r = make(task, REDIS_REPLY_ARRAY);
    if (r == nullptr) {
      std::free(table);
      return nullptr;
    }
    r->element = table;
    r->elements = static_cast<size_t>(std::max(elements, 0));
    return r;
  }
  static void* create_integer(const redisReadTask* task, long long value) {
    redisReply* r = make(task, REDIS_REPLY_INTEGER);
    if (r != nullptr) r->integer = value;
    return r;
  }
  static void* create_nil(const redisReadTask* task) { return make(task, REDIS_REPLY_NIL); }
  static void free_object(void* reply) { freeReplyObject(reply); }

  static redisReplyObjectFunctions functions;
};

redisReplyObjectFunctions ReplyLimits::functions{create_string, create_array, create_integer,
                                                 create_nil, free_object};

}  // namespace

void append_command(std::string& out, const std::vector<std::string_view>& argv) {
  fmt::format_to(std::back_inserter(out), "*{}\r\n", argv.size());
  for (std::string_view arg : argv) {
    fmt::format_to(std::back_inserter(out), "${}\r\n", arg.size());
    out.append(arg);
    out.append("\r\n");
  }
}

redisReader* new_reply_reader(bool* too_large) {
  redisReader* reader = redisReaderCreateWithFunctions(&ReplyLimits::functions);
  if (reader != nullptr) reader->privdata = too_large;
  return reader;
}

}  // namespace dlock::internal
