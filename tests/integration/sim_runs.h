// Runs of the real udp_sim for integration tests, asserting with doctest: a verified login storm,
// and a lookup of every user without logging in (what a silent user's contacts see). Thin
// wrappers over the harness's udp_sim runs (harness/udp_sim_run.h), which hold the one parser of
// its summary. Used from the test's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "harness/child_process.h"
#include "harness/udp_sim_run.h"

namespace imhash::test {

// How often the tests that move records poll counts and status, and how long they wait for a move:
// long enough for a sanitizer build to stream and purge a few hundred thousand records.
inline constexpr auto kPollInterval = std::chrono::milliseconds(100);
inline constexpr auto kMovePatience = std::chrono::seconds(120);

// Waits (bounded) for the JSON summary of a `udp_sim --json` (read_udp_sim_summary); the test
// fails, with udp_sim's stderr tail, if none comes.
UdpSimSummary summary_of(ChildProcess& sim);

// `users` users from `first` log in once each through `udp` (a storm, verified: every LOGIN and
// its LOOKUP answered OK), then stay silent.
void log_in(uint16_t udp, uint64_t first, uint64_t users);
// Every one of those users is looked up once, without logging in: how many were found with the
// endpoint they registered (the failures are printed).
uint64_t found(uint16_t udp, uint64_t first, uint64_t users);
// How many of those users' records are still there, as a client that asks again after TIMEOUT or
// UNAVAILABLE sees it: while the cluster is too busy to answer within the login server's deadline
// (a sanitizer build on a loaded machine, right after a failover), the lookups are run again, at
// most three passes in all. A wrong answer (NOT_FOUND, another endpoint) ends it: a record that
// is gone, or a stale read, counts. For tests that assert that no record is lost; found() is for
// those that also assert that every lookup is answered.
uint64_t kept(uint16_t udp, uint64_t first, uint64_t users);

// A verified mixed load (heartbeats, lookups, logouts) of `users` users from `first` at `rate`
// requests per second for `seconds`, started in the background.
std::unique_ptr<ChildProcess> start_load(uint16_t udp, uint64_t first, uint64_t users, int rate,
                                         int seconds);
// The load's summary: it passed verification, and no LOOKUP was answered anything but OK or
// NOT_FOUND (nor went unanswered).
void check_load(ChildProcess& sim);

}  // namespace imhash::test
