// UserModel: the simulated users — who they are, which endpoint each registers, whether each is
// logged in — the choice of the next request (first one LOGIN per user, then the --mix), and the
// --verify bookkeeping that judges what the server answers against that state.
//
// Verification rules. A user's state is kUnknown until its LOGIN or LOGOUT is answered, and again
// after one of its own requests fails or goes unanswered (the server may or may not have applied
// it). A user has at most one of its own requests (LOGIN, HEARTBEAT, LOGOUT) in flight: it is then
// "busy", and its version counter moves when that request is sent and when it completes. A LOOKUP
// is judged only if its target was idle with a known state when the LOOKUP was sent, and is still
// idle at the same version when the reply comes, so nothing the server might apply in between can
// change the right answer. Then a logged-in target must come back OK with exactly its endpoint and
// a logged-out one NOT_FOUND; other statuses (UNAVAILABLE, TIMEOUT, ...) are errors, not verdicts.
// With --verify an OK to LOGIN or HEARTBEAT must also echo the endpoint the user registered.
// With --history every LOGIN and HEARTBEAT writes an endpoint of its own (write_endpoint()): the
// echo must be that write's, and a logged-in user's LOOKUP must find its last acknowledged write.
// Known limit: a try delayed inside the server past the client's timeout and applied after a later
// request of the same user would be reported as a failure; a server that answers or drops within
// its own deadline (docs/design.md §5, 100 ms < the default 200 ms try) never does that.
//
// No allocation after construction. Not thread-safe: the driver's thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/codec/client_protocol.h"
#include "common/codec/endpoint.h"
#include "tools/udp_sim/rng.h"
#include "tools/udp_sim/sim_config.h"

namespace imhash::sim {

enum class UserState : uint8_t { kUnknown, kLoggedOut, kLoggedIn };

// The endpoint user `id` registers unless --observed: IPv4 10.a.b.c with a.b.c the low 24 bits of
// the id (distinct for 2^24 consecutive ids), or for `ipv6_percent` % of the ids 2001:db8::ID; the
// port is a hash of the id in 1024..65535.
Endpoint synthetic_endpoint(uint64_t id, uint32_t ipv6_percent);

// With --history: the endpoint that write number `write` (1, 2, ...: LOGINs and HEARTBEATs) of
// user `id` carries in the udp_sim process numbered `client` (--history-client), so that no other
// write of that user, from this process or another with its own number, carries the same one and a
// stale LOOKUP answer shows. IPv6 [2001:db8:C:WWWW:WWWW:III:IIII:IIII]:5222: 2001:db8::/32 (for
// documentation, unicast), the client (16 bits), the write (32 bits: unique until a user's 2^32nd
// write), the id's low 48 bits (for a reader; uniqueness is per user).
inline constexpr uint16_t kWriteEndpointPort = 5222;
Endpoint write_endpoint(uint16_t client, uint32_t write, uint64_t id);

// What the model remembers about one request between its send and its end; the driver keeps it in
// the request's in-flight slot.
struct RequestTag {
  uint32_t user = 0;  // index in the population: user id = first_user + user
  client::Op op = client::Op::kLookup;
  bool judge = false;    // LOOKUP: the target was idle with a known state when sent
  uint32_t version = 0;  // LOOKUP: the target's version when sent
  uint32_t write = 0;    // LOGIN, HEARTBEAT: the user's write number (write_endpoint())
};

struct VerifyFailure {
  uint64_t user_id = 0;
  client::Op op = client::Op::kLookup;
  std::optional<Endpoint> expected;  // nullopt: expected NOT_FOUND (logged out)
  client::Status status = client::Status::kOk;
  std::optional<Endpoint> got;  // the ENDPOINT in the reply, if any

  std::string expected_text() const;  // "10.0.0.7:4242" or "NOT_FOUND"
  std::string got_text() const;       // "10.0.0.8:4242", "NOT_FOUND", "OK without ENDPOINT"
  std::string describe() const;       // "user 7 LOOKUP: expected ..., got ..."
};

struct VerifyCounts {
  uint64_t verified_ok = 0;    // judged LOOKUPs answered right
  uint64_t verify_failed = 0;  // judged LOOKUPs answered wrong + wrong LOGIN/HEARTBEAT echoes
  uint64_t unjudged = 0;       // LOOKUPs that could not be judged (see above)
  uint64_t echo_checked = 0;   // LOGIN/HEARTBEAT OK replies whose echo was checked
};

class UserModel {
 public:
  static constexpr size_t kMaxFailures = 10;  // failures kept for the report

  struct Config {
    uint64_t first_user = 1;
    uint32_t users = 1;
    Mix mix;
    uint32_t ipv6_percent = 0;
    uint32_t sockets = 1;  // a user sends all of its requests from socket `user % sockets`
    // --observed: the local address of each socket, which the server must store for the users
    // of that socket. Empty: users send their synthetic_endpoint().
    std::vector<Endpoint> observed;
    bool verify = false;
    // --history: each LOGIN and HEARTBEAT carries write_endpoint(*history_client, ...) instead of
    // the synthetic endpoint. Not with `observed`.
    std::optional<uint16_t> history_client;
    uint64_t seed = 1;
    // A login storm (SimConfig::storm): every user's LOGIN in id order, then, once all of them
    // have ended, one LOOKUP of each user in id order, then nothing.
    bool storm = false;
    // With storm: skip the LOGINs; every user is taken as logged in (SimConfig::lookup_only), with
    // history_client: by its first write, as a storm with the same client number left it.
    bool lookup_only = false;
  };

  explicit UserModel(Config config);

  uint32_t size() const { return static_cast<uint32_t>(users_.size()); }
  uint64_t id_of(uint32_t user) const { return config_.first_user + user; }
  uint32_t socket_of(uint32_t user) const { return user % config_.sockets; }
  // The ENDPOINT the LOGIN or HEARTBEAT `t` carries; nullopt with --observed.
  std::optional<Endpoint> endpoint_to_send(const RequestTag& t) const;
  // What the server must store for `user` once its last write is acknowledged.
  Endpoint registered_endpoint(uint32_t user) const;

  // The next request: one LOGIN per user in id order, then draws from the mix. A HEARTBEAT or
  // LOGOUT drawn for a user who is not logged in becomes a LOGIN; a LOGIN, HEARTBEAT or LOGOUT
  // whose drawn users are all busy becomes a LOOKUP. Marks a sender busy. In a storm: the LOGINs,
  // then the LOOKUPs. Precondition: can_issue().
  RequestTag next();
  bool starting() const { return next_login_ < users_.size(); }
  // Whether next() has a request now: always, except in a storm between its last LOGIN sent and
  // its last LOGIN ended, and after its last LOOKUP sent.
  bool can_issue() const;
  // A storm whose every LOOKUP has ended (never true outside a storm).
  bool finished() const { return config_.storm && lookups_ended_ == users_.size(); }

  // What next() uses, public so tests can build exact sequences. start_own: `user` sends its own
  // `op` (LOGIN, HEARTBEAT or LOGOUT); precondition: the user is not busy. start_lookup: a LOOKUP
  // of `user`.
  RequestTag start_own(uint32_t user, client::Op op);
  RequestTag start_lookup(uint32_t user);

  // A request ended: `reply` is its decoded, matching response, or nullptr when no reply came.
  void complete(const RequestTag& tag, const client::Message* reply);

  UserState state(uint32_t user) const { return users_[user].state; }
  bool busy(uint32_t user) const { return users_[user].busy; }
  const VerifyCounts& verify_counts() const { return counts_; }
  const std::vector<VerifyFailure>& failures() const { return failures_; }

 private:
  struct User {
    uint32_t version = 0;
    uint32_t writes = 0;  // LOGINs and HEARTBEATs started: the last one's write number
    UserState state = UserState::kUnknown;
    bool busy = false;
  };

  void judge_lookup(const RequestTag& tag, const client::Message* reply);
  void fail(uint32_t user, client::Op op, std::optional<Endpoint> expected,
            const client::Message& reply);

  // Constant after construction.
  Config config_;
  uint64_t mix_total_ = 0;

  std::vector<User> users_;
  uint32_t next_login_ = 0;
  // Storm progress.
  uint32_t logins_ended_ = 0;
  uint32_t next_lookup_ = 0;
  uint32_t lookups_ended_ = 0;
  Rng rng_;
  VerifyCounts counts_;
  std::vector<VerifyFailure> failures_;  // reserved for kMaxFailures
};

}  // namespace imhash::sim
