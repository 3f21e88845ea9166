#include "login_server/login_server.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/json/serialize.hpp>
#include <cctype>
#include <cstring>
#include <functional>
#include <future>

#include "common/codec/endpoint.h"
#include "common/routing/table_text.h"
#include "common/runtime/lifecycle.h"
#include "common/runtime/options.h"

namespace asio = boost::asio;
using asio::ip::udp;

namespace imhash {

namespace {

// Binds one UDP socket of the SO_REUSEPORT group; the kernel spreads clients over the group.
udp::socket bind_udp(asio::io_context& ctx, const udp::endpoint& at) {
  udp::socket s(ctx);
  s.open(at.protocol());
  s.set_option(asio::socket_base::reuse_address(true));
  const int one = 1;
  if (setsockopt(s.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    throw std::runtime_error("SO_REUSEPORT is not available");
  }
  if (at.protocol() == udp::v6()) s.set_option(asio::ip::v6_only(false));
  // Room for bursts: a full receive buffer drops datagrams that clients must then retry.
  s.set_option(asio::socket_base::receive_buffer_size(8 << 20));
  s.set_option(asio::socket_base::send_buffer_size(8 << 20));
  s.bind(at);
  s.non_blocking(true);
  return s;
}

// Runs the main io_context (bounded) until `done()`, so the config link can bring the first table.
void run_until(asio::io_context& ctx, const std::function<bool()>& done,
               std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    ctx.run_for(std::chrono::milliseconds(10));
    if (ctx.stopped()) ctx.restart();
  }
}

}  // namespace

// login-HOST-PORT: unique per host and UDP port, so two login servers never register under one
// name (the config server would refuse the second while the first is up). Characters outside the
// name rule become '-'.
std::string default_login_name(uint16_t port) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  std::string name = "login-";
  for (const char* c = host; *c != '\0' && *c != '.'; ++c) {
    const bool ok = std::isalnum(static_cast<unsigned char>(*c)) || *c == '_' || *c == '-';
    name += ok ? *c : '-';
  }
  name += "-" + std::to_string(port);
  if (name.size() > kMaxServerNameLength) name.erase(0, name.size() - kMaxServerNameLength);
  return name;
}

LoginServer::LoginServer(LoginServerConfig config)
    : config_(std::move(config)), tables_(config_.grace) {
  if (!config_.table_file.empty()) tables_.load_file(config_.table_file);
  if (!config_.name.empty()) open_saved_table();  // else once run() has named the server
}

void LoginServer::open_saved_table() {
  if (config_.control.state_dir.empty()) return;
  // The table saved before a restart, when it is newer than the file's (or there is no file): it
  // is served until the config server brings a newer one, also when no config server answers. No
  // fallback reads at the file's older table (grace 0).
  saved_.emplace(config_.control.state_dir, "login", config_.name);
  if (auto saved = saved_->load();
      saved && tables_.install(*saved, std::nullopt, std::chrono::milliseconds(0))) {
    spdlog::info("starting from the saved table version {} ({})", saved->version, saved_->path());
  }
  if (auto routing = tables_.latest()) {
    saved_->save(routing->current->table());
    saved_version_ = routing->version();
  }
}

void LoginServer::committed(uint32_t worker, uint64_t version) {
  committed_[worker] = std::max(committed_[worker], version);
  const uint64_t all = *std::min_element(committed_.begin(), committed_.end());
  if (control_.config_link() && all > 0) control_.config_link()->ack(all);
}

void LoginServer::sample_workers() {
  for (uint32_t i = 0; i < workers_.size(); ++i) {
    workers_[i]->snapshot([this, i](Worker::Sample s) {
      asio::post(ctx_, [this, i, s = std::move(s)]() mutable {
        counters_[i] = s.counters;
        held_writes_[i] = std::move(s.held_writes);
      });
    });
  }
  if (stopping_) return;
  sample_timer_.expires_after(std::chrono::milliseconds(500));
  sample_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) sample_workers();
  });
}

LoginCounters LoginServer::sum() const {
  LoginCounters sum;
  for (const auto& c : counters_) sum += c;
  return sum;
}

std::map<std::string, uint64_t> LoginServer::held_writes() const {
  std::map<std::string, uint64_t> sum;
  for (const auto& worker : held_writes_) {
    for (const auto& [server, n] : worker) sum[server] += n;
  }
  return sum;
}

boost::json::object LoginServer::stats() const {
  const LoginCounters s = sum();
  boost::json::object o;
#define IMHASH_LOGIN_STAT(field, metric, help) o[#field] = s.field;
  IMHASH_LOGIN_COUNTERS(IMHASH_LOGIN_STAT)
#undef IMHASH_LOGIN_STAT
  for (size_t i = 0; i < LoginCounters::kStatuses; ++i) {
    o[std::string("replies_") + client::to_string(static_cast<client::Status>(i))] =
        s.replies_by_status[i];
  }
  for (size_t i = 0; i < static_cast<size_t>(DropReason::kCount); ++i) {
    o[std::string("dropped_") + to_string(static_cast<DropReason>(i))] = s.dropped[i];
  }
  return o;
}

void LoginServer::render_metrics(MetricsText& m) const {
  namespace lm = login_metrics;
  const auto routing = tables_.latest();
  m.add(node_metrics::kTableVersion, routing ? static_cast<double>(routing->version()) : 0);
  const LoginCounters s = sum();
#define IMHASH_LOGIN_METRIC(field, metric, help) \
  m.add(MetricDef{metric, MetricDef::Type::kCounter, help}, static_cast<double>(s.field));
  IMHASH_LOGIN_COUNTERS(IMHASH_LOGIN_METRIC)
#undef IMHASH_LOGIN_METRIC
  for (size_t i = 0; i < LoginCounters::kStatuses; ++i) {
    m.add(lm::kRepliesTotal, static_cast<double>(s.replies_by_status[i]),
          {{"status", client::to_string(static_cast<client::Status>(i))}});
  }
  for (size_t i = 0; i < static_cast<size_t>(DropReason::kCount); ++i) {
    m.add(lm::kDroppedTotal, static_cast<double>(s.dropped[i]),
          {{"reason", to_string(static_cast<DropReason>(i))}});
  }
  m.add(lm::kLinks, s.links_up, {{"state", "up"}});
  m.add(lm::kLinks, s.links_down, {{"state", "down"}});
  // Replicas: the replication lag as this login server sees it (a server it holds nothing for is
  // not listed).
  for (const auto& [server, n] : held_writes()) {
    m.add(lm::kHeldWrites, static_cast<double>(n), {{"server", server}});
  }
  m.add(lm::kLinkRefusedTotal, static_cast<double>(config_.worker.link.refused_handshakes->load()));
  m.histogram(lm::kRequestSeconds, s.latency);
}

void LoginServer::start_config_link(const std::string& udp_address) {
  control::Register self;
  self.role = Role::kLogin;
  self.name = config_.name;
  self.address = udp_address;
  self.version = tables_.latest() ? tables_.latest()->version() : 0;
  ConfigLink::Callbacks cb;
  cb.on_table = [this](control::TablePush push) {
    // Workers ack through committed() once they serve it; an old or equal version is acked now.
    if (!tables_.install(push.table, push.previous, std::chrono::milliseconds(push.grace_ms))) {
      const auto latest = tables_.latest();
      if (latest) control_.config_link()->ack(latest->version());
    }
  };
  cb.stats = [this] { return stats(); };
  cb.held_writes = [this] { return held_writes(); };
  // A worker met a version we do not have: ask for it now rather than at the next heartbeat,
  // saying which (a config leader that has just taken over may hold it back from us).
  tables_.set_on_stale([this](uint64_t version) {
    if (!control_.config_link()) return;
    control_.config_link()->saw_version(version);
    control_.config_link()->heartbeat_now();
  });
  control_.start_config_link(std::move(self), std::move(cb));
}

void LoginServer::run() {
  udp::resolver resolver(ctx_);
  udp::endpoint at =
      resolver.resolve(config_.udp_host, std::to_string(config_.udp_port)).begin()->endpoint();
  std::vector<udp::socket> sockets;
  sockets.push_back(bind_udp(ctx_, at));
  at.port(sockets.front().local_endpoint().port());  // port 0: the others join the chosen port
  for (uint32_t i = 1; i < config_.threads; ++i) sockets.push_back(bind_udp(ctx_, at));
  const std::string address = format_host_port(at.address().to_string(), at.port());
  if (config_.name.empty()) {
    config_.name = default_login_name(at.port());
    config_.worker.link.client_name = config_.name;
    open_saved_table();
  }

  committed_.assign(config_.threads, 0);
  counters_.assign(config_.threads, LoginCounters{});
  held_writes_.assign(config_.threads, {});
  for (uint32_t i = 0; i < config_.threads; ++i) {
    workers_.push_back(std::make_unique<Worker>(i, config_.worker));
    workers_.back()->on_commit(
        [this, i](uint64_t v) { asio::post(ctx_, [this, i, v] { committed(i, v); }); });
    workers_.back()->on_stale(
        [this](uint64_t v) { asio::post(ctx_, [this, v] { tables_.refresh(v); }); });
  }
  // The one listener, set before any table can arrive: every table goes to every worker.
  tables_.set_listener([this](std::shared_ptr<const RoutingState> r) {
    have_table_ = true;
    for (auto& w : workers_) w->set_routing(r);
    // Not again for the same table with longer grace periods (TableSource::install).
    if (saved_ && r->version() != saved_version_) {
      saved_->save(r->current->table());
      saved_version_ = r->version();
    }
  });
  for (uint32_t i = 0; i < config_.threads; ++i) {
    workers_[i]->start(sockets[i].release(), at.protocol());
  }
  if (auto routing = tables_.latest()) {
    have_table_ = true;
    for (auto& w : workers_) w->set_routing(routing);
  }
  sample_workers();
  if (control_.has_config_server()) {
    // What the config server shows: --advertise (its port 0: the bound port), else the bound
    // address.
    start_config_link(config_.control.advertised(at.address().to_string(), at.port()));
    // Serve the config server's latest table from the start when it answers: wait until it has
    // welcomed us and we run its version (bounded: the data path never depends on the config
    // server; a saved or file table is served meanwhile and after).
    run_until(
        ctx_,
        [this] {
          const ConfigLink* link = control_.config_link();
          const auto routing = tables_.latest();
          return link->connected() && (routing ? routing->version() : 0) >= link->config_version();
        },
        std::chrono::seconds(3));
    if (!have_table_) {
      spdlog::warn("no table yet: answering UNAVAILABLE until one arrives");
    } else if (!control_.config_link()->connected()) {
      spdlog::warn("no answer from the config server yet: serving table version {} until it does",
                   tables_.latest()->version());
    }
  }

  // Announce only once every link has been tried, so a client's first request finds them up.
  if (have_table_) {
    std::vector<std::future<void>> tried;
    for (auto& w : workers_) {
      auto p = std::make_shared<std::promise<void>>();
      tried.push_back(p->get_future());
      w->when_links_tried([p] { p->set_value(); });
    }
    for (auto& f : tried) {
      while (f.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
        ctx_.poll();  // keep the config link (and the commits it waits for) moving
        if (ctx_.stopped()) ctx_.restart();
      }
    }
  }

  asio::signal_set stop_signals(ctx_, SIGINT, SIGTERM);
  asio::signal_set reload_signal(ctx_, SIGHUP);
  stop_signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    stopping_ = true;
    reload_signal.cancel();
    sample_timer_.cancel();
    control_.stop();
    for (auto& w : workers_) w->stop();
  });
  std::function<void()> wait_reload = [&] {
    reload_signal.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (config_.table_file.empty()) {
        spdlog::info("SIGHUP: no table file to re-read (tables come from the config server)");
      } else {
        spdlog::info("SIGHUP: re-reading {}", config_.table_file);
        tables_.refresh();
      }
      wait_reload();
    });
  };
  wait_reload();

  const auto routing = tables_.latest();
  spdlog::info(
      "login server {}: {} threads, table version {}{}", config_.name, config_.threads,
      routing ? routing->version() : 0,
      control_.has_config_server() ? ", config server " + config_.control.config_address : "");
  announce_listening(address);
  control_.start_metrics([this](MetricsText& m) { render_metrics(m); });
  const Lifecycle lifecycle(ctx_, [this] { return tables_.latest() != nullptr; });  // READY=1
  ctx_.run();
  for (auto& w : workers_) w->join();
  // Its figures, for whoever reads the log after the process is gone (the last half-second's
  // sample: /metrics has no scraper left to read the rest).
  spdlog::info("stopped; its counters at the last sample: {}", boost::json::serialize(stats()));
}

}  // namespace imhash
