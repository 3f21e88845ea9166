// Tests of imctl: argument parsing into admin API requests, AGE / range / server-spec parsing,
// the human output of every reply, exit codes and messages, and one exchange with a real
// AdminHttpServer on loopback.
#include <doctest/doctest.h>

#include <boost/asio.hpp>
#include <boost/json.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/links/http_client.h"
#include "config_server/admin_http.h"
#include "imctl/imctl_command.h"
#include "imctl/imctl_format.h"

namespace imhash {
namespace {

namespace json = boost::json;
using boost::beast::http::verb;

ImctlParse parse(std::vector<std::string> args, const char* env = nullptr) {
  return parse_imctl_args(args, env);
}

// Parses `args`, expecting success.
ImctlInvocation ok(std::vector<std::string> args, const char* env = nullptr) {
  ImctlParse p = parse(args, env);
  INFO(p.error);
  REQUIRE(p.invocation);
  return *p.invocation;
}

// Parses `args`, expecting a usage error, and returns it.
std::string usage(std::vector<std::string> args) {
  ImctlParse p = parse(args);
  CHECK(!p.invocation);
  CHECK(!p.help);
  return p.error;
}

std::string request_of(const ImctlInvocation& inv) {
  return std::string(boost::beast::http::to_string(inv.method)) + " " + inv.target +
         (inv.body.empty() ? "" : " " + inv.body);
}

TEST_CASE("imctl: commands map to admin API requests") {
  struct Case {
    std::vector<std::string> args;
    std::string request;
  };
  const Case cases[] = {
      {{"status"}, "GET /v1/status"},
      {{"table"}, "GET /v1/table"},
      {{"servers"}, "GET /v1/servers"},
      {{"history"}, "GET /v1/history"},
      {{"history", "--limit", "5"}, "GET /v1/history?limit=5"},
      {{"history", "--limit=1000"}, "GET /v1/history?limit=1000"},
      {{"mode", "range"}, R"(POST /v1/mode {"mode":"range"})"},
      {{"mode", "modulo", "--modulo-hash", "identity"},
       R"(POST /v1/mode {"mode":"modulo","modulo_hash":"identity"})"},
      {{"mode", "--modulo-hash=mix", "modulo"},
       R"(POST /v1/mode {"mode":"modulo","modulo_hash":"mix"})"},
      {{"replicas", "2"}, R"(POST /v1/replicas {"replicas":2})"},
      {{"replicas", "1"}, R"(POST /v1/replicas {"replicas":1})"},
      {{"--json", "replicas", "3"}, R"(POST /v1/replicas {"replicas":3})"},
      {{"server", "add", "hash4=127.0.0.1:7004/4*2", "hash5"},
       R"(POST /v1/servers {"servers":[{"name":"hash4","address":"127.0.0.1:7004","shards":4,"weight":2},{"name":"hash5"}]})"},
      {{"server", "remove", "hash1", "hash2"},
       R"(POST /v1/servers/remove {"names":["hash1","hash2"]})"},
      {{"assign", "1-2000", "hash4"}, R"(POST /v1/assign {"lo":1,"hi":2000,"server":"hash4"})"},
      {{"assign", "42", "hash4"}, R"(POST /v1/assign {"lo":42,"hi":42,"server":"hash4"})"},
      {{"assign", "9223372036854775808-18446744073709551615", "h"},
       R"(POST /v1/assign {"lo":9223372036854775808,"hi":18446744073709551615,"server":"h"})"},
      {{"split", "1000"}, R"(POST /v1/split {"at":1000})"},
      {{"merge", "0-5000"}, R"(POST /v1/merge {"lo":0,"hi":5000})"},
      {{"purge", "hash1"}, R"(POST /v1/purge {"server":"hash1","kind":"not_owned"})"},
      {{"purge", "hash1", "--not-owned"},
       R"(POST /v1/purge {"server":"hash1","kind":"not_owned"})"},
      {{"purge", "hash1", "--older-than", "2h"},
       R"(POST /v1/purge {"server":"hash1","kind":"older_than","age_s":7200})"},
      {{"purge", "--older-than=90", "hash1"},
       R"(POST /v1/purge {"server":"hash1","kind":"older_than","age_s":90})"},
      {{"purge", "hash1", "--all"}, R"(POST /v1/purge {"server":"hash1","kind":"all"})"},
      {{"purge", "hash1", "--cancel"}, R"(POST /v1/purge {"server":"hash1","kind":"cancel"})"},
      {{"purge", "hash1", "--status"}, "GET /v1/purge"},
      {{"where", "18446744073709551615"}, "GET /v1/where/18446744073709551615"},
      {{"server", "set", "hash1", "--address", "10.0.0.11:7001"},
       R"(POST /v1/servers/set {"name":"hash1","address":"10.0.0.11:7001"})"},
      {{"server", "set", "hash1", "--weight=3", "--address", "[::1]:7001"},
       R"(POST /v1/servers/set {"name":"hash1","address":"[::1]:7001","weight":3})"},
  };
  for (const Case& c : cases) {
    INFO(c.args[0]);
    CHECK(request_of(ok(c.args)) == c.request);
  }
  CHECK(ok({"server", "add", "h"}).name == "server add");
  CHECK(ok({"assign", "1-2", "h"}).command == ImctlCommand::kAssign);
  CHECK(ok({"replicas", "2"}).command == ImctlCommand::kReplicas);
  const ImctlInvocation status = ok({"purge", "hash1", "--status"});
  CHECK(status.command == ImctlCommand::kPurgeStatus);
  CHECK(status.server == "hash1");
}

TEST_CASE("imctl: global options, anywhere on the line") {
  CHECK(ok({"status", "--watch"}).watch);
  CHECK_FALSE(ok({"status"}).watch);
  ImctlInvocation inv = ok({"status"});
  CHECK(inv.admin == "127.0.0.1:7100");
  CHECK(inv.host == "127.0.0.1");
  CHECK(inv.port == 7100);
  CHECK(!inv.json);
  CHECK(inv.timeout == std::chrono::milliseconds(5000));

  inv = ok({"status"}, "10.0.0.5:7200");
  CHECK(inv.admin == "10.0.0.5:7200");
  CHECK(inv.port == 7200);
  inv = ok({"--admin", "[::1]:7300", "status"}, "10.0.0.5:7200");
  CHECK(inv.host == "::1");
  CHECK(inv.port == 7300);
  inv = ok({"table", "--admin=localhost:1", "--json", "--timeout-ms", "250"});
  CHECK(inv.host == "localhost");
  CHECK(inv.json);
  CHECK(inv.timeout == std::chrono::milliseconds(250));
  inv = ok({"status"}, "");  // an empty IMHASH_ADMIN is unset
  CHECK(inv.port == 7100);

  CHECK(parse({"status", "--help"}).help);
  CHECK(parse({"-h"}).help);
  CHECK(usage({"--admin", "nope", "status"}) == "--admin: expected HOST:PORT, got 'nope'");
  CHECK(parse({"status"}, "nope").error == "IMHASH_ADMIN: expected HOST:PORT, got 'nope'");
  CHECK(usage({"--admin", "h:0", "status"}) == "--admin: port 0 is not allowed");
  CHECK(usage({"status", "--admin"}) == "--admin needs a value");
  CHECK(usage({"--timeout-ms", "0", "status"}) ==
        "--timeout-ms must be a number of milliseconds between 1 and 3600000 (got '0')");
  CHECK(usage({"--timeout-ms=fast", "status"}) ==
        "--timeout-ms must be a number of milliseconds between 1 and 3600000 (got 'fast')");
}

TEST_CASE("imctl: --admin and IMHASH_ADMIN take a list of config servers") {
  ImctlInvocation inv = ok({"--admin", "127.0.0.1:7100,127.0.0.1:7101, [::1]:7102", "status"});
  REQUIRE(inv.admins.size() == 3);
  CHECK(inv.admins[0] == AdminAddress{"127.0.0.1:7100", "127.0.0.1", 7100});
  CHECK(inv.admins[1] == AdminAddress{"127.0.0.1:7101", "127.0.0.1", 7101});
  CHECK(inv.admins[2] == AdminAddress{"[::1]:7102", "::1", 7102});
  // The first is the one asked first, and named by messages until another answers.
  CHECK(inv.admin == "127.0.0.1:7100");
  CHECK(inv.host == "127.0.0.1");
  CHECK(inv.port == 7100);
  inv = ok({"status"}, "10.0.0.5:7200,10.0.0.6:7200");
  REQUIRE(inv.admins.size() == 2);
  CHECK(inv.admins[1].text == "10.0.0.6:7200");
  inv = ok({"--admin=a:1,b:2", "status"}, "10.0.0.5:7200");  // --admin wins
  CHECK(inv.admins.size() == 2);
  CHECK(inv.admin == "a:1");
  inv = ok({"status"});
  CHECK(inv.admins == std::vector<AdminAddress>{{"127.0.0.1:7100", "127.0.0.1", 7100}});

  CHECK(usage({"--admin", "a:1,,b:2", "status"}) ==
        "--admin: expected HOST:PORT[,HOST:PORT...], got 'a:1,,b:2' (an empty address)");
  CHECK(usage({"--admin", "a:1,", "status"}) ==
        "--admin: expected HOST:PORT[,HOST:PORT...], got 'a:1,' (an empty address)");
  CHECK(usage({"--admin", "a:1,nope", "status"}) == "--admin: expected HOST:PORT, got 'nope'");
  CHECK(usage({"--admin", "a:1,b:0", "status"}) == "--admin: port 0 is not allowed (in 'b:0')");
  CHECK(usage({"--admin", "a:1,b:x", "status"}) == "--admin: bad port 'x' in 'b:x'");
  CHECK(usage({"--admin", "127.0.0.1:7100,127.0.0.1:7101,127.0.0.1:7100", "status"}) ==
        "--admin: '127.0.0.1:7100' is given twice");
  CHECK(usage({"--admin", "[::1]:7100, [::1]:7100", "status"}) ==
        "--admin: '[::1]:7100' is given twice");
  CHECK(parse({"status"}, "a:1,a:1").error == "IMHASH_ADMIN: 'a:1' is given twice");

  CHECK(parse_admin_list("h:1", "--admin").addresses.size() == 1);
  CHECK(parse_admin_list("", "--admin").error ==
        "--admin: expected HOST:PORT[,HOST:PORT...], got '' (an empty address)");
  CHECK(same_admin_address({"[::1]:1", "::1", 1}, {" [::1]:1", "::1", 1}));
  CHECK_FALSE(same_admin_address({"localhost:1", "localhost", 1}, {"127.0.0.1:1", "127.0.0.1", 1}));
}

TEST_CASE("imctl: usage errors say what is wrong") {
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const Case cases[] = {
      {{}, "no command given"},
      {{"stats"}, "unknown command 'stats'"},
      {{"--verbose", "status"}, "unknown option '--verbose'"},
      {{"status", "now"}, "status: unexpected argument 'now'"},
      {{"table", "--limit", "3"}, "table: unknown option '--limit'"},
      {{"history", "--limit", "0"},
       "history: --limit must be a number between 1 and 1000 (got '0')"},
      {{"history", "--limit"}, "history: --limit needs a value"},
      {{"history", "--limit=2", "--limit=3"}, "history: --limit is given twice"},
      {{"mode"}, "mode: expected mode MODE [--modulo-hash mix|identity]"},
      {{"mode", "hash"}, "mode: unknown mode 'hash' (expected modulo, range or ring)"},
      {{"mode", "ring", "--modulo-hash", "mix"}, "mode: --modulo-hash applies to mode modulo only"},
      {{"mode", "modulo", "--modulo-hash", "md5"},
       "mode: unknown --modulo-hash 'md5' (expected mix or identity)"},
      {{"replicas"}, "replicas: expected replicas N"},
      {{"replicas", "0"}, "replicas: expected a number of copies between 1 and 3 (got '0')"},
      {{"replicas", "4"}, "replicas: expected a number of copies between 1 and 3 (got '4')"},
      {{"replicas", "two"}, "replicas: expected a number of copies between 1 and 3 (got 'two')"},
      {{"replicas", "-1"}, "replicas: expected a number of copies between 1 and 3 (got '-1')"},
      {{"replicas", "2", "3"}, "replicas: unexpected argument '3' (usage: replicas N)"},
      {{"replicas", "2", "--force"}, "replicas: unknown option '--force'"},
      {{"server"},
       "server: expected 'server add NAME...', 'server set NAME --address "
       "HOST:PORT | --weight W' or 'server remove NAME...'"},
      {{"server", "list"},
       "server: expected 'server add NAME...', 'server set NAME --address "
       "HOST:PORT | --weight W' or 'server remove NAME...'"},
      {{"server", "add"}, "server add: expected at least one server"},
      {{"server", "add", "h=nohost"}, "server add: 'h=nohost': address 'nohost' is not HOST:PORT"},
      {{"server", "add", "h/0"}, "server add: 'h/0': SHARDS must be a number between 1 and 1024"},
      {{"server", "add", "h=0.0.0.0:7001"},
       "server add: 'h=0.0.0.0:7001': address '0.0.0.0:7001' is unspecified: login servers cannot "
       "dial it (give the address they reach the server at)"},
      {{"server", "set", "h"},
       "server set: nothing to change: give --address HOST:PORT, --weight W or both"},
      {{"server", "set", "--weight", "2"},
       "server set: expected server set NAME [--address HOST:PORT] [--weight W]"},
      {{"server", "set", "h", "g", "--weight", "2"},
       "server set: unexpected argument 'g' (usage: server set NAME [--address HOST:PORT] "
       "[--weight W])"},
      {{"server", "set", "h", "--weight", "0"},
       "server set: --weight must be a number between 1 and 1000 (got '0')"},
      {{"server", "set", "h", "--address", "[::]:7001"},
       "server set: address '[::]:7001' is unspecified: login servers cannot dial it (give the "
       "address they reach the server at)"},
      {{"server", "set", "h", "--address", "nohost"},
       "server set: address 'nohost' is not HOST:PORT"},
      {{"server", "set", "h", "--port", "1"}, "server set: unknown option '--port'"},
      {{"server", "remove", "bad name"},
       "server remove: 'bad name' is not a valid server name (1 to 64 characters of A-Z a-z 0-9 . "
       "_ -)"},
      {{"assign", "1-2000"}, "assign: expected assign LO-HI NAME"},
      {{"assign", "5-3", "hash1"}, "assign: range 5-3: lo is greater than hi"},
      {{"assign", "1-x", "hash1"},
       "assign: '1-x' is not a range: expected LO-HI or ID, ids a decimal integer between 0 and "
       "18446744073709551615"},
      {{"assign", "1-2", "hash1", "extra"},
       "assign: unexpected argument 'extra' (usage: assign LO-HI NAME)"},
      {{"merge", "9-1"}, "merge: range 9-1: lo is greater than hi"},
      {{"split"}, "split: expected split AT"},
      {{"split", "-5"},
       "split: '-5' is not an id: expected a decimal integer between 0 and 18446744073709551615"},
      {{"split", "1e3"},
       "split: '1e3' is not an id: expected a decimal integer between 0 and 18446744073709551615"},
      {{"where", "18446744073709551616"},
       "where: '18446744073709551616' is not an id: expected a decimal integer between 0 and "
       "18446744073709551615"},
      {{"purge"},
       "purge: expected purge NAME [--not-owned | --older-than AGE | --all | --cancel | --status]"},
      {{"purge", "hash1", "--all", "--cancel"},
       "purge: give at most one of --not-owned, --older-than, --all, --cancel, --status"},
      {{"purge", "hash1", "--older-than", "soon"},
       "purge: --older-than: bad AGE 'soon': expected a number of seconds, or a number followed by "
       "s, m, h or d (90, 90s, 15m, 2h, 7d)"},
      {{"purge", "hash1", "--older-than"}, "purge: --older-than needs a value"},
      {{"purge", "hash1", "--everything"}, "purge: unknown option '--everything'"},
      {{"token", "5", "--ttl", "1h"}, "token: --key-file FILE is required"},
  };
  for (const Case& c : cases) {
    INFO(c.error);
    CHECK(usage(c.args) == c.error);
  }
}

TEST_CASE("imctl: AGE parsing") {
  CHECK(parse_age("90").seconds == 90u);
  CHECK(parse_age("90s").seconds == 90u);
  CHECK(parse_age("15m").seconds == 900u);
  CHECK(parse_age("2h").seconds == 7200u);
  CHECK(parse_age("7d").seconds == 604800u);
  CHECK(parse_age("4294967295").seconds == 4294967295u);
  CHECK(parse_age("49710d").seconds == 4294944000u);
  CHECK(parse_age("49711d").error == "bad AGE '49711d': at most 4294967295 seconds");
  CHECK(parse_age("0s").error == "bad AGE '0s': it must be at least 1 second");
  for (const char* bad :
       {"", "s", "m", "-5", "1.5h", "5w", "5 m", "5M", "h5", "99999999999999999999999d"}) {
    INFO(bad);
    CHECK(!parse_age(bad).seconds);
    CHECK(parse_age(bad).error.starts_with("bad AGE "));
  }
}

TEST_CASE("imctl: server specs") {
  auto spec = [](std::string_view text) {
    SpecParse p = parse_server_spec(text);
    INFO(text, ": ", p.error);
    REQUIRE(p.spec);
    return *p.spec;
  };
  ServerSpec s = spec("hash4");
  CHECK(s.name == "hash4");
  CHECK(!s.address);
  CHECK(!s.shards);
  CHECK(s.weight == 1);
  s = spec("hash4=127.0.0.1:7004/4*3");
  CHECK(*s.address == "127.0.0.1:7004");
  CHECK(*s.shards == 4);
  CHECK(s.weight == 3);
  s = spec("h=[::1]:7000*2");
  CHECK(*s.address == "[::1]:7000");
  CHECK(!s.shards);
  CHECK(s.weight == 2);
  s = spec("h/16");
  CHECK(*s.shards == 16);

  CHECK(parse_server_spec("").error ==
        "'' is not a valid server name (1 to 64 characters of A-Z a-z 0-9 . _ -)");
  CHECK(parse_server_spec("h=a:0").error == "'h=a:0': address 'a:0' has port 0");
  CHECK(parse_server_spec("h*2/4").error == "'h*2/4': WEIGHT must be a number between 1 and 1000");
  CHECK(parse_server_spec("h/4/4").error == "'h/4/4': SHARDS must be a number between 1 and 1024");
  CHECK(parse_server_spec("h*0").error == "'h*0': WEIGHT must be a number between 1 and 1000");
  CHECK(parse_server_spec("h/1025").error ==
        "'h/1025': SHARDS must be a number between 1 and 1024");
  CHECK(parse_server_spec("h=").error == "'h=': address '' is not HOST:PORT");
}

TEST_CASE("imctl: ranges") {
  CHECK(parse_range_arg("1-2000").range == std::pair<uint64_t, uint64_t>{1, 2000});
  CHECK(parse_range_arg("7").range == std::pair<uint64_t, uint64_t>{7, 7});
  CHECK(parse_range_arg("5-3").error == "range 5-3: lo is greater than hi");
  CHECK(!parse_range_arg("1-").range);
  CHECK(!parse_range_arg("-").range);
  CHECK(!parse_range_arg("1-18446744073709551616").range);
}

// ---- Output -------------------------------------------------------------------------------------

json::value js(std::string_view text) { return json::parse(text); }

TEST_CASE("imctl: status as text") {
  const json::value body = js(R"({
    "version": 8, "mode": "range", "converged": false,
    "nodes": [
      {"role": "hash", "name": "hash1", "address": "127.0.0.1:7001", "state": "up",
       "version": 8, "heartbeat_age_ms": 420, "records": 1203442, "requests_per_s": 52000},
      {"role": "login", "name": "login-a", "address": "127.0.0.1:9000", "state": "down",
       "version": 7, "last_heartbeat_ms": 3600000, "stats": {}},
      {"role": "hash", "name": "hash2", "address": "127.0.0.1:7002", "state": "up",
       "version": 8, "last_heartbeat_ms": 3.25, "stats": {"records": 99}}
    ],
    "last_change": {"version": 8, "reached_every_node_ms": 12.6},
    "pending_purge": {"version": 8, "servers": ["hash1", "hash3"]},
    "purges": [
      {"server": "hash1", "shard": 0, "kind": "not_owned", "state": "running",
       "scanned": 52, "total": 100, "deleted": 7}
    ]})");
  CHECK(format_status(body) ==
        "table version 8, mode range, converged: no\n"
        "version 8 reached every node in 13ms\n"
        "pending purge of old copies after version 8: hash1 hash3\n"
        "\n"
        "ROLE   NAME     ADDRESS         STATE  VERSION  HEARTBEAT  RECORDS  REQUESTS/S\n"
        "hash   hash1    127.0.0.1:7001  up     8        420ms ago  1203442  52000\n"
        "login  login-a  127.0.0.1:9000  down   7        1h00m ago  -        -\n"
        "hash   hash2    127.0.0.1:7002  up     8        3.2ms ago  99       -\n"
        "\n"
        "purges:\n"
        "SERVER  SHARD  KIND       STATE    PROGRESS                   DELETED\n"
        "hash1   0      not_owned  running  [#####.....]  52%  52/100  7\n");
  CHECK(format_status(js(R"({"version": 1, "mode": "modulo", "modulo_hash": "identity",
                            "converged": true, "nodes": [], "purges": []})")) ==
        "table version 1, mode modulo (identity), converged: yes\n\nno nodes are connected\n");
  CHECK(format_status(js(R"({"version": 5, "mode": "modulo", "converged": true, "nodes": [],
                            "last_change": {"version": 5, "reached_every_node_ms": 9.2E-4}})")) ==
        "table version 5, mode modulo, converged: yes\n"
        "version 5 reached every node in <0.1ms\n\nno nodes are connected\n");
  CHECK(format_status(js(R"({"version": 5, "mode": "ring", "converged": false, "nodes": [],
                            "last_change": {"version": 5}})")) ==
        "table version 5, mode ring, converged: no\n"
        "version 5 has not reached every node yet\n\nno nodes are connected\n");
  // Fields of an unexpected shape show as "-", never break the output.
  CHECK(format_status(js(R"({"nodes": [{"name": ["x"]}], "purges": 5})")) ==
        "table version -, mode -, converged: -\n\n"
        "ROLE  NAME   ADDRESS  STATE  VERSION  HEARTBEAT  RECORDS  REQUESTS/S\n"
        "-     [\"x\"]  -        -      -        -          -        -\n");
}

TEST_CASE("imctl: status with replicas shows each hash server's lag and the refills") {
  const json::value body = js(R"({"version": 4, "mode": "ring", "replicas": 2, "converged": true,
    "nodes": [
      {"role": "hash", "name": "hash1", "address": "127.0.0.1:7001", "state": "up", "version": 4,
       "last_heartbeat_ms": 20, "stats": {"records": 10}, "replication_lag": 0},
      {"role": "hash", "name": "hash2", "address": "127.0.0.1:7002", "state": "up", "version": 4,
       "last_heartbeat_ms": 20, "stats": {"records": 3}, "replication_lag": 1250},
      {"role": "login", "name": "login1", "address": "127.0.0.1:9000", "state": "up",
       "version": 4, "last_heartbeat_ms": 20, "held_writes": {"hash2": 1250}}
    ],
    "refills": [{"server": "hash2", "version": 4, "waiting": ["hash3"], "done": ["hash1"],
                 "seconds": 2, "progress": 0.625, "records_sent": 5000, "streams_done": false},
                {"server": "hash4", "version": 4, "waiting": [], "done": ["hash1"],
                 "seconds": 9, "progress": 1, "records_sent": 70, "streams_done": true,
                 "login_servers_holding": ["login1"]}]})");
  CHECK(format_status(body) ==
        "table version 4, mode ring, replicas 2, converged: yes\n"
        "refills (lookups read another copy until the server has caught up):\n"
        "  hash2 at version 4, for 2 s, 63% scanned, 5000 records in, waiting for the streams of "
        "hash3\n"
        "  hash4 at version 4, for 9 s, 100% scanned, 70 records in, waiting for the login servers "
        "login1 to send what they hold for it\n"
        "\n"
        "ROLE   NAME    ADDRESS         STATE  VERSION  HEARTBEAT  RECORDS  REQUESTS/S  LAG\n"
        "hash   hash1   127.0.0.1:7001  up     4        20ms ago   10       -           0\n"
        "hash   hash2   127.0.0.1:7002  up     4        20ms ago   3        -           1250\n"
        "login  login1  127.0.0.1:9000  up     4        20ms ago   -        -           -\n");
}

TEST_CASE("imctl: table, servers, history, where, changes and purges as text") {
  CHECK(format_table(js(R"({"version": 3, "mode": "range", "servers": [
                            {"name": "hash1", "address": "127.0.0.1:7001", "shards": 4, "weight": 1},
                            {"name": "hash2", "address": "", "shards": 1, "weight": 1}],
                          "ranges": [
                            {"lo": 0, "hi": 2000, "server": "hash2"},
                            {"lo": 2001, "hi": 9223372036854775807, "server": "hash1"},
                            {"lo": 9223372036854775808, "hi": 18446744073709551615, "server": "hash2"}]})")) ==
        "table version 3, mode range\n"
        "\n"
        "SERVER  ADDRESS         SHARDS  WEIGHT\n"
        "hash1   127.0.0.1:7001  4       1\n"
        "hash2                   1       1\n"
        "\n"
        "RANGE                                     SERVER  SHARE\n"
        "0-2000                                    hash2   <0.01%\n"
        "2001-9223372036854775807                  hash1   50.00%\n"
        "9223372036854775808-18446744073709551615  hash2   50.00%\n");
  CHECK(format_servers(js(R"({"servers": [{"name": "hash1", "address": "127.0.0.1:7001",
                             "shards": 4, "weight": 1, "state": "up", "records": 10}]})")) ==
        "NAME   ADDRESS         SHARDS  WEIGHT  STATE  RECORDS\n"
        "hash1  127.0.0.1:7001  4       1       up     10\n");
  CHECK(format_servers(js(R"({"servers": []})")) == "no servers\n");
  CHECK(format_history(js(R"({"versions": [
                             {"version": 9, "time": 1714564800, "change": "assign 1-2000 to hash4"},
                             {"version": 8, "time": "yesterday", "change": "add hash4"}]})")) ==
        "VERSION  TIME                  CHANGE\n"
        "9        2024-05-01T12:00:00Z  assign 1-2000 to hash4\n"
        "8        yesterday             add hash4\n");
  CHECK(format_where(js(R"({"id": 42, "server": "hash2", "shard": 3, "address": "127.0.0.1:7002",
                           "version": 8})")) ==
        "id 42: server hash2, shard 3, address 127.0.0.1:7002 (table version 8)\n");
  CHECK(format_change(js(R"({"version": 9, "change": "assign 1-2000 to hash4", "table": {}})")) ==
        "table version 9: assign 1-2000 to hash4\n");
  CHECK(format_purge(js(R"({"server": "hash1", "purge": {"kind": "older_than", "state": "done",
                           "scanned": 10, "total": 10, "deleted": 4}})")) ==
        "SERVER  SHARD  KIND        STATE  PROGRESS                  DELETED\n"
        "hash1   -      older_than  done   [##########] 100%  10/10  4\n");
  CHECK(format_purge(js(R"({"server": "h", "purge": {"shards": [
                           {"shard": 0, "kind": "all", "state": "running", "scanned": 1, "total": 4, "deleted": 1},
                           {"shard": 1, "kind": "all", "state": "idle"}]}})")) ==
        "SERVER  SHARD  KIND  STATE    PROGRESS                DELETED\n"
        "h       0      all   running  [##........]  25%  1/4  1\n"
        "h       1      all   idle     -                       -\n");
  // The shape the config server core answers with: "requested" and "shards" beside "server".
  CHECK(format_purge(js(R"({"server": "hash1", "requested": "not_owned", "shards": [
                           {"shard": 0, "state": "running", "kind": "not_owned", "scanned": 3,
                            "total": 10, "deleted": 1}]})")) ==
        "purge not_owned requested on hash1\n"
        "SERVER  SHARD  KIND       STATE    PROGRESS                 DELETED\n"
        "hash1   0      not_owned  running  [###.......]  30%  3/10  1\n");
  CHECK(format_purge(js(R"({"server": "hash1", "requested": "cancel", "shards": []})")) ==
        "purge cancel requested on hash1\nno progress reported yet by hash1\n");
  const json::value purges = js(R"({"purges": [
      {"server": "hash1", "shard": 0, "kind": "all", "state": "running", "scanned": 0, "total": 0, "deleted": 0},
      {"server": "hash2", "shard": 0, "kind": "all", "state": "done", "scanned": 5, "total": 5, "deleted": 5}]})");
  CHECK(format_purges(purges, "hash1") ==
        "SERVER  SHARD  KIND  STATE    PROGRESS                DELETED\n"
        "hash1   0      all   running  [..........]   0%  0/0  0\n");
  CHECK(format_purges(purges, "hash3") == "no purges on hash3\n");
  CHECK(format_purges(purges, "").find("hash2") != std::string::npos);
}

TEST_CASE("imctl: replicas in where, table, status and the help") {
  // Two copies or more: the primary, then its replicas, one row each.
  CHECK(format_where(js(R"({"id": 42, "server": "hash2", "shard": 3, "address": "127.0.0.1:7002",
                           "version": 9, "replicas": [
                             {"server": "hash3", "shard": 0, "address": "127.0.0.1:7003"},
                             {"server": "hash1", "shard": 1, "address": "127.0.0.1:7001"}]})")) ==
        "id 42 (table version 9), 3 copies:\n"
        "COPY     SERVER  SHARD  ADDRESS\n"
        "primary  hash2   3      127.0.0.1:7002\n"
        "replica  hash3   0      127.0.0.1:7003\n"
        "replica  hash1   1      127.0.0.1:7001\n");
  // One copy (an empty list, or a server before replicas): the line of before.
  const std::string one =
      "id 42: server hash2, shard 3, address 127.0.0.1:7002 (table version 8)\n";
  CHECK(format_where(js(R"({"id": 42, "server": "hash2", "shard": 3, "address": "127.0.0.1:7002",
                           "version": 8, "replicas": []})")) == one);
  CHECK(format_where(js(R"({"id": 42, "server": "hash2", "shard": 3, "address": "127.0.0.1:7002",
                           "version": 8, "replicas": 7})")) == one);
  // An odd replica entry shows as "-", never breaks the output.
  CHECK(format_where(js(R"({"id": 1, "server": "a", "shard": 0, "address": "x:1", "version": 2,
                           "replicas": [5]})")) ==
        "id 1 (table version 2), 2 copies:\n"
        "COPY     SERVER  SHARD  ADDRESS\n"
        "primary  a       0      x:1\n"
        "replica  -       -      -\n");

  // The replication factor beside the mode, when there is more than one copy.
  CHECK(format_table(js(R"({"version": 4, "mode": "ring", "replicas": 2, "servers": [
                            {"name": "hash1", "address": "127.0.0.1:7001", "shards": 1, "weight": 1}]})"))
            .starts_with("table version 4, mode ring, replicas 2\n\n"));
  CHECK(format_table(js(R"({"version": 4, "mode": "ring", "servers": []})"))
            .starts_with("table version 4, mode ring\n\n"));
  CHECK(format_table(js(R"({"version": 4, "mode": "ring", "replicas": 1, "servers": []})"))
            .starts_with("table version 4, mode ring\n\n"));
  CHECK(format_status(js(R"({"version": 4, "mode": "modulo", "modulo_hash": "identity",
                            "replicas": 3, "converged": true, "nodes": []})")) ==
        "table version 4, mode modulo (identity), replicas 3, converged: yes\n\n"
        "no nodes are connected\n");
  CHECK(format_status(js(R"({"version": 4, "mode": "ring", "replicas": 1, "converged": true,
                            "nodes": []})")) ==
        "table version 4, mode ring, converged: yes\n\nno nodes are connected\n");

  // The change answers like every other edit.
  ImctlInvocation inv = ok({"replicas", "2"});
  CHECK(inv.name == "replicas");
  CHECK(format_reply(inv, js(R"({"version": 7, "change": "replicas 2", "table": {}})")) ==
        "table version 7: replicas 2\n");
  HttpOutcome outcome;
  outcome.reply = {
      400,
      R"({"error": "cannot set replicas 2: the table already keeps 2 copies of each record"})"};
  const ImctlOutput o = imctl_output(inv, outcome);
  CHECK(o.exit_code == 1);
  CHECK(
      o.err ==
      "imctl: replicas: cannot set replicas 2: the table already keeps 2 copies of each record\n");

  const std::string help = imctl_usage();
  for (const char* line :
       {"  replicas N  ", "keep N copies of each record (1 to 3)", "and its replicas"}) {
    CAPTURE(line);
    CHECK(help.find(line) != std::string::npos);
  }
}

TEST_CASE("imctl: progress bars, durations, times") {
  CHECK(progress_bar(0, 100) == "[..........]   0%");
  CHECK(progress_bar(52, 100) == "[#####.....]  52%");
  CHECK(progress_bar(99, 100) == "[#########.]  99%");
  CHECK(progress_bar(100, 100) == "[##########] 100%");
  CHECK(progress_bar(150, 100) == "[##########] 100%");
  CHECK(progress_bar(5, 0) == "[..........]   0%");
  CHECK(progress_bar(1, 3, 3) == "[#..]  33%");
  CHECK(progress_bar(~uint64_t{0} / 2, ~uint64_t{0}) == "[####......]  49%");  // rounds down
  CHECK(progress_bar(~uint64_t{0}, ~uint64_t{0}) == "[##########] 100%");
  CHECK(format_duration_ms(0) == "0ms");
  CHECK(format_duration_ms(999) == "999ms");
  CHECK(format_duration_ms(2400) == "2.4s");
  CHECK(format_duration_ms(185000) == "3m05s");
  CHECK(format_duration_ms(7800000) == "2h10m");
  CHECK(format_duration_ms(273600000) == "3d04h");
  CHECK(format_unix_time(0) == "1970-01-01T00:00:00Z");
  CHECK(format_unix_time(1714564800) == "2024-05-01T12:00:00Z");
  CHECK(format_unix_time(~uint64_t{0}) == "9999-12-31T23:59:59Z");
  TextTable t({"A", "LONGER"});
  t.add({"wide cell", "x"});
  t.add({"y"});
  CHECK(t.render() == "A          LONGER\nwide cell  x\ny          -\n");
}

TEST_CASE("imctl: outcomes become messages and exit codes") {
  ImctlInvocation inv = ok({"assign", "1-2", "hash9"});
  HttpOutcome outcome;

  outcome.failure = HttpFailure::kUnreachable;
  outcome.error = "Connection refused";
  ImctlOutput o = imctl_output(inv, outcome);
  CHECK(o.exit_code == 69);
  CHECK(o.out.empty());
  CHECK(o.err == "imctl: cannot reach the config server at 127.0.0.1:7100: Connection refused\n");

  outcome.failure = HttpFailure::kTimeout;
  outcome.error = "reading the reply";
  o = imctl_output(inv, outcome);
  CHECK(o.exit_code == 69);
  CHECK(o.err ==
        "imctl: no answer from the config server at 127.0.0.1:7100 within 5000 ms (reading the "
        "reply)\n");

  outcome.failure = HttpFailure::kBadReply;
  outcome.error = "unreadable HTTP reply: bad version";
  CHECK(imctl_output(inv, outcome).exit_code == 69);

  outcome = {};
  outcome.reply = {400, "{\"error\":\"there is no server named \\\"hash9\\\"\"}\n"};
  o = imctl_output(inv, outcome);
  CHECK(o.exit_code == 1);
  CHECK(o.out.empty());
  CHECK(o.err == "imctl: assign: there is no server named \"hash9\"\n");

  outcome.reply = {503, "<html>busy</html>"};
  o = imctl_output(inv, outcome);
  CHECK(o.exit_code == 1);
  CHECK(o.err == "imctl: assign: the config server answered HTTP 503\n");

  outcome.reply = {200, "{\"version\":9,\"change\":\"assign 1-2 to hash9\"}\n"};
  o = imctl_output(inv, outcome);
  CHECK(o.exit_code == 0);
  CHECK(o.out == "table version 9: assign 1-2 to hash9\n");
  CHECK(o.err.empty());

  outcome.reply = {200, "not json"};
  o = imctl_output(inv, outcome);
  CHECK(o.exit_code == 69);
  CHECK(o.err.starts_with("imctl: the reply from 127.0.0.1:7100 is not JSON"));

  // --json: the body as is, on success and on refusal (with the sentence on stderr as well).
  inv.json = true;
  outcome.reply = {200, "{\"version\":9}"};
  o = imctl_output(inv, outcome);
  CHECK(o.exit_code == 0);
  CHECK(o.out == "{\"version\":9}\n");
  outcome.reply = {409, "{\"error\":\"conflict\"}\n"};
  o = imctl_output(inv, outcome);
  CHECK(o.exit_code == 1);
  CHECK(o.out == "{\"error\":\"conflict\"}\n");
  CHECK(o.err == "imctl: assign: conflict\n");
}

// ---- Drains and streams (issue 13)
// ----------------------------------------------------------------

TEST_CASE("imctl: drain and stream commands map to admin API requests") {
  ImctlInvocation inv = ok({"drain", "hash3"});
  CHECK(inv.command == ImctlCommand::kDrain);
  CHECK(request_of(inv) == "POST /v1/servers/hash3/drain {}");
  CHECK_FALSE(inv.wait);
  CHECK(inv.server == "hash3");

  inv = ok({"drain", "hash3", "--wait"});
  CHECK(inv.command == ImctlCommand::kDrain);
  CHECK(inv.wait);
  CHECK(inv.wait_timeout_s == kImctlDefaultDrainTimeoutS);
  CHECK(request_of(inv) == "POST /v1/servers/hash3/drain {}");
  const ImctlInvocation poll = drain_poll_invocation(inv);
  CHECK(poll.command == ImctlCommand::kDrainStatus);
  CHECK(request_of(poll) == "GET /v1/servers/hash3/drain");
  CHECK_FALSE(poll.wait);

  inv = ok({"drain", "--timeout=30", "hash3", "--wait"});
  CHECK(inv.wait_timeout_s == 30);
  inv = ok({"drain", "hash3", "--status"});
  CHECK(inv.command == ImctlCommand::kDrainStatus);
  CHECK(request_of(inv) == "GET /v1/servers/hash3/drain");

  inv = ok({"stream", "status"});
  CHECK(inv.command == ImctlCommand::kStreamStatus);
  CHECK(request_of(inv) == "GET /v1/streams");
  inv = ok({"stream", "cancel", "hash1"});
  CHECK(inv.command == ImctlCommand::kStreamCancel);
  CHECK(inv.name == "stream cancel");
  CHECK(request_of(inv) == "POST /v1/streams/hash1/cancel {}");
  inv = ok({"--json", "stream", "restart", "hash1"});
  CHECK(inv.command == ImctlCommand::kStreamRestart);
  CHECK(request_of(inv) == "POST /v1/streams/hash1/restart {}");
}

TEST_CASE("imctl: drain and stream usage errors") {
  CHECK(usage({"drain"}) == "drain: expected drain NAME [--wait [--timeout SECONDS] | --status]");
  CHECK(usage({"drain", "a", "b"}) ==
        "drain: unexpected argument 'b' (usage: drain NAME [--wait [--timeout SECONDS] | "
        "--status])");
  CHECK(usage({"drain", "bad/name"}) ==
        "drain: 'bad/name' is not a valid server name (1 to 64 characters of A-Z a-z 0-9 . _ -)");
  CHECK(usage({"drain", "h", "--timeout", "5"}) == "drain: --timeout applies to --wait only");
  CHECK(usage({"drain", "h", "--wait", "--status"}) ==
        "drain: --status shows the drain; it does not go with --wait or --timeout");
  CHECK(usage({"drain", "h", "--wait", "--timeout", "0"}) ==
        "drain: --timeout must be a number of seconds between 1 and 604800 (got '0')");
  CHECK(usage({"drain", "h", "--wait", "--timeout"}) == "drain: --timeout needs a value");
  CHECK(usage({"drain", "h", "--force"}) == "drain: unknown option '--force'");
  CHECK(usage({"stream"}) ==
        "stream: expected 'stream status', 'stream cancel NAME' or 'stream restart NAME'");
  CHECK(usage({"stream", "pause", "h"}) ==
        "stream: expected 'stream status', 'stream cancel NAME' or 'stream restart NAME'");
  CHECK(usage({"stream", "cancel"}) == "stream cancel: expected stream cancel NAME");
  CHECK(usage({"stream", "status", "h"}) == "stream status: unexpected argument 'h'");
  CHECK(usage({"stream", "restart", "a b"}) ==
        "stream restart: 'a b' is not a valid server name (1 to 64 characters of A-Z a-z 0-9 . _ "
        "-)");
  const std::string help = imctl_usage();
  for (const char* line : {"drain NAME [--wait [--timeout SECONDS] | --status]", "stream status",
                           "stream cancel NAME", "stream restart NAME", "75 drain --wait"}) {
    CAPTURE(line);
    CHECK(help.find(line) != std::string::npos);
  }
}

TEST_CASE("imctl: drains, streams and pending purges as text") {
  const json::value running = js(R"js({"version": 7, "state": "running", "scanned": 300,
      "total": 1000, "sent": 4500, "rate": 12000, "eta_ms": 3200, "restarts": 1,
      "targets": [{"name": "hash1", "records": 3000}, {"name": "hash2", "records": 1500}]})js");
  CHECK(stream_phrase(&running) ==
        "running at version 7: 4500 records sent, [###.......]  30%, 12000/s, ETA 3.2s, 1 "
        "restarts");
  const json::value done = js(R"js({"version": 7, "state": "done", "scanned": 1000,
      "total": 1000, "sent": 9000, "rate": 0, "eta_ms": 0, "restarts": 0, "targets": []})js");
  CHECK(stream_phrase(&done) == "done at version 7: 9000 records sent");
  CHECK(stream_phrase(nullptr) == "no report");

  const json::value drain = js(R"js({"server": "hash3", "version": 7, "state": "up",
      "records": 120000, "purge_sent": false, "drained": false,
      "stream": {"version": 7, "state": "running", "scanned": 300, "total": 1000, "sent": 4500,
                 "rate": 12000, "eta_ms": 3200, "restarts": 0, "targets": []},
      "pending_purge": {"server": "hash3", "version": 7, "held": false,
                        "waits_for": ["stream done at version 7 (now running at version 7, 4500 )js"
                               R"js(records sent)"]}})js");
  CHECK_FALSE(drain_done(drain));
  CHECK(drain_progress_line(drain) ==
        "hash3 (out of the table at version 7, up): 120000 records; stream running at version 7: "
        "4500 records sent, [###.......]  30%, 12000/s, ETA 3.2s; purge pending: after version 7: "
        "waits for stream done at version 7 (now running at version 7, 4500 records sent)");
  const json::value drained = js(R"js({"server": "hash3", "version": 7, "state": "up",
      "records": 0, "purge_sent": true, "drained": true, "stream": null, "pending_purge": null})js");
  CHECK(drain_done(drained));
  CHECK(format_drain(drained) ==
        "hash3 (out of the table at version 7, up): drained, it holds nothing\n");
  // The POST reply: the change, then the drain.
  CHECK(format_drain(js(R"js({"version": 7, "change": "drain hash3", "drain": {"server": "hash3",
      "version": 7, "state": "up", "records": 5, "purge_sent": false, "drained": false,
      "stream": null, "pending_purge": null}})js")) ==
        "table version 7: drain hash3\n"
        "hash3 (out of the table at version 7, up): 5 records; stream no report; no purge "
        "pending\n");

  HttpOutcome outcome;
  outcome.reply = {200, json::serialize(drained)};
  CHECK(drained_reply(outcome));
  outcome.reply = {200, json::serialize(drain)};
  CHECK_FALSE(drained_reply(outcome));
  outcome.reply = {404, R"({"error":"x"})"};
  CHECK_FALSE(drained_reply(outcome));

  const std::string streams = format_streams(js(R"js({"streams": [
      {"server": "hash1", "state": "up", "stream": null},
      {"server": "hash3", "state": "up", "stream": {"version": 7, "state": "running",
       "scanned": 300, "total": 1000, "sent": 4500, "rate": 12000, "eta_ms": 3200,
       "restarts": 0, "targets": [{"name": "hash1", "records": 4500}]}}]})js"));
  CHECK(streams ==
        "SERVER  NODE  STREAM     VERSION  SENT  PROGRESS                     RATE/S  ETA   "
        "RESTARTS  TARGETS\n"
        "hash1   up    no report  -        -     -                            -       -     -    "
        "     -\n"
        "hash3   up    running    7        4500  [###.......]  30%  300/1000  12000   3.2s  0    "
        "     hash1=4500\n");
  CHECK(format_streams(js(R"js({"streams": []})js")) == "no hash servers\n");
  CHECK(format_stream_control(
            js(R"js({"server": "hash1", "requested": "cancel", "version": 7})js")) ==
        "stream cancel sent to hash1 (table version 7)\n");

  // imctl status: each pending purge with what it waits for, the drains, the streams.
  const std::string status = format_status(js(R"js({"version": 7, "mode": "ring",
      "converged": true,
      "pending_purge": {"version": 7, "servers": ["hash1", "hash3"]},
      "pending_purges": [
        {"server": "hash1", "version": 7, "held": true,
         "waits_for": ["stream cancelled: held until `imctl stream restart hash1`"]},
        {"server": "hash3", "version": 7, "held": false,
         "waits_for": ["grace period (3.0 s left)", "server down (DOWN)"]}],
      "drains": [{"server": "hash3", "version": 7, "state": "down", "records": 10,
                  "purge_sent": false, "drained": false, "stream": null, "pending_purge": null}],
      "nodes": [{"role": "hash", "name": "hash1", "state": "up", "stream": {"version": 7,
                 "state": "cancelled", "scanned": 1, "total": 2, "sent": 3, "rate": 0,
                 "eta_ms": 0, "restarts": 0, "targets": []}},
                {"role": "hash", "name": "hash2", "state": "up", "stream": {"version": 7,
                 "state": "idle", "scanned": 0, "total": 0, "sent": 0, "rate": 0,
                 "eta_ms": 0, "restarts": 0, "targets": []}}],
      "purges": []})js"));
  CHECK(status.find("pending purges of old copies:\n"
                    "  hash1 after version 7: HELD, waits for stream cancelled: held until "
                    "`imctl stream restart hash1`\n"
                    "  hash3 after version 7: waits for grace period (3.0 s left); server down "
                    "(DOWN)\n") != std::string::npos);
  CHECK(status.find("pending purge of old copies after version") == std::string::npos);
  CHECK(status.find("drains:\n  hash3 (out of the table at version 7, down): 10 records; stream "
                    "no report; no purge pending\n") != std::string::npos);
  CHECK(status.find("\nstreams:\n  hash1: cancelled at version 7: 3 records sent\n") !=
        std::string::npos);
  CHECK(status.find("hash2: idle") == std::string::npos);
}

// ---- Several config servers on one store: the control plane, following the leader
// ----------------------------------------------------------------

TEST_CASE("imctl: status shows the control plane when the server sends one") {
  const std::string leader = R"({"version": 3, "mode": "ring", "converged": true, "nodes": [],
    "last_change": {"version": 3, "reached_every_node_ms": 4},
    "control_plane": {"store": "etcd://127.0.0.1:2379,127.0.0.1:2381/imhash", "role": "leader",
      "name": "cfg-a", "lease_ttl_ms": 3000,
      "leader": {"name": "cfg-a", "admin": "127.0.0.1:7100", "node": "127.0.0.1:7000"},
      "standbys": [{"name": "cfg-b", "admin": "127.0.0.1:7101", "node": "127.0.0.1:7001"},
                   {"name": "cfg-c", "admin": "127.0.0.1:7102", "node": "127.0.0.1:7002"}],
      "store_latency_ms": {"last": 1.2, "mean": 0.9}, "store_errors": 0}})";
  // The store on a line of its own when one would be wider than 120 columns.
  CHECK(format_status(js(leader)) ==
        "table version 3, mode ring, converged: yes\n"
        "version 3 reached every node in 4ms\n"
        "control plane: leader cfg-a (127.0.0.1:7100), standbys cfg-b (127.0.0.1:7101), cfg-c "
        "(127.0.0.1:7102)\n"
        "  store etcd://127.0.0.1:2379,127.0.0.1:2381/imhash, last 1.2ms, mean 0.9ms, 0 errors\n"
        "\n"
        "no nodes are connected\n");
  CHECK(format_control_plane(js(R"({"store": "etcd://e1:2379/imhash", "role": "leader",
      "name": "cfg-a", "leader": {"name": "cfg-a", "admin": "10.0.0.1:7100"}, "standbys": [],
      "store_latency_ms": {"last": 12.6, "mean": 0.01}, "store_errors": 1,
      "problem": "keepalive: no etcd member answered"})")) ==
        "control plane: leader cfg-a (10.0.0.1:7100), no standbys; store etcd://e1:2379/imhash, "
        "last 13ms, mean <0.1ms, 1 error\n"
        "  problem: keepalive: no etcd member answered\n");
  // A single config server on a file store: no election, no standbys.
  CHECK(format_status(js(R"({"version": 1, "mode": "modulo", "converged": true, "nodes": [],
      "control_plane": {"store": "file /var/lib/imhash/state.json", "role": "single",
        "name": "cfg-a", "store_latency_ms": {"last": 0.3, "mean": 0.25}, "store_errors": 0}})")) ==
        "table version 1, mode modulo, converged: yes\n"
        "control plane: single config server cfg-a; store file /var/lib/imhash/state.json, last "
        "0.3ms, mean 0.2ms, 0 errors\n"
        "\n"
        "no nodes are connected\n");
  CHECK(format_control_plane(js(R"({"store": "file state.json", "role": "single",
      "store_latency_ms": {"last": 0.3}})")) ==
        "control plane: single config server; store file state.json, last 0.3ms\n");
  // A leader whose status lacks the leader object: its own name; odd shapes show as "-".
  CHECK(format_control_plane(js(R"({"role": "leader", "name": "cfg-a", "standbys": [5],
      "store_latency_ms": "fast", "store_errors": "x"})")) ==
        "control plane: leader cfg-a, standbys -; store -\n");
  CHECK(format_control_plane(js(R"({"role": "standby", "name": "cfg-b", "leader": null,
      "standbys": [{"name": "cfg-b", "admin": "127.0.0.1:7101"}], "store": "etcd://e:1/p"})")) ==
        "control plane: standby cfg-b, no leader known, standbys cfg-b (127.0.0.1:7101); store "
        "etcd://e:1/p\n");
  // An older config server sends none: status as before ("imctl: status as text" has the rest).
  const std::string old = R"({"version": 3, "mode": "ring", "converged": true, "nodes": []})";
  CHECK(format_status(js(old)) ==
        "table version 3, mode ring, converged: yes\n\nno nodes are connected\n");
  CHECK(format_status(js(R"({"version": 3, "mode": "ring", "converged": true, "nodes": [],
                            "control_plane": 7})")) == format_status(js(old)));
  // --json: the body as it is.
  ImctlInvocation inv = ok({"--json", "status"});
  HttpOutcome outcome;
  outcome.reply = {200, leader};
  CHECK(imctl_output(inv, outcome).out == leader + "\n");

  const std::string help = imctl_usage();
  for (const char* line : {"--admin HOST:PORT[,HOST:PORT...]", "each of several sharing one",
                           "from a standby (HTTP 503) to the leader it names",
                           "each address at most once", "the control plane (leader, standbys"}) {
    CAPTURE(line);
    CHECK(help.find(line) != std::string::npos);
  }
}

HttpOutcome unreachable(std::string why = "Connection refused") {
  return HttpOutcome{HttpFailure::kUnreachable, std::move(why), {}};
}

HttpOutcome reply(unsigned status, std::string body) {
  return HttpOutcome{HttpFailure::kNone, {}, HttpReply{status, std::move(body)}};
}

HttpOutcome standby(const std::string& me, const std::string& leader_name = {},
                    const std::string& leader_admin = {}) {
  if (leader_admin.empty()) {
    return reply(503, R"({"error":"this config server ()" + me +
                          R"() is a standby and no leader is known: the store is unreachable"})");
  }
  return reply(503, R"({"error":"this config server ()" + me + R"() is a standby; the leader is )" +
                        leader_name + " at " + leader_admin + R"(","leader":{"name":")" +
                        leader_name + R"(","admin":")" + leader_admin +
                        R"(","node":"127.0.0.1:7000"}})");
}

AdminAddress addr(const std::string& text) {
  const AdminListParse p = parse_admin_list(text, "test");
  REQUIRE(p.addresses.size() == 1);
  return p.addresses[0];
}

TEST_CASE("imctl: a standby's 503, read") {
  std::optional<StandbyAnswer> a = standby_answer(standby("cfg-b", "cfg-a", "127.0.0.1:7100"));
  REQUIRE(a);
  CHECK(a->leader_name == "cfg-a");
  CHECK(a->leader_admin == "127.0.0.1:7100");
  CHECK(a->error ==
        "this config server (cfg-b) is a standby; the leader is cfg-a at 127.0.0.1:7100");
  a = standby_answer(standby("cfg-b"));
  REQUIRE(a);
  CHECK(a->leader_admin.empty());
  CHECK(a->error ==
        "this config server (cfg-b) is a standby and no leader is known: the store is unreachable");
  // "leader" present (even null) marks a standby, whatever the sentence says.
  a = standby_answer(
      reply(503, R"({"error":"no leader: the store is unreachable","leader":null})"));
  REQUIRE(a);
  CHECK(a->leader_admin.empty());
  CHECK(standby_answer(reply(503, R"({"error":"x","leader":{"name":"cfg-a"}})")));
  // Any other 503 is a config server's answer; so is anything not a 503.
  CHECK_FALSE(standby_answer(reply(503, R"({"error":"too many connections: 256 are open"})")));
  CHECK_FALSE(standby_answer(reply(503, "<html>standby</html>")));
  CHECK_FALSE(standby_answer(reply(200, R"({"leader":{"admin":"a:1"}})")));
  CHECK_FALSE(standby_answer(unreachable()));
}

TEST_CASE("imctl: following the leader: which address next") {
  const std::vector<AdminAddress> list{addr("127.0.0.1:7100"), addr("127.0.0.1:7101"),
                                       addr("127.0.0.1:7102")};
  const std::chrono::milliseconds timeout(5000);
  std::vector<AdminAttempt> attempts;
  // First the first.
  AdminStep step = next_admin_step(list, attempts, timeout);
  CHECK(step.ask == list[0]);
  CHECK(step.failed.empty());

  // Unreachable -> the next.
  attempts.push_back({list[0], unreachable()});
  step = next_admin_step(list, attempts, timeout);
  CHECK(step.ask == list[1]);

  // A standby naming a leader -> that leader next, even one not listed.
  attempts.push_back({list[1], standby("cfg-b", "cfg-d", "10.0.0.4:7100")});
  step = next_admin_step(list, attempts, timeout);
  CHECK(step.ask == AdminAddress{"10.0.0.4:7100", "10.0.0.4", 7100});

  // The leader answers: that is the outcome, whatever it is (a refusal too).
  std::vector<AdminAttempt> answered = attempts;
  answered.push_back({addr("10.0.0.4:7100"), reply(200, R"({"version":1})")});
  step = next_admin_step(list, answered, timeout);
  CHECK_FALSE(step.ask);
  CHECK(step.failed.empty());
  answered.back().outcome = reply(409, R"({"error":"conflict"})");
  CHECK(next_admin_step(list, answered, timeout).failed.empty());
  answered.back().outcome = reply(503, R"({"error":"the state store cannot be written: EIO"})");
  step = next_admin_step(list, answered, timeout);
  CHECK_FALSE(step.ask);
  CHECK(step.failed.empty());

  // The leader times out -> back to the list, where it left off.
  attempts.push_back(
      {addr("10.0.0.4:7100"), HttpOutcome{HttpFailure::kTimeout, "reading the reply", {}}});
  step = next_admin_step(list, attempts, timeout);
  CHECK(step.ask == list[2]);

  // Each address at most once: a standby naming one already asked does not loop back.
  attempts.push_back({list[2], standby("cfg-c", "cfg-a", "127.0.0.1:7100")});
  step = next_admin_step(list, attempts, timeout);
  CHECK_FALSE(step.ask);
  // Every address failed: what each one said.
  CHECK(step.failed ==
        "127.0.0.1:7100: Connection refused; 127.0.0.1:7101: standby, leader cfg-d at "
        "10.0.0.4:7100; 10.0.0.4:7100: no answer within 5000 ms (reading the reply); "
        "127.0.0.1:7102: standby, leader cfg-a at 127.0.0.1:7100");

  // A standby that knows no leader -> the next; the last one's sentence ends the error.
  attempts = {{list[0], unreachable()}, {list[1], standby("cfg-b")}};
  step = next_admin_step(list, attempts, timeout);
  CHECK(step.ask == list[2]);
  attempts.push_back({list[2], reply(503, R"({"error":"no leader: the store is unreachable: )"
                                          R"(connection refused","leader":null})")});
  step = next_admin_step(list, attempts, timeout);
  CHECK_FALSE(step.ask);
  CHECK(step.failed ==
        "127.0.0.1:7100: Connection refused; 127.0.0.1:7101: this config server (cfg-b) is a "
        "standby and no leader is known: the store is unreachable; 127.0.0.1:7102: standby, no "
        "leader known: no leader: the store is unreachable: connection refused");

  // A standby naming itself, or an address that is not HOST:PORT: the list goes on.
  attempts = {{list[0], standby("cfg-a", "cfg-a", "127.0.0.1:7100")}};
  CHECK(next_admin_step(list, attempts, timeout).ask == list[1]);
  attempts = {{list[0], standby("cfg-a", "cfg-x", "nowhere")}};
  CHECK(next_admin_step(list, attempts, timeout).ask == list[1]);
  attempts = {
      {list[0], HttpOutcome{HttpFailure::kBadReply, "the connection closed before a reply", {}}}};
  step = next_admin_step({list[0]}, attempts, timeout);
  CHECK_FALSE(step.ask);
  CHECK(step.failed == "127.0.0.1:7100: no valid reply (the connection closed before a reply)");

  // Standbys naming ever new leaders: at most kImctlMaxAdminAttempts exchanges.
  attempts.clear();
  for (;;) {
    step = next_admin_step(list, attempts, timeout);
    if (!step.ask) break;
    const std::string next = "10.1.0." + std::to_string(attempts.size()) + ":7100";
    attempts.push_back({*step.ask, standby("s", "l", next)});
  }
  CHECK(attempts.size() == kImctlMaxAdminAttempts);
  CHECK_FALSE(step.failed.empty());

  // The order of a poll: the one that answered, then the list without it.
  CHECK(admin_order(list, std::nullopt) == list);
  CHECK(admin_order(list, list[1]) == std::vector<AdminAddress>{list[1], list[0], list[2]});
  const AdminAddress elsewhere = addr("10.0.0.4:7100");
  CHECK(admin_order(list, elsewhere) ==
        std::vector<AdminAddress>{elsewhere, list[0], list[1], list[2]});
}

// follow_leader with a fake exchange: the addresses asked, in order, and what imctl prints.
struct FakeCluster {
  std::map<std::string, HttpOutcome> answers;  // by address text; missing: unreachable
  std::vector<std::string> asked;

  AdminFollow run(const ImctlInvocation& inv, const std::vector<AdminAddress>& order) {
    asked.clear();
    return follow_leader(inv, order, [this](const AdminAddress& a) {
      asked.push_back(a.text);
      const auto it = answers.find(a.text);
      return it == answers.end() ? unreachable() : it->second;
    });
  }
};

TEST_CASE("imctl: following the leader: what imctl asks and prints") {
  FakeCluster cluster;
  const std::string status = R"({"version": 4, "mode": "ring", "converged": true, "nodes": []})";
  cluster.answers["127.0.0.1:7101"] = standby("cfg-b", "cfg-a", "127.0.0.1:7100");
  cluster.answers["127.0.0.1:7102"] = standby("cfg-c", "cfg-a", "127.0.0.1:7100");
  cluster.answers["127.0.0.1:7100"] = reply(200, status);

  // Asked a standby first: on to the leader.
  ImctlInvocation inv = ok({"--admin", "127.0.0.1:7101,127.0.0.1:7100", "status"});
  AdminFollow f = cluster.run(inv, inv.admins);
  CHECK(cluster.asked == std::vector<std::string>{"127.0.0.1:7101", "127.0.0.1:7100"});
  CHECK(f.output.exit_code == 0);
  CHECK(f.output.out.starts_with("table version 4, mode ring, converged: yes\n"));
  CHECK(f.output.err.empty());
  REQUIRE(f.answered);
  CHECK(f.answered->text == "127.0.0.1:7100");
  CHECK(f.outcome.reply.body == status);

  // A leader not in the list.
  inv = ok({"--admin", "127.0.0.1:7199,127.0.0.1:7102", "status"});
  f = cluster.run(inv, inv.admins);
  CHECK(cluster.asked ==
        std::vector<std::string>{"127.0.0.1:7199", "127.0.0.1:7102", "127.0.0.1:7100"});
  CHECK(f.output.exit_code == 0);
  // The next poll asks the one that answered first.
  f = cluster.run(inv, admin_order(inv.admins, f.answered));
  CHECK(cluster.asked == std::vector<std::string>{"127.0.0.1:7100"});
  // It stops answering: the list again (the leader it names was asked already).
  cluster.answers.erase("127.0.0.1:7100");
  f = cluster.run(inv, admin_order(inv.admins, f.answered));
  CHECK(cluster.asked ==
        std::vector<std::string>{"127.0.0.1:7100", "127.0.0.1:7199", "127.0.0.1:7102"});
  CHECK(f.output.exit_code == 69);
  CHECK_FALSE(f.answered);
  CHECK(f.output.out.empty());
  CHECK(f.output.err ==
        "imctl: no config server served the request: 127.0.0.1:7100: Connection refused; "
        "127.0.0.1:7199: Connection refused; 127.0.0.1:7102: standby, leader cfg-a at "
        "127.0.0.1:7100\n");

  // The messages name the config server that answered.
  cluster.answers["127.0.0.1:7100"] = reply(200, "not json");
  inv = ok({"--admin", "127.0.0.1:7101", "status"});
  f = cluster.run(inv, inv.admins);
  CHECK(f.output.exit_code == 69);
  CHECK(f.output.err.starts_with("imctl: the reply from 127.0.0.1:7100 is not JSON"));
  cluster.answers["127.0.0.1:7100"] = reply(404, R"({"error":"there is no server named \"h\""})");
  inv = ok({"--admin", "127.0.0.1:7101", "drain", "h"});
  f = cluster.run(inv, inv.admins);
  CHECK(f.output.exit_code == 1);
  CHECK(f.output.err == "imctl: drain: there is no server named \"h\"\n");

  // One address that cannot be reached: the message of one config server, as before.
  inv = ok({"--admin", "127.0.0.1:7199", "status"});
  f = cluster.run(inv, inv.admins);
  CHECK(f.output.exit_code == 69);
  CHECK(f.output.err ==
        "imctl: cannot reach the config server at 127.0.0.1:7199: Connection refused\n");
  cluster.answers["127.0.0.1:7198"] = HttpOutcome{HttpFailure::kTimeout, "connecting", {}};
  inv = ok({"--admin", "127.0.0.1:7199,127.0.0.1:7198", "--timeout-ms", "300", "status"});
  f = cluster.run(inv, inv.admins);
  CHECK(f.output.err ==
        "imctl: no config server served the request: 127.0.0.1:7199: Connection refused; "
        "127.0.0.1:7198: no answer within 300 ms (connecting)\n");

  // A standby that knows no leader, alone or last: exit 69, its sentence; --json: its body too.
  cluster.answers["127.0.0.1:7105"] = standby("cfg-e");
  inv = ok({"--admin", "127.0.0.1:7105", "status"});
  f = cluster.run(inv, inv.admins);
  CHECK(cluster.asked == std::vector<std::string>{"127.0.0.1:7105"});
  CHECK(f.output.exit_code == 69);
  CHECK(f.output.out.empty());
  CHECK(f.output.err ==
        "imctl: no config server served the request: 127.0.0.1:7105: this config server (cfg-e) "
        "is a standby and no leader is known: the store is unreachable\n");
  inv = ok({"--json", "--admin", "127.0.0.1:7199,127.0.0.1:7105", "status"});
  f = cluster.run(inv, inv.admins);
  CHECK(f.output.exit_code == 69);
  CHECK(f.output.out == cluster.answers["127.0.0.1:7105"].reply.body + "\n");
  CHECK(
      f.output.err.starts_with("imctl: no config server served the request: 127.0.0.1:7199: "
                               "Connection refused; 127.0.0.1:7105: this config server"));
}

// ---- Against a real admin server
// ----------------------------------------------------------------

class RecordingBackend : public AdminBackend {
 public:
  std::vector<std::string> calls;  // io_context thread; read after it stopped

  AdminResult status() override {
    calls.push_back("status");
    return AdminResult::ok(js(R"({"version": 4, "mode": "ring", "converged": true,
                                  "nodes": [], "purges": []})"));
  }
  AdminResult table() override { return AdminResult::ok(json::object{}); }
  AdminResult history(uint64_t) override { return AdminResult::ok(json::object{}); }
  AdminResult servers() override { return AdminResult::ok(json::object{}); }
  AdminResult where(uint64_t id) override {
    calls.push_back("where " + std::to_string(id));
    return AdminResult::ok(json::object{{"id", id}, {"server", "h"}});
  }
  AdminResult set_mode(RoutingMode, std::optional<ModuloHash>) override {
    return AdminResult::ok(json::object{});
  }
  AdminResult set_replicas(uint32_t replicas) override {
    calls.push_back("replicas " + std::to_string(replicas));
    return AdminResult::ok(json::object{{"version", 7}, {"change", "replicas 2"}});
  }
  AdminResult add_servers(const std::vector<ServerSpec>& s) override {
    calls.push_back("add " + s[0].name + " " + *s[0].address + " " + std::to_string(*s[0].shards) +
                    " " + std::to_string(s[0].weight));
    return AdminResult::ok(json::object{{"version", 5}, {"change", "add"}});
  }
  AdminResult set_server(const std::string&, const std::optional<std::string>&,
                         const std::optional<uint32_t>&) override {
    return AdminResult::ok(json::object{});
  }
  AdminResult remove_servers(const std::vector<std::string>&) override {
    return AdminResult::ok(json::object{});
  }
  AdminResult assign(uint64_t lo, uint64_t hi, const std::string& server) override {
    calls.push_back("assign " + std::to_string(lo) + " " + std::to_string(hi) + " " + server);
    return AdminResult::error(404, "there is no server named \"" + server + "\"");
  }
  AdminResult split(uint64_t) override { return AdminResult::ok(json::object{}); }
  AdminResult merge(uint64_t, uint64_t) override { return AdminResult::ok(json::object{}); }
  AdminResult purge(const std::string& server, frame::PurgeAction kind, uint32_t age) override {
    calls.push_back("purge " + server + " " + std::to_string(static_cast<int>(kind)) + " " +
                    std::to_string(age));
    return AdminResult::ok(json::object{{"server", server}, {"purge", json::object{}}});
  }
  AdminResult purge_status() override { return AdminResult::ok(json::object{}); }
  AdminResult drain(const std::string& server) override {
    calls.push_back("drain " + server);
    return AdminResult::ok(json::object{{"version", 6}, {"change", "drain " + server}});
  }
  AdminResult drain_status(const std::string& server) override {
    calls.push_back("drain_status " + server);
    return AdminResult::error(404, server + " is not being drained");
  }
  AdminResult streams() override {
    calls.push_back("streams");
    return AdminResult::ok(json::object{{"streams", json::array{}}});
  }
  AdminResult stream_control(const std::string& server, StreamControl action) override {
    calls.push_back(std::string(action == StreamControl::kCancel ? "cancel " : "restart ") +
                    server);
    return AdminResult::ok(json::object{{"server", server}, {"requested", "cancel"}});
  }
};

// Runs imctl's parse -> exchange -> output, as main() does.
ImctlOutput run_imctl(std::vector<std::string> args) {
  const ImctlParse p = parse_imctl_args(args, nullptr);
  REQUIRE(p.invocation);
  const ImctlInvocation& inv = *p.invocation;
  return imctl_output(
      inv, http_exchange(inv.host, inv.port, inv.method, inv.target, inv.body, inv.timeout));
}

TEST_CASE("imctl: talks to a real AdminHttpServer") {
  boost::asio::io_context ctx;
  RecordingBackend backend;
  AdminHttpServer server(ctx, backend, "127.0.0.1", 0);
  server.start();
  std::thread thread([&] { ctx.run(); });
  const std::string admin = server.local_address();

  ImctlOutput o = run_imctl({"--admin", admin, "status"});
  CHECK(o.exit_code == 0);
  CHECK(o.out.starts_with("table version 4, mode ring, converged: yes\n"));
  o = run_imctl({"--admin", admin, "--json", "where", "18446744073709551615"});
  CHECK(o.exit_code == 0);
  CHECK(o.out == "{\"id\":18446744073709551615,\"server\":\"h\"}\n");
  o = run_imctl({"--admin", admin, "assign", "9007199254740993-18446744073709551615", "hash9"});
  CHECK(o.exit_code == 1);
  CHECK(o.err == "imctl: assign: there is no server named \"hash9\"\n");
  o = run_imctl({"--admin", admin, "server", "add", "hash4=127.0.0.1:7004/4*2"});
  CHECK(o.exit_code == 0);
  CHECK(o.out == "table version 5: add\n");
  o = run_imctl({"--admin", admin, "purge", "hash1", "--older-than", "7d"});
  CHECK(o.exit_code == 0);
  o = run_imctl({"--admin", admin, "drain", "hash2"});
  CHECK(o.exit_code == 0);
  CHECK(o.out.starts_with("table version 6: drain hash2\n"));
  o = run_imctl({"--admin", admin, "drain", "hash2", "--status"});
  CHECK(o.exit_code == 1);
  CHECK(o.err == "imctl: drain: hash2 is not being drained\n");
  o = run_imctl({"--admin", admin, "stream", "status"});
  CHECK(o.exit_code == 0);
  CHECK(o.out == "no hash servers\n");
  o = run_imctl({"--admin", admin, "stream", "cancel", "hash1"});
  CHECK(o.exit_code == 0);
  o = run_imctl({"--admin", admin, "replicas", "2"});
  CHECK(o.exit_code == 0);
  CHECK(o.out == "table version 7: replicas 2\n");

  boost::asio::post(ctx, [&] { server.stop(); });
  thread.join();
  CHECK(backend.calls == std::vector<std::string>{
                             "status", "where 18446744073709551615",
                             "assign 9007199254740993 18446744073709551615 hash9",
                             "add hash4 127.0.0.1:7004 4 2", "purge hash1 2 604800", "drain hash2",
                             "drain_status hash2", "streams", "cancel hash1", "replicas 2"});
}

// A standby as a config server of several answers: 503 naming the leader (status only, here).
class StandbyBackend : public RecordingBackend {
 public:
  std::string leader_admin;  // "" : no leader known

  AdminResult status() override {
    calls.push_back("status");
    if (leader_admin.empty()) {
      return AdminResult::error(
          503, "this config server (cfg-b) is a standby and no leader is known: not elected yet");
    }
    AdminResult r = AdminResult::error(
        503, "this config server (cfg-b) is a standby; the leader is cfg-a at " + leader_admin);
    r.body.as_object()["leader"] =
        json::object{{"name", "cfg-a"}, {"admin", leader_admin}, {"node", "127.0.0.1:7000"}};
    return r;
  }
};

TEST_CASE("imctl: follows a real standby to the leader, past one that is down") {
  namespace asio = boost::asio;
  asio::io_context ctx;
  RecordingBackend leader_backend;
  StandbyBackend standby_backend, lost_backend;  // lost_backend knows no leader
  AdminHttpServer leader(ctx, leader_backend, "127.0.0.1", 0);
  AdminHttpServer standby(ctx, standby_backend, "127.0.0.1", 0);
  AdminHttpServer lost(ctx, lost_backend, "127.0.0.1", 0);
  leader.start();
  standby.start();
  lost.start();
  standby_backend.leader_admin = leader.local_address();
  asio::ip::tcp::acceptor probe(ctx, {asio::ip::make_address("127.0.0.1"), 0});
  const std::string dead = "127.0.0.1:" + std::to_string(probe.local_endpoint().port());
  probe.close();
  std::thread thread([&] { ctx.run(); });

  const auto run = [](const std::vector<std::string>& args) {
    const ImctlParse p = parse_imctl_args(args, nullptr);
    REQUIRE(p.invocation);
    const ImctlInvocation& inv = *p.invocation;
    return follow_leader(inv, inv.admins, [&](const AdminAddress& a) {
      return http_exchange(a.host, a.port, inv.method, inv.target, inv.body, inv.timeout);
    });
  };
  // The leader is not in the list: the standby names it.
  AdminFollow f = run({"--admin", dead + "," + standby.local_address(), "status"});
  CHECK(f.output.exit_code == 0);
  CHECK(f.output.out.starts_with("table version 4, mode ring, converged: yes\n"));
  REQUIRE(f.answered);
  CHECK(f.answered->text == leader.local_address());

  f = run({"--admin", lost.local_address() + "," + dead, "status"});
  CHECK(f.output.exit_code == 69);
  CHECK_FALSE(f.answered);
  CHECK(f.output.err == "imctl: no config server served the request: " + lost.local_address() +
                            ": this config server (cfg-b) is a standby and no leader is known: "
                            "not elected yet; " +
                            dead + ": Connection refused\n");

  asio::post(ctx, [&] {
    leader.stop();
    standby.stop();
    lost.stop();
  });
  thread.join();
  CHECK(leader_backend.calls == std::vector<std::string>{"status"});
  CHECK(standby_backend.calls == std::vector<std::string>{"status"});
  CHECK(lost_backend.calls == std::vector<std::string>{"status"});
}

TEST_CASE("imctl: an unreachable or silent config server is reported, not waited for") {
  namespace asio = boost::asio;
  asio::io_context ctx;
  // A port nobody listens on: bind one, note it, close it.
  asio::ip::tcp::acceptor probe(ctx, {asio::ip::make_address("127.0.0.1"), 0});
  const uint16_t dead = probe.local_endpoint().port();
  probe.close();
  HttpOutcome out = http_exchange("127.0.0.1", dead, verb::get, "/v1/status", "",
                                  std::chrono::milliseconds(2000));
  CHECK(out.failure == HttpFailure::kUnreachable);
  CHECK(out.error == "Connection refused");

  // A listener that accepts (in the kernel backlog) but never answers.
  asio::ip::tcp::acceptor silent(ctx, {asio::ip::make_address("127.0.0.1"), 0});
  out = http_exchange("127.0.0.1", silent.local_endpoint().port(), verb::get, "/v1/status", "",
                      std::chrono::milliseconds(100));
  CHECK(out.failure == HttpFailure::kTimeout);
  CHECK(out.error == "reading the reply");
}

}  // namespace
}  // namespace imhash
