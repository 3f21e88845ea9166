// ConfigLink against a small fake config server in the same io_context, on 127.0.0.1 only. Each
// test runs a server script as a coroutine; every wait is bounded by the harness deadline.
#include "common/links/config_link.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/runtime/clock.h"
#include "common/runtime/options.h"

using namespace imhash;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;
using control::Message;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

Table table(uint64_t version) {
  Table t;
  t.version = version;
  t.mode = RoutingMode::kModulo;
  t.servers = {{"hash1", "127.0.0.1:7001", 4, 1}};
  return t;
}

// Builds the messages to send. Call it in a statement of its own, not inside a co_await
// expression: g++ 12 rejects an initializer_list there and mishandles temporaries holding tables.
template <typename... M>
std::vector<Message> msgs(M... m) {
  std::vector<Message> v;
  (v.push_back(Message(std::move(m))), ...);
  return v;
}

boost::json::object node_stats() { return boost::json::object{{"records", 42}, {"load", 0.5}}; }

// About 200 KB of JSON.
boost::json::object big_stats() {
  boost::json::object o;
  for (int i = 0; i < 10000; ++i) o["counter_" + std::to_string(i)] = i;
  return o;
}

std::vector<std::vector<uint8_t>> bad_frames() {
  return {
      {0x01, 0x00, 0x00, 0x01, '{'},  // above 16 MiB: refused from the prefix alone
      {0, 0, 0, 2, '{', '}'},         // JSON, but no type
      {0, 0, 0, 3, 'x', 'y', 'z'},    // not JSON
  };
}

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

asio::awaitable<void> sleep(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(kTuple);
}

// The config server's end of one connection.
class Peer {
 public:
  explicit Peer(tcp::socket s) : socket_(std::move(s)) {}

  // The next message, or nullopt once the link closed the connection.
  asio::awaitable<std::optional<Message>> next() {
    for (;;) {
      Message m;
      size_t used = 0;
      std::string error;
      const auto st = control::next_message(data_, m, used, error);
      if (st == control::DecodeStatus::kOk) {
        data_.erase(data_.begin(), data_.begin() + static_cast<std::ptrdiff_t>(used));
        co_return m;
      }
      expect(st == control::DecodeStatus::kNeedMore, "the fake server got a bad message: " + error);
      uint8_t chunk[4096];
      auto [ec, n] = co_await socket_.async_read_some(asio::buffer(chunk), kTuple);
      if (ec) co_return std::nullopt;
      data_.insert(data_.end(), chunk, chunk + n);
    }
  }

  // The next message of type T that satisfies `pred`, skipping others (heartbeats, acks...).
  template <typename T>
  asio::awaitable<T> wait_for(std::function<bool(const T&)> pred = {}) {
    for (;;) {
      std::optional<Message> m = co_await next();
      expect(m.has_value(), "the link closed the connection");
      if (const T* t = std::get_if<T>(&*m); t && (!pred || pred(*t))) co_return *t;
    }
  }

  asio::awaitable<void> send(const std::vector<Message>& messages) {
    std::vector<uint8_t> out;
    for (const Message& m : messages) control::append_message(m, out);
    co_await send_raw(out);
  }

  asio::awaitable<void> send_raw(std::vector<uint8_t> bytes) {
    auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(bytes), kTuple);
    expect(!ec, "fake server write: " + ec.message());
  }

  // Returns once the link has closed its end (EOF), whatever it sent before.
  asio::awaitable<void> until_closed() {
    for (;;) {
      const std::optional<Message> m = co_await next();
      if (!m) co_return;
    }
  }

  void close() {
    boost::system::error_code ec;
    socket_.close(ec);
  }

 private:
  tcp::socket socket_;
  std::vector<uint8_t> data_;
};

struct Harness {
  asio::io_context ctx;
  std::optional<tcp::acceptor> acceptor;
  std::string error;
  bool script_done = false;
  std::function<void()> on_failure;  // stops the link

  void listen(uint16_t port = 0) {
    acceptor.emplace(ctx);
    const tcp::endpoint ep(asio::ip::address_v4::loopback(), port);
    acceptor->open(ep.protocol());
    acceptor->set_option(tcp::acceptor::reuse_address(true));
    acceptor->bind(ep);
    acceptor->listen();
  }
  uint16_t port() const { return acceptor->local_endpoint().port(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }

  asio::awaitable<Peer> accept() {
    auto [ec, socket] = co_await acceptor->async_accept(kTuple);
    expect(!ec, "accept: " + ec.message());
    co_return Peer(std::move(socket));
  }

  // Runs `script` and the link until the io_context runs out of work: the script must stop the
  // link and close what it opened. Fails if that takes more than 10 seconds.
  void run(std::function<asio::awaitable<void>()> script) {
    asio::co_spawn(ctx, script(), [this](std::exception_ptr e) {
      script_done = true;
      if (acceptor) acceptor->close();
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        error = x.what();
      }
      if (on_failure) on_failure();
    });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!ctx.stopped() && std::chrono::steady_clock::now() < deadline) ctx.run_for(50ms);
    if (!ctx.stopped()) {
      error += script_done ? " (the link kept the io_context busy after stop())"
                           : " (timed out waiting for the link)";
      if (on_failure) on_failure();
      if (acceptor) acceptor->close();
      ctx.run_for(1s);
    }
    CHECK_MESSAGE(error.empty(), error);
    CHECK(ctx.stopped());
  }
};

control::Register hash_self() {
  return control::Register{Role::kHash, "hash1", "127.0.0.1:7001", 4, 0, 4242, false, false};
}

ConfigLinkSettings fast() {
  ConfigLinkSettings s;
  s.connect_timeout = 1000ms;
  s.backoff_initial = 10ms;
  s.backoff_max = 40ms;
  return s;
}

// Accepts the link's next connection, takes its register, welcomes it (version 0) and waits for
// its first heartbeat: the link is connected then.
asio::awaitable<Peer> accept_and_welcome(Harness& h) {
  Peer peer = co_await h.accept();
  co_await peer.wait_for<control::Register>();
  {
    const std::vector<Message> out = msgs(control::Welcome{0, 0});
    co_await peer.send(out);
  }
  co_await peer.wait_for<control::Heartbeat>();
  co_return peer;
}

}  // namespace

TEST_CASE(
    "config_link: registers, delivers the table, acks, heartbeats; re-registers after a close") {
  Harness h;
  h.listen();
  std::vector<control::TablePush> tables;
  std::vector<control::PurgeCommand> purges;
  std::vector<bool> states;
  std::optional<ConfigLink> link;
  ConfigLink::Callbacks cb;
  cb.on_table = [&](control::TablePush p) {
    tables.push_back(p);
    link->ack(p.table.version);
  };
  cb.on_purge = [&](control::PurgeCommand c) {
    purges.push_back(c);
    link->send_purge_report(
        control::PurgeReport{{{0, frame::PurgeState::kRunning, c.action, 5, 100, 2}}});
  };
  cb.stats = node_stats;
  std::function<void()> on_down;  // runs when the link notices the connection is gone
  cb.on_state = [&](bool up) {
    states.push_back(up);
    if (!up && on_down) on_down();
  };
  link.emplace(h.ctx, h.address(), hash_self(), cb, fast());
  h.on_failure = [&] { link->stop(); };
  link->start();

  h.run([&]() -> asio::awaitable<void> {
    Peer first = co_await h.accept();
    const auto reg = co_await first.wait_for<control::Register>();
    expect(reg == hash_self(), "the registration carries the node's identity");
    // The welcome and a table in one segment.
    {
      const std::vector<Message> out =
          msgs(control::Welcome{20, 7}, control::TablePush{table(7), table(6), 500});
      co_await first.send(out);
    }
    co_await first.wait_for<control::Ack>([](const control::Ack& a) { return a.version == 7; });
    expect(link->connected() && link->version() == 7 && link->config_version() == 7,
           "connected, acked, config version from the welcome");
    const auto hb = co_await first.wait_for<control::Heartbeat>(
        [](const control::Heartbeat& b) { return b.version == 7; });
    expect(hb.stats == node_stats(),
           "heartbeats carry the stats: " + boost::json::serialize(hb.stats));
    // Heartbeats keep coming at the interval of the welcome (20 ms).
    for (int i = 0; i < 3; ++i) co_await first.wait_for<control::Heartbeat>();

    {
      const std::vector<Message> out =
          msgs(control::PurgeCommand{frame::PurgeAction::kNotOwned, 0});
      co_await first.send(out);
    }
    const auto report = co_await first.wait_for<control::PurgeReport>();
    expect(report.shards.size() == 1 && report.shards[0].state == frame::PurgeState::kRunning &&
               report.shards[0].kind == frame::PurgeAction::kNotOwned &&
               report.shards[0].deleted == 2,
           "the purge report arrives");

    // The config server goes away. While the link is down the node acks a newer version and
    // reports purge progress: the next registration carries the version, the report follows it.
    on_down = [&] {
      link->ack(8);
      link->send_purge_report(control::PurgeReport{
          {{1, frame::PurgeState::kDone, frame::PurgeAction::kAll, 100, 100, 100}}});
    };
    first.close();
    Peer second = co_await h.accept();
    const auto again = co_await second.next();
    expect(again && std::holds_alternative<control::Register>(*again),
           "the first message after a reconnect is a registration");
    expect(std::get<control::Register>(*again).version == 8,
           "registers again with the latest acked version");
    expect(!link->connected(), "not connected before the welcome");
    const auto kept = co_await second.wait_for<control::PurgeReport>();
    expect(kept.shards.size() == 1 && kept.shards[0].shard == 1 &&
               kept.shards[0].state == frame::PurgeState::kDone,
           "purge progress kept while disconnected");
    {
      const std::vector<Message> out = msgs(control::Welcome{60000, 8});
      co_await second.send(out);
    }
    co_await second.wait_for<control::Heartbeat>();  // one right after the welcome
    // heartbeat_now() takes one per 100 ms: asked until it takes one. The next periodic heartbeat
    // is 60 s away, past the harness's bound: the one that comes is the one asked for.
    while (!link->heartbeat_now()) co_await sleep(5ms);
    co_await second.wait_for<control::Heartbeat>();

    link->stop();
    expect(!link->connected(), "stop() disconnects");
    co_await second.until_closed();
  });

  REQUIRE(tables.size() == 1);
  CHECK(tables[0].table == table(7));
  CHECK(tables[0].previous == table(6));
  CHECK(tables[0].grace_ms == 500);
  REQUIRE(purges.size() == 1);
  CHECK(purges[0].action == frame::PurgeAction::kNotOwned);
  CHECK(states == std::vector<bool>{true, false, true});
}

TEST_CASE("config_link: keeps retrying while the config server is down, connects when it appears") {
  Harness h;
  h.listen();
  const uint16_t port = h.port();
  h.acceptor.reset();  // nothing listens there now
  std::optional<ConfigLink> link;
  std::vector<bool> states;
  ConfigLink::Callbacks cb;
  cb.on_state = [&](bool up) { states.push_back(up); };
  link.emplace(h.ctx, "127.0.0.1:" + std::to_string(port),
               control::Register{Role::kLogin, "login-a", "127.0.0.1:9000", 0, 3, 1, false, false},
               cb, fast());
  h.on_failure = [&] {
    if (link) link->stop();
  };
  link->start();

  h.run([&]() -> asio::awaitable<void> {
    // Several refused attempts, each followed by its back-off: none connected.
    while (link->failed_attempts() < 3) co_await sleep(5ms);
    expect(!link->connected() && states.empty(), "not connected while nothing listens");
    h.listen(port);
    Peer peer = co_await h.accept();
    const auto reg = co_await peer.wait_for<control::Register>();
    expect(reg.role == Role::kLogin && reg.version == 3 && reg.shards == 0,
           "a login server registers with the version it started with");
    {
      const std::vector<Message> out = msgs(control::Welcome{0, 3});
      co_await peer.send(out);
    }  // 0: the node's default interval
    co_await peer.wait_for<control::Heartbeat>(
        [](const control::Heartbeat& b) { return b.version == 3 && b.stats.empty(); });
    expect(link->connected(), "connected after the welcome");
    link.reset();  // destroying the link stops it
  });
  CHECK(states == std::vector<bool>{true});
}

TEST_CASE("config_link: a malformed, oversized or unexpected message makes it reconnect") {
  Harness h;
  h.listen();
  std::vector<control::TablePush> tables;
  std::optional<ConfigLink> link;
  ConfigLink::Callbacks cb;
  cb.on_table = [&](control::TablePush p) { tables.push_back(std::move(p)); };
  link.emplace(h.ctx, h.address(), hash_self(), cb, fast());
  h.on_failure = [&] { link->stop(); };
  link->start();

  h.run([&]() -> asio::awaitable<void> {
    const std::vector<std::vector<uint8_t>> bad = bad_frames();
    for (const auto& bytes : bad) {
      Peer peer = co_await h.accept();
      co_await peer.wait_for<control::Register>();
      {
        const std::vector<Message> out = msgs(control::Welcome{1000, 1});
        co_await peer.send(out);
      }
      co_await peer.send_raw(bytes);
      co_await peer.until_closed();
    }
    {  // a message only nodes send
      Peer peer = co_await h.accept();
      co_await peer.wait_for<control::Register>();
      {
        const std::vector<Message> out = msgs(control::Welcome{1000, 1}, control::Ack{3});
        co_await peer.send(out);
      }
      co_await peer.until_closed();
    }
    {  // a table before the welcome
      Peer peer = co_await h.accept();
      co_await peer.wait_for<control::Register>();
      {
        const std::vector<Message> out = msgs(control::TablePush{table(2), std::nullopt, 0});
        co_await peer.send(out);
      }
      co_await peer.until_closed();
    }
    {  // no welcome at all: the link gives up after connect_timeout (1 s here) and comes back
      Peer peer = co_await h.accept();
      co_await peer.wait_for<control::Register>();
      co_await peer.until_closed();
      Peer next = co_await h.accept();
      co_await next.wait_for<control::Register>();
      const std::vector<Message> out =
          msgs(control::Welcome{1000, 1}, control::TablePush{table(2), std::nullopt, 0});
      co_await next.send(out);
      while (tables.empty()) co_await sleep(5ms);
    }
    link->stop();
  });
  REQUIRE(tables.size() == 1);
  CHECK(tables[0].table.version == 2);
}

TEST_CASE(
    "config_link: a config server that stops reading costs a bounded write, then a reconnect") {
  Harness h;
  h.listen();
  std::optional<ConfigLink> link;
  ConfigLink::Callbacks cb;
  cb.stats = big_stats;  // the socket buffers fill within a second at one heartbeat per 10 ms
  ConfigLinkSettings settings = fast();
  settings.write_timeout = 300ms;
  link.emplace(h.ctx, h.address(), hash_self(), cb, settings);
  h.on_failure = [&] { link->stop(); };
  link->start();
  // What one heartbeat of the link takes on the wire (its timestamp has as many digits).
  std::vector<uint8_t> one;
  control::append_message(control::Heartbeat{0, big_stats(), {}, unix_micros()}, one);
  const size_t one_heartbeat = one.size();
  // The most the link held for sending, sampled every millisecond until it has reconnected.
  size_t most_queued = 0;
  bool reconnected = false;

  h.run([&]() -> asio::awaitable<void> {
    Peer stuck = co_await h.accept();
    co_await stuck.wait_for<control::Register>();
    {
      const std::vector<Message> out = msgs(control::Welcome{10, 1});
      co_await stuck.send(out);
    }
    asio::co_spawn(
        h.ctx,
        [&]() -> asio::awaitable<void> {
          while (!reconnected && !h.script_done) {
            most_queued = std::max(most_queued, link->queued_bytes());
            co_await sleep(1ms);
          }
        },
        asio::detached);
    // `stuck` never reads again. The link keeps one heartbeat pending, no more, and gives up on
    // the connection once its write has been stuck for write_timeout.
    Peer next = co_await h.accept();
    co_await next.wait_for<control::Register>();
    reconnected = true;
    expect(link->write_timeouts() == 1,
           "the link gave up because its write stayed stuck for write_timeout, not for another "
           "reason");
    link->stop();
    stuck.close();
  });
  // A heartbeat was held back by the stuck write (the write held for write_timeout, sampled every
  // millisecond), and never more than that one: those that came due meanwhile replaced each other
  // rather than queueing behind it.
  CHECK(most_queued >= one_heartbeat - 64);
  CHECK(most_queued <= one_heartbeat + 64);
}

TEST_CASE("config_link: stop() ends everything, whatever the link is doing") {
  SUBCASE("backing off with nothing listening") {
    Harness h;
    h.listen();
    const std::string address = h.address();
    h.acceptor.reset();
    // After its first failed attempt the link waits 30 to 60 s, longer than the harness waits
    // for the io_context to run out of work: only stop() cancelling that wait ends the run.
    ConfigLinkSettings settings = fast();
    settings.backoff_initial = 60s;
    settings.backoff_max = 60s;
    ConfigLink link(h.ctx, address, hash_self(), {}, settings);
    h.on_failure = [&] { link.stop(); };
    link.start();
    h.run([&]() -> asio::awaitable<void> {
      while (link.failed_attempts() < 1) co_await sleep(1ms);
      link.stop();
    });
  }
  SUBCASE("waiting for the welcome") {
    Harness h;
    h.listen();
    ConfigLink link(h.ctx, h.address(), hash_self(), {}, fast());
    h.on_failure = [&] { link.stop(); };
    link.start();
    h.run([&]() -> asio::awaitable<void> {
      Peer peer = co_await h.accept();
      co_await peer.wait_for<control::Register>();
      link.stop();
      co_await peer.until_closed();
    });
  }
  SUBCASE("destroyed from inside its own callback") {
    Harness h;
    h.listen();
    std::optional<ConfigLink> link;
    int tables = 0;
    ConfigLink::Callbacks cb;
    cb.on_table = [&](control::TablePush) {
      ++tables;
      link.reset();
    };
    link.emplace(h.ctx, h.address(), hash_self(), cb, fast());
    h.on_failure = [&] {
      if (link) link->stop();
    };
    link->start();
    h.run([&]() -> asio::awaitable<void> {
      Peer peer = co_await h.accept();
      co_await peer.wait_for<control::Register>();
      // Two tables in one segment: the second must not reach the destroyed link's callback.
      {
        const std::vector<Message> out =
            msgs(control::Welcome{1000, 2}, control::TablePush{table(1), std::nullopt, 0},
                 control::TablePush{table(2), std::nullopt, 0});
        co_await peer.send(out);
      }
      co_await peer.until_closed();
    });
    CHECK(tables == 1);
    CHECK_FALSE(link);
  }
  SUBCASE("never started") {
    asio::io_context ctx;
    { ConfigLink link(ctx, "127.0.0.1:1", hash_self(), {}); }
    ctx.run();
    CHECK(ctx.stopped());
  }
}

TEST_CASE("config_link: a malformed config server address is a usage error") {
  asio::io_context ctx;
  CHECK_THROWS_AS(ConfigLink(ctx, "no-port", hash_self(), {}), UsageError);
  CHECK_THROWS_AS(ConfigLink(ctx, "127.0.0.1:1,,127.0.0.1:2", hash_self(), {}), UsageError);
  CHECK_THROWS_AS(ConfigLink(ctx, "127.0.0.1:0", hash_self(), {}), UsageError);
}

TEST_CASE("config_link: given several config servers, it dials the next after a failed connect") {
  Harness h;
  h.listen();
  const uint16_t dead = h.port();
  h.acceptor.reset();  // nothing listens on the first address
  h.listen();
  const std::string live = h.address();
  std::optional<ConfigLink> link;
  link.emplace(h.ctx, "127.0.0.1:" + std::to_string(dead) + ", " + live, hash_self(),
               ConfigLink::Callbacks{}, fast());
  h.on_failure = [&] {
    if (link) link->stop();
  };
  link->start();
  h.run([&]() -> asio::awaitable<void> {
    Peer peer = co_await accept_and_welcome(h);
    expect(link->connected(), "connected to the second address");
    expect(link->config_address() == live, "on the address that answered");
    // That one goes away: the link goes back to the first (dead), then to this one again.
    peer.close();
    Peer again = co_await h.accept();
    co_await again.wait_for<control::Register>();
    link.reset();
  });
}

TEST_CASE("config_link: a refused registration is logged and tried again after the back-off") {
  Harness h;
  h.listen();
  std::optional<ConfigLink> link;
  std::vector<bool> states;
  ConfigLink::Callbacks cb;
  cb.on_state = [&](bool up) { states.push_back(up); };
  link.emplace(h.ctx, h.address(), hash_self(), cb, fast());
  h.on_failure = [&] {
    if (link) link->stop();
  };
  link->start();
  h.run([&]() -> asio::awaitable<void> {
    for (int i = 0; i < 2; ++i) {  // the same refusal twice: logged once, retried each time
      Peer peer = co_await h.accept();
      co_await peer.wait_for<control::Register>();
      {
        const std::vector<Message> out = msgs(control::Refused{"address 0.0.0.0:7001 refused", ""});
        co_await peer.send(out);
      }
      co_await peer.until_closed();  // the link hangs up after a refusal
      expect(!link->connected(), "a refused link is not connected");
    }
    Peer peer = co_await accept_and_welcome(h);
    expect(link->connected(), "welcomed at last");
    link.reset();
  });
  CHECK(states == std::vector<bool>{true});  // refusals are no change of state
}
