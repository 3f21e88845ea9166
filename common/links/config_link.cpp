#include "common/links/config_link.h"

#include <netinet/tcp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl.hpp>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "common/links/backoff.h"
#include "common/runtime/clock.h"
#include "common/runtime/config_addresses.h"
#include "common/runtime/options.h"
#include "common/security/link_auth.h"
#include "common/security/token.h"

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace imhash {

namespace {

constexpr size_t kControlReadBufferSize = 64 * 1024;
// A session that stayed up this long after its welcome was healthy: the back-off starts over.
constexpr milliseconds kStableSession{1000};
constexpr milliseconds kMinHeartbeat{10};
constexpr milliseconds kHeartbeatNowGap{100};

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// Linux: the kernel fails the connection when sent data stays unacknowledged this long, so a
// config server host that vanished without a reset is noticed although heartbeats still fit in
// the socket buffer.
using TcpUserTimeout = asio::detail::socket_option::integer<IPPROTO_TCP, TCP_USER_TIMEOUT>;

long long ms_count(Clock::duration d) {
  return std::chrono::duration_cast<milliseconds>(d).count();
}

}  // namespace

// Everything the link's coroutines use. They hold it by shared_ptr, so the ConfigLink object may
// go away while they unwind.
struct ConfigLink::State {
  State(asio::io_context& ctx, std::string address, control::Register self, Callbacks cb,
        ConfigLinkSettings settings)
      : ctx(ctx),
        addresses(ConfigAddresses::parse(address, "config server address")),
        settings(settings),
        self(std::move(self)),
        cb(std::move(cb)),
        socket(ctx),
        resolver(ctx),
        retry_timer(ctx),
        heartbeat_timer(ctx),
        wake(ctx),
        backoff(settings.backoff_initial, settings.backoff_max, std::random_device{}()),
        heartbeat(settings.default_heartbeat) {}

  asio::awaitable<void> run(std::shared_ptr<State> keep_alive);
  asio::awaitable<std::string> session();
  asio::awaitable<std::string> connect();
  asio::awaitable<void> read_loop(std::string& reason);
  asio::awaitable<void> heartbeat_loop(std::string& reason);
  asio::awaitable<void> write_loop(std::string& reason);
  // False (with `reason`) if the message ends the session.
  bool handle(control::Message& m, std::string& reason);
  bool has_output() const;
  void encode_output();
  void wake_writer();
  void close_socket();
  void stop();
  // Runs a node callback; an exception from it is logged, not allowed to end the link.
  template <typename F>
  void invoke(const char* what, F&& f);
  std::string who() const {
    return std::string("config link (") + to_string(self.role) + " " + self.name + ")";
  }

  // Constant after construction.
  asio::io_context& ctx;
  ConfigAddresses addresses;  // which one the link is on: moves on after a failure
  const ConfigLinkSettings settings;

  control::Register self;  // its `version` follows ack()
  Callbacks cb;
  tcp::socket socket;
  // With settings.tls: the session's TLS over `socket` (made by connect(), used by the loops).
  std::optional<asio::ssl::stream<tcp::socket&>> tls;
  tcp::resolver resolver;
  asio::steady_timer retry_timer;
  asio::steady_timer heartbeat_timer;  // also the deadline of the welcome
  asio::steady_timer wake;             // the writer waits on it when it has nothing to send
  Backoff backoff;

  bool started = false;
  bool stopped = false;
  bool welcomed = false;       // this session: the welcome arrived (connected() == welcomed)
  bool quiet = false;          // a failure was logged since the last change of state
  bool refused = false;        // this session: the config server refused the registration
  std::string refused_leader;  // and named the leader (a standby config server)
  // By address: logged once while each config server keeps refusing the same way (several
  // standbys refuse in turn while there is no leader).
  std::map<size_t, std::string> last_refusal;
  // How the end of this session is logged: info, or worse if the config server misbehaved.
  spdlog::level::level_enum failure_level = spdlog::level::info;
  milliseconds heartbeat;
  uint64_t config_version = 0;
  Clock::time_point session_start{};
  Clock::time_point welcomed_at{};

  // This session's handshake (with a cluster key): our nonce, and whether the config server has
  // proved the key yet (registering waits for it).
  link_auth::Nonce auth_nonce{};
  bool auth_hello_due = false;
  std::optional<link_auth::Proof> auth_proof_due;
  bool registered = false;  // this session's register has been written (reports may follow it)
  uint64_t refused_handshakes = 0;  // sessions whose config server did not prove the key
  uint64_t failed_attempts = 0;     // connection attempts that ended without a welcome
  uint64_t write_timeouts = 0;      // sessions dropped because a write stayed stuck
  uint64_t seen_version = 0;        // saw_version: the newest a hash server answered MOVED with

  // Output: at most one of each kind, so a config server that stops reading costs nothing more.
  bool register_due = false;
  std::optional<uint64_t> ack_due;
  bool heartbeat_due = false;
  std::map<uint32_t, control::PurgeShard> purge_due;  // latest progress per shard
  control::StreamReport stream_latest;                // sent after every registration
  bool stream_due = false;
  bool writing = false;
  Clock::time_point write_started{};
  Clock::time_point last_heartbeat{};
  std::vector<uint8_t> out;

  // Grows for one large message (a table push) up to the protocol's limit, then shrinks back.
  StreamBuffer in{kControlReadBufferSize, control::kLengthPrefixSize + control::kMaxMessageSize};
};

template <typename F>
void ConfigLink::State::invoke(const char* what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    spdlog::error("{}: {} failed: {}", who(), what, e.what());
  }
}

void ConfigLink::State::close_socket() {
  boost::system::error_code ec;
  if (socket.is_open()) socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

void ConfigLink::State::wake_writer() {
  if (socket.is_open()) wake.cancel();
}

void ConfigLink::State::stop() {
  if (stopped) return;
  stopped = true;
  welcomed = false;
  retry_timer.cancel();
  resolver.cancel();
  heartbeat_timer.cancel();
  wake.cancel();
  close_socket();
}

asio::awaitable<void> ConfigLink::State::run(std::shared_ptr<State> keep_alive) {
  (void)keep_alive;  // the frame's copy keeps the state alive until the loop ends
  while (!stopped) {
    std::string reason;
    try {
      reason = co_await session();
    } catch (const std::exception& e) {
      reason = std::string("internal error: ") + e.what();
      failure_level = spdlog::level::err;
    }
    const bool was_up = welcomed;
    welcomed = false;
    close_socket();
    if (stopped) break;
    if (!was_up) ++failed_attempts;
    // A failed connect or a lost session: the next address (if there are several) after the
    // back-off. One line per change of state; a config server that stays down logs nothing more,
    // but one that misbehaves (malformed messages, a stuck write) is reported every time, and a
    // refusal once per reason.
    const std::string on = addresses.describe();
    const size_t refused_at = addresses.position();
    // A standby config server names the leader: dial it next if it is one of ours.
    const bool to_leader = refused && !refused_leader.empty() && addresses.move_to(refused_leader);
    const std::string then = to_leader ? "; trying the leader " + refused_leader + " next"
                             : addresses.size() > 1 ? "; trying " + addresses.advance() + " next"
                                                    : std::string();
    refused_leader.clear();
    if (refused) {
      const bool again = last_refusal[refused_at] == reason;
      // A standby naming the leader is the normal way to find it (info); anything else is an
      // error.
      spdlog::log(again       ? spdlog::level::debug
                  : to_leader ? spdlog::level::info
                              : spdlog::level::err,
                  "{}: the {} {}{}", who(), on, reason,
                  then.empty() ? "; trying again later" : then);
      last_refusal[refused_at] = reason;
      quiet = true;
    } else if (failure_level != spdlog::level::info) {
      spdlog::log(failure_level, "{}: {}: {}{}", who(), on, reason,
                  then.empty() ? "; reconnecting" : then);
      quiet = true;
    } else if (was_up) {
      spdlog::info("{}: lost the connection to the {}: {}{}", who(), on, reason,
                   then.empty() ? "; reconnecting" : then);
      quiet = true;
    } else if (!quiet) {
      spdlog::info("{}: no connection to the {}: {}{}", who(), on, reason,
                   then.empty() ? "; retrying with back-off" : then + ", retrying with back-off");
      quiet = true;
    } else {
      spdlog::debug("{}: {}: {}{}", who(), on, reason, then);
    }
    if (was_up) {
      invoke("on_state", [&] {
        if (cb.on_state) cb.on_state(false);
      });
      if (Clock::now() - welcomed_at >= kStableSession) backoff.reset();
      if (stopped) break;  // on_state may have stopped the link
    }
    // Sent to the leader: dial it at once (the back-off still grows, so two config servers that
    // name each other cannot make a loop without pause).
    const auto pause = backoff.next();
    retry_timer.expires_after(to_leader ? std::min<milliseconds>(pause, settings.backoff_initial)
                                        : pause);
    co_await retry_timer.async_wait(kTuple);
  }
  spdlog::debug("{}: stopped", who());
}

asio::awaitable<std::string> ConfigLink::State::connect() {
  asio::steady_timer deadline(ctx, settings.connect_timeout);
  const HostPort target = addresses.current();
  auto resolved =
      co_await (resolver.async_resolve(target.host, std::to_string(target.port), kTuple) ||
                deadline.async_wait(kTuple));
  if (resolved.index() != 0) co_return "resolving " + target.host + " timed out";
  auto [resolve_ec, endpoints] = std::get<0>(resolved);
  if (resolve_ec) co_return "cannot resolve " + target.host + ": " + resolve_ec.message();
  if (stopped) co_return "stopped";

  tls.reset();  // the last session's loops have all ended
  socket = tcp::socket(ctx);
  auto connected =
      co_await (asio::async_connect(socket, endpoints, kTuple) || deadline.async_wait(kTuple));
  if (connected.index() != 0) {
    co_return "connecting timed out after " + std::to_string(settings.connect_timeout.count()) +
        " ms";
  }
  if (auto ec = std::get<0>(std::get<0>(connected))) co_return ec.message();
  if (stopped) co_return "stopped";
  boost::system::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  socket.set_option(asio::socket_base::keep_alive(true), ec);
  socket.set_option(TcpUserTimeout(static_cast<int>(
                        std::min(settings.unacknowledged_timeout, settings.write_timeout).count())),
                    ec);
  if (settings.tls) {
    // TLS from the first byte, under the same deadline; the cluster-key handshake runs inside it.
    tls.emplace(socket, *settings.tls);
    auto shook = co_await (tls->async_handshake(asio::ssl::stream_base::client, kTuple) ||
                           deadline.async_wait(kTuple));
    if (shook.index() != 0) co_return "the TLS handshake timed out";
    if (auto tls_ec = std::get<0>(std::get<0>(shook))) {
      failure_level = spdlog::level::err;  // a misconfiguration: reported every time
      co_return "TLS failed: " + tls_ec.message() +
          " (a config server without TLS, or a certificate another CA signed?)";
    }
  }
  co_return std::string();
}

asio::awaitable<std::string> ConfigLink::State::session() {
  failure_level = spdlog::level::info;
  refused = false;
  std::string reason = co_await connect();
  if (!reason.empty()) co_return reason;
  if (stopped) co_return "stopped";

  // A new session: the registration carries the latest version, so an older ack is moot; purge
  // progress kept while disconnected goes out after it.
  session_start = Clock::now();
  in.consume(in.data().size());  // nothing of the last session is read in this one
  auth_proof_due.reset();
  registered = false;
  if (!settings.cluster_key.empty()) {
    const auto nonce = link_auth::make_nonce();
    if (!nonce) co_return "OpenSSL could not make a nonce";
    auth_nonce = *nonce;
    auth_hello_due = true;
    register_due = false;  // once the config server has proved the key
  } else {
    register_due = true;
  }
  ack_due.reset();
  heartbeat_due = false;
  writing = false;
  heartbeat = settings.default_heartbeat;
  co_await (read_loop(reason) || heartbeat_loop(reason) || write_loop(reason));
  if (reason.empty()) reason = "closed";
  co_return reason;
}

bool ConfigLink::State::handle(control::Message& m, std::string& reason) {
  if (auto* c = std::get_if<control::AuthChallenge>(&m)) {
    const auto server_nonce = link_auth::from_hex<link_auth::kNonceSize>(c->nonce);
    const auto server_proof = link_auth::from_hex<link_auth::kProofSize>(c->proof);
    if (settings.cluster_key.empty() || welcomed || register_due || registered || !server_nonce ||
        !server_proof) {
      reason = "unexpected or malformed auth_challenge";
      failure_level = spdlog::level::err;
      return false;
    }
    const std::string role = to_string(self.role);
    const link_auth::Transcript t{.link = "config",
                                  .client_role = role,
                                  .client_name = self.name,
                                  .server_name = "config",
                                  .client_nonce = auth_nonce,
                                  .server_nonce = *server_nonce};
    if (!link_auth::verify(settings.cluster_key, link_auth::Side::kServer, t, *server_proof)) {
      ++refused_handshakes;
      reason =
          "the config server did not prove the cluster key (a different key?): not "
          "registering with it";
      failure_level = spdlog::level::err;
      return false;
    }
    auth_proof_due = link_auth::prove(settings.cluster_key, link_auth::Side::kClient, t);
    if (!auth_proof_due) {
      reason = "OpenSSL could not compute a proof";
      return false;
    }
    register_due = true;
    wake_writer();
    return true;
  }
  if (auto* w = std::get_if<control::Welcome>(&m)) {
    heartbeat = w->heartbeat_ms == 0 ? settings.default_heartbeat
                                     : std::max(milliseconds(w->heartbeat_ms), kMinHeartbeat);
    config_version = w->config_version;
    // Registered once: a later registration is of a process that kept its records.
    self.fresh = false;
    if (!welcomed) {
      welcomed = true;
      welcomed_at = Clock::now();
      quiet = false;
      last_refusal.clear();
      spdlog::info("{}: connected to the {} (its version {}, ours {})", who(), addresses.describe(),
                   config_version, self.version);
      heartbeat_due = true;  // stats at once, then every interval
      wake_writer();
      heartbeat_timer.cancel();  // re-armed with the interval the welcome gave
      invoke("on_state", [&] {
        if (cb.on_state) cb.on_state(true);
      });
    }
    return true;
  }
  if (auto* r = std::get_if<control::Refused>(&m); r && !welcomed) {
    reason = "refused the registration: " + r->reason;
    refused = true;
    refused_leader = r->leader;
    return false;
  }
  if (!welcomed) {
    reason = std::string("expected a welcome, got a ") + control::type_name(m) + " message";
    failure_level = spdlog::level::err;
    return false;
  }
  if (auto* push = std::get_if<control::TablePush>(&m)) {
    spdlog::debug("{}: table version {} pushed", who(), push->table.version);
    invoke("on_table", [&] {
      if (cb.on_table) cb.on_table(std::move(*push));
    });
    return true;
  }
  if (auto* purge = std::get_if<control::PurgeCommand>(&m)) {
    if (!cb.on_purge) {
      spdlog::debug("{}: ignoring a purge command", who());
      return true;
    }
    invoke("on_purge", [&] { cb.on_purge(*purge); });
    return true;
  }
  if (auto* stream = std::get_if<control::StreamCommand>(&m)) {
    if (!cb.on_stream) {
      spdlog::debug("{}: ignoring a stream command", who());
      return true;
    }
    invoke("on_stream", [&] { cb.on_stream(*stream); });
    return true;
  }
  if (auto* fill = std::get_if<control::FillCommand>(&m)) {
    if (!cb.on_fill) {
      spdlog::debug("{}: ignoring a fill command", who());
      return true;
    }
    invoke("on_fill", [&] { cb.on_fill(*fill); });
    return true;
  }
  reason = std::string("unexpected ") + control::type_name(m) + " message";
  failure_level = spdlog::level::err;
  return false;
}

asio::awaitable<void> ConfigLink::State::read_loop(std::string& reason) {
  for (;;) {
    // Everything already buffered first: a welcome and a table may arrive in one segment.
    std::string error, why;
    bool refused = false;
    const auto st = control::drain_messages(in, error, [&](control::Message& m) {
      if (!handle(m, why)) {
        refused = true;
        return false;
      }
      return !stopped && socket.is_open();  // a callback may stop the link
    });
    if (refused) {
      if (reason.empty()) reason = why;
      close_socket();
      co_return;
    }
    if (st != control::DecodeStatus::kNeedMore && st != control::DecodeStatus::kOk) {
      if (reason.empty()) {
        reason = "malformed message: " + error;
        failure_level = spdlog::level::err;
      }
      close_socket();
      co_return;
    }
    if (stopped || !socket.is_open()) co_return;
    const auto space = in.space();
    const auto buffer = asio::buffer(space.data(), space.size());
    auto [ec, n] = tls ? co_await tls->async_read_some(buffer, kTuple)
                       : co_await socket.async_read_some(buffer, kTuple);
    if (ec) {
      if (reason.empty()) {
        reason = ec == asio::error::eof ? "closed by the config server" : ec.message();
        // The kernel gave up on unacknowledged data after TCP_USER_TIMEOUT (write_timeout).
        if (ec == asio::error::timed_out) ++write_timeouts;
      }
      close_socket();
      co_return;
    }
    in.commit(n);
  }
}

asio::awaitable<void> ConfigLink::State::heartbeat_loop(std::string& reason) {
  for (;;) {
    if (welcomed) {
      heartbeat_timer.expires_after(heartbeat);
    } else {
      heartbeat_timer.expires_at(session_start + settings.connect_timeout);
    }
    auto [ec] = co_await heartbeat_timer.async_wait(kTuple);
    if (stopped || !socket.is_open()) co_return;
    if (ec) continue;  // re-armed after the welcome
    if (!welcomed) {
      if (reason.empty()) {
        reason = "no welcome within " + std::to_string(settings.connect_timeout.count()) + " ms";
      }
      close_socket();
      co_return;
    }
    if (writing && Clock::now() - write_started >= settings.write_timeout) {
      if (reason.empty()) {
        reason = "a write has been stuck for " +
                 std::to_string(ms_count(Clock::now() - write_started)) + " ms";
        failure_level = spdlog::level::warn;
        ++write_timeouts;
      }
      close_socket();
      co_return;
    }
    heartbeat_due = true;  // if the last one is still held back by a slow write, this replaces it
    wake_writer();
  }
}

bool ConfigLink::State::has_output() const {
  return auth_hello_due || register_due ||
         (registered && (ack_due || !purge_due.empty() || stream_due)) ||
         (heartbeat_due && welcomed);
}

void ConfigLink::State::encode_output() {
  out.clear();
  if (auth_hello_due) {
    control::append_message(control::AuthHello{self.role, self.name, to_hex(auth_nonce)}, out);
    auth_hello_due = false;
  }
  if (register_due && auth_proof_due) {
    control::append_message(control::AuthProof{to_hex(*auth_proof_due)}, out);
    auth_proof_due.reset();
  }
  if (register_due) {
    registered = true;
    control::append_message(self, out);
    register_due = false;
    stream_due = self.role == Role::kHash;
  }
  if (ack_due && registered) {
    control::append_message(control::Ack{*ack_due}, out);
    ack_due.reset();
  }
  if (!purge_due.empty() && registered) {
    control::PurgeReport report;
    report.shards.reserve(purge_due.size());
    for (const auto& entry : purge_due) report.shards.push_back(entry.second);
    purge_due.clear();
    control::append_message(report, out);
  }
  if (stream_due && registered) {
    control::append_message(stream_latest, out);
    stream_due = false;
  }
  if (heartbeat_due && welcomed) {
    control::Heartbeat hb{
        self.version, {}, {}, unix_micros(), seen_version > self.version ? seen_version : 0};
    invoke("stats", [&] {
      if (cb.stats) hb.stats = cb.stats();
      if (cb.held_writes) hb.held_writes = cb.held_writes();
    });
    control::append_message(hb, out);
    heartbeat_due = false;
    last_heartbeat = Clock::now();
  }
}

asio::awaitable<void> ConfigLink::State::write_loop(std::string& reason) {
  for (;;) {
    if (stopped || !socket.is_open()) co_return;
    if (!has_output()) {
      wake.expires_at(Clock::time_point::max());
      co_await wake.async_wait(kTuple);  // cancelled by wake_writer()
      continue;
    }
    encode_output();
    writing = true;
    write_started = Clock::now();
    auto [ec, n] = tls ? co_await asio::async_write(*tls, asio::buffer(out), kTuple)
                       : co_await asio::async_write(socket, asio::buffer(out), kTuple);
    writing = false;
    if (ec) {
      if (reason.empty()) {
        reason = "write failed: " + ec.message();
        if (ec == asio::error::timed_out) ++write_timeouts;  // TCP_USER_TIMEOUT (write_timeout)
      }
      close_socket();
      co_return;
    }
  }
}

// ---- ConfigLink ---------------------------------------------------------------------------------

ConfigLink::ConfigLink(asio::io_context& ctx, std::string config_address, control::Register self,
                       Callbacks cb, ConfigLinkSettings settings)
    : state_(std::make_shared<State>(ctx, std::move(config_address), std::move(self), std::move(cb),
                                     settings)) {
  thread_.bind();
}

// The callbacks stay: the destructor may run inside one of them.
ConfigLink::~ConfigLink() { state_->stop(); }

void ConfigLink::start() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  State& s = *state_;
  if (s.started || s.stopped) return;
  s.started = true;
  asio::co_spawn(s.ctx, s.run(state_), asio::detached);
}

void ConfigLink::stop() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  state_->stop();
}

void ConfigLink::set_filling(bool filling) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  state_->self.filling = filling;
}

void ConfigLink::ack(uint64_t version) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  State& s = *state_;
  s.self.version = version;
  s.ack_due = version;
  s.wake_writer();
}

void ConfigLink::send_purge_report(control::PurgeReport r) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  State& s = *state_;
  for (const control::PurgeShard& shard : r.shards) s.purge_due[shard.shard] = shard;
  s.wake_writer();
}

void ConfigLink::send_stream_report(control::StreamReport r) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  State& s = *state_;
  s.stream_latest = std::move(r);
  s.stream_due = true;
  s.wake_writer();
}

bool ConfigLink::heartbeat_now() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  State& s = *state_;
  if (!s.welcomed || Clock::now() - s.last_heartbeat < kHeartbeatNowGap) return false;
  s.heartbeat_due = true;
  s.wake_writer();
  return true;
}

void ConfigLink::saw_version(uint64_t version) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  state_->seen_version = std::max(state_->seen_version, version);
}

bool ConfigLink::connected() const {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return state_->welcomed;
}
uint64_t ConfigLink::version() const { return state_->self.version; }
uint64_t ConfigLink::config_version() const { return state_->config_version; }
uint64_t ConfigLink::refused_handshakes() const { return state_->refused_handshakes; }
uint64_t ConfigLink::failed_attempts() const {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return state_->failed_attempts;
}
uint64_t ConfigLink::write_timeouts() const {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return state_->write_timeouts;
}
size_t ConfigLink::queued_bytes() const {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return state_->writing ? state_->out.size() : 0;
}
std::string ConfigLink::config_address() const {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  return state_->addresses.current_text();
}

}  // namespace imhash
