#include "imctl/imctl_command.h"

#include <boost/json.hpp>
#include <initializer_list>
#include <limits>

#include "admin_api/admin_contract.h"
#include "common/codec/endpoint.h"
#include "common/codec/printable.h"
#include "common/routing/table_text.h"
#include "common/runtime/options.h"
#include "common/security/token.h"

namespace imhash {

namespace json = boost::json;
using boost::beast::http::verb;

namespace {

constexpr std::string_view kIdExpected =
    "expected a decimal integer between 0 and 18446744073709551615";

// Command-line words are quoted back the way a shell would take them.
std::string single_quoted(std::string_view text) {
  // Appended rather than `"'" + ...`: g++ 12 at -O3 warns falsely (stringop-overflow) on the
  // insert at the front that operator+ inlines to.
  std::string quoted(1, '\'');
  quoted += printable(text, 80);
  quoted += '\'';
  return quoted;
}

ImctlParse usage_error(std::string error) {
  ImctlParse parse;
  parse.error = std::move(error);
  return parse;
}

// Matches "--flag VALUE" and "--flag=VALUE" at args[i] (advancing i past a separate value).
// Returns false if args[i] is not `flag`; sets `error` if the value is missing.
bool take_value(const std::vector<std::string>& args, size_t& i, std::string_view flag,
                std::string& value, std::string& error) {
  const std::string& arg = args[i];
  if (arg.size() > flag.size() && arg.starts_with(flag) && arg[flag.size()] == '=') {
    value = arg.substr(flag.size() + 1);
    return true;
  }
  if (arg != flag) return false;
  if (i + 1 >= args.size()) {
    error = std::string(flag) + " needs a value";
  } else {
    value = args[++i];
  }
  return true;
}

struct Flag {
  std::string_view name;
  bool takes_value;
};

struct CommandArgs {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> flags;  // in the order given

  const std::string* flag(std::string_view name) const {
    for (const auto& [n, v] : flags) {
      if (n == name) return &v;
    }
    return nullptr;
  }
};

// Splits a command's arguments (rest[from..]) into positionals and the flags it knows.
std::string split_args(const std::vector<std::string>& rest, size_t from,
                       const std::string& command, std::initializer_list<Flag> known,
                       CommandArgs& out) {
  for (size_t i = from; i < rest.size(); ++i) {
    const std::string& arg = rest[i];
    if (!arg.starts_with("--")) {
      out.positional.push_back(arg);
      continue;
    }
    bool matched = false;
    for (const Flag& flag : known) {
      std::string value, error;
      if (flag.takes_value) {
        if (!take_value(rest, i, flag.name, value, error)) continue;
        if (!error.empty()) return command + ": " + error;
      } else if (arg != flag.name) {
        continue;
      }
      if (out.flag(flag.name)) return command + ": " + std::string(flag.name) + " is given twice";
      out.flags.emplace_back(std::string(flag.name), std::move(value));
      matched = true;
      break;
    }
    if (!matched) return command + ": unknown option " + single_quoted(arg);
  }
  return {};
}

std::string positional_count(const std::string& command, const CommandArgs& args, size_t want,
                             std::string_view shape) {
  if (args.positional.size() == want) return {};
  if (args.positional.size() > want && want > 0) {
    return command + ": unexpected argument " + single_quoted(args.positional[want]) +
           " (usage: " + std::string(shape) + ")";
  }
  if (want == 0) return command + ": unexpected argument " + single_quoted(args.positional[0]);
  return command + ": expected " + std::string(shape);
}

// "" if `name` is a valid server name, else the sentence saying it is not.
std::string name_problem(const std::string& name) {
  if (is_valid_server_name(name)) return {};
  return single_quoted(name) + " is not a valid server name (" + std::string(kServerNameRule) + ")";
}

std::string check_name(const std::string& command, const std::string& name) {
  const std::string problem = name_problem(name);
  return problem.empty() ? problem : command + ": " + problem;
}

// Parses a decimal count in [min, max] for a flag or a spec part.
std::optional<uint64_t> count_in(std::string_view text, uint64_t min, uint64_t max) {
  const auto n = parse_decimal_id(text);
  if (!n || *n < min || *n > max) return std::nullopt;
  return n;
}

std::string json_text(const json::object& object) { return json::serialize(object); }

}  // namespace

std::string imctl_usage() {
  return R"(usage: imctl [--admin HOST:PORT[,HOST:PORT...]] [--json] [--timeout-ms N] COMMAND

imctl talks to the config server's admin API (HTTP/JSON, docs/admin_api.md).
  --admin HOST:PORT[,HOST:PORT...]
                     the admin API of the config server, or of each of several sharing one
                     store (default: $IMHASH_ADMIN, in the same form, else 127.0.0.1:7100).
                     imctl asks them in order: past one it cannot reach or that does not answer
                     in time, and from a standby (HTTP 503) to the leader it names, even one not
                     listed; each address at most once. The first other reply is the outcome;
                     if none serves, the error says what each one said (exit 69). status
                     --watch and drain --wait poll the one that answered, and the list again
                     once it stops answering
  --json             print the server's JSON reply as is, for scripts
  --timeout-ms N     bound on each exchange, in milliseconds (default 5000)
  --token-file FILE  the admin token, for a config server started with --admin-token-file
                     (default: $IMHASH_ADMIN_TOKEN_FILE); reads need none
  --help             print this help

commands:
  status [--watch]                     the control plane (leader, standbys, store), nodes,
                                       their table versions, heartbeats, records and requests/s;
                                       purges (--watch: redraw every second)
  table                                the current routing table
  servers                              the hash servers and their state
  history [--limit N]                  table versions, newest first (default 20, at most 1000)
  mode MODE [--modulo-hash mix|identity]
                                       switch the table to modulo, range or ring mode
  replicas N                           keep N copies of each record (1 to 3): on its owner (the
                                       primary) and on N - 1 more servers (its replicas)
  server add NAME[=HOST:PORT][/SHARDS][*WEIGHT]...
                                       add hash servers (address and shards default to the
                                       registered node's)
  server set NAME [--address HOST:PORT] [--weight W]
                                       change a hash server in place: a new address moves no
                                       id; a new weight moves ids in ring mode only
  server remove NAME...                remove hash servers
  assign LO-HI NAME                    range mode: ids LO..HI (inclusive; or one ID) go to NAME
  split AT                             range mode: split the range holding AT so that AT starts one
  merge LO-HI                          range mode: merge the ranges inside LO..HI into one
  purge NAME [--not-owned | --older-than AGE | --all | --cancel | --status]
                                       purge records on a hash server (default: --not-owned);
                                       AGE: 90, 90s, 15m, 2h or 7d
  drain NAME [--wait [--timeout SECONDS] | --status]
                                       take NAME out of the table by streaming its records to
                                       their new owners, then purging them; --wait: poll until it
                                       holds nothing (at most SECONDS, default 600; exit 75 if
                                       not drained by then); --status: how far it is
  stream status                        every hash server's latest stream: records sent, progress,
                                       rate, ETA
  stream cancel NAME                   stop NAME's stream (its automatic purge is held)
  stream restart NAME                  start NAME's stream again from the beginning
  where ID                             the server and shard that own user ID, and its replicas
  token ID --ttl AGE --key-file FILE   print an authentication token for user ID valid for AGE,
                                       made locally from the login servers' key file (no config
                                       server needed); with --json: user_id, expiry, token

exit status: 0 done; 1 the config server refused the request; 64 bad command line;
             69 no config server could be reached, answered in time or served (a standby
                that knows no leader);
             75 drain --wait: not drained within --timeout
)";
}

AgeParse parse_age(std::string_view text) {
  AgeParse out;
  const std::string bad = "bad AGE " + single_quoted(text) +
                          ": expected a number of seconds, or a number "
                          "followed by s, m, h or d (90, 90s, 15m, 2h, 7d)";
  if (text.empty()) {
    out.error = bad;
    return out;
  }
  uint64_t unit = 1;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    default:
      unit = 0;
  }
  const std::string_view digits = unit == 0 ? text : text.substr(0, text.size() - 1);
  if (unit == 0) unit = 1;
  const auto n = parse_decimal_id(digits);
  if (!n) {
    out.error = bad;
    return out;
  }
  constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
  if (*n == 0) {
    out.error = "bad AGE " + single_quoted(text) + ": it must be at least 1 second";
  } else if (*n > kMax / unit) {
    out.error = "bad AGE " + single_quoted(text) + ": at most " + std::to_string(kMax) + " seconds";
  } else {
    out.seconds = static_cast<uint32_t>(*n * unit);
  }
  return out;
}

RangeParse parse_range_arg(std::string_view text) {
  RangeParse out;
  if ((out.range = parse_id_range(text))) return out;
  const size_t dash = text.find('-');
  if (dash != std::string_view::npos) {
    const auto lo = parse_decimal_id(text.substr(0, dash));
    const auto hi = parse_decimal_id(text.substr(dash + 1));
    if (lo && hi && *lo > *hi) {
      out.error = "range " + std::string(text) + ": lo is greater than hi";
      return out;
    }
  }
  out.error = single_quoted(text) + " is not a range: expected LO-HI or ID, ids " +
              std::string(kIdExpected.substr(std::string_view("expected ").size()));
  return out;
}

// "" if `address` is one a hash server can be dialled at, else what is wrong with it (to follow
// "address 'X'" in a sentence).
std::string address_problem(const std::string& address) {
  try {
    if (parse_host_port(address, "address").port == 0) return "has port 0";
  } catch (const UsageError&) {
    return "is not HOST:PORT";
  }
  if (is_unspecified_address(address)) {
    return "is unspecified: login servers cannot dial it (give the address they reach the server "
           "at)";
  }
  return {};
}

AdminListParse parse_admin_list(std::string_view text, const std::string& source) {
  AdminListParse out;
  std::vector<std::string> items;
  for (size_t from = 0;;) {
    const size_t comma = text.find(',', from);
    std::string_view item =
        text.substr(from, comma == std::string_view::npos ? comma : comma - from);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
  std::vector<AdminAddress> addresses;
  for (const std::string& item : items) {
    if (item.empty()) {
      out.error = source + ": expected HOST:PORT[,HOST:PORT...], got " + single_quoted(text) +
                  " (an empty address)";
      return out;
    }
    AdminAddress a;
    try {
      const HostPort hp = parse_host_port(item, source);
      a = AdminAddress{item, hp.host, hp.port};
    } catch (const UsageError& e) {
      out.error = e.what();
      return out;
    }
    if (a.port == 0) {
      out.error = source + ": port 0 is not allowed" +
                  (items.size() > 1 ? " (in " + single_quoted(item) + ")" : std::string());
      return out;
    }
    for (const AdminAddress& seen : addresses) {
      if (same_admin_address(seen, a)) {
        out.error = source + ": " + single_quoted(item) + " is given twice";
        return out;
      }
    }
    addresses.push_back(std::move(a));
  }
  out.addresses = std::move(addresses);
  return out;
}

bool same_admin_address(const AdminAddress& a, const AdminAddress& b) {
  return a.port == b.port && a.host == b.host;
}

SpecParse parse_server_spec(std::string_view text) {
  SpecParse out;
  const std::string shape = single_quoted(text) + ": expected NAME[=HOST:PORT][/SHARDS][*WEIGHT]";
  size_t end = text.find_first_of("=/*");
  ServerSpec spec;
  spec.name = std::string(text.substr(0, end));
  out.error = name_problem(spec.name);
  if (!out.error.empty()) return out;
  if (end != std::string_view::npos && text[end] == '=') {
    const size_t next = text.find_first_of("/*", end + 1);
    const std::string address(text.substr(end + 1, next - end - 1));
    if (const std::string problem = address_problem(address); !problem.empty()) {
      out.error = single_quoted(text) + ": address " + single_quoted(address) + " " + problem;
      return out;
    }
    spec.address = address;
    end = next;
  }
  if (end != std::string_view::npos && text[end] == '/') {
    const size_t next = text.find('*', end + 1);
    const auto shards = count_in(text.substr(end + 1, next - end - 1), 1, kMaxShards);
    if (!shards) {
      out.error = single_quoted(text) + ": SHARDS must be a number between 1 and " +
                  std::to_string(kMaxShards);
      return out;
    }
    spec.shards = static_cast<uint32_t>(*shards);
    end = next;
  }
  if (end != std::string_view::npos && text[end] == '*') {
    const auto weight = count_in(text.substr(end + 1), 1, kMaxWeight);
    if (!weight) {
      out.error = single_quoted(text) + ": WEIGHT must be a number between 1 and " +
                  std::to_string(kMaxWeight);
      return out;
    }
    spec.weight = static_cast<uint32_t>(*weight);
    end = std::string_view::npos;
  }
  if (end != std::string_view::npos) {
    out.error = shape;
    return out;
  }
  out.spec = std::move(spec);
  return out;
}

std::string format_token(const client::Token& token, bool json) {
  const std::string hex = to_hex(token_bytes(token));
  if (!json) return hex + "\n";
  return json_text(
             json::object{{"user_id", token.user_id}, {"expiry", token.expiry}, {"token", hex}}) +
         "\n";
}

ImctlParse parse_imctl_args(const std::vector<std::string>& args, const char* env_admin) {
  ImctlInvocation inv;
  std::vector<std::string> rest;
  std::optional<std::string> admin;
  std::optional<std::string> timeout;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value, error;
    if (args[i] == "--help" || args[i] == "-h") {
      ImctlParse help;
      help.help = true;
      return help;
    }
    if (args[i] == "--json") {
      inv.json = true;
    } else if (take_value(args, i, "--admin", value, error)) {
      if (!error.empty()) return usage_error(error);
      admin = value;
    } else if (take_value(args, i, "--timeout-ms", value, error)) {
      if (!error.empty()) return usage_error(error);
      timeout = value;
    } else if (take_value(args, i, "--token-file", value, error)) {
      if (!error.empty()) return usage_error(error);
      if (value.empty()) return usage_error("--token-file: expected a file, got ''");
      inv.token_file = value;
    } else {
      rest.push_back(args[i]);
    }
  }

  std::string source = "--admin";
  std::string admins = kImctlDefaultAdmin;
  if (admin) {
    admins = *admin;
  } else if (env_admin && *env_admin) {
    admins = env_admin;
    source = kImctlAdminEnv;
  }
  AdminListParse list = parse_admin_list(admins, source);
  if (list.addresses.empty()) return usage_error(list.error);
  inv.admins = std::move(list.addresses);
  inv.admin = inv.admins.front().text;
  inv.host = inv.admins.front().host;
  inv.port = inv.admins.front().port;
  if (timeout) {
    const auto ms = count_in(*timeout, 1, 3'600'000);
    if (!ms) {
      return usage_error(
          "--timeout-ms must be a number of milliseconds between 1 and 3600000 (got " +
          single_quoted(*timeout) + ")");
    }
    inv.timeout = std::chrono::milliseconds(*ms);
  }

  if (rest.empty()) return usage_error("no command given");
  const std::string& command = rest[0];
  if (command.starts_with("-")) return usage_error("unknown option " + single_quoted(command));
  inv.name = command;
  CommandArgs a;
  std::string e;
  json::object body;

  if (command == "status") {
    e = split_args(rest, 1, command, {{"--watch", false}}, a);
    if (e.empty()) e = positional_count(command, a, 0, "status [--watch]");
    inv.watch = a.flag("--watch") != nullptr;
    inv.command = ImctlCommand::kStatus;
    inv.target = "/v1/status";
  } else if (command == "table" || command == "servers") {
    e = split_args(rest, 1, command, {}, a);
    if (e.empty()) e = positional_count(command, a, 0, command);
    inv.command = command == "table" ? ImctlCommand::kTable : ImctlCommand::kServers;
    inv.target = "/v1/" + command;
  } else if (command == "history") {
    e = split_args(rest, 1, command, {{"--limit", true}}, a);
    if (e.empty()) e = positional_count(command, a, 0, "history [--limit N]");
    inv.command = ImctlCommand::kHistory;
    inv.target = "/v1/history";
    if (e.empty() && a.flag("--limit")) {
      const auto limit = count_in(*a.flag("--limit"), 1, kAdminMaxHistoryLimit);
      if (!limit) {
        e = "history: --limit must be a number between 1 and " +
            std::to_string(kAdminMaxHistoryLimit) + " (got " + single_quoted(*a.flag("--limit")) +
            ")";
      } else {
        inv.target += "?limit=" + std::to_string(*limit);
      }
    }
  } else if (command == "mode") {
    e = split_args(rest, 1, command, {{"--modulo-hash", true}}, a);
    if (e.empty()) e = positional_count(command, a, 1, "mode MODE [--modulo-hash mix|identity]");
    inv.command = ImctlCommand::kMode;
    inv.method = verb::post;
    inv.target = "/v1/mode";
    if (e.empty()) {
      const auto mode = parse_mode(a.positional[0]);
      if (!mode) {
        e = "mode: unknown mode " + single_quoted(a.positional[0]) +
            " (expected modulo, range or ring)";
      } else {
        body["mode"] = to_string(*mode);
      }
      if (e.empty() && a.flag("--modulo-hash")) {
        const auto hash = parse_modulo_hash(*a.flag("--modulo-hash"));
        if (!hash) {
          e = "mode: unknown --modulo-hash " + single_quoted(*a.flag("--modulo-hash")) +
              " (expected mix or identity)";
        } else if (*mode != RoutingMode::kModulo) {
          e = "mode: --modulo-hash applies to mode modulo only";
        } else {
          body["modulo_hash"] = to_string(*hash);
        }
      }
    }
  } else if (command == "replicas") {
    e = split_args(rest, 1, command, {}, a);
    if (e.empty()) e = positional_count(command, a, 1, "replicas N");
    inv.command = ImctlCommand::kReplicas;
    inv.method = verb::post;
    inv.target = "/v1/replicas";
    if (e.empty()) {
      if (const auto n = count_in(a.positional[0], 1, kMaxReplicas)) {
        body["replicas"] = *n;
      } else {
        e = "replicas: expected a number of copies between 1 and " + std::to_string(kMaxReplicas) +
            " (got " + single_quoted(a.positional[0]) + ")";
      }
    }
  } else if (command == "server") {
    const std::string sub = rest.size() > 1 ? rest[1] : "";
    if (sub != "add" && sub != "remove" && sub != "set") {
      return usage_error(
          "server: expected 'server add NAME...', 'server set NAME --address HOST:PORT | "
          "--weight W' or 'server remove NAME...'");
    }
    inv.name = "server " + sub;
    inv.method = verb::post;
    if (sub == "set") {
      inv.command = ImctlCommand::kServerSet;
      inv.target = "/v1/servers/set";
      e = split_args(rest, 2, inv.name, {{"--address", true}, {"--weight", true}}, a);
      if (e.empty()) {
        e = positional_count(inv.name, a, 1, "server set NAME [--address HOST:PORT] [--weight W]");
      }
      if (e.empty()) e = check_name(inv.name, a.positional[0]);
      if (e.empty() && !a.flag("--address") && !a.flag("--weight")) {
        e = inv.name + ": nothing to change: give --address HOST:PORT, --weight W or both";
      }
      if (e.empty()) body["name"] = a.positional[0];
      if (const std::string* address = a.flag("--address"); e.empty() && address) {
        if (const std::string problem = address_problem(*address); !problem.empty()) {
          e = inv.name + ": address " + single_quoted(*address) + " " + problem;
        } else {
          body["address"] = *address;
        }
      }
      if (const std::string* weight = a.flag("--weight"); e.empty() && weight) {
        if (const auto w = count_in(*weight, 1, kMaxWeight)) {
          body["weight"] = *w;
        } else {
          e = inv.name + ": --weight must be a number between 1 and " + std::to_string(kMaxWeight) +
              " (got " + single_quoted(*weight) + ")";
        }
      }
    } else {
      e = split_args(rest, 2, inv.name, {}, a);
      if (e.empty() && a.positional.empty()) e = inv.name + ": expected at least one server";
    }
    if (sub == "add") {
      inv.command = ImctlCommand::kServerAdd;
      inv.target = "/v1/servers";
      json::array servers;
      for (size_t i = 0; e.empty() && i < a.positional.size(); ++i) {
        SpecParse spec = parse_server_spec(a.positional[i]);
        if (!spec.spec) {
          e = inv.name + ": " + spec.error;
          break;
        }
        json::object s{{"name", spec.spec->name}};
        if (spec.spec->address) s["address"] = *spec.spec->address;
        if (spec.spec->shards) s["shards"] = *spec.spec->shards;
        if (spec.spec->weight != 1) s["weight"] = spec.spec->weight;
        servers.push_back(std::move(s));
      }
      body["servers"] = std::move(servers);
    } else if (sub == "remove") {
      inv.command = ImctlCommand::kServerRemove;
      inv.target = "/v1/servers/remove";
      json::array names;
      for (size_t i = 0; e.empty() && i < a.positional.size(); ++i) {
        e = check_name(inv.name, a.positional[i]);
        names.emplace_back(a.positional[i]);
      }
      body["names"] = std::move(names);
    }
  } else if (command == "assign" || command == "merge") {
    const bool assign = command == "assign";
    e = split_args(rest, 1, command, {}, a);
    if (e.empty()) {
      e = positional_count(command, a, assign ? 2 : 1,
                           assign ? "assign LO-HI NAME" : "merge LO-HI");
    }
    inv.command = assign ? ImctlCommand::kAssign : ImctlCommand::kMerge;
    inv.method = verb::post;
    inv.target = "/v1/" + command;
    if (e.empty()) {
      const RangeParse range = parse_range_arg(a.positional[0]);
      if (!range.range) {
        e = command + ": " + range.error;
      } else {
        body["lo"] = range.range->first;
        body["hi"] = range.range->second;
      }
    }
    if (e.empty() && assign) {
      e = check_name(command, a.positional[1]);
      body["server"] = a.positional[1];
    }
  } else if (command == "split" || command == "where") {
    e = split_args(rest, 1, command, {}, a);
    if (e.empty())
      e = positional_count(command, a, 1, command + (command == "split" ? " AT" : " ID"));
    std::optional<uint64_t> id;
    if (e.empty() && !(id = parse_decimal_id(a.positional[0]))) {
      e = command + ": " + single_quoted(a.positional[0]) +
          " is not an id: " + std::string(kIdExpected);
    }
    if (command == "split") {
      inv.command = ImctlCommand::kSplit;
      inv.method = verb::post;
      inv.target = "/v1/split";
      if (id) body["at"] = *id;
    } else {
      inv.command = ImctlCommand::kWhere;
      inv.target = "/v1/where/" + (id ? std::to_string(*id) : std::string());
    }
  } else if (command == "token") {
    e = split_args(rest, 1, command, {{"--ttl", true}, {"--key-file", true}}, a);
    if (e.empty()) e = positional_count(command, a, 1, "token ID --ttl AGE --key-file FILE");
    inv.command = ImctlCommand::kToken;
    std::optional<uint64_t> id;
    if (e.empty() && !(id = parse_decimal_id(a.positional[0]))) {
      e = command + ": " + single_quoted(a.positional[0]) +
          " is not an id: " + std::string(kIdExpected);
    }
    if (e.empty() && !a.flag("--ttl")) e = "token: --ttl AGE is required";
    if (e.empty() && !a.flag("--key-file")) e = "token: --key-file FILE is required";
    if (e.empty()) {
      const AgeParse ttl = parse_age(*a.flag("--ttl"));
      if (!ttl.seconds) {
        e = "token: --ttl: " + ttl.error;
      } else {
        inv.token_user = *id;
        inv.token_ttl_s = *ttl.seconds;
        inv.key_file = *a.flag("--key-file");
      }
    }
  } else if (command == "purge") {
    e = split_args(rest, 1, command,
                   {{"--not-owned", false},
                    {"--older-than", true},
                    {"--all", false},
                    {"--cancel", false},
                    {"--status", false}},
                   a);
    if (e.empty())
      e = positional_count(
          command, a, 1,
          "purge NAME [--not-owned | --older-than AGE | --all | --cancel | --status]");
    if (e.empty()) e = check_name(command, a.positional[0]);
    if (e.empty() && a.flags.size() > 1) {
      e = "purge: give at most one of --not-owned, --older-than, --all, --cancel, --status";
    }
    const std::string kind = a.flags.empty() ? "--not-owned" : a.flags[0].first;
    inv.command = ImctlCommand::kPurge;
    inv.method = verb::post;
    inv.target = "/v1/purge";
    if (e.empty() && kind == "--status") {
      inv.command = ImctlCommand::kPurgeStatus;
      inv.method = verb::get;
      inv.server = a.positional[0];
    } else if (e.empty()) {
      body["server"] = a.positional[0];
      if (kind == "--older-than") {
        const AgeParse age = parse_age(a.flags[0].second);
        if (!age.seconds) {
          e = "purge: --older-than: " + age.error;
        } else {
          body["kind"] = "older_than";
          body["age_s"] = *age.seconds;
        }
      } else {
        body["kind"] = kind == "--all" ? "all" : kind == "--cancel" ? "cancel" : "not_owned";
      }
    }
  } else if (command == "drain") {
    e = split_args(rest, 1, command, {{"--wait", false}, {"--timeout", true}, {"--status", false}},
                   a);
    if (e.empty()) {
      e = positional_count(command, a, 1, "drain NAME [--wait [--timeout SECONDS] | --status]");
    }
    if (e.empty()) e = check_name(command, a.positional[0]);
    if (e.empty() && a.flag("--status") && (a.flag("--wait") || a.flag("--timeout"))) {
      e = "drain: --status shows the drain; it does not go with --wait or --timeout";
    }
    if (e.empty() && a.flag("--timeout") && !a.flag("--wait")) {
      e = "drain: --timeout applies to --wait only";
    }
    if (const std::string* t = a.flag("--timeout"); e.empty() && t) {
      if (const auto s = count_in(*t, 1, 86400 * 7)) {
        inv.wait_timeout_s = static_cast<uint32_t>(*s);
      } else {
        e = "drain: --timeout must be a number of seconds between 1 and 604800 (got " +
            single_quoted(*t) + ")";
      }
    }
    if (e.empty()) {
      inv.server = a.positional[0];
      inv.target = "/v1/servers/" + a.positional[0] + "/drain";
      inv.wait = a.flag("--wait") != nullptr;
      if (a.flag("--status")) {
        inv.command = ImctlCommand::kDrainStatus;
      } else {
        inv.command = ImctlCommand::kDrain;
        inv.method = verb::post;
      }
    }
  } else if (command == "stream") {
    const std::string sub = rest.size() > 1 ? rest[1] : "";
    if (sub != "status" && sub != "cancel" && sub != "restart") {
      return usage_error(
          "stream: expected 'stream status', 'stream cancel NAME' or 'stream restart NAME'");
    }
    inv.name = "stream " + sub;
    e = split_args(rest, 2, inv.name, {}, a);
    if (sub == "status") {
      if (e.empty()) e = positional_count(inv.name, a, 0, "stream status");
      inv.command = ImctlCommand::kStreamStatus;
      inv.target = "/v1/streams";
    } else {
      if (e.empty()) e = positional_count(inv.name, a, 1, inv.name + " NAME");
      if (e.empty()) e = check_name(inv.name, a.positional[0]);
      if (e.empty()) {
        inv.command = sub == "cancel" ? ImctlCommand::kStreamCancel : ImctlCommand::kStreamRestart;
        inv.method = verb::post;
        inv.server = a.positional[0];
        inv.target = "/v1/streams/" + a.positional[0] + "/" + sub;
      }
    }
  } else {
    return usage_error("unknown command " + single_quoted(command));
  }

  if (!e.empty()) return usage_error(e);
  if (inv.method == verb::post) inv.body = json_text(body);
  ImctlParse parse;
  parse.invocation = std::move(inv);
  return parse;
}

}  // namespace imhash
