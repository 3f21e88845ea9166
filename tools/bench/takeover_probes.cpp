#include "tools/bench/takeover_probes.h"

#include <boost/json.hpp>

#include "harness/http_get.h"
#include "harness/wait_until.h"

namespace imhash::bench::takeover {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

constexpr auto kEvery = std::chrono::milliseconds(50);

// GET /v1/status: its HTTP status (0: no answer) and its body, an empty object if it is not one
// (a standby answers 503 with a body too).
struct Status {
  int code = 0;
  json::object body;
};

Status status_of(const std::string& admin) {
  const test::HttpReply r = test::http_get(admin, "/v1/status");
  Status s{r.status, {}};
  boost::system::error_code ec;
  json::value v = json::parse(r.body, ec);
  if (!ec && v.is_object()) s.body = std::move(v.as_object());
  return s;
}

const json::object& object_at(const json::object& o, std::string_view key) {
  static const json::object empty;
  const json::value* v = o.if_contains(key);
  return v && v->is_object() ? v->as_object() : empty;
}

bool string_is(const json::object& o, std::string_view key, std::string_view want) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() && v->as_string() == want;
}

bool leads(const Status& s) {
  return s.code == 200 && string_is(object_at(s.body, "control_plane"), "role", "leader");
}

// Calls `probe` every kEvery until it gives a value, `bound` at most; that value and the moment
// the probe returned it.
template <typename T, typename Probe>
std::optional<Seen<T>> poll(Probe&& probe, std::chrono::milliseconds bound) {
  std::optional<Seen<T>> seen;
  test::wait_until(
      [&] {
        std::optional<T> v = probe();
        if (v) seen = Seen<T>{*v, Clock::now()};
        return v.has_value();
      },
      bound, kEvery);
  return seen;
}

}  // namespace

std::optional<Seen<int>> await_leader(const std::vector<std::string>& admins, int skip,
                                      bool settled, std::chrono::milliseconds bound) {
  return poll<int>(
      [&]() -> std::optional<int> {
        for (size_t i = 0; i < admins.size(); ++i) {
          if (static_cast<int>(i) == skip) continue;
          const Status s = status_of(admins[i]);
          if (leads(s) &&
              !(settled && object_at(s.body, "control_plane").contains("settling_ms"))) {
            return static_cast<int>(i);
          }
        }
        return std::nullopt;
      },
      bound);
}

std::optional<Seen<uint64_t>> await_nodes_back(const std::string& admin, int hashes, int logins,
                                               std::chrono::milliseconds bound) {
  return poll<uint64_t>(
      [&]() -> std::optional<uint64_t> {
        const Status s = status_of(admin);
        const json::value* converged = s.body.if_contains("converged");
        const json::value* version = s.body.if_contains("version");
        const json::value* nodes = s.body.if_contains("nodes");
        if (!leads(s) || !converged || !converged->is_bool() || !converged->as_bool() || !version ||
            !version->is_number() || !nodes || !nodes->is_array()) {
          return std::nullopt;
        }
        const uint64_t v = version->to_number<uint64_t>();
        int up_hash = 0, up_login = 0;
        for (const json::value& n : nodes->as_array()) {
          if (!n.is_object()) continue;
          const json::object& o = n.as_object();
          const json::value* at = o.if_contains("version");
          if (!string_is(o, "state", "up") || !at || !at->is_number() ||
              at->to_number<uint64_t>() != v) {
            continue;
          }
          up_hash += string_is(o, "role", "hash");
          up_login += string_is(o, "role", "login");
        }
        const bool all = nodes->as_array().size() == static_cast<size_t>(hashes + logins) &&
                         up_hash == hashes && up_login == logins;
        return all ? std::optional<uint64_t>(v) : std::nullopt;
      },
      bound);
}

std::optional<Clock::time_point> await_standby(const std::string& admin, const std::string& name,
                                               std::chrono::milliseconds bound) {
  const auto seen = poll<bool>(
      [&]() -> std::optional<bool> {
        const Status s = status_of(admin);
        if (s.code != 200) return std::nullopt;
        const json::value* standbys = object_at(s.body, "control_plane").if_contains("standbys");
        if (!standbys || !standbys->is_array()) return std::nullopt;
        for (const json::value& sb : standbys->as_array()) {
          if (sb.is_object() && string_is(sb.as_object(), "name", name)) return true;
        }
        return std::nullopt;
      },
      bound);
  if (!seen) return std::nullopt;
  return seen->at;
}

}  // namespace imhash::bench::takeover
