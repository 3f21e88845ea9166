// The admin API's contract (docs/admin_api.md), shared by the config server that serves it and
// imctl that calls it: what an answer is, the shape of a server in a request, and the limits both
// sides check. Header-only, no networking. Any thread.
#pragma once

#include <boost/json.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace imhash {

inline constexpr size_t kAdminMaxBodyBytes = size_t{1} << 20;  // larger bodies get 413
inline constexpr uint64_t kAdminDefaultHistoryLimit = 20;
inline constexpr uint64_t kAdminMaxHistoryLimit = 1000;

struct AdminResult {
  unsigned status = 200;  // HTTP status: 200, 400 (bad request), 404 (unknown), 409 (conflict),
                          // 503 (cannot be done now, e.g. state not writable)
  boost::json::value body;

  static AdminResult ok(boost::json::value body) { return {200, std::move(body)}; }
  static AdminResult error(unsigned status, const std::string& sentence) {
    return {status, boost::json::object{{"error", sentence}}};
  }
};

struct ServerSpec {
  std::string name;
  std::optional<std::string> address;  // absent: take it from the registered node of that name
  std::optional<uint32_t> shards;      // absent: from the registered node
  uint32_t weight = 1;
};

enum class StreamControl : uint8_t { kCancel, kRestart };

}  // namespace imhash
