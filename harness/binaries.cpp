#include "harness/binaries.h"

#include <filesystem>
#include <stdexcept>

namespace imhash::test {

Binaries Binaries::built_in() {
  return Binaries{IMHASH_HASH_SERVER, IMHASH_LOGIN_SERVER, IMHASH_CONFIG_SERVER,
                  IMHASH_IMCTL,       IMHASH_UDP_SIM,      IMHASH_HICCUP_METER,
                  IMHASH_HASH_BENCH,  IMHASH_NODE_SWARM,   IMHASH_LOSSY_RELAY};
}

Binaries Binaries::of_build(const std::string& dir) {
  Binaries b{dir + "/hash_server/hash_server",
             dir + "/login_server/login_server",
             dir + "/config_server/config_server",
             dir + "/imctl/imctl",
             dir + "/tools/udp_sim/udp_sim",
             dir + "/tools/hiccup_meter",
             dir + "/tools/hash_bench",
             dir + "/tools/node_swarm",
             dir + "/tools/lossy_relay/lossy_relay"};
  for (const std::string* p :
       {&b.hash_server, &b.login_server, &b.config_server, &b.imctl, &b.udp_sim}) {
    if (!std::filesystem::exists(*p)) {
      throw std::runtime_error("no " + *p + " (is " + dir + " a built imhash tree?)");
    }
  }
  return b;
}

}  // namespace imhash::test
