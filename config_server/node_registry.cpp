#include "config_server/node_registry.h"

#include <algorithm>

namespace imhash::cluster {

std::string NodeKey::text() const { return std::string(to_string(role)) + "/" + name; }

const char* version_source_name(VersionSource from) {
  switch (from) {
    case VersionSource::kRegister:
      return "register";
    case VersionSource::kHeartbeat:
      return "heartbeat";
    case VersionSource::kAck:
      return "ack";
  }
  return "?";
}

NodeRecord* NodeRegistry::find(const NodeKey& key) {
  const auto it = nodes_.find(key);
  return it == nodes_.end() ? nullptr : &it->second;
}

const NodeRecord* NodeRegistry::find(const NodeKey& key) const {
  const auto it = nodes_.find(key);
  return it == nodes_.end() ? nullptr : &it->second;
}

NodeRecord* NodeRegistry::on_link(LinkId link) {
  const auto it = by_link_.find(link);
  return it == by_link_.end() ? nullptr : it->second;
}

void NodeRegistry::clear() {
  nodes_.clear();
  by_link_.clear();
  convergence_ = Convergence{};
}

bool NodeRegistry::name_held(const NodeKey& key, LinkId asking, bool holder_link_open) const {
  const NodeRecord* held = find(key);
  // Free: nobody had it, or its link is gone, is this one, has closed, or the holder is DOWN.
  return held && held->link != 0 && held->link != asking && holder_link_open && held->up;
}

NodeRegistry::Registration NodeRegistry::on_register(const control::Register& reg, LinkId link,
                                                     int64_t now_ns, uint64_t latest) {
  NodeRecord& n = nodes_[NodeKey{reg.role, reg.name}];
  Registration r{n, n.up, n.link != 0 && n.link != link ? n.link : 0, VersionTaken::kTaken};
  n.role = reg.role;
  n.name = reg.name;
  n.address = reg.address;
  n.shards = reg.shards;
  n.pid = reg.pid;
  // The version it runs now (lower after a restart from an older saved table).
  n.version = 0;
  r.version = take_version(n, VersionSource::kRegister, reg.version, latest);
  n.last_heard_ns = now_ns;
  n.up = true;
  if (n.link != 0) by_link_.erase(n.link);
  n.link = link;
  by_link_[link] = &n;
  n.stream.reset();
  n.purges.clear();
  return r;
}

void NodeRegistry::on_link_closed(LinkId link) {
  const auto it = by_link_.find(link);
  if (it == by_link_.end()) return;
  it->second->link = 0;
  by_link_.erase(it);
}

bool NodeRegistry::on_heard(NodeRecord& n, int64_t now_ns) {
  n.last_heard_ns = now_ns;
  if (n.up) return false;
  n.up = true;
  return true;
}

VersionTaken NodeRegistry::take_version(NodeRecord& n, VersionSource from, uint64_t version,
                                        uint64_t latest) {
  // Every push carries the current version, so nothing above it can have been installed.
  if (version > latest) {
    ++rejected_[static_cast<size_t>(from)];
    return VersionTaken::kRejected;
  }
  n.version = std::max(n.version, version);
  if (n.version < latest) return VersionTaken::kTaken;
  n.behind_since_ns = 0;
  const bool was_lagging = n.lagging;
  n.lagging = false;
  return was_lagging ? VersionTaken::kCaughtUp : VersionTaken::kTaken;
}

bool NodeRegistry::log_rejection(NodeRecord& n, int64_t now_ns) {
  if (n.last_rejected_log_ns != 0 && now_ns - n.last_rejected_log_ns < 1'000'000'000) return false;
  n.last_rejected_log_ns = now_ns;
  return true;
}

void NodeRegistry::on_pushed(NodeRecord& n, int64_t now_ns, uint64_t latest) {
  n.last_push_ns = now_ns;
  if (n.version < latest && n.behind_since_ns == 0) n.behind_since_ns = now_ns;
}

void NodeRegistry::update_rate(NodeRecord& n, int64_t now_ns) {
  double total = 0;
  for (const char* key : {"upserts", "gets", "deletes", "received"}) {
    if (const auto* v = n.stats.if_contains(key); v && v->is_number()) {
      total += v->to_number<double>();
    }
  }
  if (n.last_requests >= 0 && now_ns - n.last_requests_ns < 1'000'000'000) return;
  if (n.last_requests >= 0 && total >= n.last_requests) {
    n.requests_per_s =
        (total - n.last_requests) * 1e9 / static_cast<double>(now_ns - n.last_requests_ns);
  }
  n.last_requests = total;
  n.last_requests_ns = now_ns;
}

std::vector<NodeKey> NodeRegistry::mark_down(int64_t now_ns, int64_t listening_since_ns) {
  std::vector<NodeKey> down;
  for (auto& [key, n] : nodes_) {
    if (n.up && now_ns - std::max(n.last_heard_ns, listening_since_ns) > down_after_ns_) {
      n.up = false;
      down.push_back(key);
    }
  }
  return down;
}

std::vector<NodeKey> NodeRegistry::mark_lagging(int64_t now_ns, uint64_t latest) {
  std::vector<NodeKey> lagging;
  for (auto& [key, n] : nodes_) {
    if (!n.up || n.version >= latest) continue;
    if (n.behind_since_ns == 0) n.behind_since_ns = now_ns;
    if (!n.lagging && now_ns - n.behind_since_ns > down_after_ns_) {
      n.lagging = true;
      lagging.push_back(key);
    }
  }
  return lagging;
}

void NodeRegistry::start_convergence(uint64_t version, int64_t now_ns) {
  convergence_ = Convergence{version, now_ns, std::nullopt};
}

std::optional<double> NodeRegistry::check_convergence(int64_t now_ns) {
  if (convergence_.version == 0 || convergence_.reached_ms) return std::nullopt;
  if (!converged(convergence_.version)) return std::nullopt;
  convergence_.reached_ms = static_cast<double>(now_ns - convergence_.started_ns) / 1e6;
  return convergence_.reached_ms;
}

bool NodeRegistry::converged(uint64_t version) const {
  return std::none_of(nodes_.begin(), nodes_.end(), [&](const auto& entry) {
    return entry.second.waited_for() && entry.second.version < version;
  });
}

}  // namespace imhash::cluster
