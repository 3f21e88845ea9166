// HashServer: the listener of a hash server and its shards. The main thread runs the acceptor,
// the handshakes and the signal handling; each accepted connection is handed, once its HELLO names
// a shard, to that shard's thread for the rest of its life.
//
// Thread rules: construct, run() and stop() on the main thread (stop() also from a signal handler
// running on the main io_context).
#pragma once

#include <boost/asio.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/node_control.h"
#include "common/router.h"
#include "hash_server/shard.h"

namespace imhash {

struct HashServerConfig {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;
  std::string name = "hash1";
  uint32_t shards = 1;
  std::shared_ptr<const Router> router;  // may be null: no table yet, the server owns every id
  NodeControl::Endpoints control;        // --config (none: --table only) and --metrics
};

class HashServer {
 public:
  using tcp = boost::asio::ip::tcp;

  explicit HashServer(HashServerConfig config);
  // Binds, prints "listening on ADDRESS", serves until SIGTERM/SIGINT, then drains and returns.
  void run();

 private:
  boost::asio::awaitable<void> accept_loop();
  boost::asio::awaitable<void> handshake(tcp::socket socket);
  void stop();
  // Installs a table (main thread): new handshakes report its version, shards judge ownership.
  void set_router(std::shared_ptr<const Router> router);
  // Samples every shard (they answer on the main thread) for heartbeats and purge reports.
  void sample_shards();
  boost::json::object stats() const;
  control::PurgeReport purge_report() const;
  void start_config_link(const std::string& listen_address);
  void render_metrics(MetricsText& m) const;

  HashServerConfig config_;
  boost::asio::io_context ctx_{1};
  tcp::acceptor acceptor_;
  boost::asio::signal_set signals_;
  std::vector<std::unique_ptr<Shard>> shards_;
  uint64_t table_version_ = 0;
  NodeControl control_{ctx_, config_.control};
  boost::asio::steady_timer sample_timer_;
  std::vector<ShardSnapshot> snapshots_;  // the latest of each shard
  bool purge_reporting_ = false;          // a purge ran since the last report
  bool stopping_ = false;
};

}  // namespace imhash
