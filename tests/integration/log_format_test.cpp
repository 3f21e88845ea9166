// --log-format json on the real daemons: every line they write on stderr, from start-up to the
// last line of a clean stop or of a failed start, parses as one JSON object with Boost.JSON, with
// paths holding quotes and backslashes in the messages.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness/child_process.h"
#include "harness/log_file.h"

using namespace imhash::test;

namespace {

// Every line of `log` as a JSON object (the test fails on one that is not); their messages.
std::vector<std::string> json_messages(const std::string& log) {
  std::ifstream in(log);
  std::vector<std::string> messages;
  for (std::string line; std::getline(in, line);) {
    CAPTURE(log);
    CAPTURE(line);
    boost::system::error_code ec;
    const auto v = boost::json::parse(line, ec);
    REQUIRE_FALSE(ec);
    REQUIRE(v.is_object());
    for (const char* key : {"time", "level", "logger", "message"}) {
      REQUIRE(v.as_object().contains(key));
    }
    messages.emplace_back(v.at("message").as_string());
  }
  return messages;
}

bool any_contains(const std::vector<std::string>& messages, const std::string& needle) {
  for (const auto& m : messages) {
    if (m.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("log_format: with --log-format json every daemon writes only JSON lines") {
  const std::string pid = std::to_string(getpid());
  const std::string state = "json \"state\" \\dir." + pid;
  std::filesystem::remove_all(state);
  const std::string config_log = log_path("json_config"), hash_log = log_path("json_hash"),
                    login_log = log_path("json_login"), bad_log = log_path("json_bad");
  for (const auto& f : {config_log, hash_log, login_log, bad_log}) std::filesystem::remove(f);

  {
    ChildProcess config(IMHASH_CONFIG_SERVER,
                        {"--log-format", "json", "--listen", "127.0.0.1:0", "--admin",
                         "127.0.0.1:0", "--state-dir", state, "--heartbeat-ms", "100"},
                        {.stderr_log = config_log});
    const auto caddr = config.wait_listening(2);
    ChildProcess hash(IMHASH_HASH_SERVER,
                      {"--log-format", "json", "--name", "hash1", "--shards", "1", "--config",
                       caddr[0], "--log-level", "debug"},
                      {.stderr_log = hash_log});
    hash.wait_listening();
    bool added = false;
    for (int i = 0; i < 200 && !added; ++i) {  // bounded: until hash1 has registered
      ChildProcess imctl(IMHASH_IMCTL, {"--admin", caddr[1], "server", "add", "hash1"});
      added = imctl.stop(0) == 0;
      if (!added) usleep(20000);
    }
    REQUIRE(added);
    ChildProcess login(
        IMHASH_LOGIN_SERVER,
        {"--log-format", "json", "--config", caddr[0], "--threads", "1", "--log-level", "debug"},
        {.stderr_log = login_log});
    login.wait_listening();
    for (auto* d : {&login, &hash, &config}) CHECK(d->stop(SIGTERM) == 0);
  }
  // A failed start says why in JSON too (exit 78: the table file cannot be read).
  const std::string missing = "no \"such\" \\table." + pid + ".json";
  ChildProcess bad(IMHASH_HASH_SERVER, {"--log-format", "json", "--table", missing},
                   {.stderr_log = bad_log});
  CHECK(bad.stop(0) == 78);

  const auto config_messages = json_messages(config_log);
  CHECK(any_contains(config_messages, "state in " + state));
  CHECK(any_contains(config_messages, "stopped"));
  CHECK(any_contains(json_messages(hash_log), "stopped"));
  CHECK(any_contains(json_messages(login_log), "stopped"));
  CHECK(any_contains(json_messages(bad_log), missing));
  std::filesystem::remove_all(state);
}

TEST_CASE("log_format: an unknown --log-format is a usage error") {
  ChildProcess bad(IMHASH_HASH_SERVER, {"--log-format", "xml"});
  CHECK(bad.stop(0) == 64);
}
