// Tests of what a config server that has just taken over holds back
// (config_server/takeover_hold.h): changes and purges wait for the settle window, and a version the
// dying leader committed but pushed to no node (inherited unpushed) goes to every node at once, not
// to each as it registers.
#include "config_server/takeover_hold.h"

#include <doctest/doctest.h>

#include "tests/cluster_events.h"

using imhash::cluster::TakeoverHold;
using imhash::test::kDownAfterNs;
using imhash::test::kSecondNs;

TEST_CASE("takeover hold: changes wait for the settle window, at least the DOWN window") {
  TakeoverHold hold;
  hold.on_lead(7, 10 * kSecondNs, kDownAfterNs);
  CHECK(hold.settling_left(10 * kSecondNs) == kDownAfterNs);
  CHECK(hold.settling_left(12 * kSecondNs) == kSecondNs);
  CHECK(hold.settling_left(13 * kSecondNs) == 0);
  CHECK(hold.settling_left(20 * kSecondNs) == 0);
  // A short DOWN window: the settle window is still the nodes' reconnect back-off and more.
  TakeoverHold quick;
  quick.on_lead(7, 0, kSecondNs / 10);
  CHECK(quick.settling_left(0) == TakeoverHold::kSettleNs);
  // A first table (version 0): nobody to wait for.
  TakeoverHold first;
  first.on_lead(0, 0, kDownAfterNs);
  CHECK(first.settling_left(0) == 0);
  CHECK_FALSE(first.holding());
}

TEST_CASE("takeover hold: an inherited version reaches no node one by one") {
  TakeoverHold hold;
  hold.on_lead(7, 0, kDownAfterNs);  // version 7 in the store: perhaps pushed to nobody
  // Nodes that register on version 6 keep it (a hash server on 7 would answer MOVED to login
  // servers still on 6); a node with no table at all gets 7 at once; one on 7 is not behind.
  CHECK(hold.holds_push(6, 7));
  CHECK_FALSE(hold.holds_push(0, 7));
  CHECK_FALSE(hold.holds_push(7, 7));
  CHECK_FALSE(hold.on_node_runs(6, 7));
  CHECK(hold.holding());
  CHECK_FALSE(hold.on_tick(kSecondNs));  // the window has not ended
}

TEST_CASE("takeover hold: a node that runs the version releases it to every node at once") {
  TakeoverHold hold;
  hold.on_lead(7, 0, kDownAfterNs);
  CHECK(hold.on_node_runs(7, 7));  // it was out before the old leader died
  CHECK_FALSE(hold.holding());
  CHECK_FALSE(hold.holds_push(6, 7));
  CHECK_FALSE(hold.on_node_runs(7, 7));  // released once
  CHECK_FALSE(hold.on_tick(kDownAfterNs + 1));
  // Changes still wait for the settle window: the nodes may not all be back.
  CHECK(hold.settling_left(kSecondNs) > 0);
}

TEST_CASE("takeover hold: the end of the settle window releases the version") {
  TakeoverHold hold;
  hold.on_lead(7, 0, kDownAfterNs);
  CHECK_FALSE(hold.on_tick(kDownAfterNs - 1));
  CHECK(hold.on_tick(kDownAfterNs));
  CHECK_FALSE(hold.holding());
  CHECK_FALSE(hold.on_tick(kDownAfterNs + 1));
  // Standing by clears it; leading again starts a new window.
  hold.clear();
  CHECK(hold.settling_left(kDownAfterNs) == 0);
  hold.on_lead(8, 10 * kSecondNs, kDownAfterNs);
  CHECK(hold.holds_push(7, 8));
}
