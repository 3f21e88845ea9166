// imctl's command line (docs/admin_api.md): the arguments in, the one admin API request they mean
// out (method, target, JSON body), or a usage error naming what is wrong. Pure: no I/O.
//
//   imctl [--admin HOST:PORT[,HOST:PORT...]] [--json] [--timeout-ms N] COMMAND
//
// Thread rules: plain functions; any thread.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admin_api/admin_contract.h"
#include "common/codec/client_protocol.h"

namespace imhash {

inline constexpr const char* kImctlDefaultAdmin = "127.0.0.1:7100";
inline constexpr const char* kImctlAdminEnv = "IMHASH_ADMIN";

enum class ImctlCommand : uint8_t {
  kStatus,
  kTable,
  kServers,
  kHistory,
  kMode,
  kReplicas,  // replicas N: POST /v1/replicas
  kServerAdd,
  kServerSet,  // server set NAME --address|--weight
  kServerRemove,
  kAssign,
  kSplit,
  kMerge,
  kPurge,        // start or cancel a purge
  kPurgeStatus,  // purge NAME --status: GET /v1/purge, shown for NAME only
  kWhere,
  kToken,          // token ID --ttl AGE --key-file FILE: computed locally, no request
  kDrain,          // drain NAME [--wait [--timeout S]]: POST /v1/servers/NAME/drain
  kDrainStatus,    // drain NAME --status: GET /v1/servers/NAME/drain
  kStreamStatus,   // stream status: GET /v1/streams
  kStreamCancel,   // stream cancel NAME
  kStreamRestart,  // stream restart NAME
};

inline constexpr uint32_t kImctlDefaultDrainTimeoutS = 600;
inline constexpr int kImctlExitTimeout = 75;  // EX_TEMPFAIL: drain --wait ran out of time

// One config server's admin API address: from --admin's list, or the leader a standby names.
struct AdminAddress {
  std::string text;  // as given, for messages: "127.0.0.1:7100", "[::1]:7100"
  std::string host;
  uint16_t port = 0;
  friend bool operator==(const AdminAddress&, const AdminAddress&) = default;
};

// --admin's (or IMHASH_ADMIN's) list: HOST:PORT[,HOST:PORT...], spaces around the commas allowed.
struct AdminListParse {
  std::vector<AdminAddress> addresses;  // in the order given; empty on error
  std::string error;                    // "--admin: 127.0.0.1:7100 is given twice"
};
// `source` ("--admin" or "IMHASH_ADMIN") starts every error.
AdminListParse parse_admin_list(std::string_view text, const std::string& source);
// The same host and port, however written ("127.0.0.1:7100" and " 127.0.0.1:7100 "; IPv6 with or
// without brackets as parse_host_port reads it). Names are not resolved: "localhost:7100" and
// "127.0.0.1:7100" differ.
bool same_admin_address(const AdminAddress& a, const AdminAddress& b);

struct ImctlInvocation {
  // Global options.
  // The config servers to ask, in order (at least one): with several sharing one store, imctl
  // asks past those it cannot reach and follows a standby to the leader it names
  // (imctl_format.h, follow_leader).
  std::vector<AdminAddress> admins{{kImctlDefaultAdmin, "127.0.0.1", 7100}};
  // The one asked, for messages: the first of `admins` until imctl follows another.
  std::string admin = kImctlDefaultAdmin;
  std::string host = "127.0.0.1";
  uint16_t port = 7100;
  bool json = false;  // print the server's JSON body as is
  std::chrono::milliseconds timeout{5000};
  std::string token_file;  // --token-file or $IMHASH_ADMIN_TOKEN_FILE: the admin token (optional)

  // The command and its request.
  ImctlCommand command = ImctlCommand::kStatus;
  std::string name;  // the command as errors name it: "assign", "server add"
  boost::beast::http::verb method = boost::beast::http::verb::get;
  std::string target;  // "/v1/where/42"
  std::string body;    // JSON text for POST; empty for GET
  std::string server;  // kPurgeStatus, drain, stream cancel|restart: the server named
  bool watch = false;  // status --watch: redraw every second until interrupted
  // drain --wait: after the POST, poll GET `target` every second until drained, at most
  // `wait_timeout_s` seconds.
  bool wait = false;
  uint32_t wait_timeout_s = kImctlDefaultDrainTimeoutS;

  // kToken: made here from the key file (docs/design.md §6), printed as hex or, with --json, as
  // JSON.
  uint64_t token_user = 0;
  uint32_t token_ttl_s = 0;
  std::string key_file;
};

// The output of `imctl token`: 56 hex digits (user_id ‖ expiry ‖ MAC) and a newline, or with
// `json` {"user_id":ID,"expiry":UNIX_SECONDS,"token":"HEX"}.
std::string format_token(const client::Token& token, bool json);

struct ImctlParse {
  std::optional<ImctlInvocation> invocation;
  bool help = false;  // --help: print imctl_usage() and exit 0
  std::string error;  // a usage error ("assign: range 5-3: lo is greater than hi"); exit 64
};

// `args` are argv[1..]. Global options may stand before or after the command. `env_admin` is the
// value of IMHASH_ADMIN (nullptr if unset); --admin wins over it.
ImctlParse parse_imctl_args(const std::vector<std::string>& args, const char* env_admin);

std::string imctl_usage();

// AGE: "90" or "90s" (seconds), "15m", "2h", "7d"; 1 second .. 2^32-1 seconds. Error text if bad.
struct AgeParse {
  std::optional<uint32_t> seconds;
  std::string error;
};
AgeParse parse_age(std::string_view text);

// "LO-HI" or "ID" (parse_id_range), with a message that says what is wrong.
struct RangeParse {
  std::optional<std::pair<uint64_t, uint64_t>> range;
  std::string error;
};
RangeParse parse_range_arg(std::string_view text);

// NAME[=HOST:PORT][/SHARDS][*WEIGHT], e.g. "hash4=127.0.0.1:7004/4*2", "hash5/8", "hash6".
struct SpecParse {
  std::optional<ServerSpec> spec;
  std::string error;
};
SpecParse parse_server_spec(std::string_view text);

}  // namespace imhash
