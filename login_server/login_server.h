// LoginServer: the login server process: N workers sharing one UDP port through SO_REUSEPORT, the
// routing table source, and signal handling (SIGTERM/SIGINT stop, SIGHUP re-reads the table file).
//
// Thread rules: construct and run() on the main thread.
#pragma once

#include <boost/asio.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/config_link.h"
#include "common/metrics.h"
#include "login_server/table_source.h"
#include "login_server/worker.h"

namespace imhash {

struct LoginServerConfig {
  std::string udp_host = "127.0.0.1";
  uint16_t udp_port = 0;
  uint32_t threads = 1;
  std::string name = "login";
  std::string table_file;      // may be empty with a config server
  std::string config_address;  // config server HOST:PORT; empty: the table file only
  std::string metrics_host;    // --metrics: Prometheus endpoint; empty: none
  uint16_t metrics_port = 0;
  std::chrono::milliseconds grace{60000};  // file mode: fallback reads after a table change
  WorkerSettings worker;
};

class LoginServer {
 public:
  explicit LoginServer(LoginServerConfig config);
  // Binds, connects the links, prints "listening on ADDRESS", serves until SIGTERM/SIGINT.
  void run();

 private:
  void start_config_link(const std::string& udp_address);
  // Main thread: a worker started serving `version`; ack once all of them do.
  void committed(uint32_t worker, uint64_t version);
  void sample_workers();
  boost::json::object stats() const;
  std::string render_metrics() const;

  LoginServerConfig config_;
  TableSource tables_;
  boost::asio::io_context ctx_{1};
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<ConfigLink> config_link_;
  std::unique_ptr<MetricsServer> metrics_;
  std::vector<uint64_t> committed_;       // per worker
  std::vector<WorkerCounters> counters_;  // per worker, sampled
  boost::asio::steady_timer sample_timer_{ctx_};
  bool stopping_ = false;
};

}  // namespace imhash
