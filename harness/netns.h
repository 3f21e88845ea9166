// Hosts: a little network of hosts in network namespaces for tests of several machines. A hub
// namespace holds a bridge; each host is a namespace whose eth0 (one end of a veth pair, the other
// end a port of the bridge) has an address on 10.77.X.0/24. The addresses exist only inside these
// namespaces: the root namespace gets no interface, route or address, so no packet leaves the
// test's hosts. A program runs on a host through ChildOptions::netns = hosts.netns(NAME).
//
// Faults on a host's link: cut and restore it; loss, delay, duplication and reordering on both
// directions of it (impair(): tc netem, or where the kernel has no sch_netem, tools/lossy_relay
// joining the link through the hub); and the same loss and delay for one UDP path from a relay on
// the host (impaired_path()). Between two hosts: a partition, no packet
// between them either way while each still reaches every other host (partition(), heal()).
//
// Everything is made with iproute2 (`ip`, `tc`) run as child processes, each checked (a failure
// throws with the command and what it said; each command and its output also go to the run's
// netns.log). Names carry the test's pid (imh<PID>-hub, imh<PID>-<host>): the destructor kills
// whatever still runs inside them and deletes them, and a Hosts made later deletes what a test
// process that died without unwinding left (namespaces of pids that are gone). Needs root
// (CAP_SYS_ADMIN, CAP_NET_ADMIN). Used from the test's thread.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/binaries.h"
#include "harness/child_process.h"

namespace imhash::test {

// This machine cannot make hosts (not root, no iproute2, no namespaces, no bridge or veth
// devices); what() says why. The test decides whether that is a skip.
struct HostsUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What netem does to a link, each direction.
struct LinkFault {
  double loss_percent = 0;
  int delay_ms = 0;
  int jitter_ms = 0;  // the delay varies by +- this (uniform; may reorder)
  double duplicate_percent = 0;
  double reorder_percent = 0;  // needs a delay: these go at once, the rest wait delay_ms
};

class Hosts;

// A path from one host to a target address with a LinkFault on it (Hosts::impaired_path): with
// netem, the fault is on the host's link and address() is the target itself; without netem, a
// lossy_relay runs on the host (listening on its loopback, sending on from its eth0) and address()
// is the relay's. Removes the fault (or stops the relay) when destroyed. Test thread.
class ImpairedPath {
 public:
  ~ImpairedPath();
  ImpairedPath(const ImpairedPath&) = delete;
  ImpairedPath& operator=(const ImpairedPath&) = delete;
  ImpairedPath(ImpairedPath&&) noexcept;
  ImpairedPath& operator=(ImpairedPath&&) = delete;

  const std::string& address() const { return address_; }  // where to send
  bool by_netem() const { return relay_ == nullptr && hosts_ != nullptr; }
  std::string description() const;  // "tc netem" or "lossy_relay (no sch_netem in this kernel)"
  // With the relay: stops it (SIGTERM) and returns its summary line ("lossy_relay summary: to
  // target: received N forwarded N lost N ..."); throws if it does not exit 0 with one. The path
  // then goes direct (address() is the target). With netem: "" and nothing changes.
  std::string stop_relay();
  // From a relay summary: how many datagrams it lost toward the target (-1: not in the line).
  static long lost_toward_target(const std::string& summary);

 private:
  friend class Hosts;
  ImpairedPath() = default;
  Hosts* hosts_ = nullptr;  // netem: whose host link to clear
  std::string host_;
  std::string target_;
  std::string address_;
  std::unique_ptr<ChildProcess> relay_;
};

struct HostsOptions {
  Binaries binaries = Binaries::built_in();  // lossy_relay, for impaired_path() without netem
};

class Hosts {
 public:
  // Makes the hub (and probes for veth pairs and netem); throws HostsUnavailable if this machine
  // cannot, std::runtime_error if a later step fails.
  explicit Hosts(HostsOptions options = {});
  ~Hosts();  // kills what runs in its namespaces, deletes them
  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;

  // Adds host `name` (letters and digits, at most 6) with address NET.`byte` (1..254, distinct);
  // returns the address ("10.77.X.BYTE"). Its link is up when it returns.
  std::string add(const std::string& name, int byte);
  // The namespace of host `name`, for ChildOptions::netns (throws for an unknown host).
  const std::string& netns(const std::string& name) const;
  const std::string& address(const std::string& name) const;
  const std::string& subnet() const { return net_; }  // "10.77.X"
  bool netem_available() const { return netem_; }
  // Why netem is missing ("" when it is not).
  const std::string& netem_missing_reason() const { return netem_missing_; }

  // Takes host `name`'s link down (every packet to or from it is lost) / up again (returns once
  // the link is up).
  void cut(const std::string& name);
  void restore(const std::string& name);
  // `fault` on both directions of host `name`'s link, replacing what was there: netem on its eth0
  // and on the hub's port facing it; where the kernel has no sch_netem, a lossy_relay in the hub
  // (--link) between that port, taken out of the bridge, and a new veth pair into it, so that
  // every frame of the link goes through the relay. Returns the evidence: the qdisc shown on the
  // host's eth0, or the relay's "relaying" line.
  std::string impair(const std::string& name, const LinkFault& fault);
  // Removes it (idempotent); with the relay, returns its summary line ("lossy_relay summary:
  // pN to rpNb: received ... lost ... duplicated ... reordered ...; rpNb to pN: ...").
  std::string clear_impairment(const std::string& name);
  // `fault` on the traffic host `from` sends to `target` ("IP:PORT") and on the replies: by netem
  // on from's link where the kernel has it, else by a lossy_relay on `from` (loss, delay and
  // jitter only: a duplicate or reorder fault without netem throws).
  ImpairedPath impaired_path(const std::string& from, const std::string& target,
                             const LinkFault& fault);

  // Partitions host a from host b: from now on no packet goes between them, either way, while
  // both keep their links to every other host. Each one's neighbour (ARP) entry for the other is
  // made permanent with an address no interface has (kNowhere): their frames to each other go
  // nowhere, dropped without a word like on a cut cable, so a connection already open stalls and a
  // new one times out. (A blackhole or unreachable route would not do: the sender gets an error at
  // once, which no real partition gives.) Checks the entries are there once made; idempotent.
  // Partitions survive cut() and restore(), which puts them back before the link comes up (taking
  // a link down drops its neighbour entries).
  void partition(const std::string& a, const std::string& b);
  void heal(const std::string& a, const std::string& b);  // removes it (idempotent)
  void heal_all();                                        // every partition made here
  bool partitioned(const std::string& a, const std::string& b) const;
  // The address partitioned hosts give each other's neighbour entry.
  static constexpr const char* kNowhere = "02:00:00:00:00:00";
  // Host `name`'s neighbour entries (`ip neigh show dev eth0`), the evidence of its partitions
  // for a fault log: each host it is partitioned from is a line "ADDRESS lladdr 02:00:00:00:00:00
  // PERMANENT".
  std::string neighbours(const std::string& name);

  // Runs `ip ARGS` / `tc ARGS` and checks it (throws with what it said); returns its stdout.
  std::string ip(std::vector<std::string> args);
  std::string tc(std::vector<std::string> args);
  // Runs `commands` (lines of `ip` arguments) in the hub namespace with one `ip -batch`, so
  // they take effect within a fraction of a millisecond of each other; checked as ip() is.
  void ip_batch_in_hub(const std::vector<std::string>& commands);

 private:
  struct Host {
    std::string netns;
    std::string address;
    std::string hub_port;  // the bridge's end of its veth pair
  };
  const Host& host(const std::string& name) const;
  // Runs `program ARGS`; its exit status, and its stdout and stderr in `out`.
  int run(const std::string& program, const std::vector<std::string>& args, std::string& out);
  std::string checked(const std::string& program, std::vector<std::string> args);
  void wait_link_up(const Host& h);
  // impair() without netem: the relay on host `name`'s link.
  std::string relay_link(const std::string& name, const LinkFault& fault);
  // `from`'s frames to `to` go nowhere (one side of a partition); checks the entry is there.
  void block(const Host& from, const Host& to);
  void remove_all() noexcept;

  HostsOptions options_;
  std::string ip_, tc_;  // the binaries
  std::string tag_;      // "imh<PID>"
  std::string hub_;      // the hub namespace
  std::string net_;      // "10.77.X"
  std::string log_;      // the run's netns.log
  bool netem_ = false;
  std::string netem_missing_;
  std::map<std::string, Host> hosts_;
  std::map<std::string, std::unique_ptr<ChildProcess>>
      link_relays_;                                           // by host: impair() sans netem
  std::set<std::pair<std::string, std::string>> partitions_;  // host names, the lesser first
  std::vector<std::string> namespaces_;                       // made by this object, hub first
};

// Whether the tests that need hosts must run here (CI=true in the environment): then a machine
// that cannot make them is a failure, not a skip.
bool hosts_required();

}  // namespace imhash::test
