// HashServer: the listener of a hash server and its shards. The main thread runs the acceptor,
// the handshakes and the signal handling; each accepted connection is handed, once its HELLO names
// a shard, to that shard's thread for the rest of its life.
//
// Thread rules: construct, run() and stop() on the main thread (stop() also from a signal handler
// running on the main io_context).
#pragma once

#include <boost/asio.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/links/node_control.h"
#include "common/routing/router.h"
#include "common/runtime/connection_quota.h"
#include "common/runtime/saved_table.h"
#include "hash_server/shard.h"
#include "hash_server/stream_sender.h"

namespace imhash {

struct HashServerConfig {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;
  std::string name = "hash1";
  uint32_t shards = 1;
  std::shared_ptr<const Router> router;  // may be null: no table yet, the server owns every id
  std::string table_file;                // --table: re-read on SIGHUP; empty: none
  NodeControl::Endpoints control;        // --config (none: --table only), --advertise, --metrics
  std::shared_ptr<SavedTable> saved;  // --state-dir: every table installed is kept there; or null
  ConnectionQuota::Limits connection_limits;  // --max-connections, --max-connections-per-source
  std::chrono::seconds idle_timeout{60};      // --idle-timeout: a bound link silent this long
                                              // is closed (login servers ping idle links)
  uint64_t stream_rate = 100000;  // --stream-rate: records per second streamed out (0: no limit)
  bool remember_deletes = true;   // false only as a defect put back (common/runtime/defects.h)
};

// Why `table` cannot run on the server `name` with `shards` shards (login servers would send ids
// to the wrong shard), or nothing if it can.
std::optional<std::string> table_mismatch(const Table& table, const std::string& name,
                                          uint32_t shards);

class HashServer {
 public:
  using tcp = boost::asio::ip::tcp;

  explicit HashServer(HashServerConfig config);
  // Binds, prints "listening on ADDRESS", serves until SIGTERM/SIGINT, then drains and returns.
  // SIGHUP re-reads the table file (and, through Lifecycle, the log level).
  void run();

 private:
  boost::asio::awaitable<void> accept_loop();
  // HELLO (and, with a cluster key, the server's proof and the client's AUTH), then hands the
  // connection to its shard with its quota ticket.
  boost::asio::awaitable<void> handshake(tcp::socket socket, ConnectionQuota::Ticket ticket,
                                         ConnectionQuota::Ticket handshaking);
  void stop();
  // Installs a table (main thread): new handshakes report its version, shards judge ownership;
  // with --state-dir it is saved there too.
  void set_router(std::shared_ptr<const Router> router,
                  std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  // A shard's fresh snapshot after a purge or its stream started or ended: reported at once.
  void on_shard_change(const ShardSnapshot& snap);
  control::StreamReport stream_report();
  void send_stream_report();
  // SIGHUP: installs the table file's version if it is valid and newer, as a pushed one would be;
  // otherwise logs why and keeps the table it has.
  void reload_table_file();
  void wait_reload();
  // Samples every shard (they answer on the main thread) for heartbeats and purge reports.
  void sample_shards();
  boost::json::object stats() const;
  control::PurgeReport purge_report() const;
  void start_config_link(const std::string& advertised_address);
  void render_metrics(MetricsText& m) const;

  HashServerConfig config_;
  boost::asio::io_context ctx_{1};
  tcp::acceptor acceptor_;
  ConnectionQuota quota_;            // connections held
  ConnectionQuota handshakes_;       // of those, the ones still in their handshake
  uint64_t auth_refused_ = 0;        // handshakes that did not prove the cluster key
  uint64_t tls_refused_ = 0;         // handshakes where one side wanted TLS, the other not
  uint64_t refused_total_cap_ = 0;   // connections over --max-connections
  uint64_t refused_source_cap_ = 0;  // connections over --max-connections-per-source
  int64_t last_cap_log_s_ = 0;
  boost::asio::signal_set signals_;
  boost::asio::signal_set reload_signal_;
  std::vector<std::unique_ptr<Shard>> shards_;
  uint64_t table_version_ = 0;
  NodeControl control_{ctx_, config_.control};
  boost::asio::steady_timer sample_timer_;
  std::vector<ShardSnapshot> snapshots_;  // the latest of each shard
  bool purge_reporting_ = false;          // a purge ran since the last report
  bool filling_ = false;                  // being refilled (control::FillCommand)
  std::unique_ptr<StreamSender> sender_;  // the outbound stream's links
  control::StreamState stream_state_ = control::StreamState::kIdle;  // as last reported
  int64_t stream_started_ns_ = 0;
  uint64_t rate_sent_ = 0;  // records acked at rate_ns_, for the rate
  int64_t rate_ns_ = 0;
  uint64_t stream_rate_ = 0;  // records per second, measured
  bool stopping_ = false;
};

}  // namespace imhash
