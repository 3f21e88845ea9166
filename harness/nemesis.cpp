#include "harness/nemesis.h"

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <thread>

#include "harness/log_file.h"
#include "harness/wait_until.h"

namespace imhash::test {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// splitmix64: the same draws on every platform and standard library, so a seed replays.
class Draw {
 public:
  explicit Draw(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo + 1)));
  }
  int index(int n) { return static_cast<int>(below(static_cast<uint64_t>(n))); }
  // One of a lane's kinds, at random among those drawn fewest times so far: each kind comes once
  // in every round of draws, in a random order. Drawn uniformly, the rarest kind of a lane fell
  // short by a third of its share over runs of hundreds of faults; balanced, a run of N faults
  // per lane has N / kinds of each (the long runs' "at least 50 of each kind").
  template <size_t N>
  FaultKind kind(const FaultKind (&kinds)[N]) {
    uint64_t fewest = UINT64_MAX;
    for (FaultKind k : kinds) fewest = std::min(fewest, drawn_[static_cast<size_t>(k)]);
    FaultKind pool[N];
    int n = 0;
    for (FaultKind k : kinds) {
      if (drawn_[static_cast<size_t>(k)] == fewest) pool[n++] = k;
    }
    const FaultKind k = pool[index(n)];
    ++drawn_[static_cast<size_t>(k)];
    return k;
  }

 private:
  uint64_t state_;
  std::array<uint64_t, kFaultKinds> drawn_{};
};

// The first line of /proc/PID/status that starts with "State:" ("State:\tT (stopped)").
std::string process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("State:", 0) == 0) return line;
  }
  return "State: gone";
}

}  // namespace

const char* fault_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::kHashKill:
      return "hash-kill";
    case FaultKind::kHashPauseShort:
      return "hash-pause-short";
    case FaultKind::kHashPauseLong:
      return "hash-pause-long";
    case FaultKind::kHashCutFromLogins:
      return "hash-cut-from-logins";
    case FaultKind::kLoginCutFromHash:
      return "login-cut-from-hash";
    case FaultKind::kConfigLeaderKill:
      return "config-leader-kill";
    case FaultKind::kConfigLeaderIsolate:
      return "config-leader-isolate";
    case FaultKind::kEtcdKill:
      return "etcd-kill";
    case FaultKind::kLinkLoss:
      return "link-loss";
    case FaultKind::kLinkDuplicate:
      return "link-duplicate";
    case FaultKind::kLinkReorder:
      return "link-reorder";
    case FaultKind::kLinkDelay:
      return "link-delay";
    case FaultKind::kRangeMove:
      return "range-move";
    case FaultKind::kReplicaChange:
      return "replica-change";
    case FaultKind::kDrain:
      return "drain";
    case FaultKind::kCount:
      break;
  }
  return "?";
}

const char* allowed_answers(const FaultRecord& fault) {
  switch (fault.kind) {
    case FaultKind::kLinkLoss:
    case FaultKind::kLinkDuplicate:
    case FaultKind::kLinkReorder:
    case FaultKind::kLinkDelay:
      // On a login server's own link. Its TCP links to every hash server wait for
      // retransmissions (200 ms at least, twice the deadline): requests time out, replies to
      // clients are lost. And the client protocol is datagrams without sequence numbers: a
      // LOGIN or HEARTBEAT the network duplicates or holds back can arrive after the user's next
      // write and be applied over it (the client's retry of a try that was only late, too).
      // On a hash server's link TCP hides all four (retransmits, drops duplicates, reorders),
      // and hedging answers from the other copy within the deadline: nothing is allowed there.
      return fault.target.rfind("l", 0) == 0 ? "unavailable,no_reply,stale,logout_undone,write_lost"
                                             : "";
    default:
      return "";
  }
}

// A fault as a lane plans it: what to do, how long it stays on, and how to undo it.
struct Planned {
  FaultKind kind = FaultKind::kHashKill;
  std::string target, detail;
  milliseconds length{0};
  std::function<std::string()> apply;  // the evidence; throws if the fault did not take effect
  std::function<bool()> done;          // set: the fault ends once this holds (or at `length`)
  std::function<void()> revert;        // may be empty
  // Set: the fault waits (already drawn, so a seed still gives the same faults in the same order)
  // while this holds — a fault that would take the last reachable copy of some records.
  std::function<bool()> blocked;
};

class Nemesis::Lane {
 public:
  using Planner = std::function<Planned(Draw&)>;
  Lane(Nemesis& n, uint64_t seed, milliseconds gap, Planner plan, std::function<bool()> settled)
      : n_(n), draw_(seed), gap_(gap), plan_(std::move(plan)), settled_(std::move(settled)) {
    next_ = Clock::now() + pause();
  }

  // A fault of this lane is on, or the cluster is settling after one.
  bool busy() const { return state_ != State::kIdle; }
  // The target of the fault that is on ("" when none is).
  const std::string& target_on() const {
    static const std::string none;
    return state_ == State::kActive ? current_.target : none;
  }

  // Does what is due; returns when it wants to be called again.
  Clock::time_point step(Clock::time_point now) {
    switch (state_) {
      case State::kIdle:
        if (now < next_) return next_;
        if (!drawn_) {
          current_ = plan_(draw_);
          drawn_ = true;
        }
        if (current_.blocked && current_.blocked()) return now + milliseconds(250);
        start(now);
        return now;
      case State::kActive:
        if (now < until_ && !(current_.done && current_.done())) {
          return std::min(until_, now + milliseconds(100));
        }
        end(Clock::now());
        return now;
      case State::kSettling:
        if (settled_()) {
          state_ = State::kIdle;
          next_ = Clock::now() + pause();
          return next_;
        }
        if (now >= settle_by_) {
          n_.log_[record_].evidence += "; not settled within the patience";
          state_ = State::kIdle;
          next_ = Clock::now() + pause();
          return next_;
        }
        return now + milliseconds(250);
    }
    return now;
  }

  // The run is over: the fault that is on is reverted, and the cluster settles (bounded).
  void finish() {
    if (state_ == State::kActive) end(Clock::now());
    if (state_ == State::kSettling) {
      if (!wait_until(settled_, n_.options_.settle_patience, milliseconds(250))) {
        n_.log_[record_].evidence += "; not settled within the patience after the run";
      }
    }
    state_ = State::kIdle;
  }

 private:
  enum class State { kIdle, kActive, kSettling };

  milliseconds pause() {
    return milliseconds(draw_.between(gap_.count() / 2, gap_.count() * 3 / 2));
  }

  void start(Clock::time_point now) {
    drawn_ = false;
    FaultRecord r;
    r.kind = current_.kind;
    r.target = current_.target;
    r.detail = current_.detail;
    r.start_ns = ns_of(now);
    try {
      r.evidence = current_.apply();
      r.took_effect = true;
    } catch (const std::exception& e) {
      r.evidence = std::string("did not take effect: ") + e.what();
    }
    record_ = n_.log_.size();
    n_.log_.push_back(std::move(r));
    if (!n_.log_[record_].took_effect) current_.revert = nullptr;
    if (n_.log_[record_].took_effect && (current_.length.count() > 0 || current_.done)) {
      state_ = State::kActive;
      until_ = Clock::now() + current_.length;
    } else {
      end(Clock::now());
    }
  }

  void end(Clock::time_point now) {
    FaultRecord& r = n_.log_[record_];
    if (current_.revert) {
      try {
        current_.revert();
      } catch (const std::exception& e) {
        r.evidence += std::string("; revert failed: ") + e.what();
      }
    }
    r.end_ns = ns_of(now);
    state_ = State::kSettling;
    settle_by_ = Clock::now() + n_.options_.settle_patience;
  }

  Nemesis& n_;
  Draw draw_;
  milliseconds gap_;
  Planner plan_;
  std::function<bool()> settled_;
  State state_ = State::kIdle;
  Clock::time_point next_, until_, settle_by_;
  Planned current_;
  bool drawn_ = false;  // current_ is the next fault, waiting while it is blocked
  size_t record_ = 0;
};

namespace {

// imctl status, parsed (null when no config server answers).
boost::json::value status_of(ConfigCluster& c) {
  // A second per config server at most: one that is isolated must not stall every lane.
  const ImctlResult r = c.imctl({"--timeout-ms", "1000", "--json", "status"});
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(r.out, ec);
  return r.exit_code == 0 && !ec && v.is_object() ? v : boost::json::value();
}

// Every hash server the status lists is up, and none is being refilled.
// And no login server holds writes for one: a login server that still holds writes for a hash
// server has no working link to it yet (links come back with a backoff, seconds after the fault
// ends), and a fault on another copy's server then would leave some records none.
// Every one of them, too: a config leader that has just taken over knows only the nodes that
// have registered with it, and a server back empty that has not yet is in no list (a nemesis run:
// the hash lane settled 30 ms after hash2's restart, at a new leader, and a link fault on hash1's
// host cost 250 TIMEOUTs while hash2 had not been refilled).
bool hash_servers_settled(ConfigCluster& c, int hashes, int logins) {
  const boost::json::value st = status_of(c);
  if (!st.is_object()) return false;
  const auto& o = st.as_object();
  int hash_up = 0, login_up = 0;
  for (const auto& n : o.at("nodes").as_array()) {
    const auto& node = n.as_object();
    const bool up = node.at("state").as_string() == "up";
    hash_up += up && node.at("role").as_string() == "hash";
    login_up += up && node.at("role").as_string() == "login";
    if (node.at("role").as_string() == "hash" && !up) return false;
    const auto* held = node.if_contains("held_writes");
    if (held && held->is_object()) {
      for (const auto& [server, count] : held->as_object()) {
        if (count.to_number<uint64_t>() > 0) return false;
      }
    }
  }
  const auto* refills = o.if_contains("refills");
  return hash_up >= hashes && login_up >= logins && (!refills || refills->as_array().empty());
}

// No purge is owed (every stream of the last change is done) and no drain runs.
bool moves_settled(ConfigCluster& c) {
  const boost::json::value st = status_of(c);
  if (!st.is_object()) return false;
  const auto& o = st.as_object();
  for (const char* list : {"pending_purges", "drains"}) {
    const auto* l = o.if_contains(list);
    if (l && l->is_array() && !l->as_array().empty()) return false;
  }
  return true;
}

std::string must_imctl(ConfigCluster& c, std::vector<std::string> args) {
  const ImctlResult r = c.imctl(std::move(args));
  if (r.exit_code != 0)
    throw std::runtime_error("imctl exit " + std::to_string(r.exit_code) + ": " + trimmed(r.out));
  return trimmed(r.out);
}

// Puts drained servers back into the table with their first range; those imctl could not reach
// a leader for stay in `pending` for the next call. Each step is idempotent: a server the table
// already has (its add done, its answer lost) is not added again, and assign may repeat.
void restore_drained(NemesisCluster& nc, std::vector<int>& pending) {
  ConfigCluster& c = nc.cluster();
  std::erase_if(pending, [&](int i) {
    const std::string name = "hash" + std::to_string(i);
    const ImctlResult t = c.imctl({"--timeout-ms", "1000", "--json", "table"});
    boost::system::error_code ec;
    const boost::json::value table = boost::json::parse(t.out, ec);
    if (t.exit_code != 0 || ec || !table.is_object()) return false;
    bool listed = false;
    for (const auto& s : table.as_object().at("servers").as_array()) {
      listed = listed || s.as_object().at("name").as_string() == name;
    }
    if (!listed && c.imctl({"--timeout-ms", "1000", "server", "add", name}).exit_code != 0) {
      return false;
    }
    return c.imctl({"--timeout-ms", "1000", "assign", nc.initial_range(i), name}).exit_code == 0;
  });
}

}  // namespace

Nemesis::Nemesis(NemesisCluster& cluster, NemesisOptions options)
    : cluster_(cluster), options_(options) {
  ConfigCluster& c = cluster_.cluster();
  Hosts& hosts = cluster_.hosts();
  const NemesisClusterOptions& shape = cluster_.options();
  const int hashes = shape.hash_servers, logins = shape.login_servers;
  const milliseconds down = options_.down;

  // Evidence of a partition: each side's neighbour entry for the other points nowhere.
  const auto partition = [&hosts](const std::string& a, const std::string& b) {
    hosts.partition(a, b);
    std::string evidence;
    for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      const std::string entry =
          trimmed(hosts.ip({"-n", hosts.netns(from), "neigh", "show", hosts.address(to)}));
      if (entry.find(Hosts::kNowhere) == std::string::npos) {
        throw std::runtime_error("no partition entry in " + from + " for " + to + ": " + entry);
      }
      evidence += (evidence.empty() ? "" : "; ") + from + ": " + entry;
    }
    return evidence;
  };

  // ---- hash: one hash server at a time -------------------------------------------------------
  // Nor while the net lane impairs a hash server's link, nor for link_recovery after: with 2
  // copies, a lossy or slow link (TCP's retransmissions take 200 ms and more, and go on after the
  // fault ends) and a server down would leave some records no copy that answers in time. The net
  // lane waits likewise for a hash fault to settle before it impairs a hash server's link; links
  // of login servers do not wait.
  struct HashLinkFault {
    bool on = false;
    Clock::time_point recovered_at{};
    bool impaired() const { return on || Clock::now() < recovered_at; }
  };
  auto hash_link_impaired = std::make_shared<HashLinkFault>();
  lanes_.push_back(std::make_unique<Lane>(
      *this, options_.seed * 4 + 0, options_.hash_gap,
      [&c, &hosts, partition, hashes, logins, down, hash_link_impaired](Draw& d) {
        static constexpr FaultKind kinds[] = {
            FaultKind::kHashKill, FaultKind::kHashPauseShort, FaultKind::kHashPauseLong,
            FaultKind::kHashCutFromLogins, FaultKind::kLoginCutFromHash};
        Planned p;
        p.kind = d.kind(kinds);
        const int i = 1 + d.index(hashes);
        const std::string name = "hash" + std::to_string(i);
        const std::string host = NemesisCluster::hash_host(i);
        p.target = name;
        switch (p.kind) {
          case FaultKind::kHashKill:
            p.length = milliseconds(d.between(1000, 4000));
            p.detail = "kill -9, restart empty after " + std::to_string(p.length.count()) + " ms";
            p.apply = [&c, i, name] {
              c.kill_hash(i);
              if (c.hash(i).running()) throw std::runtime_error(name + " still runs");
              return name + " gone (SIGKILL)";
            };
            p.revert = [&c, i] { c.start_hash(i, /*wait_registered=*/false); };
            break;
          case FaultKind::kHashPauseShort:
          case FaultKind::kHashPauseLong: {
            p.length = p.kind == FaultKind::kHashPauseShort
                           ? milliseconds(d.between(100, down.count() - 100))
                           : milliseconds(d.between(2 * down.count(), 5 * down.count()));
            p.detail = "SIGSTOP for " + std::to_string(p.length.count()) + " ms (DOWN " +
                       std::to_string(down.count()) + " ms)";
            p.apply = [&c, i] {
              const pid_t pid = c.hash(i).pid();
              ::kill(pid, SIGSTOP);
              std::string state;
              // kill(SIGSTOP) only queues the stop: it has taken effect once the state says so.
              if (!wait_until(
                      [&] {
                        return (state = process_state(pid)).find("T (stopped)") !=
                               std::string::npos;
                      },
                      milliseconds(2000), milliseconds(1))) {
                throw std::runtime_error("not stopped: " + state);
              }
              return state;
            };
            p.revert = [&c, i] { ::kill(c.hash(i).pid(), SIGCONT); };
            break;
          }
          case FaultKind::kHashCutFromLogins:
            p.length = milliseconds(d.between(1000, 4000));
            p.detail = "cut from every login server (not the config servers) for " +
                       std::to_string(p.length.count()) + " ms";
            p.apply = [partition, host, logins] {
              std::string evidence;
              for (int j = 1; j <= logins; ++j) {
                evidence += (j > 1 ? "; " : "") + partition(host, NemesisCluster::login_host(j));
              }
              return evidence;
            };
            p.revert = [&hosts, host, logins] {
              for (int j = 1; j <= logins; ++j) hosts.heal(host, NemesisCluster::login_host(j));
            };
            break;
          default: {  // kLoginCutFromHash
            const int j = 1 + d.index(logins);
            p.target = "login" + std::to_string(j) + "-" + name;
            p.length = milliseconds(d.between(1000, 4000));
            p.detail = "login" + std::to_string(j) + " cut from " + name + " for " +
                       std::to_string(p.length.count()) + " ms";
            const std::string login = NemesisCluster::login_host(j);
            p.apply = [partition, login, host] { return partition(login, host); };
            p.revert = [&hosts, login, host] { hosts.heal(login, host); };
            break;
          }
        }
        p.blocked = [hash_link_impaired] { return hash_link_impaired->impaired(); };
        return p;
      },
      [&c, hashes, logins] { return hash_servers_settled(c, hashes, logins); }));
  const Lane* hash_lane = lanes_.back().get();

  // ---- control: the config leader and etcd, one at a time -----------------------------------
  EtcdCluster& etcd = cluster_.etcd();
  lanes_.push_back(std::make_unique<Lane>(
      *this, options_.seed * 4 + 1, options_.control_gap,
      [&c, &hosts, &etcd](Draw& d) {
        static constexpr FaultKind kinds[] = {
            FaultKind::kConfigLeaderKill, FaultKind::kConfigLeaderIsolate, FaultKind::kEtcdKill};
        Planned p;
        p.kind = d.kind(kinds);
        p.length = milliseconds(d.between(1000, 5000));
        const std::string for_ms = " for " + std::to_string(p.length.count()) + " ms";
        if (p.kind == FaultKind::kEtcdKill) {
          const size_t m = static_cast<size_t>(d.index(3));
          p.target = "etcd m" + std::to_string(m);
          p.detail = "kill -9, restart" + for_ms;
          p.apply = [&etcd, m] {
            etcd.kill(m);
            return "etcd m" + std::to_string(m) + " gone (SIGKILL)";
          };
          p.revert = [&etcd, m] { etcd.restart(m); };
          return p;
        }
        // Which config server leads is known only when the fault starts.
        auto leader = std::make_shared<int>(-1);
        p.target = "config leader";
        if (p.kind == FaultKind::kConfigLeaderKill) {
          p.detail = "kill -9, restart" + for_ms;
          p.apply = [&c, leader] {
            *leader = c.leader();
            if (*leader < 0) throw std::runtime_error("no config server leads");
            c.kill_config(*leader);
            return "cfg" + std::to_string(*leader) + " (the leader) gone (SIGKILL)";
          };
          p.revert = [&c, leader] { c.start_config(*leader); };
        } else {
          p.detail = "its host's link down" + for_ms;
          p.apply = [&c, &hosts, leader] {
            *leader = c.leader();
            if (*leader < 0) throw std::runtime_error("no config server leads");
            const std::string host = NemesisCluster::config_host(*leader);
            hosts.cut(host);
            const std::string link = hosts.ip({"-n", hosts.netns(host), "link", "show", "eth0"});
            if (link.find("state DOWN") == std::string::npos &&
                link.find(",UP") != std::string::npos) {
              throw std::runtime_error("eth0 of " + host + " still up: " + trimmed(link));
            }
            return "cfg" + std::to_string(*leader) + " (the leader) isolated: eth0 of " + host +
                   " down";
          };
          p.revert = [&hosts, leader] { hosts.restore(NemesisCluster::config_host(*leader)); };
        }
        return p;
      },
      [&c, &etcd] {
        if (c.leader() < 0) return false;
        for (size_t m = 0; m < etcd.size(); ++m) {
          if (!etcd.healthy(m)) return false;
        }
        return true;
      }));

  // ---- net: netem on one hash or login host's link --------------------------------------------
  lanes_.push_back(std::make_unique<Lane>(
      *this, options_.seed * 4 + 2, options_.net_gap,
      [&hosts, hashes, logins, hash_lane, hash_link_impaired,
       recovery = options_.link_recovery](Draw& d) {
        static constexpr FaultKind kinds[] = {FaultKind::kLinkLoss, FaultKind::kLinkDuplicate,
                                              FaultKind::kLinkReorder, FaultKind::kLinkDelay};
        Planned p;
        p.kind = d.kind(kinds);
        const int which = d.index(hashes + logins);
        const std::string host = which < hashes ? NemesisCluster::hash_host(1 + which)
                                                : NemesisCluster::login_host(1 + which - hashes);
        p.target = host + " link";
        p.length = milliseconds(d.between(1000, 4000));
        LinkFault f;
        switch (p.kind) {
          case FaultKind::kLinkLoss:
            f.loss_percent = static_cast<double>(d.between(5, 20));
            p.detail = "loss " + std::to_string(static_cast<int>(f.loss_percent)) + "%";
            break;
          case FaultKind::kLinkDuplicate:
            f.duplicate_percent = static_cast<double>(d.between(5, 20));
            p.detail = "duplicate " + std::to_string(static_cast<int>(f.duplicate_percent)) + "%";
            break;
          case FaultKind::kLinkReorder:
            f.reorder_percent = static_cast<double>(d.between(10, 30));
            f.delay_ms = static_cast<int>(d.between(5, 20));
            p.detail = "reorder " + std::to_string(static_cast<int>(f.reorder_percent)) +
                       "% (the rest delayed " + std::to_string(f.delay_ms) + " ms)";
            break;
          default:
            f.delay_ms = static_cast<int>(d.between(5, 30));
            f.jitter_ms = static_cast<int>(d.between(0, 5));
            p.detail = "delay " + std::to_string(f.delay_ms) + " ms +- " +
                       std::to_string(f.jitter_ms) + " ms";
            break;
        }
        p.detail += " both ways for " + std::to_string(p.length.count()) + " ms";
        // The evidence: netem's qdisc on the host's eth0, or (no sch_netem) the relay's line.
        const bool hash_host = which < hashes;
        p.apply = [&hosts, host, f, hash_host, hash_link_impaired] {
          const std::string evidence = hosts.impair(host, f);
          if (hosts.netem_available() && evidence.find("netem") == std::string::npos) {
            hosts.clear_impairment(host);
            throw std::runtime_error("no netem on eth0 of " + host + ": " + evidence);
          }
          hash_link_impaired->on = hash_host;
          return evidence;
        };
        p.revert = [&hosts, host, hash_host, hash_link_impaired, recovery] {
          hosts.clear_impairment(host);
          hash_link_impaired->on = false;
          if (hash_host) hash_link_impaired->recovered_at = Clock::now() + recovery;
        };
        // Nor within link_recovery of the last one on a hash host: the connections of that one
        // may still wait out retransmission timeouts, and putting the relay in (or taking it out)
        // stops a link for tens of milliseconds (a nemesis run: hash4's link 1.4 s after its
        // reordering ended and hash3's as its delay began, 15 TIMEOUTs of ids on both).
        if (hash_host) {
          p.blocked = [hash_lane, hash_link_impaired] {
            return hash_lane->busy() || hash_link_impaired->impaired();
          };
        }
        return p;
      },
      [] { return true; }));

  // ---- ops: moves, replica changes, drains ----------------------------------------------------
  if (!options_.ops) return;
  auto replicas = std::make_shared<int>(shape.replicas);
  const uint64_t users = shape.users;
  // Drained servers not yet back in the table with their first range. A revert that imctl could
  // not make (the config leader killed or isolated meanwhile) is retried while the lane settles:
  // left out, the table shrank for the rest of the run and most later operations failed (an
  // 8-minute run: 23 of 26 drains refused, "would have only 1 server").
  auto to_restore = std::make_shared<std::vector<int>>();
  lanes_.push_back(std::make_unique<Lane>(
      *this, options_.seed * 4 + 3, options_.ops_gap,
      [this, &c, hashes, users, replicas, to_restore](Draw& d) {
        static constexpr FaultKind kinds[] = {FaultKind::kRangeMove, FaultKind::kReplicaChange,
                                              FaultKind::kDrain};
        Planned p;
        p.kind = d.kind(kinds);
        const int i = 1 + d.index(hashes);
        const std::string name = "hash" + std::to_string(i);
        switch (p.kind) {
          case FaultKind::kRangeMove: {
            const uint64_t size = std::max<uint64_t>(users / 20, 1);
            const uint64_t lo = 1 + d.below(users - size);
            const std::string range = std::to_string(lo) + "-" + std::to_string(lo + size - 1);
            p.target = range + " " + name;
            p.detail = "imctl assign " + range + " " + name;
            p.apply = [&c, range, name] { return must_imctl(c, {"assign", range, name}); };
            break;
          }
          case FaultKind::kReplicaChange:
            p.target = "replicas";
            p.detail = "imctl replicas " + std::to_string(*replicas == 2 ? 3 : 2);
            p.apply = [&c, replicas] {
              const int to = *replicas == 2 ? 3 : 2;
              std::string out = must_imctl(c, {"replicas", std::to_string(to)});
              *replicas = to;
              return out;
            };
            break;
          default:  // kDrain: streamed out of the table, then added back with its first range
            p.target = name;
            p.detail =
                "imctl drain " + name + ", then server add and assign " + cluster_.initial_range(i);
            p.length = options_.settle_patience;
            p.apply = [&c, name] { return must_imctl(c, {"drain", name}); };
            p.done = [&c, name] {
              const ImctlResult r = c.imctl({"--json", "drain", name, "--status"});
              // A new config leader knows of no drain (drains are not kept across a takeover,
              // docs/admin_api.md): the server is out of the table all the same.
              return (r.exit_code == 0 && r.out.find("\"drained\":true") != std::string::npos) ||
                     r.out.find("is not being drained") != std::string::npos;
            };
            p.revert = [this, i, to_restore] {
              to_restore->push_back(i);
              restore_drained(cluster_, *to_restore);
            };
            break;
        }
        return p;
      },
      [this, &c, to_restore] {
        restore_drained(cluster_, *to_restore);
        return to_restore->empty() && moves_settled(c);
      }));
}

Nemesis::~Nemesis() = default;

void Nemesis::run(milliseconds length) {
  const Clock::time_point end = Clock::now() + length;
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now >= end) break;
    Clock::time_point wake = std::min(end, now + milliseconds(100));
    for (auto& lane : lanes_) wake = std::min(wake, lane->step(Clock::now()));
    std::this_thread::sleep_until(wake);
  }
  for (auto& lane : lanes_) lane->finish();
}

std::array<uint64_t, kFaultKinds> Nemesis::counts() const {
  std::array<uint64_t, kFaultKinds> n{};
  for (const FaultRecord& r : log_) n[static_cast<size_t>(r.kind)] += r.took_effect;
  return n;
}

void Nemesis::write_log(const std::string& path) const {
  std::ofstream out(path);
  out << "# imhash nemesis log: start_ns end_ns kind target ok|failed detail -- evidence\n";
  // One line a fault: imctl's answers have several.
  const auto line = [](std::string text) {
    for (char& c : text) c = c == '\n' ? '|' : c;
    return text;
  };
  for (const FaultRecord& r : log_) {
    out << r.start_ns << ' ' << r.end_ns << ' ' << fault_name(r.kind) << " '" << r.target << "' "
        << (r.took_effect ? "ok" : "failed") << ' ' << line(r.detail) << " -- " << line(r.evidence)
        << '\n';
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

void Nemesis::write_windows(const std::string& path, milliseconds slack) const {
  std::ofstream out(path);
  out << "# imhash nemesis windows: start_ns end_ns kind rules (docs/reliability.md)\n";
  const int64_t slack_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slack).count();
  for (const FaultRecord& r : log_) {
    if (!r.took_effect) continue;
    const char* rules = allowed_answers(r);
    if (*rules == '\0') continue;
    out << r.start_ns << ' ' << r.end_ns + slack_ns << ' ' << fault_name(r.kind) << ' ' << rules
        << '\n';
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace imhash::test
