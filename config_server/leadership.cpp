#include "config_server/leadership.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>

namespace json = boost::json;

namespace imhash {

json::object ConfigServerInfo::to_json() const {
  return json::object{{"name", name}, {"node", node}, {"admin", admin}};
}

std::optional<ConfigServerInfo> ConfigServerInfo::of_json(const std::string& text) {
  boost::system::error_code ec;
  const json::value v = json::parse(text, ec);
  const json::object* o = ec ? nullptr : v.if_object();
  if (!o) return std::nullopt;
  ConfigServerInfo info;
  for (auto [field, name] : {std::pair{&info.name, "name"}, std::pair{&info.node, "node"},
                             std::pair{&info.admin, "admin"}}) {
    const json::value* f = o->if_contains(name);
    if (!f || !f->is_string()) return std::nullopt;
    *field = std::string(f->get_string());
  }
  return info;
}

Leadership::Leadership(boost::asio::io_context& ctx, EtcdClient& etcd, EtcdKeys keys,
                       ConfigServerInfo self, std::chrono::seconds ttl, Callbacks cb)
    : timer_(ctx),
      etcd_(etcd),
      keys_(std::move(keys)),
      self_(std::move(self)),
      ttl_(ttl),
      cb_(std::move(cb)) {}

void Leadership::start() {
  round();
  schedule();
}

void Leadership::schedule() {
  if (stopped_) return;
  timer_.expires_after(renew_failing_ ? ttl_ / 16 : ttl_ / 4);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    round();
    schedule();
  });
}

void Leadership::stop() {
  stopped_ = true;
  timer_.cancel();
  if (lease_ != 0) {
    // The leader key and the member key go with the lease: a standby need not wait out the TTL.
    const EtcdReply r = etcd_.revoke(lease_);
    if (!r.ok())
      spdlog::warn("config server {}: could not give up its lease: {}", self_.name, r.error);
    lease_ = 0;
  }
  leading_ = false;
  fence_ = 0;
}

void Leadership::resign(const std::string& why) {
  if (lease_ != 0) {
    etcd_.revoke(lease_);  // if etcd is unreachable the lease runs out by itself
    lease_ = 0;
  }
  if (leading_) depose(why);
}

void Leadership::depose(const std::string& why) {
  leading_ = false;
  fence_ = 0;
  spdlog::warn("config server {}: no longer leads: {}", self_.name, why);
  if (cb_.deposed) cb_.deposed(why);
}

std::vector<ConfigServerInfo> Leadership::standbys() const {
  std::vector<ConfigServerInfo> out;
  for (const ConfigServerInfo& m : members_) {
    if (!leader_ || m.name != leader_->name) out.push_back(m);
  }
  return out;
}

// A lease that etcd keeps alive; false if there is none now (the round goes no further).
bool Leadership::keep_lease(std::chrono::steady_clock::time_point now) {
  if (lease_ != 0) {
    const EtcdReply k = etcd_.keepalive(lease_, std::max(ttl_ / 8, std::chrono::milliseconds(50)));
    renew_failing_ = !k.ok() && leading_;
    if (!k.ok()) {
      problem_ = k.error;
      // Step down before etcd could hand the key to another: the lease may run out one TTL after
      // the latest keepalive that reached it, and the next round comes TTL/4 later.
      if (leading_ && now - lease_ok_at_ >= ttl_ - ttl_ / 4) {
        depose("could not keep its lease alive for " + std::to_string(ttl_.count()) +
               " ms: " + k.error);
      }
      return false;
    }
    if (k.ttl_s > 0) {
      lease_ok_at_ = now;
      return true;
    }
    lease_ = 0;  // it expired: a new one below
    if (leading_) depose("its lease expired");
  }
  const EtcdReply g = etcd_.grant(std::chrono::duration_cast<std::chrono::seconds>(ttl_).count());
  if (!g.ok()) {
    problem_ = g.error;
    return false;
  }
  lease_ = g.lease_id;
  lease_ok_at_ = now;
  const std::string me = json::serialize(self_.to_json());
  const EtcdReply put =
      etcd_.txn({}, {{EtcdOp::Kind::kPut, keys_.members + self_.name, me, lease_, false}});
  if (!put.ok()) {
    problem_ = put.error;
    return false;
  }
  return true;
}

void Leadership::round() {
  if (stopped_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!keep_lease(now)) return;
  // Campaign and look in one transaction: take PREFIX/leader if nobody holds it; either way read
  // it and the members.
  const std::string me = json::serialize(self_.to_json());
  const std::vector<EtcdOp> look{{EtcdOp::Kind::kRange, keys_.leader, {}, 0, false},
                                 {EtcdOp::Kind::kRange, keys_.members, {}, 0, true}};
  std::vector<EtcdOp> campaign{{EtcdOp::Kind::kPut, keys_.leader, me, lease_, false}};
  campaign.insert(campaign.end(), look.begin(), look.end());
  const EtcdReply r =
      etcd_.txn({{keys_.leader, EtcdCompare::Target::kCreate, 0, {}}}, campaign, look);
  if (!r.ok() || r.ranges.size() != 2) {
    problem_ = r.ok() ? "unreadable election reply" : r.error;
    return;
  }
  problem_.clear();
  members_.clear();
  for (const EtcdKv& kv : r.ranges[1]) {
    if (auto m = ConfigServerInfo::of_json(kv.value)) members_.push_back(std::move(*m));
  }
  leader_.reset();
  if (r.ranges[0].empty()) return;  // it expired between the compare and the read: next round
  const EtcdKv& key = r.ranges[0].front();
  leader_ = ConfigServerInfo::of_json(key.value);
  if (key.lease == lease_) {
    if (!leading_) {
      leading_ = true;
      fence_ = key.create_revision;
      ++terms_;
      spdlog::info("config server {}: leads (store {}, lease TTL {} ms)", self_.name,
                   etcd_.describe(), ttl_.count());
      if (cb_.elected) cb_.elected();
    }
  } else if (leading_) {
    depose("another config server leads: " + (leader_ ? leader_->name : std::string("?")));
  }
}

}  // namespace imhash
