// imctl's output: the server's JSON replies as aligned text for people, and the whole outcome of
// an invocation (text on stdout and stderr, exit status). Pure: no I/O, no clock.
//
// Every formatter takes the reply body as the admin API documents it (docs/admin_api.md) and
// tolerates missing or oddly typed fields (shown as "-"), so a newer server never breaks imctl.
//
// Thread rules: plain functions; any thread.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config_server/imctl_command.h"
#include "config_server/imctl_http.h"

namespace imhash {

struct ImctlOutput {
  int exit_code = 0;
  std::string out;  // for stdout
  std::string err;  // for stderr
};

// What imctl prints and returns for the outcome of its one exchange: the human text (or, with
// --json, the body as is) on success; "imctl: COMMAND: sentence" and 1 when the server refused;
// "imctl: cannot reach the config server at ADDRESS: reason" and 69 when it could not be reached.
ImctlOutput imctl_output(const ImctlInvocation& invocation, const HttpOutcome& outcome);

// Human text for a successful reply to `invocation`.
std::string format_reply(const ImctlInvocation& invocation, const boost::json::value& body);

std::string format_status(const boost::json::value& body);   // GET /v1/status
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
