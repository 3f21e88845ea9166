#include "config_server/refills.h"

#include <algorithm>

namespace imhash {

void Refills::start(const std::string& server, uint64_t version,
                    const std::vector<std::string>& peers, int64_t now_ns) {
  Refill& r = refills_[server];
  r = Refill{};
  r.version = version;
  r.started_ns = now_ns;
  for (const std::string& p : peers) {
    if (p != server) r.waiting.insert(p);
  }
}

std::vector<std::string> Refills::on_report(const std::string& peer,
                                            const control::StreamReport& report, int64_t now_ns) {
  const bool done = report.state == control::StreamState::kDone;
  if (!done && report.state != control::StreamState::kRunning) return {};
  for (auto& [server, r] : refills_) {
    if (report.version < r.version || !r.waiting.count(peer)) continue;
    if (std::find(report.lost.begin(), report.lost.end(), server) == report.lost.end()) continue;
    PeerProgress& p = r.progress[peer];
    p.scanned = done || report.total == 0 ? (done ? 1.0 : 0.0)
                                          : std::min(1.0, static_cast<double>(report.scanned) /
                                                              static_cast<double>(report.total));
    for (const control::StreamTarget& t : report.targets) {
      if (t.name == server) p.sent = t.records;
    }
    if (!done) continue;
    r.waiting.erase(peer);
    r.done.insert(peer);
  }
  return take_complete(now_ns);
}

std::vector<std::string> Refills::drop_peer(const std::string& peer, int64_t now_ns) {
  for (auto& entry : refills_) entry.second.waiting.erase(peer);
  return take_complete(now_ns);
}

void Refills::cancel(const std::string& server) { refills_.erase(server); }

std::vector<std::string> Refills::clear() {
  std::vector<std::string> servers;
  for (const auto& entry : refills_) servers.push_back(entry.first);
  refills_.clear();
  return servers;
}

std::vector<std::string> Refills::take_complete(int64_t now_ns) {
  std::vector<std::string> complete;
  for (auto& [server, r] : refills_) {
    if (!r.waiting.empty() || r.streams_done_ns != 0) continue;
    r.streams_done_ns = std::max<int64_t>(now_ns, 1);
    complete.push_back(server);
  }
  return complete;
}

boost::json::array Refills::json(int64_t now_ns) const {
  boost::json::array out;
  for (const auto& [server, r] : refills_) {
    boost::json::array waiting(r.waiting.begin(), r.waiting.end());
    boost::json::array done(r.done.begin(), r.done.end());
    // Peers dropped (DOWN) count neither way: the mean is over the peers still in the book.
    double scanned = static_cast<double>(r.done.size());
    uint64_t sent = 0;
    for (const auto& [peer, p] : r.progress) {
      if (r.waiting.count(peer)) scanned += p.scanned;
      sent += p.sent;
    }
    const size_t peers = r.waiting.size() + r.done.size();
    out.push_back(
        boost::json::object{{"server", server},
                            {"version", r.version},
                            {"waiting", std::move(waiting)},
                            {"done", std::move(done)},
                            {"seconds", (now_ns - r.started_ns) / 1'000'000'000},
                            {"progress", peers ? scanned / static_cast<double>(peers) : 1.0},
                            {"records_sent", sent},
                            {"streams_done", r.streams_done_ns != 0}});
  }
  return out;
}

}  // namespace imhash
