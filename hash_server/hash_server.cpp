#include "hash_server/hash_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <map>

#include "common/codec/endpoint.h"
#include "common/routing/routing_table.h"
#include "common/runtime/clock.h"
#include "common/runtime/lifecycle.h"
#include "common/runtime/options.h"
#include "common/security/link_auth.h"

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace imhash {

using namespace frame;

namespace {
// A peer that connects and does not complete its handshake is dropped after this long.
constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
constexpr size_t kHandshakeBuffer = 4096;
// Handshakes under way at once: in all, and from one IP address (a login server opens its links
// one after the other per worker; a restart of many login servers behind one NAT address still
// fits, as refused links are retried with back-off).
constexpr ConnectionQuota::Limits kHandshakeLimits{.total = 1024, .per_source = 32};
}  // namespace

std::optional<std::string> table_mismatch(const Table& table, const std::string& name,
                                          uint32_t shards) {
  const ServerInfo* me = table.find_server(name);
  if (!me || me->shards == shards) return std::nullopt;
  return "table version " + std::to_string(table.version) + " gives " + name + " " +
         std::to_string(me->shards) + " shards but this server has " + std::to_string(shards) +
         ": login servers would send ids to the wrong shard";
}

HashServer::HashServer(HashServerConfig config)
    : config_(std::move(config)),
      acceptor_(ctx_),
      quota_(config_.connection_limits),
      handshakes_(kHandshakeLimits),
      signals_(ctx_, SIGINT, SIGTERM),
      reload_signal_(ctx_, SIGHUP),
      sample_timer_(ctx_) {
  LinkSettings links;
  links.client_name = config_.name;
  links.role = Role::kHash;
  links.cluster_key = config_.control.cluster_key.key;
  links.tls = config_.control.tls.context;
  // A batch is a thousand records: give a busy target time to store it.
  links.timeout = std::chrono::milliseconds(5000);
  links.dead_after = std::chrono::milliseconds(10000);
  links.max_in_flight = 256;
  sender_ = std::make_unique<StreamSender>(ctx_, std::move(links), [this](uint32_t shard) {
    shards_[shard]->handle().stream_link_lost();
  });
  Shard::Hooks hooks;
  hooks.send_batch = [this](uint32_t shard, Handoff::Batch batch) {
    asio::post(ctx_, [this, shard, batch = std::move(batch)]() mutable {
      const uint64_t generation = batch.generation;
      const uint16_t count = batch.count;
      std::string target = batch.target.name;
      sender_->send(shard, std::move(batch),
                    [this, shard, generation, count, target = std::move(target)](bool lost) {
                      shards_[shard]->handle().acknowledged(generation, count, target, lost);
                    });
    });
  };
  hooks.drop_older = [this](uint32_t shard, uint64_t generation) {
    asio::post(ctx_, [this, shard, generation] { sender_->drop_older(shard, generation); });
  };
  hooks.on_change = [this](ShardSnapshot snap) {
    asio::post(ctx_, [this, snap = std::move(snap)] { on_shard_change(snap); });
  };
  for (uint32_t i = 0; i < config_.shards; ++i) {
    shards_.push_back(std::make_unique<Shard>(i, config_.shards, config_.name, config_.idle_timeout,
                                              config_.control.tls.context, hooks,
                                              config_.stream_rate, config_.remember_deletes));
    ShardSnapshot empty;
    empty.shard = i;
    snapshots_.push_back(empty);
  }
  set_router(config_.router);
}

void HashServer::set_router(std::shared_ptr<const Router> router, std::chrono::milliseconds grace) {
  table_version_ = router ? router->version() : 0;
  if (router && config_.saved) config_.saved->save(router->table());
  for (auto& s : shards_) s->handle().set_router(router, grace);
}

void HashServer::on_shard_change(const ShardSnapshot& snap) {
  snapshots_[snap.shard] = snap;
  if (snap.purge.state == PurgeState::kRunning || snap.purge_id != 0) purge_reporting_ = true;
  if (control_.config_link()) control_.config_link()->send_purge_report(purge_report());
  send_stream_report();
}

control::StreamReport HashServer::stream_report() {
  control::StreamReport r;
  bool any_running = false, any_cancelled = false, all_done = true, any = false;
  uint64_t version = 0;
  std::map<std::string, uint64_t> targets;
  for (const auto& s : snapshots_) {
    const Handoff::Progress& p = s.stream;
    if (p.state == Handoff::State::kIdle) {
      all_done = false;
      continue;
    }
    any = true;
    any_running |= p.state == Handoff::State::kRunning;
    any_cancelled |= p.state == Handoff::State::kCancelled;
    all_done &= p.state == Handoff::State::kDone;
    version = version == 0 ? p.version : std::min(version, p.version);
    r.scanned += p.scanned;
    r.total += p.total;
    r.sent += p.acked;
    r.restarts += p.restarts;
    for (const auto& [name, n] : s.stream_targets) targets[name] += n;
  }
  r.version = version;
  r.state = !any            ? control::StreamState::kIdle
            : any_running   ? control::StreamState::kRunning
            : any_cancelled ? control::StreamState::kCancelled
            : all_done      ? control::StreamState::kDone
                            : control::StreamState::kRunning;  // some shards not started yet
  for (auto& [name, n] : targets) r.targets.push_back(control::StreamTarget{name, n});
  // The servers every shard's stream refills: a shard that has not taken the command yet still
  // reports its previous stream, and a refill is complete only when every shard's is.
  bool first_shard = true;
  for (const auto& s : snapshots_) {
    if (first_shard) {
      r.lost = s.stream_lost;
      first_shard = false;
      continue;
    }
    std::erase_if(r.lost, [&](const std::string& name) {
      return std::find(s.stream_lost.begin(), s.stream_lost.end(), name) == s.stream_lost.end();
    });
  }
  const int64_t now = monotonic_ns();
  if (r.state == control::StreamState::kRunning) {
    if (stream_state_ != control::StreamState::kRunning) {
      stream_started_ns_ = now;
      rate_ns_ = now;
      rate_sent_ = r.sent;
      stream_rate_ = 0;
    } else if (now - rate_ns_ >= 1'000'000'000) {
      stream_rate_ =
          static_cast<uint64_t>(static_cast<double>(r.sent - std::min(rate_sent_, r.sent)) * 1e9 /
                                static_cast<double>(now - rate_ns_));
      rate_ns_ = now;
      rate_sent_ = r.sent;
    }
    r.rate = stream_rate_;
    if (r.scanned > 0 && r.total > r.scanned) {
      const double elapsed_ms = static_cast<double>(now - stream_started_ns_) / 1e6;
      r.eta_ms = static_cast<uint64_t>(elapsed_ms * static_cast<double>(r.total - r.scanned) /
                                       static_cast<double>(r.scanned));
    }
  }
  stream_state_ = r.state;
  return r;
}

void HashServer::send_stream_report() {
  control::StreamReport r = stream_report();
  if (control_.config_link()) control_.config_link()->send_stream_report(std::move(r));
}

void HashServer::reload_table_file() {
  if (config_.table_file.empty()) {
    spdlog::info("SIGHUP: no table file to re-read (tables come from the config server)");
    return;
  }
  auto loaded = load_table_file(config_.table_file);
  if (!loaded.table) {
    spdlog::error("SIGHUP: {}; keeping table version {}", loaded.error, table_version_);
    return;
  }
  const uint64_t version = loaded.table->version;
  if (version <= table_version_) {
    spdlog::info("SIGHUP: {} holds version {}, not newer than {}: kept", config_.table_file,
                 version, table_version_);
    return;
  }
  if (const auto why = table_mismatch(*loaded.table, config_.name, config_.shards)) {
    spdlog::error("SIGHUP: {}; keeping table version {}", *why, table_version_);
    return;
  }
  if (!loaded.table->find_server(config_.name)) {
    spdlog::warn("{} is not in table version {}: it owns no ids and answers MOVED", config_.name,
                 version);
  }
  set_router(Router::compile(std::move(*loaded.table)));
  spdlog::info("table version {} installed from {}", version, config_.table_file);
  if (control_.config_link()) control_.config_link()->ack(version);
}

void HashServer::wait_reload() {
  reload_signal_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec || stopping_) return;
    reload_table_file();
    wait_reload();
  });
}

void HashServer::sample_shards() {
  for (auto& s : shards_) {
    s->handle().snapshot([this](ShardSnapshot snap) {
      asio::post(ctx_, [this, snap] {
        snapshots_[snap.shard] = snap;
        if (snap.purge.state == PurgeState::kRunning) purge_reporting_ = true;
      });
    });
  }
  // Report stream progress while it runs (a state change is reported as it happens).
  if (stream_state_ == control::StreamState::kRunning) send_stream_report();
  // Report purge progress while one runs, and once more when it ends.
  if (purge_reporting_ && control_.config_link()) {
    control_.config_link()->send_purge_report(purge_report());
    purge_reporting_ = std::any_of(snapshots_.begin(), snapshots_.end(), [](const auto& s) {
      return s.purge.state == PurgeState::kRunning;
    });
  }
  if (stopping_) return;
  sample_timer_.expires_after(std::chrono::milliseconds(500));
  sample_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) sample_shards();
  });
}

boost::json::object HashServer::stats() const {
  uint64_t records = 0, memory = 0, upserts = 0, gets = 0, deletes = 0, moved = 0, purged = 0,
           connections = 0, bad_frames = 0, longest_turn_ns = 0, imported = 0, stream_sent = 0;
  for (const auto& s : snapshots_) {
    imported += s.counters.imported;
    stream_sent += s.stream.acked;
    longest_turn_ns = std::max(longest_turn_ns, s.turns.longest_ns);
    records += s.records;
    memory += s.memory_bytes;
    upserts += s.counters.upserts;
    gets += s.counters.gets;
    deletes += s.counters.deletes;
    moved += s.counters.moved;
    purged += s.counters.purged;
    bad_frames += s.counters.bad_frames;
    connections += s.connections;
  }
  return boost::json::object{{"records", records},
                             {"memory_bytes", memory},
                             {"upserts", upserts},
                             {"gets", gets},
                             {"deletes", deletes},
                             {"moved", moved},
                             {"purged", purged},
                             {"connections", connections},
                             {"bad_frames", bad_frames},
                             {"shards", snapshots_.size()},
                             {"imported", imported},
                             {"stream_sent", stream_sent},
                             {"longest_turn_us", longest_turn_ns / 1000},
                             {"filling", filling_ ? 1 : 0}};
}

control::PurgeReport HashServer::purge_report() const {
  control::PurgeReport r;
  for (const auto& s : snapshots_) {
    r.shards.push_back(control::PurgeShard{s.shard, s.purge.state, s.purge.kind, s.purge.scanned,
                                           s.purge.total, s.purge.deleted, s.purge_id});
  }
  return r;
}

void HashServer::start_config_link(const std::string& advertised_address) {
  control::Register self;
  self.role = Role::kHash;
  self.name = config_.name;
  self.address = advertised_address;
  self.shards = config_.shards;
  self.version = table_version_;
  self.fresh = true;  // memory only: this process started empty
  // Until the config server says whether the others refill it, a LOOKUP of a user it does not
  // hold may be of one it held before it restarted (Shard::set_filling: only in a table with
  // replicas, or before it has any table).
  if (control_.has_config_server()) {
    filling_ = true;
    for (auto& s : shards_) s->handle().set_filling(true);
  }
  self.filling = filling_;
  ConfigLink::Callbacks cb;
  cb.on_table = [this](control::TablePush push) {
    if (push.table.version <= table_version_) {
      control_.config_link()->ack(table_version_);
      return;
    }
    if (const auto why = table_mismatch(push.table, config_.name, config_.shards)) {
      spdlog::error("{}: ignoring it", *why);
      return;
    }
    const uint64_t version = push.table.version;
    set_router(Router::compile(std::move(push.table)), std::chrono::milliseconds(push.grace_ms));
    spdlog::info("table version {} installed", version);
    control_.config_link()->ack(version);
  };
  cb.on_purge = [this](control::PurgeCommand cmd) {
    for (auto& s : shards_) s->handle().command_purge(cmd.action, cmd.age_seconds, cmd.id);
    purge_reporting_ = true;
  };
  cb.on_stream = [this](control::StreamCommand cmd) {
    spdlog::info("stream {} for table version {} asked for by the config server",
                 control::stream_action_name(cmd.action), cmd.version);
    for (auto& s : shards_) s->handle().command_stream(cmd.action, cmd.version, cmd.lost);
  };
  cb.on_fill = [this](control::FillCommand cmd) {
    if (cmd.filling != filling_) {
      spdlog::info(cmd.filling ? "being refilled by the other replicas: a LOOKUP is answered "
                                 "NOT_READY, so another copy is read"
                               : "not being refilled: serving every LOOKUP");
    }
    filling_ = cmd.filling;
    control_.config_link()->set_filling(cmd.filling);
    for (auto& s : shards_) s->handle().set_filling(cmd.filling);
  };
  cb.stats = [this] { return stats(); };
  control_.start_config_link(std::move(self), std::move(cb));
}

void HashServer::run() {
  tcp::resolver resolver(ctx_);
  const auto endpoint =
      *resolver.resolve(config_.listen_host, std::to_string(config_.listen_port)).begin();
  acceptor_.open(endpoint.endpoint().protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(endpoint.endpoint());
  acceptor_.listen();
  const auto bound = acceptor_.local_endpoint();

  for (auto& s : shards_) s->start();
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    stop();
  });
  wait_reload();
  asio::co_spawn(ctx_, accept_loop(), asio::detached);

  const std::string listen_address = format_host_port(bound.address().to_string(), bound.port());
  // What login servers are told to dial: --advertise (its port 0: the bound port), else the bound
  // address.
  const std::string advertised =
      config_.control.advertised(bound.address().to_string(), bound.port());
  spdlog::info("hash server {} with {} shards on {}{}", config_.name, config_.shards,
               listen_address, advertised == listen_address ? "" : ", advertised as " + advertised);
  sample_shards();
  start_config_link(advertised);
  announce_listening(listen_address);
  control_.start_metrics([this](MetricsText& m) { render_metrics(m); });
  const Lifecycle lifecycle(ctx_);  // READY=1 now: every listener is bound
  ctx_.run();
  for (auto& s : shards_) s->join();
  spdlog::info("stopped");
}

void HashServer::stop() {
  stopping_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  signals_.cancel(ec);
  reload_signal_.cancel(ec);
  sample_timer_.cancel();
  control_.stop();
  sender_->stop();
  for (auto& s : shards_) s->handle().stop();
}

asio::awaitable<void> HashServer::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
    if (ec) {
      spdlog::warn("accept: {}", ec.message());
      continue;
    }
    boost::system::error_code peer_ec;
    const auto peer = socket.remote_endpoint(peer_ec);
    if (peer_ec) continue;  // already gone
    // Two quotas: connections held (bound or not), and handshakes under way, the only state a peer
    // without the key can hold (for at most kHandshakeTimeout): a few hosts that cannot prove the
    // key cannot take the places of the login servers that can.
    ConnectionQuota::Refusal why{};
    std::optional<ConnectionQuota::Ticket> handshaking;
    auto ticket = quota_.admit(peer.address(), why);
    if (ticket) handshaking = handshakes_.admit(peer.address(), why);
    if (!ticket || !handshaking) {
      const ConnectionQuota& full = ticket ? handshakes_ : quota_;
      ++(why == ConnectionQuota::Refusal::kTotal ? refused_total_cap_ : refused_source_cap_);
      // One line per second at most: a flood of connections must not become a flood of logs.
      if (const int64_t now = monotonic_ns() / 1'000'000'000; now != last_cap_log_s_) {
        last_cap_log_s_ = now;
        spdlog::warn(
            "hash port: refused a connection from {}: {} (cap {} {}per address, {} in all)",
            peer.address().to_string(), to_string(why), full.limits().per_source,
            ticket ? "handshakes " : "", full.limits().total);
      }
      continue;  // the socket closes here
    }
    asio::co_spawn(ctx_, handshake(std::move(socket), std::move(*ticket), std::move(*handshaking)),
                   asio::detached);
  }
}

namespace {

// One handshake frame, copied out of the read buffer (so the buffer can take the next one).
struct HandshakeFrame {
  Header header;
  std::vector<uint8_t> body;
};

// Reads the next frame of a handshake into `out`; an empty string on success, else why not.
asio::awaitable<std::string> read_handshake_frame(asio::ip::tcp::socket& socket, StreamBuffer& in,
                                                  asio::steady_timer& deadline,
                                                  HandshakeFrame& out) {
  for (;;) {
    bool got = false;
    const DecodeStatus st = drain_frames(in, [&](const Header& header, std::span<const uint8_t> b) {
      out.header = header;
      out.body.assign(b.begin(), b.end());
      got = true;
      return false;
    });
    if (got) co_return std::string();
    if (st != DecodeStatus::kNeedMore) co_return to_string(st);
    const auto space = in.space();
    if (space.empty()) co_return "handshake frame larger than a handshake needs";
    auto result = co_await (socket.async_read_some(asio::buffer(space.data(), space.size()),
                                                   asio::as_tuple(asio::use_awaitable)) ||
                            deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (result.index() == 1) co_return "timed out";
    auto [ec, n] = std::get<0>(result);
    if (ec) co_return ec.message();
    in.commit(n);
  }
}

}  // namespace

asio::awaitable<void> HashServer::handshake(tcp::socket socket, ConnectionQuota::Ticket ticket,
                                            ConnectionQuota::Ticket handshaking) {
  std::string peer = "?";
  boost::system::error_code peer_ec;
  if (const auto ep = socket.remote_endpoint(peer_ec); !peer_ec) {
    peer = format_host_port(ep.address().to_string(), ep.port());
  }
  // A HELLO and an AUTH are a few hundred bytes; whatever a client pipelines behind them goes
  // to its shard with the connection.
  StreamBuffer in(kHandshakeBuffer);
  asio::steady_timer deadline(ctx_, kHandshakeTimeout);
  auto send = [&](const Response& r) -> asio::awaitable<bool> {
    std::vector<uint8_t> out;
    append_response(r, out);
    auto [ec, n] =
        co_await asio::async_write(socket, asio::buffer(out), asio::as_tuple(asio::use_awaitable));
    co_return !ec;
  };

  HandshakeFrame hello;
  if (const std::string err = co_await read_handshake_frame(socket, in, deadline, hello);
      !err.empty()) {
    spdlog::warn("handshake from {}: {}", peer, err);
    co_return;
  }
  Request q;
  Response r{.type = FrameType::kHello,
             .correlation = hello.header.correlation,
             .table_version = table_version_};
  const bool ok = hello.header.type == FrameType::kHello &&
                  decode_request(hello.header, hello.body, q) == DecodeStatus::kOk;
  const bool tls = config_.control.tls.enabled();
  std::string refusal;
  bool tls_refusal = false;  // refused because one side wants TLS and the other does not
  if (!ok) {
    r.status = FrameStatus::kBadRequest;
    refusal = "not a valid HELLO";
  } else if (q.protocol_version != kProtocolVersion) {
    r.status = FrameStatus::kUnsupported;
    refusal = "protocol version " + std::to_string(q.protocol_version);
  } else if (q.shard >= config_.shards) {
    r.status = FrameStatus::kWrongShard;
    refusal = "shard " + std::to_string(q.shard) + " of " + std::to_string(config_.shards);
  } else if (config_.control.cluster_key.enabled() && !(q.flags & kFlagAuth)) {
    r.status = FrameStatus::kUnauthorized;
    refusal = "no cluster-key proof offered (is its --cluster-key-file set?)";
  } else if (tls && !(q.flags & kFlagTls)) {
    // Fail closed both ways: a peer never falls back to plain TCP where TLS is configured.
    r.status = FrameStatus::kUnauthorized;
    tls_refusal = true;
    refusal =
        "no TLS asked for, and this server runs TLS on its links (--tls-cert, --tls-key, "
        "--tls-ca on the peer?)";
  } else if (!tls && (q.flags & kFlagTls)) {
    r.status = FrameStatus::kUnsupported;
    tls_refusal = true;
    refusal = "TLS asked for, and this server has no --tls-cert, --tls-key, --tls-ca";
  }
  link_auth::Transcript transcript{.link = "hash",
                                   .client_role = to_string(q.role),
                                   .client_name = q.name,
                                   .server_name = config_.name};
  if (r.status == FrameStatus::kOk) {
    r.protocol_version = kProtocolVersion;
    r.shard_count = static_cast<uint16_t>(config_.shards);
    r.name = config_.name;
    if (tls) r.flags = kFlagTls;
    r.flags |= kFlagTimed;  // it understands timed writes and imports
  }
  std::array<uint8_t, kHelloAuthResponseSize> answer{};
  if (r.status == FrameStatus::kOk && config_.control.cluster_key.enabled()) {
    const auto nonce = link_auth::make_nonce();
    std::copy(q.auth.begin(), q.auth.end(), transcript.client_nonce.begin());
    if (nonce) transcript.server_nonce = *nonce;
    const auto proof = nonce ? link_auth::prove(config_.control.cluster_key.key,
                                                link_auth::Side::kServer, transcript)
                             : std::nullopt;
    if (!proof) {
      spdlog::error("handshake from {}: OpenSSL could not make a nonce or a proof; refused", peer);
      co_return;
    }
    std::copy(nonce->begin(), nonce->end(), answer.begin());
    std::copy(proof->begin(), proof->end(), answer.begin() + link_auth::kNonceSize);
    r.flags |= kFlagAuth;
    r.auth = std::string_view(reinterpret_cast<const char*>(answer.data()), answer.size());
  }
  if (!refusal.empty()) {
    if (tls_refusal) {
      ++tls_refused_;
    } else if (r.status == FrameStatus::kUnauthorized) {
      ++auth_refused_;
    }
    spdlog::warn("hash port: refused {} ({}): {}", peer,
                 q.name.empty() ? std::string("unnamed") : std::string(q.name), refusal);
    co_await send(r);
    co_return;
  }
  if (!co_await send(r)) co_return;

  if (config_.control.cluster_key.enabled()) {
    HandshakeFrame auth;
    if (const std::string err = co_await read_handshake_frame(socket, in, deadline, auth);
        !err.empty()) {
      spdlog::warn("handshake from {} ({}): no AUTH: {}", peer, q.name, err);
      co_return;
    }
    Request a;
    const bool proved =
        auth.header.type == FrameType::kAuth &&
        decode_request(auth.header, auth.body, a) == DecodeStatus::kOk &&
        link_auth::verify(
            config_.control.cluster_key.key, link_auth::Side::kClient, transcript,
            std::span(reinterpret_cast<const uint8_t*>(a.auth.data()), a.auth.size()));
    const Response ar{.type = FrameType::kAuth,
                      .status = proved ? FrameStatus::kOk : FrameStatus::kUnauthorized,
                      .correlation = auth.header.correlation,
                      .table_version = table_version_};
    if (!proved) {
      ++auth_refused_;
      spdlog::warn(
          "hash port: refused {} ({}): its proof of the cluster key is wrong (another "
          "key?)",
          peer, q.name);
      co_await send(ar);
      co_return;
    }
    if (!co_await send(ar)) co_return;
  }
  spdlog::debug("{} ({}) bound to shard {}", q.name, peer, q.shard);
  // A client may pipeline requests right behind its handshake: the shard takes those bytes too.
  // Not with TLS: its client hello comes only after our answer, so bytes already here are plain
  // text where only TLS may be.
  if (tls && !in.empty()) {
    ++tls_refused_;
    spdlog::warn("hash port: refused {} ({}): bytes pipelined behind a TLS handshake", peer,
                 q.name);
    co_return;
  }
  std::vector<uint8_t> leftover(in.data().begin(), in.data().end());
  { const ConnectionQuota::Ticket done = std::move(handshaking); }  // bound: no longer handshaking
  const auto protocol = socket.local_endpoint().protocol();
  shards_[q.shard]->handle().adopt(protocol, socket.release(), std::move(leftover),
                                   std::move(ticket));
}

}  // namespace imhash
