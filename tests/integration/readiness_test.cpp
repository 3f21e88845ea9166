// Readiness (systemd Type=notify): each daemon, run with $NOTIFY_SOCKET pointing at a datagram
// socket the test binds, as systemd would, sends READY=1 only after it printed every "listening on"
// line — a login server only once it serves a routing table —, feeds the watchdog when
// $WATCHDOG_USEC asks for it, and says STOPPING=1 on SIGTERM.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/child_process.h"
#include "harness/http_get.h"

using namespace imhash::test;

namespace {

// The service manager's end: an abstract AF_UNIX datagram socket ("@name" in $NOTIFY_SOCKET).
class NotifySocket {
 public:
  NotifySocket() {
    static int count = 0;
    name_ = "imhash_notify_test." + std::to_string(getpid()) + "." + std::to_string(++count);
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, name_.data(), name_.size());  // sun_path[0] = 0: abstract
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name_.size());
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0) {
      throw std::runtime_error("cannot bind the notify socket");
    }
  }
  ~NotifySocket() { close(fd_); }
  std::string env() const { return "NOTIFY_SOCKET=@" + name_; }

  // The next datagram, waiting at most `wait` (0: only one already there).
  std::optional<std::string> next(std::chrono::milliseconds wait) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(wait.count())) <= 0) return std::nullopt;
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n < 0) return std::nullopt;
    return std::string(buf, static_cast<size_t>(n));
  }
  // Reads datagrams (bounded) until one holds `state` ("READY=1"); false if none came.
  bool wait_for(const std::string& state,
                std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      const auto d = next(left);
      if (d && (*d == state || d->find(state + "\n") != std::string::npos ||
                d->ends_with("\n" + state))) {
        return true;
      }
    }
  }

 private:
  std::string name_;
  int fd_ = -1;
};

// READY=1 arrives, and by then the child had already written `lines` "listening on" lines;
// returns their addresses.
std::vector<std::string> check_ready_after_listening(NotifySocket& notify, ChildProcess& child,
                                                     size_t lines) {
  REQUIRE(notify.wait_for("READY=1"));
  // Nothing is awaited here: the lines must be in the pipe before the datagram was sent.
  const std::string out = child.available_output();
  std::vector<std::string> addresses;
  const std::string prefix = "listening on ";
  for (size_t at = out.find(prefix); at != std::string::npos; at = out.find(prefix, at + 1)) {
    addresses.push_back(out.substr(at + prefix.size(), out.find('\n', at) - at - prefix.size()));
  }
  CHECK(addresses.size() == lines);
  return addresses;
}

std::string write_table(const std::string& hash_address) {
  const std::string path = "readiness_table." + std::to_string(getpid()) + ".json";
  std::ofstream(path) << R"({"version": 1, "mode": "modulo", "servers": [{"name": "hash1", )"
                      << R"("address": ")" << hash_address << R"(", "shards": 1}]})";
  return path;
}

}  // namespace

TEST_CASE("readiness: every daemon sends READY=1 after its listening lines, STOPPING=1 on TERM") {
  const std::string state = "readiness_state." + std::to_string(getpid());
  std::filesystem::remove_all(state);
  NotifySocket config_notify, hash_notify, login_notify;

  ChildProcess config(IMHASH_CONFIG_SERVER,
                      {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--state-dir", state,
                       "--metrics", "127.0.0.1:0"},
                      {.env = {config_notify.env()}});
  check_ready_after_listening(config_notify, config, 3);

  ChildProcess hash(IMHASH_HASH_SERVER,
                    {"--name", "hash1", "--shards", "1", "--metrics", "127.0.0.1:0"},
                    {.env = {hash_notify.env()}});
  const auto haddr = check_ready_after_listening(hash_notify, hash, 2);
  const std::string table = write_table(haddr.at(0));

  ChildProcess login(IMHASH_LOGIN_SERVER,
                     {"--table", table, "--threads", "1", "--metrics", "127.0.0.1:0"},
                     {.env = {login_notify.env()}});
  check_ready_after_listening(login_notify, login, 2);

  using Daemon = std::pair<ChildProcess*, NotifySocket*>;
  for (auto [daemon, notify] : {Daemon{&config, &config_notify}, Daemon{&hash, &hash_notify},
                                Daemon{&login, &login_notify}}) {
    kill(daemon->pid(), SIGTERM);
    CHECK(notify->wait_for("STOPPING=1"));
    CHECK(daemon->stop(0) == 0);  // no second SIGTERM: it could land after the handlers
  }
  std::filesystem::remove_all(state);
  std::filesystem::remove(table);
}

TEST_CASE("readiness: a login server without a table is READY only once one arrives") {
  const std::string state = "readiness_state2." + std::to_string(getpid());
  std::filesystem::remove_all(state);
  ChildProcess config(IMHASH_CONFIG_SERVER, {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
                                             "--state-dir", state, "--heartbeat-ms", "100"});
  const auto caddr = config.wait_listening(2);
  ChildProcess hash(IMHASH_HASH_SERVER, {"--name", "hash1", "--shards", "1", "--config", caddr[0]});
  hash.wait_listening();

  NotifySocket notify;
  ChildProcess login(
      IMHASH_LOGIN_SERVER,
      {"--config", caddr[0], "--name", "login1", "--threads", "1", "--metrics", "127.0.0.1:0"},
      {.env = {notify.env()}});
  // The config server has no table yet: the login server announces after its bounded wait...
  const auto laddr = login.wait_listening(2);
  // ...and once its /metrics answers, its event loop runs, so its readiness was checked.
  REQUIRE(metric(scrape(laddr[1]), "imhash_table_version") == 0);
  CHECK_FALSE(notify.next(std::chrono::milliseconds(0)).has_value());

  // The first table (hash1 in it) reaches the login server: now it serves, and says so.
  bool added = false;
  for (int i = 0; i < 200 && !added; ++i) {  // bounded: until hash1 has registered
    ChildProcess imctl(IMHASH_IMCTL, {"--admin", caddr[1], "server", "add", "hash1"});
    added = imctl.stop(0, std::chrono::seconds(10)) == 0;
    if (!added) usleep(20000);
  }
  REQUIRE(added);
  CHECK(notify.wait_for("READY=1"));
  CHECK(metric(scrape(laddr[1]), "imhash_table_version") >= 1);
  std::filesystem::remove_all(state);
}

TEST_CASE("readiness: a login server with a saved table and no config server is READY serving it") {
  const std::string state = "readiness_state3." + std::to_string(getpid());
  std::filesystem::remove_all(state);
  std::filesystem::create_directories(state);
  ChildProcess hash(IMHASH_HASH_SERVER, {"--name", "hash1", "--shards", "1"});
  const std::string table = write_table(hash.wait_listening().at(0));
  std::filesystem::copy_file(table, state + "/login-login1.table.json");
  // A config server address where nothing listens (bound, then closed): it never answers.
  ChildProcess gone(IMHASH_CONFIG_SERVER, {"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
                                           "--state-dir", state + "/config"});
  const std::string dead = gone.wait_listening(2).at(0);
  gone.stop(SIGKILL);

  NotifySocket notify;
  ChildProcess login(IMHASH_LOGIN_SERVER,
                     {"--config", dead, "--state-dir", state, "--name", "login1", "--threads", "1",
                      "--metrics", "127.0.0.1:0"},
                     {.env = {notify.env()}});
  const auto laddr = check_ready_after_listening(notify, login, 2);
  CHECK(metric(scrape(laddr.at(1)), "imhash_table_version") == 1);
  CHECK(login.stop(SIGTERM) == 0);
  std::filesystem::remove_all(state);
  std::filesystem::remove(table);
}

TEST_CASE("readiness: the watchdog is fed while WATCHDOG_USEC asks for it") {
  NotifySocket notify;
  ChildProcess hash(IMHASH_HASH_SERVER, {"--name", "hash1", "--shards", "1"},
                    {.env = {notify.env(), "WATCHDOG_USEC=200000"}});
  hash.wait_listening();
  // Pinged every half interval: several pings, each within the bound, prove it keeps going.
  for (int i = 0; i < 3; ++i) CHECK(notify.wait_for("WATCHDOG=1", std::chrono::seconds(10)));
  CHECK(hash.stop(SIGTERM) == 0);
}
