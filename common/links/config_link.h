// ConfigLink: a hash or login server's persistent connection to the config server (docs/design.md
// §4, §5; the messages are in common/routing/control_protocol.h). It registers, sends a heartbeat
// with the node's stats every interval the config server asks for, delivers table pushes and purge
// commands in the order they arrive, sends acks and purge reports, and when the connection fails or
// closes it reconnects with exponential back-off and jitter, forever, registering again with the
// latest acked version (the config server then pushes the latest table if the node is behind).
// Given several config server addresses it dials the next one after each failed connect or lost
// session (common/runtime/config_addresses.h). A registration the config server refuses
// (control::Refused) is logged with its reason and tried again after the back-off.
//
// The data path never waits on this link: callbacks run on the link's io_context (the node's
// control thread) and the node hands work to its data threads itself. What the link keeps for
// sending is bounded: at most one heartbeat (a new one replaces one that a stuck write holds back),
// the latest ack, and the latest purge progress of each shard; a write stuck for write_timeout
// drops the connection. An incoming message above control::kMaxMessageSize, a malformed one or one
// the config server should not send is logged and the link reconnects.
//
// Not thread-safe: construct it, call every method and destroy it on the thread that runs `ctx`
// (or before that thread starts running it); checked in debug builds. Callbacks run on that thread,
// never after stop(). Destroying the link stops it; what is still pending in `ctx` finishes there
// without touching the ConfigLink object. Destroy it before `ctx`.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/codec/thread_check.h"
#include "common/routing/control_protocol.h"

namespace imhash {

struct ConfigLinkSettings {
  std::chrono::milliseconds connect_timeout{2000};    // resolve + connect, then again for welcome
  std::chrono::milliseconds default_heartbeat{1000};  // when the welcome says 0
  std::chrono::milliseconds backoff_initial{50};
  std::chrono::milliseconds backoff_max{2000};
  // A write stuck this long drops the connection.
  std::chrono::milliseconds write_timeout{10000};
  // The socket's TCP_USER_TIMEOUT (at most write_timeout): a config server host that vanished or
  // was cut off (its kernel acknowledges nothing) is noticed this long after a heartbeat, although
  // heartbeats still fit in the socket buffer, and the link goes on to the next address. Short,
  // because a leader cut off is replaced within its lease TTL (3 s) and the new one lets
  // `max(DOWN, 2.5 s)` pass before it changes the table: nodes still on the old one would miss
  // the change (a nemesis run: nodes kept a cut-off leader's session for 6.5 s, until it came
  // back, and the new leader's range move meanwhile cost 250 UNAVAILABLEs and TIMEOUTs).
  std::chrono::milliseconds unacknowledged_timeout{2000};
  // The cluster key (common/runtime/cluster_key.h): when set, each session starts with the
  // handshake of common/security/link_auth.h (auth_hello, the config server's auth_challenge with
  // its proof, our auth_proof) before the registration; a config server that cannot prove the key
  // is not registered with. Empty: register at once.
  std::vector<uint8_t> cluster_key;
  // --tls-cert, --tls-key, --tls-ca (common/runtime/tls_options.h): each session runs TLS from its
  // first byte (the config server must present a certificate the CA signed); null: plain TCP.
  std::shared_ptr<boost::asio::ssl::context> tls;
};

class ConfigLink {
 public:
  // All run on `ctx`'s thread; any may be empty.
  struct Callbacks {
    // A table push: the node installs it, then calls ack(version).
    std::function<void(control::TablePush)> on_table;
    // Hash servers start the purge and report with send_purge_report(); login servers ignore it.
    std::function<void(control::PurgeCommand)> on_purge;
    // Hash servers start or cancel their outbound stream; login servers ignore it.
    std::function<void(control::StreamCommand)> on_stream;
    // Hash servers: being refilled or not (replicas); login servers ignore it.
    std::function<void(control::FillCommand)> on_fill;
    // Sampled for each heartbeat: numbers only (other values are left out).
    std::function<boost::json::object()> stats;
    // Login servers, sampled for each heartbeat: control::Heartbeat::held_writes.
    std::function<std::map<std::string, uint64_t>()> held_writes;
    // Connected (welcomed) or disconnected: for logging and metrics.
    std::function<void(bool connected)> on_state;
  };

  // config_addresses "HOST:PORT" or several joined by commas (throws UsageError if malformed).
  // `self.version` is the table version the node starts with (0 if none).
  ConfigLink(boost::asio::io_context& ctx, std::string config_addresses, control::Register self,
             Callbacks cb, ConfigLinkSettings settings = {});
  ~ConfigLink();  // stop()
  ConfigLink(const ConfigLink&) = delete;
  ConfigLink& operator=(const ConfigLink&) = delete;

  void start();
  // Closes the connection, cancels every timer, no more reconnects and no more callbacks; once
  // `ctx` has run the cancellations (ctx.run() returns if nothing else is pending) nothing remains.
  void stop();

  // The node runs table `version` now: sent to the config server, and recorded for heartbeats and
  // for registering again after a reconnect.
  void ack(uint64_t version);
  // Hash servers: whether it is being refilled (Register::filling), for registering again.
  void set_filling(bool filling);
  // Sent at once if connected; otherwise the latest progress of each shard is kept and sent after
  // the next registration. A report written just as the connection dies is lost with it, so a hash
  // server reports periodically while a purge runs, and once when it ends.
  void send_purge_report(control::PurgeReport r);
  // The hash server's latest stream progress: sent at once if connected, and again after every
  // registration (so a config server that restarted, or a new session, learns it at once).
  void send_stream_report(control::StreamReport r);
  // Sends a heartbeat now rather than at the next interval (at most one per 100 ms), e.g. after a
  // hash server answered MOVED: the config server pushes the latest table to a node that is behind.
  // Returns whether it was taken: false while not connected or within 100 ms of the last one.
  bool heartbeat_now();
  // A hash server answered MOVED with table `version`: the heartbeats say so (seen_version) until
  // this link runs it, which lets a config leader that holds that version back push it.
  void saw_version(uint64_t version);

  bool connected() const;           // registered and welcomed, connection up
  uint64_t version() const;         // the version registered / last acked
  uint64_t config_version() const;  // the config server's version in its last welcome (0: none yet)
  std::string config_address() const;  // the address it is on (or dials next)
  // Sessions given up because the config server did not prove the cluster key.
  uint64_t refused_handshakes() const;
  // The next three: what a caller (a test) can wait on instead of sleeping a guessed time. On
  // `ctx`'s thread, like every method here (checked in debug builds).
  // Connection attempts that ended without a welcome: a connect that failed or timed out, a
  // session refused or never welcomed. Counted before the back-off that follows each.
  uint64_t failed_attempts() const;
  // Sessions dropped because a write stayed stuck for write_timeout (noticed by the link, or by
  // the kernel through TCP_USER_TIMEOUT, which is the same bound).
  uint64_t write_timeouts() const;
  // Bytes the link holds for sending: the batch being written, 0 while no write is in flight. A
  // heartbeat that comes due meanwhile adds nothing: it is encoded once that write has ended.
  size_t queued_bytes() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
  ThreadCheck thread_;  // the thread that constructed it
};

}  // namespace imhash
