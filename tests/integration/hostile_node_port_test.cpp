// Hostile peers at the config server's node port (issue 15, items 3, 5 and 7): an impostor under a
// live hash server's name, acks of versions never pushed, a fake login node that never takes a
// table, connection floods from one source, silent and oversize links, and a table change too big
// to push. Each is refused or closed, counted, and the real cluster keeps serving every lookup.
// The node port has no authentication here yet (the cluster key is separate work): these are the
// rules that hold whoever connects.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/codec/client_protocol.h"
#include "common/routing/control_protocol.h"
#include "common/routing/table_json.h"
#include "harness/child_process.h"
#include "harness/config_cluster.h"
#include "harness/http_get.h"
#include "harness/log_file.h"
#include "harness/loopback.h"
#include "harness/udp_client.h"
#include "harness/wait_until.h"

using namespace imhash;
using namespace imhash::test;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// One raw link to the node port, speaking the control protocol by hand. Test thread only (or the
// one thread it is handed to).
class RawNode {
 public:
  explicit RawNode(const std::string& config_address)
      : fd_(connect_loopback(SOCK_STREAM | SOCK_CLOEXEC, port_of(config_address))) {
    REQUIRE(fd_ >= 0);
  }
  ~RawNode() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawNode(const RawNode&) = delete;
  RawNode& operator=(const RawNode&) = delete;

  void send(const control::Message& m) {
    std::vector<uint8_t> out;
    control::append_message(m, out);
    send_raw(out);
  }
  void send_raw(const std::vector<uint8_t>& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the config server may have closed the link: that is what is tested
      off += static_cast<size_t>(n);
    }
  }
  // The next message from the config server, or nothing if the link closed or none came in time.
  std::optional<control::Message> next(milliseconds timeout = kPatience) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      control::Message m;
      size_t used = 0;
      std::string error;
      const auto st = control::next_message(in_, m, used, error);
      if (st == control::DecodeStatus::kOk) {
        in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(used));
        return m;
      }
      REQUIRE_MESSAGE(st == control::DecodeStatus::kNeedMore, error);
      if (Clock::now() >= deadline || !read_some(50)) return std::nullopt;
    }
  }
  // A message of type T, skipping others (table pushes, purges) on the way.
  template <typename T>
  std::optional<T> next_of(milliseconds timeout = kPatience) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto m = next(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
      if (!m) return std::nullopt;
      if (auto* t = std::get_if<T>(&*m)) return *t;
    }
    return std::nullopt;
  }
  // Waits (bounded) until the config server closes the link, discarding what it sends.
  bool closed_by_peer(milliseconds timeout = kPatience) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (!read_some(50)) return eof_;
      in_.clear();
    }
    return false;
  }
  // Reads whatever is waiting without blocking, and throws it away (a node must read its link).
  void discard_input() {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (eof_ || ::poll(&p, 1, 0) <= 0 || !read_some(0)) return;
      in_.clear();
    }
  }

 private:
  // False on EOF, error, or nothing within `wait_ms`.
  bool read_some(int wait_ms) {
    if (eof_) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) <= 0) return true;  // nothing yet: not closed
    std::array<uint8_t, 65536> buf{};
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      in_.insert(in_.end(), buf.begin(), buf.begin() + n);
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    eof_ = true;
    return false;
  }

  int fd_;
  std::vector<uint8_t> in_;
  bool eof_ = false;
};

control::Register registration(Role role, const std::string& name, const std::string& address,
                               uint64_t version = 0) {
  return control::Register{.role = role,
                           .name = name,
                           .address = address,
                           .shards = role == Role::kHash ? 1u : 0u,
                           .version = version,
                           .pid = 4242};
}

// `imctl status`'s entry for the node called `name` (empty if there is none).
json::object node_status(ConfigCluster& c, const std::string& name) {
  const auto st = c.imctl_json({"status"});
  for (const auto& n : st.as_object().at("nodes").as_array()) {
    if (n.as_object().at("name").as_string() == name) return n.as_object();
  }
  return {};
}

std::string text(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

double config_metric(ConfigCluster& c, const std::string& name, const std::string& label = "") {
  return metric(scrape(c.config_metrics()), name, label);
}

// Starts the config server, hash1..hashN in the table, and login1; returns login1's UDP port once
// every node runs version 1.
uint16_t start_cluster(ConfigCluster& c, int hash_servers) {
  c.start_config();
  std::vector<std::string> add = {"server", "add"};
  for (int i = 1; i <= hash_servers; ++i) {
    c.start_hash(i);
    add.push_back("hash" + std::to_string(i));
  }
  REQUIRE(c.imctl(add).exit_code == 0);
  const uint16_t udp = c.start_login(1);
  REQUIRE(c.wait_converged(1, hash_servers + 1));
  return udp;
}

// Logs users 1..n in through the login server and checks that every one is looked up.
void every_lookup_served(uint16_t udp, uint64_t n, bool log_in) {
  UdpClient client(udp);
  for (uint64_t id = 1; id <= n; ++id) {
    if (log_in) {
      auto r = client.call(
          UdpClient::make(client::Op::kLogin, id, Endpoint::v4(0x0a000001, 5000 + id % 1000)));
      REQUIRE(r);
      REQUIRE(r->status == client::Status::kOk);
    }
    auto r = client.call(UdpClient::make(client::Op::kLookup, id));
    REQUIRE(r);
    CHECK(r->status == client::Status::kOk);
  }
}

}  // namespace

TEST_CASE("hostile node port: an impostor under a live hash server's name is refused") {
  ConfigCluster c(ConfigClusterOptions{.metrics = true});
  const uint16_t udp = start_cluster(c, 2);
  every_lookup_served(udp, 300, true);
  const json::object before = node_status(c, "hash1");

  RawNode impostor(c.config_address());
  impostor.send(registration(Role::kHash, "hash1", "10.6.6.6:7001"));
  const auto answer = impostor.next();
  REQUIRE(answer);
  const auto* refused = std::get_if<control::Refused>(&*answer);
  REQUIRE_MESSAGE(refused, "expected a refusal, got " << control::type_name(*answer));
  CAPTURE(refused->reason);
  CHECK(refused->reason.find("held by a live hash server") != std::string::npos);
  CHECK(impostor.closed_by_peer());

  // The real hash1 kept its entry and its link; nothing of the impostor's shows.
  const json::object after = node_status(c, "hash1");
  CHECK(text(after, "address") == c.hash_address(1));
  CHECK(text(after, "address") == text(before, "address"));
  CHECK(after.at("pid") == before.at("pid"));
  CHECK(after.at("connected").as_bool());
  CHECK(text(after, "state") == "up");
  CHECK(config_metric(c, "imhash_config_registrations_refused_total") == 1);
  every_lookup_served(udp, 300, false);

  // A restarted hash1 (the old process died, its link closed) takes its name back at once; its
  // records died with it, so the users log in again (their next heartbeat) and are served.
  c.kill_hash(1);
  c.start_hash(1);  // waits until hash1 is registered, up and connected again
  CHECK(text(node_status(c, "hash1"), "address") == c.hash_address(1));
  REQUIRE(c.imctl({"split", "1000"}).exit_code == 0);
  CHECK(c.wait_converged(c.version(), 3));
  // The login server's link to the new process comes back after its reconnect back-off: until
  // then hash1's users get UNAVAILABLE (a loaded machine may take a while).
  UdpClient probe(udp);
  CHECK(wait_until([&] {
    for (uint64_t id = 1; id <= 300; ++id) {
      const auto r = probe.call(
          UdpClient::make(client::Op::kLogin, id, Endpoint::v4(0x0a000001, 5000 + id % 1000)));
      if (!r || r->status != client::Status::kOk) return false;
    }
    return true;
  }));
  every_lookup_served(udp, 300, true);
}

TEST_CASE("hostile node port: a second hash server under a live name waits, then takes over") {
  ConfigCluster c;
  c.start_config();
  c.start_hash(1);
  REQUIRE(c.imctl({"server", "add", "hash1"}).exit_code == 0);
  const std::string log = log_path("second_hash1");
  ChildProcess second(IMHASH_HASH_SERVER,
                      {"--listen", "127.0.0.1:0", "--name", "hash1", "--shards", "1", "--config",
                       c.config_address()},
                      {.stderr_log = log});
  const std::string second_address = second.wait_listening().at(0);
  // Its registration is refused (the real ConfigLink logs why and retries with its back-off)...
  CHECK(log_says(log, "held by a live hash server"));
  CHECK(text(node_status(c, "hash1"), "address") == c.hash_address(1));
  // ...until the first one is gone: then it registers and gets the table.
  c.kill_hash(1);
  CHECK(wait_until([&] {
    const json::object n = node_status(c, "hash1");
    return text(n, "address") == second_address && n.at("connected").as_bool() &&
           text(n, "state") == "up" && n.at("version").to_number<uint64_t>() == 1;
  }));
  CHECK(second.stop(SIGTERM) == 0);
  std::filesystem::remove(log);
}

TEST_CASE(
    "hostile node port: an ack of 2^64-1 is rejected and a login node stuck at version 0 does "
    "not block the automatic purge") {
  ConfigCluster c(ConfigClusterOptions{.metrics = true});
  const uint16_t udp = start_cluster(c, 2);

  // A fake login server: registers at version 0, acks a version never pushed, and then heartbeats
  // "version 0" forever without installing anything.
  RawNode fake(c.config_address());
  fake.send(registration(Role::kLogin, "fake1", "127.0.0.1:9"));
  REQUIRE(fake.next_of<control::Welcome>());
  fake.send(control::Ack{std::numeric_limits<uint64_t>::max()});
  fake.send(control::Heartbeat{std::numeric_limits<uint64_t>::max(), {}, {}, 0});
  std::atomic<bool> stop{false};
  std::thread beat([&] {
    for (int i = 0; i < 3000 && !stop; ++i) {  // bounded: at most 5 minutes
      fake.send(control::Heartbeat{0, {}, {}, 0});
      fake.discard_input();
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      t.join();
    }
  } join{stop, beat};

  CHECK(wait_until([&] { return config_metric(c, "imhash_config_rejected_acks_total") >= 1; }));
  CHECK(wait_until([&] {
    return config_metric(c, "imhash_config_rejected_versions_total", "message=\"heartbeat\"") >= 1;
  }));
  // Not converged: the fake stays at version 0, and after the DOWN window it shows as lagging.
  json::object f = node_status(c, "fake1");
  CHECK(f.at("version").to_number<uint64_t>() == 0);
  CHECK(wait_until([&] { return text(node_status(c, "fake1"), "state") == "lagging"; }));
  CHECK(config_metric(c, "imhash_config_node_lagging", "name=\"fake1\"") == 1);
  CHECK(config_metric(c, "imhash_config_nodes", "state=\"lagging\"") == 1);

  // A change: ids move from hash1 to hash2. Once the grace period has passed the automatic purge
  // goes to hash1 although fake1 never took version 2.
  every_lookup_served(udp, 200, true);
  REQUIRE(c.imctl({"assign", "1-1000", "hash2"}).exit_code == 0);
  const uint64_t v2 = c.version();
  REQUIRE(c.wait_converged(v2, 3));  // the real nodes
  bool purged = wait_until([&] {
    const auto st = c.imctl_json({"status"}).as_object();
    return !st.contains("pending_purge");
  });
  CHECK(purged);
  // hash1 no longer holds the ids it gave away.
  CHECK(wait_until([&] { return c.held(1, 1, 200) == 0; }));
  f = node_status(c, "fake1");
  CHECK(f.at("version").to_number<uint64_t>() == 0);
  CHECK(text(f, "state") == "lagging");
  CHECK(c.imctl_json({"status"}).as_object().at("converged").as_bool());
  // The users' next heartbeats store them at their new owner; every lookup is served.
  every_lookup_served(udp, 200, true);
}

TEST_CASE("hostile node port: connections over the per-source cap are closed at once") {
  constexpr int kCap = 6;
  ConfigCluster c(ConfigClusterOptions{
      .metrics = true, .config_args = {"--max-node-connections-per-source", std::to_string(kCap)}});
  const uint16_t udp = start_cluster(c, 1);
  // hash1 and login1 hold two of the links loopback may open; silent ones take the rest.
  std::vector<std::unique_ptr<RawNode>> held;
  for (int i = 0; i < kCap - 2; ++i) held.push_back(std::make_unique<RawNode>(c.config_address()));
  REQUIRE(wait_until([&] { return config_metric(c, "imhash_config_node_links_open") == kCap; }));
  std::vector<std::unique_ptr<RawNode>> over;
  for (int i = 0; i < 20; ++i) over.push_back(std::make_unique<RawNode>(c.config_address()));
  int closed = 0;
  for (auto& o : over) closed += o->closed_by_peer();
  CHECK(closed == 20);
  CHECK(config_metric(c, "imhash_config_node_links_refused_total", "cap=\"per_source\"") == 20);
  // The real nodes keep their links and take a new version.
  REQUIRE(c.imctl({"split", "1000"}).exit_code == 0);
  CHECK(c.wait_converged(2, 2));
  CHECK(node_status(c, "hash1").at("connected").as_bool());
  CHECK(node_status(c, "login1").at("connected").as_bool());
  every_lookup_served(udp, 200, true);
}

TEST_CASE("hostile node port: silent links and oversize length prefixes are closed") {
  ConfigCluster c(ConfigClusterOptions{.metrics = true});
  const uint16_t udp = start_cluster(c, 1);

  // Never registers: closed by the registration timeout.
  RawNode silent(c.config_address());
  // Registers, then says nothing: closed by the idle timeout (it is DOWN long before).
  RawNode quiet(c.config_address());
  quiet.send(registration(Role::kLogin, "quiet1", "127.0.0.1:9"));
  REQUIRE(quiet.next_of<control::Welcome>());
  // A length prefix above what an unregistered link may send (64 KiB), and one above the
  // registered limit (1 MiB) after a registration.
  RawNode big(c.config_address());
  big.send_raw({0x00, 0x01, 0x00, 0x01, '{'});
  RawNode huge(c.config_address());
  huge.send_raw({0x7f, 0xff, 0xff, 0xff});
  RawNode registered_big(c.config_address());
  registered_big.send(registration(Role::kLogin, "big1", "127.0.0.1:9"));
  REQUIRE(registered_big.next_of<control::Welcome>());
  registered_big.send_raw({0x00, 0x10, 0x00, 0x01, '{'});

  CHECK(big.closed_by_peer());
  CHECK(huge.closed_by_peer());
  CHECK(registered_big.closed_by_peer());
  CHECK(silent.closed_by_peer());
  CHECK(quiet.closed_by_peer());
  CHECK(config_metric(c, "imhash_config_node_links_closed_total", "reason=\"bad_message\"") == 3);
  CHECK(config_metric(c, "imhash_config_node_links_closed_total", "reason=\"register_timeout\"") ==
        1);
  CHECK(config_metric(c, "imhash_config_node_links_closed_total", "reason=\"idle\"") == 1);
  CHECK(text(node_status(c, "quiet1"), "state") == "down");
  // The real nodes never went quiet: still connected, and serving.
  CHECK(node_status(c, "hash1").at("connected").as_bool());
  CHECK(node_status(c, "login1").at("connected").as_bool());
  every_lookup_served(udp, 100, true);
}

TEST_CASE("hostile node port: a table change too big to push is refused before it is written") {
  // A range table of about 9 MB: alone it can be pushed, but any change sends it together with
  // the table before it, over the control message limit (16 MiB).
  ConfigCluster c(ConfigClusterOptions{.state_dir = "big_table_state." + std::to_string(getpid())});
  const std::string dir = "big_table_state." + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  Table t;
  t.version = 1;
  t.mode = RoutingMode::kRange;
  const std::string name(64, 'h');
  t.servers.push_back(ServerInfo{name, "127.0.0.1:1", 1, 1});
  constexpr uint64_t kRanges = 70'000;
  const uint64_t step = std::numeric_limits<uint64_t>::max() / kRanges;
  for (uint64_t i = 0; i < kRanges; ++i) {
    t.ranges.push_back(IdRange{
        i * step, i + 1 == kRanges ? std::numeric_limits<uint64_t>::max() : (i + 1) * step - 1,
        name});
  }
  REQUIRE(validate(t).empty());
  {
    std::ofstream out(dir + "/state.json");
    out << "{\"format\":1,\"history\":[{\"time\":1,\"change\":\"big\",\"table\":"
        << table_to_json(t) << "}]}\n";
  }
  const auto size_before = std::filesystem::file_size(dir + "/state.json");
  c.start_config();
  REQUIRE(c.version() == 1);

  // imctl prints the admin API's reason on stderr and fails. Framing two tables of this size
  // takes a sanitizer build seconds on a loaded machine: more than imctl's default 5 s.
  const std::string err_log = dir + ".imctl.err";
  ChildProcess split(IMHASH_IMCTL,
                     {"--admin", c.admin_address(), "--timeout-ms", "60000", "split", "1000"},
                     {.stderr_log = err_log});
  split.read_all();
  CHECK(split.stop(0) == 1);
  const std::string said = file_text(err_log);
  CAPTURE(said);
  CHECK(said.find("cannot be pushed") != std::string::npos);
  CHECK(c.version() == 1);
  CHECK(std::filesystem::file_size(dir + "/state.json") == size_before);
  CHECK(c.config().running());
  std::filesystem::remove(err_log);
}
