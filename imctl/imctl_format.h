// imctl's output: the server's JSON replies as aligned text for people, and the whole outcome of
// an invocation (text on stdout and stderr, exit status). Pure: no I/O, no clock.
//
// Every formatter takes the reply body as the admin API documents it (docs/admin_api.md) and
// tolerates missing or oddly typed fields (shown as "-"), so a newer server never breaks imctl.
//
// Thread rules: plain functions; any thread.
#pragma once

#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/links/http_client.h"
#include "imctl/imctl_command.h"

namespace imhash {

struct ImctlOutput {
  int exit_code = 0;
  std::string out;  // for stdout
  std::string err;  // for stderr
};

// A key of a reply's JSON object (null if absent, or if `v` is not an object), and the sentence
// that says why a reply failed (its "error" field, or its HTTP status).
const boost::json::value* reply_field(const boost::json::value& v, std::string_view key);
std::string reply_error(const HttpReply& reply, const boost::json::value* body);

// What imctl prints and returns for the outcome of its one exchange: the human text (or, with
// --json, the body as is) on success; "imctl: COMMAND: sentence" and 1 when the server refused;
// "imctl: cannot reach the config server at ADDRESS: reason" and 69 when it could not be reached.
ImctlOutput imctl_output(const ImctlInvocation& invocation, const HttpOutcome& outcome);

// Human text for a successful reply to `invocation`.
std::string format_reply(const ImctlInvocation& invocation, const boost::json::value& body);

std::string format_status(const boost::json::value& body);  // GET /v1/status
// status's "control_plane": "control plane: leader cfg-a (127.0.0.1:7100), standbys cfg-b
// (127.0.0.1:7101); store etcd://127.0.0.1:2379/imhash, last 1.2ms, mean 0.9ms, 0 errors" (or
// "single config server cfg-a; store file /var/lib/imhash/state.json, ..."), the store on a second,
// indented line when one would be wider than 120 columns; then "  problem: ..." if it reports one.
std::string format_control_plane(const boost::json::value& control_plane);
std::string format_table(const boost::json::value& body);    // GET /v1/table
std::string format_servers(const boost::json::value& body);  // GET /v1/servers
std::string format_history(const boost::json::value& body);  // GET /v1/history
std::string format_where(const boost::json::value& body);    // GET /v1/where/ID
std::string format_change(const boost::json::value& body);   // POST mode/servers/assign/...
std::string format_purge(const boost::json::value& body);    // POST /v1/purge
// GET /v1/purge, only the rows of `server` ("" for all).
std::string format_purges(const boost::json::value& body, std::string_view server);
// POST /v1/servers/NAME/drain (the change, then the drain) and GET (the drain alone).
std::string format_drain(const boost::json::value& body);
// One line of drain --wait's progress, for the drain object GET /v1/servers/NAME/drain answers.
std::string drain_progress_line(const boost::json::value& drain);
// The drain object says "drained": true.
bool drain_done(const boost::json::value& drain);
// drain --wait's poll: a 200 reply whose drain object says "drained": true.
bool drained_reply(const HttpOutcome& outcome);
// drain --wait's poll request (GET the drain) for the `drain NAME --wait` invocation.
ImctlInvocation drain_poll_invocation(const ImctlInvocation& drain);
std::string format_streams(const boost::json::value& body);         // GET /v1/streams
std::string format_stream_control(const boost::json::value& body);  // POST /v1/streams/NAME/...
// A stream report as one phrase: "running at version 7: 4500 records sent, [###.......]  30%,
// 12000/s, ETA 3.2s" ("no report" for null).
std::string stream_phrase(const boost::json::value* stream);

// ---- Several config servers on one store: following the leader --------------------------------
//
// A standby answers every admin request with 503 {"error", "leader": {"name", "admin", "node"}}
// ("leader" absent when it knows none). imctl asks the addresses of --admin in order and moves on
// past one it cannot reach (no connection, no reply in time, no readable HTTP reply) and from a
// standby to the leader it names (even one not listed); it asks each address at most once. The
// first other reply is the outcome. The decision is next_admin_step; follow_leader is the loop.

// A standby's 503, as read from the reply.
struct StandbyAnswer {
  std::string error;         // its sentence ("this config server (cfg-b) is a standby; ...")
  std::string leader_name;   // "" when it names no leader
  std::string leader_admin;  // the leader's admin HOST:PORT as written; "" when none is named
};
// The standby answer in `outcome`, if it is one: HTTP 503 with a JSON object body that has
// "leader" (an object, or null) or whose "error" says "standby". Any other 503 (too many
// connections, a state store that cannot be written) is a config server's answer like any other.
std::optional<StandbyAnswer> standby_answer(const HttpOutcome& outcome);

// One exchange with one address.
struct AdminAttempt {
  AdminAddress address;
  HttpOutcome outcome;
};

struct AdminStep {
  std::optional<AdminAddress> ask;  // ask this address next
  // When `ask` is empty: "" if attempts.back() is the outcome; otherwise every address failed and
  // this says what each one said: "127.0.0.1:7100: Connection refused; 127.0.0.1:7101: ...".
  std::string failed;
};

// At most this many exchanges per request, whatever the standbys name.
inline constexpr size_t kImctlMaxAdminAttempts = 16;

// What to do after `attempts` (oldest first, none yet at the start) when asking the addresses of
// `order` in turn; `timeout` is --timeout-ms, for the words of a timeout. Pure.
AdminStep next_admin_step(const std::vector<AdminAddress>& order,
                          const std::vector<AdminAttempt>& attempts,
                          std::chrono::milliseconds timeout);

// The addresses a poll asks in turn: the one that answered the previous exchange (if any) first,
// then `admins` in order (without it again).
std::vector<AdminAddress> admin_order(const std::vector<AdminAddress>& admins,
                                      const std::optional<AdminAddress>& answered);

// One request of `invocation` through the addresses of `order`: `exchange` makes one exchange
// (http_exchange in imctl_main.cpp; a fake in tests), next_admin_step chooses the next.
using AdminExchange = std::function<HttpOutcome(const AdminAddress&)>;
struct AdminFollow {
  ImctlOutput output;                    // what imctl prints and returns
  std::optional<AdminAddress> answered;  // whose reply is the outcome; empty if every one failed
  HttpOutcome outcome;                   // that reply (drain --wait reads it); the last if failed
};
AdminFollow follow_leader(const ImctlInvocation& invocation, const std::vector<AdminAddress>& order,
                          const AdminExchange& exchange);

// What imctl prints when every address failed (`failed` from next_admin_step): exit 69, and
// "imctl: no config server served the request: FAILED", except for a single address that could
// not be reached (imctl_output's message, as before several). With --json, the body of the last
// reply (a standby's) on stdout.
ImctlOutput all_failed_output(const ImctlInvocation& invocation,
                              const std::vector<AdminAttempt>& attempts, const std::string& failed);

// `invocation` asking `address`: its admin, host and port (messages name it).
ImctlInvocation asking(const ImctlInvocation& invocation, const AdminAddress& address);

// "[#####.....]  52%": `done` of `total` in a bar of `width` cells (total 0 shows 0%).
std::string progress_bar(uint64_t done, uint64_t total, size_t width = 10);
// Milliseconds as a short age: "850ms", "2.4s", "3m05s", "2h10m", "3d04h".
std::string format_duration_ms(uint64_t ms);
// Unix seconds as "2024-05-01T12:00:00Z".
std::string format_unix_time(uint64_t seconds);

// Columns aligned with two spaces between them; the last column is not padded.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  size_t rows() const { return rows_.size(); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace imhash
