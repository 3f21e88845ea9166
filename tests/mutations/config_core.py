#!/usr/bin/env python3
"""Shows that each rule of the config server's core is tested: removes one rule at a time from
config_server/ (a small edit of the source: the parts, then the controller that orders them),
rebuilds unit_tests in build/ and runs the test of that rule, which must fail; then puts the source
back. Not part of the suite (it rebuilds); run by
hand after changing a rule or its test: tests/mutations/config_core.py [WORDS...] (from the
repository root, with build/ configured; WORDS pick the rules whose names contain them). Prints
one line a rule; exits 1 if any test still passed.
"""
import shutil
import subprocess
import sys
muts = [
 ("the takeover hold", "config_server/takeover_hold.cpp",
  "return holding_ && node_version > 0 && node_version < latest;", "return holding_ && node_version > latest;",
  "takeover hold: an inherited version reaches no node one by one"),
 ("the inherited version released when a node runs it", "config_server/takeover_hold.cpp",
  "if (!holding_ || latest == 0 || node_version != latest) return false;", "if (holding_ || latest == 0 || node_version != latest) return false;",
  "takeover hold: a node that runs the version releases it to every node at once"),
 ("LAGGING", "config_server/node_registry.cpp",
  "    if (!n.lagging && now_ns - n.behind_since_ns > down_after_ns_) {", "    if (false) {",
  "node registry: a node behind the latest version for the DOWN window is LAGGING"),
 ("convergence waits only for nodes up and not LAGGING", "config_server/node_registry.cpp",
  "return entry.second.waited_for() && entry.second.version < version;", "return entry.second.version < version;",
  "node registry: a node behind the latest version for the DOWN window is LAGGING"),
 ("a name held by a live link", "config_server/node_registry.cpp",
  "return held && held->link != 0 && held->link != asking && holder_link_open && held->up;", "return held && held->link == asking && !holder_link_open;",
  "node registry: a name held by a live link is refused to another link"),
 ("the automatic purge waits for the nodes", "config_server/move_rules.cpp",
  "if (n.waited_for() && n.version < p.version) {", "if (false) {",
  "move rules: the automatic purge goes once all three conditions hold"),
 ("the automatic purge waits for the grace period", "config_server/move_rules.cpp",
  "if (now_unix_ms < p.not_before_ms) {", "if (false) {",
  "move rules: the automatic purge goes once all three conditions hold"),
 ("the automatic purge waits for the stream", "config_server/move_rules.cpp",
  "} else if (r->state != StreamState::kDone || r->version < p.version) {", "} else if (false) {",
  "move rules: the automatic purge goes once all three conditions hold"),
 ("a purge's id matching", "config_server/move_rules.cpp",
  "return s.id == n.rejoin_purge_id && s.state == frame::PurgeState::kDone;", "return s.state == frame::PurgeState::kDone;",
  "move rules: a purge of everything is done when every shard reports its id done"),
 ("drain progress", "config_server/move_rules.cpp",
  "return purge_sent && !purge_pending && records", "return purge_sent && (purge_pending || !purge_pending) && records",
  "move rules: a drained server is one purged, with nothing pending, that holds nothing"),
 ("a rejoin after DOWN", "config_server/node_registry.cpp",
  "  if (n.up) return false;\n  n.up = true;\n  return true;", "  n.up = true;\n  return false;",
  "node registry: a node silent for the DOWN window is DOWN, and heard again it is up"),
 ("a version above the latest pushed", "config_server/node_registry.cpp",
  "  if (version > latest) {", "  if (false) {",
  "node registry: a version above the latest pushed is rejected and counted"),
 # The controller: the order of the rules after each event, and the rules only it holds.
 ("the address check of a registration", "config_server/cluster_controller.cpp",
  "if (is_unspecified_address(reg.address)) {", "if (false) {",
  "cluster controller: a hash server registering an unspecified address is refused"),
 ("the refusal of a name held by a live link", "config_server/cluster_controller.cpp",
  "if (std::string why = name_held(key, link); !why.empty()) {", "if (std::string why = name_held(key, link); false) {",
  "cluster controller: a name held by a live link is refused until that link is gone"),
 ("no push to a node while the version is held", "config_server/cluster_controller.cpp",
  "if (router_ && reg.version < latest && !holds_push(n)) push(n, now, out);", "if (router_ && reg.version < latest) push(n, now, out);",
  "cluster controller: after a takeover changes wait and the inherited version is held"),
 ("the held version released when a node registers with it", "config_server/cluster_controller.cpp",
  "if (takeover_.on_node_runs(reg.version, latest)) {", "if (false) {",
  "cluster controller: after a takeover changes wait and the inherited version is held"),
 ("the held version released at the end of the settle window", "config_server/cluster_controller.cpp",
  "if (takeover_.on_tick(now.steady_ns)) release_held_version", "if (false) release_held_version",
  "cluster controller: after a takeover changes wait and the inherited version is held"),
 ("changes wait for the settle window", "config_server/cluster_controller.cpp",
  "if (const int64_t left = settling_ns(now); left > 0) {", "if (const int64_t left = settling_ns(now); left < 0) {",
  "cluster controller: after a takeover changes wait and the inherited version is held"),
 ("the push-size check", "config_server/cluster_controller.cpp",
  "size > control::kMaxMessageSize", "size > 4 * control::kMaxMessageSize",
  "cluster controller: a change whose push exceeds the message limit is refused"),
 ("a failed store write changes nothing", "config_server/cluster_controller.cpp",
  "if (!error.empty()) {", "if (false) {",
  "cluster controller: a failed store write answers 503 and changes nothing"),
 ("failover of a DOWN server", "config_server/cluster_controller.cpp",
  "n && settings_.failover_auto", "n && false",
  "cluster controller: with automatic failover a DOWN hash server is removed"),
 ("a server removed while DOWN purges everything", "config_server/cluster_controller_moves.cpp",
  "if (removed && !(pending && pending->streams)) {", "if (false && removed && !(pending && pending->streams)) {",
  "cluster controller: a server removed while DOWN purges everything before it is back"),
 ("the automatic purge waits for its conditions", "config_server/cluster_controller_moves.cpp",
  "if (!purge_waits(*it, now).waits.empty()) {", "if (false && !purge_waits(*it, now).waits.empty()) {",
  "cluster controller: the automatic purge waits for grace and acks and the stream"),
 ("a drain's purge recorded", "config_server/cluster_controller_moves.cpp",
  "if (auto d = drains_.find(it->server); d != drains_.end()) d->second.purged = true;", "",
  "cluster controller: a drain shows its version and then that its purge was sent"),
]
survived = 0
only = sys.argv[1:]  # words of the rules to remove (default: every rule)
for name, path, old, new, test in muts:
    if only and not any(w in name for w in only):
        continue
    src = open(path).read()
    assert src.count(old) == 1, (name, old)
    shutil.copy(path, path + ".orig")
    try:
        open(path, "w").write(src.replace(old, new))
        b = subprocess.run(["cmake", "--build", "build", "-j2", "--target", "unit_tests"], capture_output=True, text=True)
        if b.returncode != 0:
            print(f"{name}: BUILD FAILED\n{b.stdout[-2000:]}")
            survived += 1
            continue
        r = subprocess.run(["build/tests/unit_tests", "-tc=" + test.replace(",", "*")], capture_output=True, text=True)
        fails = [l.replace("/work/main/", "") for l in r.stdout.splitlines() if "ERROR" in l][:1]
        ran = [l for l in r.stdout.splitlines() if "test cases:" in l]
        print(f"without {name}: '{test}' {'FAILS' if r.returncode else 'PASSES (!)'} {fails} {ran}")
        survived += r.returncode == 0
    finally:
        shutil.move(path + ".orig", path)
subprocess.run(["cmake", "--build", "build", "-j2", "--target", "unit_tests"], capture_output=True)
sys.exit(1 if survived else 0)
