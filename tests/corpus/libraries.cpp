// Guarded functions in a source that includes the heavy headers a service does: Boost.Asio,
// nlohmann/json, spdlog, abseil and protobuf-generated code.
#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>
#include <boost/asio.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <string>

#include "corpus.pb.h"
#include "corpus/catalog.hpp"
#include "corpus/probe.hpp"
#include "corpus/programs.hpp"

namespace corpus {

[[dlock::guard("json:<id>")]]
bool parse_order(long id, const std::string& text) {
  const nlohmann::json order = nlohmann::json::parse(text);
  return order.at("qty").get<int>() == 4 && held_elsewhere("json:" + std::to_string(id));
}

[[dlock::guard("asio:<id>", wait=2s)]]
bool post_work(long id) {
  boost::asio::io_context io;
  int ran = 0;
  boost::asio::post(io, [&ran] { ++ran; });
  io.run();
  return ran == 1 && held_elsewhere("asio:" + std::to_string(id));
}

[[dlock::guard("log:<id>")]]
bool log_and_count(long id) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("corpus", sink);
  logger.info("order {}", id);
  absl::flat_hash_map<std::string, int> seen{{absl::StrCat("k", id), 1}};
  return out.str().find(absl::StrCat("order ", id)) != std::string::npos && seen.size() == 1 &&
         held_elsewhere("log:" + std::to_string(id));
}

[[dlock::guard("proto:<id>")]]
bool round_trip(long id, const pb::Order& order) {
  std::string wire;
  pb::Order copy;
  return order.SerializeToString(&wire) && copy.ParseFromString(wire) &&
         copy.sku() == order.sku() && held_elsewhere("proto:" + std::to_string(id));
}

bool run_libraries(long base) {
  pb::Order order;
  order.set_id(base + 3);
  order.set_sku("sku-9");
  order.add_quantities(2);
  return parse_order(base, R"({"qty": 4})") && post_work(base + 1) && log_and_count(base + 2) &&
         round_trip(order.id(), order) && use_catalog(base + 30);
}

}  // namespace corpus
