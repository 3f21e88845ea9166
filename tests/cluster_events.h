// What the tests of the config server's core (config_server/node_registry.h, takeover_hold.h,
// move_rules.h, cluster_controller.h) feed it: times in steady-clock nanoseconds, and a node's
// registration; and how they pick out what the controller asked for (its actions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/routing/control_protocol.h"
#include "config_server/controller_actions.h"

namespace imhash::test {

inline constexpr int64_t kSecondNs = 1'000'000'000;
// The DOWN window of the tests: three heartbeats of a second.
inline constexpr int64_t kDownAfterNs = 3 * kSecondNs;

// A node's register message: `role` `name` at 127.0.0.1:7000, 2 shards, running `version`.
inline control::Register registration(Role role, const std::string& name, uint64_t version) {
  control::Register r;
  r.role = role;
  r.name = name;
  r.address = "127.0.0.1:7000";
  r.shards = 2;
  r.pid = 42;
  r.version = version;
  return r;
}

// The actions of type A (cluster::SendTable, cluster::LogRecord, ...) in `actions`, in order.
template <typename A>
std::vector<A> actions_of(const cluster::Actions& actions) {
  std::vector<A> found;
  for (const cluster::Action& a : actions) {
    if (const A* x = std::get_if<A>(&a)) found.push_back(*x);
  }
  return found;
}

// The actions of type A that are for link `link` (A has a `link`: SendTable, CloseLink, ...).
template <typename A>
std::vector<A> actions_on(const cluster::Actions& actions, cluster::LinkId link) {
  std::vector<A> found;
  for (const A& a : actions_of<A>(actions)) {
    if (a.link == link) found.push_back(a);
  }
  return found;
}

// The control messages of type M (control::Welcome, control::PurgeCommand, ...) sent on `link`.
template <typename M>
std::vector<M> sent_on(const cluster::Actions& actions, cluster::LinkId link) {
  std::vector<M> found;
  for (const cluster::SendMessage& s : actions_on<cluster::SendMessage>(actions, link)) {
    if (const M* m = std::get_if<M>(&s.message)) found.push_back(*m);
  }
  return found;
}

// Whether some log record among `actions` contains `words`.
inline bool logged(const cluster::Actions& actions, std::string_view words) {
  for (const cluster::LogRecord& r : actions_of<cluster::LogRecord>(actions)) {
    if (r.text.find(words) != std::string::npos) return true;
  }
  return false;
}

}  // namespace imhash::test
