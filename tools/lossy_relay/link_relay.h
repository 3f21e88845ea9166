// lossy_relay's link mode: joins two network interfaces of this namespace, every Ethernet frame
// that arrives on one sent out on the other through a FaultQueue (fault_queue.h), so that a link
// that runs through it loses, duplicates, reorders and delays packets as tc netem would — for all
// of its traffic (TCP and UDP, ARP), where the kernel has no sch_netem. The harness
// (harness/netns.cpp, Hosts::impair) takes a host's veth end out of its bridge and joins it to a
// new veth pair into the bridge through this.
#pragma once

#include <string>

#include "tools/lossy_relay/fault_queue.h"

namespace imhash {

// Runs until SIGTERM or SIGINT, then prints one summary line on stderr ("lossy_relay summary: A
// to B: ...; B to A: ...") and returns 0. Prints "relaying A <-> B" once both sockets are bound.
// `described`: the faults in words, for the log. Throws on a socket error (needs CAP_NET_RAW).
int run_link_relay(const std::string& a, const std::string& b, const FaultParams& faults,
                   const std::string& described);

}  // namespace imhash
