// SIGHUP (systemctl reload): a hash server re-reads --table (a newer valid version is installed as
// a pushed one would be, an invalid file is logged and the old table kept), every daemon re-reads
// its log level from --config-file, and none of them dies of it.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "harness/child_process.h"
#include "harness/frame_client.h"
#include "harness/log_file.h"
#include "harness/wait_until.h"

using namespace imhash::test;

namespace {

std::string unique(const std::string& what) {
  return "sighup_" + what + "." + std::to_string(getpid());
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path + ".tmp") << text;
  std::filesystem::rename(path + ".tmp", path);
}

std::string table_json(uint64_t version, uint32_t shards) {
  return R"({"version": )" + std::to_string(version) +
         R"(, "mode": "modulo", "servers": [{"name": "hash1", "address": "127.0.0.1:1", )" +
         R"("shards": )" + std::to_string(shards) + "}]}";
}

// Counts the lines of `log` holding `needle`.
size_t count_in(const std::string& log, const std::string& needle) {
  const std::string text = file_text(log);
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("sighup: a hash server re-reads its table file and keeps the old table if it is bad") {
  const std::string table = unique("table") + ".json", log = unique("hash") + ".log";
  std::filesystem::remove(log);
  write_file(table, table_json(1, 2));
  ChildProcess hash(IMHASH_HASH_SERVER,
                    {"--name", "hash1", "--shards", "2", "--table", table, "--log-level", "debug"},
                    {.stderr_log = log});
  const uint16_t port = port_of(hash.wait_listening()[0]);
  // The version a handshake reports is the table the server runs.
  const auto version = [&] { return FrameClient(port, 0).hello().table_version; };
  REQUIRE(version() == 1);

  write_file(table, table_json(2, 2));
  kill(hash.pid(), SIGHUP);
  CHECK(wait_until([&] { return version() == 2; }));

  // Not JSON, then a table that would give hash1 the wrong shard count: logged, version 2 kept.
  write_file(table, "{\"version\": 3, \"mode\":");
  kill(hash.pid(), SIGHUP);
  CHECK(wait_until([&] { return count_in(log, "keeping table version 2") == 1; }));
  write_file(table, table_json(4, 3));
  kill(hash.pid(), SIGHUP);
  CHECK(wait_until([&] { return count_in(log, "keeping table version 2") >= 2; }));
  CHECK(hash.running());
  CHECK(version() == 2);

  // An older version is not installed either; a newer valid one is.
  write_file(table, table_json(1, 2));
  kill(hash.pid(), SIGHUP);
  CHECK(wait_until([&] { return count_in(log, "not newer than 2") == 1; }));
  write_file(table, table_json(5, 2));
  kill(hash.pid(), SIGHUP);
  CHECK(wait_until([&] { return version() == 5; }));
  CHECK(hash.stop(SIGTERM) == 0);
  std::filesystem::remove(table);
}

TEST_CASE("sighup: every daemon re-reads its log level from --config-file and keeps serving") {
  const std::string state = unique("state");
  std::filesystem::remove_all(state);
  const std::string config_conf = unique("config") + ".conf", hash_conf = unique("hash") + ".conf",
                    login_conf = unique("login") + ".conf", table = unique("ltable") + ".json";
  const std::string config_log = unique("config") + ".log", hash_log = unique("hash2") + ".log",
                    login_log = unique("login") + ".log";
  for (const auto& f : {config_log, hash_log, login_log}) std::filesystem::remove(f);
  for (const auto& f : {config_conf, hash_conf, login_conf}) write_file(f, "log-level = info\n");

  ChildProcess config(IMHASH_CONFIG_SERVER,
                      {"--config-file", config_conf, "--listen", "127.0.0.1:0", "--admin",
                       "127.0.0.1:0", "--state-dir", state},
                      {.stderr_log = config_log});
  config.wait_listening(2);
  ChildProcess hash(IMHASH_HASH_SERVER,
                    {"--config-file", hash_conf, "--listen", "127.0.0.1:0", "--shards", "1"},
                    {.stderr_log = hash_log});
  const uint16_t hash_port = port_of(hash.wait_listening()[0]);
  write_file(table, R"({"version": 1, "mode": "modulo", "servers": [{"name": "hash1", )"
                    R"("address": "127.0.0.1:)" +
                        std::to_string(hash_port) + R"(", "shards": 1}]})");
  ChildProcess login(IMHASH_LOGIN_SERVER,
                     {"--config-file", login_conf, "--table", table, "--threads", "1"},
                     {.stderr_log = login_log});
  login.wait_listening();

  // At info, a hash server does not log a link binding to a shard (debug).
  { FrameClient probe(hash_port, 0); }
  CHECK(count_in(hash_log, "bound to shard") == 0);

  for (const auto& f : {config_conf, hash_conf, login_conf}) write_file(f, "log-level = debug\n");
  for (auto* d : {&config, &hash, &login}) kill(d->pid(), SIGHUP);
  for (const auto& log : {config_log, hash_log, login_log}) {
    CHECK(wait_until([&] { return count_in(log, "SIGHUP: log level debug") == 1; }));
  }
  { FrameClient probe(hash_port, 0); }
  CHECK(wait_until([&] { return count_in(hash_log, "bound to shard") >= 1; }));

  // An unknown level is refused and the level kept; the daemons live through all of it.
  for (const auto& f : {config_conf, hash_conf, login_conf}) write_file(f, "log-level = loud\n");
  for (auto* d : {&config, &hash, &login}) kill(d->pid(), SIGHUP);
  for (const auto& log : {config_log, hash_log, login_log}) {
    CHECK(wait_until([&] { return count_in(log, "unknown log level 'loud'") == 1; }));
  }
  for (auto* d : {&config, &hash, &login}) {
    CHECK(d->running());
    CHECK(d->stop(SIGTERM) == 0);
  }
  std::filesystem::remove_all(state);
  for (const auto& f : {config_conf, hash_conf, login_conf, table}) std::filesystem::remove(f);
}
