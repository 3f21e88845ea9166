// LoginServer: the login server process (docs/design.md, "The login server"): N workers sharing
// one UDP port through SO_REUSEPORT, the routing table source, the config link and /metrics, and
// signal handling (SIGTERM/SIGINT stop, SIGHUP re-reads the table file).
//
// Thread rules: construct and run() on the main thread; the table source, the config link and the
// sampled counters live there, and workers reach them only by posting to it.
#pragma once

#include <boost/asio.hpp>
#include <boost/json/object.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/links/node_control.h"
#include "common/runtime/saved_table.h"
#include "login_server/login_counters.h"
#include "login_server/table_source.h"
#include "login_server/worker.h"

namespace imhash {

struct LoginServerConfig {
  std::string udp_host = "127.0.0.1";
  uint16_t udp_port = 0;
  uint32_t threads = 1;
  std::string name;        // empty: login-HOST-PORT, set once the UDP port is bound
  std::string table_file;  // may be empty with a config server
  NodeControl::Endpoints control;
  std::chrono::milliseconds grace{60000};  // file mode: fallback reads after a table change
  WorkerSettings worker;
};

class LoginServer {
 public:
  explicit LoginServer(LoginServerConfig config);
  // Binds, connects the links, prints "listening on ADDRESS", serves until SIGTERM/SIGINT.
  void run();

 private:
  // Loads the table saved under this server's name in --state-dir (if any) and keeps saving there.
  void open_saved_table();
  void start_config_link(const std::string& udp_address);
  // A worker started serving `version`; ack once all of them do.
  void committed(uint32_t worker, uint64_t version);
  void sample_workers();
  LoginCounters sum() const;
  boost::json::object stats() const;
  // Writes held for each hash server, over all workers (as last sampled).
  std::map<std::string, uint64_t> held_writes() const;
  void render_metrics(MetricsText& m) const;

  LoginServerConfig config_;
  TableSource tables_;
  std::optional<SavedTable> saved_;
  uint64_t saved_version_ = 0;  // the version saved_ last wrote
  boost::asio::io_context ctx_{1};
  NodeControl control_{ctx_, config_.control};
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<uint64_t> committed_;                           // per worker
  std::vector<LoginCounters> counters_;                       // per worker, sampled
  std::vector<std::map<std::string, uint64_t>> held_writes_;  // per worker, sampled
  boost::asio::steady_timer sample_timer_{ctx_};
  bool have_table_ = false;
  bool stopping_ = false;
};

// login-HOST-PORT (this host's name up to its first dot, the UDP port): the default name, unique
// per host and port, so that two login servers never knock each other's config link off by
// registering under one name. Any thread.
std::string default_login_name(uint16_t port);

}  // namespace imhash
