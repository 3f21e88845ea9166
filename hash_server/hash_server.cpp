#include "hash_server/hash_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/endpoint.h"
#include "common/lifecycle.h"
#include "common/options.h"
#include "common/routing_table.h"

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace imhash {

using namespace frame;

namespace {
// A peer that connects and says nothing is dropped after this long.
constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
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
      signals_(ctx_, SIGINT, SIGTERM),
      reload_signal_(ctx_, SIGHUP),
      sample_timer_(ctx_) {
  for (uint32_t i = 0; i < config_.shards; ++i) {
    shards_.push_back(std::make_unique<Shard>(i, config_.shards, config_.name));
    ShardSnapshot empty;
    empty.shard = i;
    snapshots_.push_back(empty);
  }
  set_router(config_.router);
}

void HashServer::set_router(std::shared_ptr<const Router> router) {
  table_version_ = router ? router->version() : 0;
  if (router && config_.saved) config_.saved->save(router->table());
  for (auto& s : shards_) s->set_router(router);
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
    s->snapshot([this](ShardSnapshot snap) {
      asio::post(ctx_, [this, snap] {
        snapshots_[snap.shard] = snap;
        if (snap.purge.state == PurgeState::kRunning) purge_reporting_ = true;
      });
    });
  }
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
           connections = 0, bad_frames = 0, longest_turn_ns = 0;
  for (const auto& s : snapshots_) {
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
                             {"longest_turn_us", longest_turn_ns / 1000}};
}

control::PurgeReport HashServer::purge_report() const {
  control::PurgeReport r;
  for (const auto& s : snapshots_) {
    r.shards.push_back(control::PurgeShard{s.shard, s.purge.state, s.purge.kind, s.purge.scanned,
                                           s.purge.total, s.purge.deleted});
  }
  return r;
}

void HashServer::render_metrics(MetricsText& m) const {
  m.gauge("imhash_table_version", "routing table version this server runs",
          static_cast<double>(table_version_));
  for (const auto& s : snapshots_) {
    const MetricsText::Labels shard{{"shard", std::to_string(s.shard)}};
    m.gauge("imhash_hash_records", "records held, per shard", static_cast<double>(s.records),
            shard);
    m.gauge("imhash_hash_memory_bytes", "bytes of the shard's table and address pool",
            static_cast<double>(s.memory_bytes), shard);
    m.gauge("imhash_hash_connections", "login server links bound to the shard",
            static_cast<double>(s.connections), shard);
    auto op = [&](const char* name, uint64_t v) {
      m.counter("imhash_hash_requests_total", "requests answered, by operation",
                static_cast<double>(v), {{"shard", std::to_string(s.shard)}, {"op", name}});
    };
    op("upsert", s.counters.upserts);
    op("get", s.counters.gets);
    op("delete", s.counters.deletes);
    m.counter("imhash_hash_moved_total", "requests answered MOVED (sender's table was older)",
              static_cast<double>(s.counters.moved), shard);
    m.counter("imhash_hash_bad_frames_total", "connections closed for malformed frames",
              static_cast<double>(s.counters.bad_frames), shard);
    m.counter("imhash_hash_purged_total", "records deleted by purges",
              static_cast<double>(s.counters.purged), shard);
    m.gauge("imhash_hash_longest_turn_seconds",
            "longest event-loop turn of the shard since start-up (a batch of requests or a purge "
            "step, with any store growth inside it)",
            static_cast<double>(s.turns.longest_ns) * 1e-9, shard);
    std::vector<uint64_t> cumulative;
    uint64_t running = 0;
    for (uint64_t n : s.turns.buckets) cumulative.push_back(running += n);
    m.histogram("imhash_hash_turn_seconds", "event-loop turns of the shard, by duration",
                std::vector<double>(TurnStats::kBounds.begin(), TurnStats::kBounds.end()),
                cumulative, s.turns.sum_s, shard);
    m.gauge("imhash_purge_running", "1 while a purge runs on the shard",
            s.purge.state == PurgeState::kRunning ? 1 : 0, shard);
    m.gauge("imhash_purge_scanned_slots", "slots the current or last purge examined",
            static_cast<double>(s.purge.scanned), shard);
    m.gauge("imhash_purge_total_slots", "slots the current or last purge has to examine",
            static_cast<double>(s.purge.total), shard);
    m.gauge("imhash_purge_deleted", "records the current or last purge deleted",
            static_cast<double>(s.purge.deleted), shard);
  }
}

void HashServer::start_config_link(const std::string& advertised_address) {
  control::Register self;
  self.role = control::Role::kHash;
  self.name = config_.name;
  self.address = advertised_address;
  self.shards = config_.shards;
  self.version = table_version_;
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
    set_router(Router::compile(std::move(push.table)));
    spdlog::info("table version {} installed", version);
    control_.config_link()->ack(version);
  };
  cb.on_purge = [this](control::PurgeCommand cmd) {
    for (auto& s : shards_) s->command_purge(cmd.action, cmd.age_seconds);
    purge_reporting_ = true;
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
  for (auto& s : shards_) s->stop();
}

asio::awaitable<void> HashServer::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
    if (ec) {
      spdlog::warn("accept: {}", ec.message());
      continue;
    }
    asio::co_spawn(ctx_, handshake(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> HashServer::handshake(tcp::socket socket) {
  StreamBuffer in(4 + kMaxFrameLength + 64 * 1024);
  Header h;
  std::vector<uint8_t> hello;  // the HELLO frame's body, copied out of `in`
  asio::steady_timer deadline(ctx_, kHandshakeTimeout);
  for (;;) {
    bool got = false;
    const DecodeStatus st = drain_frames(in, [&](const Header& header, std::span<const uint8_t> b) {
      h = header;
      hello.assign(b.begin(), b.end());
      got = true;
      return false;
    });
    if (got) break;
    if (st != DecodeStatus::kNeedMore) {
      spdlog::warn("handshake: {}", to_string(st));
      co_return;
    }
    const auto space = in.space();
    auto result = co_await (socket.async_read_some(asio::buffer(space.data(), space.size()),
                                                   asio::as_tuple(asio::use_awaitable)) ||
                            deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (result.index() == 1) {
      spdlog::warn("handshake: timed out");
      co_return;
    }
    auto [ec, n] = std::get<0>(result);
    if (ec) co_return;
    in.commit(n);
  }
  const std::span<const uint8_t> body(hello);

  Request q;
  Response r{
      .type = FrameType::kHello, .correlation = h.correlation, .table_version = table_version_};
  const bool ok = h.type == FrameType::kHello && decode_request(h, body, q) == DecodeStatus::kOk;
  if (!ok) {
    r.status = FrameStatus::kBadRequest;
  } else if (q.protocol_version != kProtocolVersion) {
    r.status = FrameStatus::kUnsupported;
  } else if (q.shard >= config_.shards) {
    r.status = FrameStatus::kWrongShard;
  } else {
    r.protocol_version = kProtocolVersion;
    r.shard_count = static_cast<uint16_t>(config_.shards);
    r.name = config_.name;
  }
  std::vector<uint8_t> out;
  append_response(r, out);
  auto [ec, n] =
      co_await asio::async_write(socket, asio::buffer(out), asio::as_tuple(asio::use_awaitable));
  if (ec || r.status != FrameStatus::kOk) {
    if (r.status != FrameStatus::kOk) {
      spdlog::warn("handshake refused: {}", to_string(r.status));
    }
    co_return;
  }
  spdlog::debug("{} bound to shard {}", q.name, q.shard);
  // A client may pipeline requests right behind its HELLO: the shard takes those bytes too.
  std::vector<uint8_t> leftover(in.data().begin(), in.data().end());
  const auto protocol = socket.local_endpoint().protocol();
  shards_[q.shard]->adopt(protocol, socket.release(), std::move(leftover));
}

}  // namespace imhash
