#include "harness/netns.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "harness/log_file.h"
#include "harness/run_logs.h"
#include "harness/wait_until.h"

namespace imhash::test {

namespace {

constexpr auto kCommandPatience = std::chrono::seconds(30);  // one ip/tc command, at most
constexpr const char* kHostPrefix = "imh";

std::string find_binary(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string p = dir + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

std::string percent(double p) {
  std::ostringstream out;
  out << p << '%';
  return out.str();
}

std::vector<std::string> netem_args(const LinkFault& f) {
  std::vector<std::string> a = {"netem"};
  if (f.loss_percent > 0) a.insert(a.end(), {"loss", percent(f.loss_percent)});
  if (f.delay_ms > 0 || f.jitter_ms > 0) {
    a.insert(a.end(), {"delay", std::to_string(f.delay_ms) + "ms"});
    if (f.jitter_ms > 0) a.push_back(std::to_string(f.jitter_ms) + "ms");
  }
  if (f.duplicate_percent > 0) a.insert(a.end(), {"duplicate", percent(f.duplicate_percent)});
  if (f.reorder_percent > 0) a.insert(a.end(), {"reorder", percent(f.reorder_percent)});
  return a;
}

// "imh1234-cfg" -> 1234 (0: not one of ours).
long pid_of_namespace(const std::string& name) {
  if (name.rfind(kHostPrefix, 0) != 0) return 0;
  const size_t dash = name.find('-');
  if (dash == std::string::npos || dash == 3) return 0;
  const std::string digits = name.substr(3, dash - 3);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::strtol(digits.c_str(), nullptr, 10);
}

}  // namespace

bool hosts_required() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// --- ImpairedPath ------------------------------------------------------------------------------

ImpairedPath::ImpairedPath(ImpairedPath&& o) noexcept
    : hosts_(o.hosts_),
      host_(std::move(o.host_)),
      target_(std::move(o.target_)),
      address_(std::move(o.address_)),
      relay_(std::move(o.relay_)) {
  o.hosts_ = nullptr;
}

ImpairedPath::~ImpairedPath() {
  if (hosts_ == nullptr) return;
  try {
    hosts_->clear_impairment(host_);
  } catch (const std::exception&) {
    // The namespaces go with the Hosts anyway.
  }
}

std::string ImpairedPath::description() const {
  if (by_netem()) return "tc netem on " + host_ + "'s link";
  if (relay_) return "lossy_relay on " + host_ + " (no sch_netem in this kernel)";
  return "nothing (the relay is stopped: direct)";
}

std::string ImpairedPath::stop_relay() {
  if (!relay_) return {};
  const int rc = relay_->stop(SIGTERM);
  std::string summary;
  std::ifstream in(relay_->log_path());
  for (std::string line; std::getline(in, line);) {
    if (line.find("lossy_relay summary") != std::string::npos) summary = line;
  }
  const std::string log = relay_->log_path();
  relay_.reset();
  address_ = target_;
  if (rc != 0 || summary.empty()) {
    throw std::runtime_error("lossy_relay exited " + std::to_string(rc) +
                             " on SIGTERM; the end of its log (" + log + "):\n" +
                             tail_of_file(log, 40));
  }
  return summary;
}

long ImpairedPath::lost_toward_target(const std::string& summary) {
  static const std::regex lost("to target: received [0-9]+ forwarded [0-9]+ lost ([0-9]+)");
  std::smatch m;
  if (!std::regex_search(summary, m, lost)) return -1;
  return std::stol(m[1].str());
}

// --- Hosts -------------------------------------------------------------------------------------

Hosts::Hosts(HostsOptions options) : options_(std::move(options)) {
  if (geteuid() != 0) {
    throw HostsUnavailable("needs root to create network namespaces (running as uid " +
                           std::to_string(geteuid()) + ")");
  }
  ip_ = find_binary("ip");
  tc_ = find_binary("tc");
  if (ip_.empty()) throw HostsUnavailable("iproute2 (ip) is not installed");
  if (tc_.empty()) throw HostsUnavailable("iproute2 (tc) is not installed");
  log_ = RunLogs::path("netns");
  const pid_t pid = getpid();
  tag_ = kHostPrefix + std::to_string(pid);
  hub_ = tag_ + "-hub";
  // 10.77.X.0/24 exists only inside our namespaces; X varies anyway, as a second line of defence.
  net_ = "10.77." + std::to_string(pid % 200 + 20);

  // What test processes that died without unwinding left: namespaces of pids that are gone.
  std::string listed;
  if (run(ip_, {"netns", "list"}, listed) == 0) {
    std::istringstream lines(listed);
    for (std::string line; std::getline(lines, line);) {
      const std::string name = line.substr(0, line.find(' '));
      const long owner = pid_of_namespace(name);
      if (owner <= 0 || owner == pid) continue;
      if (::kill(static_cast<pid_t>(owner), 0) == 0 || errno != ESRCH) continue;
      std::string pids, ignored;
      run(ip_, {"netns", "pids", name}, pids);
      std::istringstream each(pids);
      for (long p; each >> p;) ::kill(static_cast<pid_t>(p), SIGKILL);
      run(ip_, {"netns", "del", name}, ignored);
    }
  }

  std::string out;
  if (run(ip_, {"netns", "add", hub_}, out) != 0) {
    throw HostsUnavailable("ip netns add failed: " + out);
  }
  namespaces_.push_back(hub_);
  try {
    if (run(ip_, {"-n", hub_, "link", "add", "name", "br0", "type", "bridge"}, out) != 0) {
      throw HostsUnavailable("no bridge device in network namespaces: " + out);
    }
    if (run(ip_,
            {"-n", hub_, "link", "add", "name", "probe0", "type", "veth", "peer", "name", "probe1"},
            out) != 0) {
      throw HostsUnavailable("no veth pairs: " + out);
    }
    netem_ =
        run(tc_, {"-n", hub_, "qdisc", "add", "dev", "probe0", "root", "netem", "delay", "1ms"},
            out) == 0;
    if (!netem_) netem_missing_ = "tc netem is not available (no sch_netem module?): " + out;
    ip({"-n", hub_, "link", "del", "probe0"});
    ip({"-n", hub_, "link", "set", "br0", "up"});
    ip({"-n", hub_, "link", "set", "lo", "up"});
  } catch (...) {
    remove_all();
    throw;
  }
}

Hosts::~Hosts() { remove_all(); }

void Hosts::remove_all() noexcept {
  for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) {
    std::string pids, ignored;
    try {
      // Anything still inside one of our namespaces was started by this test.
      if (run(ip_, {"netns", "pids", *it}, pids) == 0) {
        std::istringstream each(pids);
        for (long p; each >> p;) ::kill(static_cast<pid_t>(p), SIGKILL);
      }
      run(ip_, {"netns", "del", *it}, ignored);
    } catch (const std::exception&) {
      // Deleting is best effort here: a later Hosts removes what is left of a dead pid.
    }
  }
  namespaces_.clear();
  hosts_.clear();
}

int Hosts::run(const std::string& program, const std::vector<std::string>& args, std::string& out) {
  const size_t before = file_text(log_).size();
  {
    std::ofstream log(log_, std::ios::app);
    log << "$ " << program.substr(program.rfind('/') + 1);
    for (const std::string& a : args) log << ' ' << a;
    log << '\n';
  }
  ChildProcess p(program, args, ChildOptions{.stderr_log = log_});
  out = p.read_all(kCommandPatience);
  const int rc = p.stop(0, kCommandPatience);
  // What it said on stderr follows the command line in the log.
  const std::string all = file_text(log_);
  const size_t said = all.find('\n', before);
  if (said != std::string::npos && said + 1 < all.size()) out += all.substr(said + 1);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return rc;
}

std::string Hosts::checked(const std::string& program, std::vector<std::string> args) {
  std::string out;
  const int rc = run(program, args, out);
  if (rc != 0) {
    std::string command = program;
    for (const std::string& a : args) command += " " + a;
    throw std::runtime_error("`" + command + "` exited " + std::to_string(rc) + ": " + out);
  }
  return out;
}

std::string Hosts::ip(std::vector<std::string> args) { return checked(ip_, std::move(args)); }
std::string Hosts::tc(std::vector<std::string> args) { return checked(tc_, std::move(args)); }

std::string Hosts::add(const std::string& name, int byte) {
  if (name.empty() || name.size() > 6 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "0123456789") != std::string::npos) {
    throw std::invalid_argument("Hosts: bad host name '" + name + "'");
  }
  if (byte < 1 || byte > 254) throw std::invalid_argument("Hosts: address byte out of 1..254");
  if (hosts_.count(name)) throw std::invalid_argument("Hosts: host " + name + " exists");
  Host h{tag_ + "-" + name, net_ + "." + std::to_string(byte), "p" + std::to_string(byte)};
  for (const auto& [other, o] : hosts_) {
    if (o.address == h.address) throw std::invalid_argument("Hosts: " + h.address + " is taken");
  }
  ip({"netns", "add", h.netns});
  namespaces_.push_back(h.netns);
  ip({"-n", hub_, "link", "add", "name", h.hub_port, "type", "veth", "peer", "name", "eth0",
      "netns", h.netns});
  ip({"-n", hub_, "link", "set", h.hub_port, "master", "br0", "up"});
  ip({"-n", h.netns, "link", "set", "lo", "up"});
  ip({"-n", h.netns, "addr", "add", h.address + "/24", "dev", "eth0"});
  ip({"-n", h.netns, "link", "set", "eth0", "up"});
  wait_link_up(h);
  return hosts_.emplace(name, std::move(h)).first->second.address;
}

void Hosts::wait_link_up(const Host& h) {
  // Both ends report carrier once both are up (the bridge, without STP, forwards at once).
  const auto up = [&](const std::string& ns, const std::string& dev) {
    std::string out;
    return run(ip_, {"-n", ns, "-o", "link", "show", dev}, out) == 0 &&
           out.find("state UP") != std::string::npos;
  };
  if (!wait_until([&] { return up(h.netns, "eth0") && up(hub_, h.hub_port); }, kPatience,
                  std::chrono::milliseconds(20))) {
    throw std::runtime_error("Hosts: the link of " + h.netns + " did not come up");
  }
}

const Hosts::Host& Hosts::host(const std::string& name) const {
  const auto it = hosts_.find(name);
  if (it == hosts_.end()) throw std::invalid_argument("Hosts: no host " + name);
  return it->second;
}

const std::string& Hosts::netns(const std::string& name) const { return host(name).netns; }
const std::string& Hosts::address(const std::string& name) const { return host(name).address; }

void Hosts::cut(const std::string& name) { ip({"-n", netns(name), "link", "set", "eth0", "down"}); }

void Hosts::restore(const std::string& name) {
  const Host& h = host(name);
  // Taking the link down dropped its neighbour entries, its partitions' too: they go back first,
  // so that not one packet crosses a partition once the link is up.
  for (const auto& [a, b] : partitions_) {
    if (a == name) block(h, host(b));
    if (b == name) block(h, host(a));
  }
  ip({"-n", h.netns, "link", "set", "eth0", "up"});
  wait_link_up(h);
}

void Hosts::block(const Host& from, const Host& to) {
  ip({"-n", from.netns, "neigh", "replace", to.address, "lladdr", kNowhere, "dev", "eth0", "nud",
      "permanent"});
  const std::string shown = ip({"-n", from.netns, "neigh", "show", to.address, "dev", "eth0"});
  if (shown.find(kNowhere) == std::string::npos || shown.find("PERMANENT") == std::string::npos) {
    throw std::runtime_error("Hosts: " + from.netns + "'s neighbour entry for " + to.address +
                             " is not the partition's but '" + shown + "'");
  }
}

void Hosts::partition(const std::string& a, const std::string& b) {
  if (a == b) throw std::invalid_argument("Hosts: cannot partition " + a + " from itself");
  const Host& ha = host(a);
  const Host& hb = host(b);
  block(ha, hb);
  block(hb, ha);
  partitions_.insert(std::minmax(a, b));
}

void Hosts::heal(const std::string& a, const std::string& b) {
  const Host& ha = host(a);
  const Host& hb = host(b);
  // `flush ... nud permanent`: the partition's entry if it is there (a plain flush spares
  // permanent entries), nothing and no error if not.
  for (const auto& [from, to] : {std::pair{&ha, &hb}, {&hb, &ha}}) {
    ip({"-n", from->netns, "neigh", "flush", "to", to->address, "dev", "eth0", "nud", "permanent"});
  }
  partitions_.erase(std::minmax(a, b));
}

void Hosts::heal_all() {
  while (!partitions_.empty()) {
    const auto [a, b] = *partitions_.begin();
    heal(a, b);
  }
}

bool Hosts::partitioned(const std::string& a, const std::string& b) const {
  return partitions_.count(std::minmax(a, b)) > 0;
}

std::string Hosts::neighbours(const std::string& name) {
  return ip({"-n", netns(name), "neigh", "show", "dev", "eth0"});
}

std::string Hosts::impair(const std::string& name, const LinkFault& fault) {
  const Host& h = host(name);
  if (!netem_) return relay_link(name, fault);
  const std::vector<std::string> netem = netem_args(fault);
  // Its eth0 carries what it sends, the hub's port facing it what it receives.
  for (const auto& [ns, dev] : {std::pair{h.netns, std::string("eth0")}, {hub_, h.hub_port}}) {
    std::vector<std::string> args = {"-n", ns, "qdisc", "replace", "dev", dev, "root"};
    args.insert(args.end(), netem.begin(), netem.end());
    tc(args);
  }
  return trimmed(tc({"-n", h.netns, "qdisc", "show", "dev", "eth0"}));
}

std::string Hosts::relay_link(const std::string& name, const LinkFault& fault) {
  clear_impairment(name);
  const Host& h = host(name);
  // The host's port leaves the bridge; a new veth pair joins the bridge (its "a" end) and the
  // relay joins the pair's "b" end to the host's port: every frame of the link goes through it.
  // The relay runs before the swap, which is one `ip -batch`: no frame is lost to the change
  // itself. (Started after the port left the bridge, the link carried nothing for the relay's
  // start-up, tens of milliseconds: TCP retransmitted after its 200 ms minimum RTO, and a fault
  // logged as "reorder" was a blackout first — the lookups of one-minute runs timed out at the
  // moments relays were put in and taken out.)
  const std::string into_bridge = "r" + h.hub_port + "a", to_relay = "r" + h.hub_port + "b";
  ip({"-n", hub_, "link", "add", "name", into_bridge, "type", "veth", "peer", "name", to_relay});
  ip({"-n", hub_, "link", "set", to_relay, "up"});
  ip({"-n", hub_, "link", "set", into_bridge, "up"});
  const auto number = [](double v) {
    std::string p = percent(v);
    return p.substr(0, p.size() - 1);
  };
  auto relay = std::make_unique<ChildProcess>(
      options_.binaries.lossy_relay,
      std::vector<std::string>{
          "--link", h.hub_port + "," + to_relay, "--loss", number(fault.loss_percent),
          "--duplicate", number(fault.duplicate_percent), "--reorder",
          number(fault.reorder_percent), "--delay-ms", std::to_string(fault.delay_ms),
          "--jitter-ms", std::to_string(fault.jitter_ms)},
      ChildOptions{.name = "lossy_relay.link." + name, .netns = hub_});
  const std::string line = trimmed(relay->wait_for_line("relaying"));
  link_relays_[name] = std::move(relay);
  ip_batch_in_hub(
      {"link set " + h.hub_port + " nomaster", "link set " + into_bridge + " master br0"});
  return line + " (lossy_relay in the hub: " + netem_missing_ + ")";
}

std::string Hosts::clear_impairment(const std::string& name) {
  const Host& h = host(name);
  std::string summary, ignored;  // "no qdisc to delete" is fine
  if (auto it = link_relays_.find(name); it != link_relays_.end()) {
    std::unique_ptr<ChildProcess> relay = std::move(it->second);
    link_relays_.erase(it);
    // The host's port goes back into the bridge in the same instant the relay's pair leaves it;
    // then the relay stops (what it still holds reaches the host or a pair out of the bridge).
    ip_batch_in_hub(
        {"link set r" + h.hub_port + "a nomaster", "link set " + h.hub_port + " master br0 up"});
    relay->stop(SIGTERM);
    std::ifstream in(relay->log_path());
    for (std::string line; std::getline(in, line);) {
      if (line.find("lossy_relay summary") != std::string::npos) summary = line;
    }
    // Deleting one end of the pair deletes both.
    run(ip_, {"-n", hub_, "link", "del", "r" + h.hub_port + "a"}, ignored);
    wait_link_up(h);
  }
  if (netem_) {
    run(tc_, {"-n", h.netns, "qdisc", "del", "dev", "eth0", "root"}, ignored);
    run(tc_, {"-n", hub_, "qdisc", "del", "dev", h.hub_port, "root"}, ignored);
  }
  return summary;
}

void Hosts::ip_batch_in_hub(const std::vector<std::string>& commands) {
  const std::string file = log_ + ".batch";
  {
    std::ofstream out(file, std::ios::trunc);
    for (const std::string& c : commands) out << c << '\n';
  }
  std::ofstream(log_, std::ios::app) << "# " << file << ":\n" << file_text(file);
  ip({"-n", hub_, "-batch", file});
}

ImpairedPath Hosts::impaired_path(const std::string& from, const std::string& target,
                                  const LinkFault& fault) {
  ImpairedPath path;
  path.host_ = from;
  path.target_ = target;
  if (netem_) {
    impair(from, fault);
    path.hosts_ = this;
    path.address_ = target;
    return path;
  }
  if (fault.duplicate_percent > 0 || fault.reorder_percent > 0) {
    throw std::runtime_error("Hosts: lossy_relay cannot duplicate or reorder, and " +
                             netem_missing_);
  }
  // The relay listens on the host's own loopback and sends on from its eth0, so the target sees
  // the host's address as with netem.
  path.relay_ = std::make_unique<ChildProcess>(
      options_.binaries.lossy_relay,
      std::vector<std::string>{
          "--listen", "127.0.0.1:0", "--target", target, "--loss",
          percent(fault.loss_percent).substr(0, percent(fault.loss_percent).size() - 1),
          "--delay-ms", std::to_string(fault.delay_ms), "--jitter-ms",
          std::to_string(fault.jitter_ms)},
      ChildOptions{.name = "lossy_relay." + from, .netns = netns(from)});
  path.address_ = path.relay_->wait_listening()[0];
  return path;
}

}  // namespace imhash::test
