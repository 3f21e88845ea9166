// Binaries: where the programs a harness starts are. By default those of the build the harness
// was compiled in; `of_build(DIR)` names another build tree (the "base" side of an A/B run, or a
// release of the commit before in an upgrade test). Plain data: copy it freely, any thread.
#pragma once

#include <string>

namespace imhash::test {

struct Binaries {
  std::string hash_server;
  std::string login_server;
  std::string config_server;
  std::string imctl;
  std::string udp_sim;
  std::string hiccup_meter;
  std::string hash_bench;
  std::string node_swarm;
  std::string lossy_relay;

  // The programs of this build (paths fixed when the harness was compiled).
  static Binaries built_in();
  // The programs of the CMake build tree at `dir` (its usual layout); throws std::runtime_error
  // naming the first one missing.
  static Binaries of_build(const std::string& dir);
};

}  // namespace imhash::test
