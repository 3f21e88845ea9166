#include "harness/nemesis_run.h"

#include <csignal>
#include <memory>
#include <stdexcept>

#include "harness/run_logs.h"

namespace imhash::test {

NemesisRunResult run_nemesis(const NemesisRunOptions& options) {
  NemesisRunResult out;
  out.seed = options.seed;
  out.dir = RunLogs::dir();
  // The ranges cover exactly the clients' ids, so every hash server owns users the clients use
  // and every fault on one of them meets traffic.
  NemesisClusterOptions cluster = options.cluster;
  cluster.users =
      options.users_per_client * static_cast<uint64_t>(cluster.clients * cluster.login_servers);
  NemesisCluster nc(cluster);
  nc.start();

  // Each client host runs one udp_sim per login server, on users of its own: a user's writes come
  // from one process (its endpoints are unique per process and write: --history-client).
  const int seconds =
      static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(options.length).count()) +
      2;
  std::vector<std::unique_ptr<UdpSim>> sims;
  int index = 0;
  for (int k = 1; k <= cluster.clients; ++k) {
    for (int j = 1; j <= cluster.login_servers; ++j, ++index) {
      const uint64_t first = 1 + static_cast<uint64_t>(index) * options.users_per_client;
      const std::string name = "udp_sim.k" + std::to_string(k) + ".l" + std::to_string(j);
      const std::string history = out.dir + "/" + name + ".history";
      out.history_files.push_back(history);
      sims.push_back(std::make_unique<UdpSim>(
          std::vector<std::string>{
              "--target", nc.login_udp(j), "--first-user", std::to_string(first), "--users",
              std::to_string(options.users_per_client), "--rate",
              std::to_string(options.rate_per_client), "--duration", std::to_string(seconds),
              // Tries of 300 ms (three deadlines), 3 retries: a reply lost on a lossy link is
              // asked for again within the request's history entry.
              "--timeout-ms", "300", "--retries", "3", "--seed",
              std::to_string(options.seed * 16 + static_cast<uint64_t>(index)), "--history",
              history, "--history-client", std::to_string(index), "--log-level", "warn"},
          UdpSimOptions{.name = name, .netns = nc.hosts().netns(NemesisCluster::client_host(k))}));
    }
  }

  NemesisOptions n = options.nemesis;
  n.seed = options.seed;
  Nemesis nemesis(nc, n);
  nemesis.run(options.length);
  for (auto& sim : sims) out.clients.push_back(sim->wait(std::chrono::seconds(60)));
  // Stopped gracefully, their logs end with their counters (hedges, hints, retries...).
  for (int j = 1; j <= cluster.login_servers; ++j) nc.cluster().login(j).stop(SIGTERM);

  out.faults = nemesis.log();
  out.counts = nemesis.counts();
  out.log_file = out.dir + "/nemesis.log";
  out.windows_file = out.dir + "/nemesis.windows";
  nemesis.write_log(out.log_file);
  nemesis.write_windows(out.windows_file);

  history::History h;
  for (const std::string& f : out.history_files) {
    if (const auto e = history::read_history_file(f, h)) throw std::runtime_error(e->to_string());
  }
  std::vector<history::Window> windows;
  if (const auto e = history::read_windows_file(out.windows_file, windows)) {
    throw std::runtime_error(e->to_string());
  }
  out.report = history::check(std::move(h), windows);
  return out;
}

}  // namespace imhash::test
