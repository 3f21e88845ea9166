// config_server: owns the routing table and its history, pushes every change to all nodes, watches
// heartbeats, and serves the admin API that imctl uses.
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>

#include "admin_api/admin_guard.h"
#include "common/codec/endpoint.h"
#include "common/routing/table_text.h"
#include "common/runtime/cluster_key.h"
#include "common/runtime/lifecycle.h"
#include "common/runtime/metrics.h"
#include "common/runtime/options.h"
#include "common/runtime/tls_options.h"
#include "config_server/admin_http.h"
#include "config_server/config_service.h"
#include "config_server/control_plane.h"
#include "config_server/etcd_client.h"
#include "config_server/etcd_state_store.h"
#include "config_server/file_state_store.h"
#include "config_server/leadership.h"
#include "config_server/node_listener.h"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace imhash;

int config_server_main(int argc, char** argv) {
  namespace po = boost::program_options;
  Options opts("config_server",
               "owns the routing table, pushes changes to every node, serves the admin API");
  opts.add()("listen", po::value<std::string>()->default_value("127.0.0.1:7000"),
             "HOST:PORT for hash and login servers to dial (port 0: pick a free port)")(
      "admin", po::value<std::string>()->default_value("127.0.0.1:7100"),
      "HOST:PORT of the HTTP/JSON admin API used by imctl (loopback unless told otherwise)")(
      "admin-token-file", po::value<std::string>(),
      "FILE holding the admin token (one word, at least 16 characters, chmod 600): requests that "
      "change state then need 'Authorization: Bearer TOKEN' (imctl --token-file); reads do not")(
      "admin-allow-host", po::value<std::vector<std::string>>()->multitoken(),
      "HOST:PORT values of the Host header the admin API also answers to (a DNS name or another "
      "address of this machine); others get 403, against DNS rebinding")(
      "state-dir", po::value<std::string>(),
      "directory for the durable state (tables and history): one config server on one machine")(
      "store", po::value<std::string>()->default_value("file"),
      "file: the state in --state-dir; etcd://HOST:PORT[,HOST:PORT...][/PREFIX]: in etcd under "
      "PREFIX (default /imhash), shared by several config servers of which one leads and the "
      "others stand by (docs/operations.md, \"Several config servers on etcd\"); --state-dir "
      "is then not used")(
      "name", po::value<std::string>(),
      "this config server's name among several (default: its advertised admin address)")(
      "advertise", po::value<std::string>(),
      "HOST the other machines reach this config server at, for its node and admin addresses in "
      "the store (default: the --listen and --admin hosts; needed when they are wildcards)")(
      "lease-ttl-s", po::value<uint32_t>()->default_value(3),
      "with --store etcd: the leader's lease in seconds; a standby leads within it (plus a "
      "quarter) after the leader is lost")(
      "store-timeout-ms", po::value<uint32_t>()->default_value(1000),
      "with --store etcd: the longest one request to one etcd member may take")(
      "heartbeat-ms", po::value<uint32_t>()->default_value(1000),
      "heartbeat interval the nodes are told to use; three missed: DOWN")(
      "grace-ms", po::value<uint32_t>()->default_value(60000),
      "after a change, how long login servers retry missed lookups at the previous owner "
      "(two client heartbeat intervals); old copies are purged after it")(
      "failover", po::value<std::string>()->default_value("off"),
      "auto: move a DOWN hash server's ids to the others in a new version; off: only report it")(
      "auto-purge", po::value<std::string>()->default_value("on"),
      "on: purge ids old owners no longer own once every node runs the new version and the grace "
      "period passed; off: only on demand (imctl purge)")(
      "max-node-connections", po::value<uint32_t>()->default_value(1024),
      "node links (--listen) open at once, registered or not; a connection beyond it is closed at "
      "once (and counted in /metrics)")(
      "max-node-connections-per-source", po::value<uint32_t>()->default_value(64),
      "node links open at once from one IP address (all of loopback is one source); a connection "
      "beyond it is closed at once")(
      "metrics", po::value<std::string>(),
      "HOST:PORT to serve Prometheus metrics on (GET /metrics); printed as a third "
      "'listening on' line")("initial-mode", po::value<std::string>()->default_value("ring"),
                             "routing mode of the first table (modulo, range or ring)");
  ClusterKey::add_options(opts);
  TlsOptions::add_options(opts);
  if (auto code = opts.parse(argc, argv)) return *code;

  ConfigServiceSettings settings;
  settings.heartbeat = std::chrono::milliseconds(opts.get<uint32_t>("heartbeat-ms"));
  if (settings.heartbeat.count() < 10) throw UsageError("--heartbeat-ms must be at least 10");
  settings.grace = std::chrono::milliseconds(opts.get<uint32_t>("grace-ms"));
  const auto failover = opts.get<std::string>("failover");
  if (failover != "auto" && failover != "off") throw UsageError("--failover must be auto or off");
  settings.failover_auto = failover == "auto";
  const auto auto_purge = opts.get<std::string>("auto-purge");
  if (auto_purge != "on" && auto_purge != "off") throw UsageError("--auto-purge must be on or off");
  settings.auto_purge = auto_purge == "on";
  const auto mode = parse_mode(opts.get<std::string>("initial-mode"));
  if (!mode) throw UsageError("--initial-mode must be modulo, range or ring");
  settings.initial_mode = *mode;
  const auto listen = parse_host_port(opts.get<std::string>("listen"), "--listen");
  NodeListenerLimits node_limits;
  node_limits.max_connections = opts.get<uint32_t>("max-node-connections");
  node_limits.max_per_source = opts.get<uint32_t>("max-node-connections-per-source");
  if (node_limits.max_connections == 0) {
    throw UsageError("--max-node-connections must be at least 1");
  }
  if (node_limits.max_per_source == 0) {
    throw UsageError("--max-node-connections-per-source must be at least 1");
  }
  // A registered node heartbeats every interval: one silent for twice the DOWN window (and at
  // least 3 s, so a slow machine is not cut off) is gone, and its link is closed.
  node_limits.link.idle_timeout = std::max<std::chrono::milliseconds>(
      2 * settings.missed_heartbeats_down * settings.heartbeat, std::chrono::seconds(3));
  const auto admin = parse_host_port(opts.get<std::string>("admin"), "--admin");
  const ClusterKey cluster = ClusterKey::from(opts);
  cluster.check_listener(listen.host, "--listen");
  check_internal_listener(admin.host, "--admin", opts.has("admin-token-file"), cluster.insecure,
                          "--admin-token-file FILE");
  settings.cluster_key = cluster.key;
  const TlsOptions tls = TlsOptions::from(opts);

  const std::string store_url = opts.get<std::string>("store");
  const bool on_etcd = store_url != "file";
  if (!on_etcd && !opts.has("state-dir")) {
    throw UsageError(
        "--state-dir DIR is needed (or --store etcd://HOST:PORT,... for several config servers "
        "on etcd)");
  }
  const uint32_t lease_ttl_s = opts.get<uint32_t>("lease-ttl-s");
  if (lease_ttl_s < 1 || lease_ttl_s > 60) throw UsageError("--lease-ttl-s must be 1 to 60");
  const uint32_t store_timeout_ms = opts.get<uint32_t>("store-timeout-ms");
  if (store_timeout_ms < 10) throw UsageError("--store-timeout-ms must be at least 10");
  std::unique_ptr<EtcdClient> etcd;
  std::unique_ptr<StateStore> store;
  EtcdStateStore* etcd_store = nullptr;
  if (on_etcd) {
    // The packaged unit always passes --state-dir: with etcd it is not used.
    if (opts.has("state-dir")) spdlog::info("--store {}: --state-dir is not used", store_url);
    const EtcdUrl url = parse_etcd_url(store_url, "--store");
    etcd = std::make_unique<EtcdClient>(url.endpoints, std::chrono::milliseconds(store_timeout_ms));
    auto s = std::make_unique<EtcdStateStore>(*etcd, url.prefix);
    // A write whose answer was lost is sent again (the fence makes that safe) until etcd has had
    // time to elect a new leader after losing one: up to about two election timeouts, 1 s each by
    // default. Longer than a lease's renewal budget, so a change in flight then is not refused.
    s->set_retry_for(
        std::max(std::chrono::milliseconds(4000), std::chrono::milliseconds(lease_ttl_s * 750)));
    etcd_store = s.get();
    store = std::move(s);
  } else {
    store = std::make_unique<FileStateStore>(opts.get<std::string>("state-dir"));
  }
  asio::io_context ctx(1);
  ConfigService service(ctx, *store, settings);

  tcp::resolver resolver(ctx);
  const auto at = resolver.resolve(listen.host, std::to_string(listen.port)).begin()->endpoint();
  NodeListener nodes(ctx, at, service, node_limits, tls.context);
  AdminAccess access;
  if (opts.has("admin-token-file")) {
    access.token = load_admin_token_file(opts.get<std::string>("admin-token-file"));
  }
  if (opts.has("admin-allow-host")) {
    for (const std::string& h : opts.get<std::vector<std::string>>("admin-allow-host")) {
      if (const std::string problem = check_host_port(h); !problem.empty()) {
        throw UsageError("--admin-allow-host '" + h + "' " + problem);
      }
      access.allow_hosts.push_back(h);
    }
  }
  AdminHttpServer admin_server(ctx, service, admin.host, admin.port, {}, std::move(access));

  // Several config servers on one store: the election decides whether this one serves.
  const tcp::endpoint bound = nodes.local_endpoint();
  const std::string node_address = format_host_port(bound.address().to_string(), bound.port());
  const std::string admin_address = admin_server.local_address();
  std::unique_ptr<Leadership> leadership;
  if (etcd_store) {
    ConfigServerInfo self;
    self.node = advertised(node_address, opts, "--listen");
    self.admin = advertised(admin_address, opts, "--admin");
    self.name = opts.has("name") ? opts.get<std::string>("name") : self.admin;
    if (self.name.empty() || self.name.size() > 64 || self.name.find('/') != std::string::npos) {
      throw UsageError("--name must be 1 to 64 characters without '/'");
    }
    Leadership::Callbacks cb;
    cb.elected = [&] {
      etcd_store->set_fence(leadership->fence());
      if (std::string err = service.lead(); !err.empty()) {
        spdlog::error("config server {}: cannot lead: {}", leadership->self().name, err);
        asio::post(ctx, [&, err] { leadership->resign("cannot lead: " + err); });
      }
    };
    cb.deposed = [&](const std::string& why) {
      etcd_store->set_fence(0);
      service.step_down(why);
    };
    leadership = std::make_unique<Leadership>(ctx, *etcd, etcd_store->keys(), self,
                                              std::chrono::seconds(lease_ttl_s), std::move(cb));
    etcd_store->on_lost = [&](const std::string& why) {
      asio::post(ctx, [&, why] { leadership->resign(why); });
    };
    ControlPlaneHooks hooks;
    hooks.status = [&] { return control_plane_json(*leadership); };
    hooks.leader = [&] { return leadership->leader(); };
    hooks.metrics = [&](MetricsText& m) { append_control_plane_metrics(*leadership, *etcd, m); };
    service.set_control_plane(self.name, std::move(hooks), false);
  }

  std::unique_ptr<MetricsServer> metrics;
  asio::signal_set signals(ctx, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    if (leadership) leadership->stop();  // a standby takes over at once
    nodes.stop();                        // every link, registered or not
    admin_server.stop();
    service.stop();
    if (metrics) metrics->stop();
  });
  service.start();
  admin_server.start();
  nodes.start();

  spdlog::info("config server: state in {} (version {}), heartbeat {} ms, grace {} ms, failover {}",
               etcd_store ? store->describe() : static_cast<FileStateStore&>(*store).path(),
               store->version(), settings.heartbeat.count(), settings.grace.count(), failover);
  announce_listening(node_address);
  announce_listening(admin_address);
  if (opts.has("metrics")) {
    const auto m = parse_host_port(opts.get<std::string>("metrics"), "--metrics");
    metrics = std::make_unique<MetricsServer>(ctx, m.host, m.port, [&service, &nodes] {
      MetricsText links;
      nodes.append_metrics(links);
      return service.metrics_text() + links.str();
    });
    metrics->start();
    announce_listening(metrics->local_address());
  }
  if (leadership) leadership->start();  // the first round now: leads at once if nobody does
  const Lifecycle lifecycle(ctx);       // READY=1 now: every listener is bound
  ctx.run();
  spdlog::info("stopped");
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return imhash::run_main("config_server", config_server_main, argc, argv);
}
