// SimConfig: everything one udp_sim run is told on its command line, as plain values, and the
// parsing of the --mix flag. Built once in main() and read-only afterwards (any thread may read).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace imhash::sim {

// Relative weights of the steady-state operations, as in "heartbeat=50,lookup=45,logout=5".
// A HEARTBEAT or LOGOUT drawn for a user who is not logged in becomes a LOGIN, so users who logged
// out come back as part of the mix.
struct Mix {
  uint32_t login = 0;
  uint32_t heartbeat = 50;
  uint32_t lookup = 45;
  uint32_t logout = 5;

  uint32_t total() const { return login + heartbeat + lookup + logout; }
  friend bool operator==(const Mix&, const Mix&) = default;
};

// Parses "name=weight,..." with names login, heartbeat, lookup, logout (each at most once; absent
// ones weigh 0). Returns nullopt and sets `error` on bad input or when every weight is 0.
std::optional<Mix> parse_mix(std::string_view text, std::string& error);
std::string to_string(const Mix& mix);

struct SimConfig {
  std::string target;  // as given, "HOST:PORT"
  std::string host;
  uint16_t port = 0;

  uint64_t users = 0;
  uint64_t first_user = 1;  // user ids are first_user .. first_user + users - 1
  double duration_s = 10;
  // Seconds of load before the measured `duration_s`: its requests are sent, answered and tracked
  // by the model (--verify), but left out of every figure (start-up effects of this process, the
  // machine and the servers' first writes do not end up in the percentiles).
  double warmup_s = 0;

  // Exactly one of the two modes: open loop when rate > 0, else closed loop with `window`.
  double rate = 0;       // requests per second, on a fixed schedule
  uint32_t window = 64;  // requests in flight

  Mix mix;
  uint32_t timeout_ms = 200;  // per try
  uint32_t retries = 3;       // re-sends of the same request (same request_id) after a timeout
  uint32_t sockets = 8;
  uint64_t seed = 0;
  uint32_t ipv6_percent = 10;  // share of users whose synthetic endpoint is IPv6
  bool observed = false;       // send no ENDPOINT: the server stores the datagram's source
  bool verify = false;
  // --echo: the target echoes datagrams back unchanged (a bare UDP echo server such as the
  // yardstick ../shared/bench/udp_limit.c): each request's own bytes count as its OK answer. For
  // measuring the machine's UDP path with the same pacing and timing as a real run.
  bool echo = false;
  // --storm: each user sends one LOGIN (timed-out tries re-sent as usual), then, once every LOGIN
  // has ended, each user is looked up once; the run ends when the last LOOKUP ends (or at the
  // duration). The --mix is not used. Closed loop only.
  bool storm = false;
  // --lookup-only (with --storm): no LOGINs; every user counts as logged in with the endpoint a
  // storm of the same --first-user and --ipv6-percent registered, and is looked up once: "are the
  // users an earlier run logged in all still there?" (after a move, a restart, a purge).
  bool lookup_only = false;
  // --busy-wait: wait for due times and replies by polling instead of sleeping in ppoll. A timed
  // sleep wakes late by the machine's wake-up latency (~75 us on the development VM), which open
  // loop charges to the server; polling takes a whole core instead, which on a host with no core
  // to spare delays the servers more than the sleep did (docs/performance.md).
  bool busy_wait = false;
  bool json = false;
  // --history FILE: every request goes to FILE (HistoryLog, history_log.h), and every LOGIN and
  // HEARTBEAT carries an endpoint unique to it (write_endpoint(), user_model.h) built with
  // `history_client` (--history-client), which each udp_sim writing the same users must have
  // its own of. Empty: no history, the synthetic endpoints.
  std::string history;
  uint16_t history_client = 0;
  std::string csv;  // --csv FILE: one row per progress line (per second); empty: none
  // Authentication (docs/design.md §6): with --auth-key-file, the key (read at start-up);
  // LoadDriver then puts a TOKEN (TokenSource) into every LOGIN, HEARTBEAT and LOGOUT. Empty: no
  // tokens.
  std::vector<uint8_t> auth_key;

  bool open_loop() const { return rate > 0; }
  // Slots the in-flight table needs: the window, or for open loop what the rate can put in flight
  // while every try of a request times out (with room to spare), within [64, 2^20].
  uint32_t in_flight_capacity() const;
};

}  // namespace imhash::sim
