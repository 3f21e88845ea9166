// Leadership: which of several config servers sharing one etcd store leads (docs/design.md §5).
// Each config server holds an etcd lease (TTL a few seconds, kept alive every TTL/4) and, under
// it, PREFIX/members/NAME naming its node and admin addresses. The leader is whoever created
// PREFIX/leader, attached to its lease, in a transaction that succeeds only if the key does not
// exist; the key's create revision is the leader's fence (config_server/etcd_state_store.h). A
// standby looks at the key every round and campaigns as soon as it is gone: the leader's lease
// expired (kill -9, a lost host: at most one TTL after its last keepalive) or was revoked (a clean
// shutdown, a resignation), so a standby leads within TTL plus one round.
//
// A leader that cannot keep its lease alive for TTL less one round, or finds the key held by
// another lease, steps down on its own (`deposed`), before etcd would let another take over.
// While its keepalives fail (etcd electing a new leader after losing one: about 1-2 election
// timeouts) a leader tries again every TTL/16, each keepalive bounded by TTL/8 per member, so it
// renews as soon as etcd can answer rather than one slow round later.
// `elected` and `deposed` run on the io_context's thread, from the timer.
//
// Not thread-safe: the config server's main thread only (the EtcdClient blocks, each request
// bounded by its timeout).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config_server/etcd_client.h"
#include "config_server/etcd_state_store.h"

namespace imhash {

// A config server as the others see it: its name and the addresses nodes and imctl dial.
struct ConfigServerInfo {
  std::string name;
  std::string node;   // HOST:PORT of --listen, as advertised
  std::string admin;  // HOST:PORT of --admin, as advertised
  boost::json::object to_json() const;
  static std::optional<ConfigServerInfo> of_json(const std::string& text);
  friend bool operator==(const ConfigServerInfo&, const ConfigServerInfo&) = default;
};

class Leadership {
 public:
  struct Callbacks {
    std::function<void()> elected;
    std::function<void(const std::string& why)> deposed;
  };

  Leadership(boost::asio::io_context& ctx, EtcdClient& etcd, EtcdKeys keys, ConfigServerInfo self,
             std::chrono::seconds ttl, Callbacks cb);

  void start();  // the first round now, then one every TTL/4
  // No more rounds; revokes the lease, so that a standby takes over at its next round.
  void stop();
  // Steps down now (if leading) and gives up the lease, so whoever leads next (maybe this one, at
  // a later round) starts from what the store holds. Calls `deposed`.
  void resign(const std::string& why);

  bool leading() const { return leading_; }
  int64_t fence() const { return fence_; }  // PREFIX/leader's create revision while leading
  // As seen at the latest round that reached etcd.
  const std::optional<ConfigServerInfo>& leader() const { return leader_; }
  std::vector<ConfigServerInfo> standbys() const;
  const ConfigServerInfo& self() const { return self_; }
  // Why the latest round failed ("" when it did not).
  const std::string& problem() const { return problem_; }
  std::chrono::milliseconds ttl() const { return ttl_; }
  uint64_t terms() const { return terms_; }  // times this config server was elected

 private:
  void schedule();
  void round();
  bool keep_lease(std::chrono::steady_clock::time_point now);
  void depose(const std::string& why);

  boost::asio::steady_timer timer_;
  EtcdClient& etcd_;
  const EtcdKeys keys_;
  const ConfigServerInfo self_;
  std::chrono::milliseconds ttl_;
  const Callbacks cb_;
  bool stopped_ = false;
  bool renew_failing_ = false;  // the latest keepalive of a leader failed: the next round soon
  int64_t lease_ = 0;
  std::chrono::steady_clock::time_point lease_ok_at_{};  // when the latest good keepalive left
  bool leading_ = false;
  int64_t fence_ = 0;
  std::optional<ConfigServerInfo> leader_;
  std::vector<ConfigServerInfo> members_;
  std::string problem_;
  uint64_t terms_ = 0;
};

}  // namespace imhash
