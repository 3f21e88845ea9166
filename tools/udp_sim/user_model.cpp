#include "tools/udp_sim/user_model.h"

#include <utility>

namespace imhash::sim {

using client::Op;
using client::Status;

Endpoint synthetic_endpoint(uint64_t id, uint32_t ipv6_percent) {
  const uint64_t h = mix64(id);
  const auto port = static_cast<uint16_t>(1024 + h % (65536 - 1024));
  if ((h >> 32) % 100 < ipv6_percent) {
    std::array<uint8_t, 16> a{0x20, 0x01, 0x0d, 0xb8};  // 2001:db8::/32, for documentation
    for (int i = 0; i < 8; ++i) a[8 + i] = static_cast<uint8_t>(id >> (56 - 8 * i));
    return Endpoint::v6(a, port);
  }
  return Endpoint::v4(0x0a000000u | static_cast<uint32_t>(id & 0xffffff), port);
}

Endpoint write_endpoint(uint16_t client, uint32_t write, uint64_t id) {
  std::array<uint8_t, 16> a{0x20, 0x01, 0x0d, 0xb8};  // 2001:db8::/32, for documentation
  a[4] = static_cast<uint8_t>(client >> 8);
  a[5] = static_cast<uint8_t>(client);
  for (int i = 0; i < 4; ++i) a[6 + i] = static_cast<uint8_t>(write >> (24 - 8 * i));
  for (int i = 0; i < 6; ++i) a[10 + i] = static_cast<uint8_t>(id >> (40 - 8 * i));
  return Endpoint::v6(a, kWriteEndpointPort);
}

std::string VerifyFailure::expected_text() const {
  return expected ? expected->to_string() : "NOT_FOUND";
}

std::string VerifyFailure::got_text() const {
  if (status != Status::kOk) return client::to_string(status);
  return got ? got->to_string() : "OK without ENDPOINT";
}

std::string VerifyFailure::describe() const {
  return "user " + std::to_string(user_id) + " " + client::to_string(op) + ": expected " +
         expected_text() + ", got " + got_text();
}

UserModel::UserModel(Config config)
    : config_(std::move(config)), users_(config_.users), rng_(config_.seed) {
  if (config_.sockets == 0) config_.sockets = 1;
  mix_total_ = config_.mix.total();
  failures_.reserve(kMaxFailures);
  if (config_.storm && config_.lookup_only) {
    // The storm this run looks up wrote each user's first endpoint.
    for (User& u : users_) {
      u.state = UserState::kLoggedIn;
      u.writes = 1;
    }
    next_login_ = logins_ended_ = static_cast<uint32_t>(users_.size());
  }
}

std::optional<Endpoint> UserModel::endpoint_to_send(const RequestTag& t) const {
  if (!config_.observed.empty()) return std::nullopt;
  if (config_.history_client) {
    return write_endpoint(*config_.history_client, t.write, id_of(t.user));
  }
  return synthetic_endpoint(id_of(t.user), config_.ipv6_percent);
}

Endpoint UserModel::registered_endpoint(uint32_t user) const {
  if (!config_.observed.empty()) return config_.observed[socket_of(user) % config_.observed.size()];
  if (config_.history_client) {
    return write_endpoint(*config_.history_client, users_[user].writes, id_of(user));
  }
  return synthetic_endpoint(id_of(user), config_.ipv6_percent);
}

RequestTag UserModel::start_own(uint32_t user, Op op) {
  User& u = users_[user];
  u.busy = true;
  ++u.version;
  RequestTag t{.user = user, .op = op};
  if (op == Op::kLogin || op == Op::kHeartbeat) t.write = ++u.writes;
  return t;
}

RequestTag UserModel::start_lookup(uint32_t user) {
  const User& u = users_[user];
  return RequestTag{.user = user,
                    .op = Op::kLookup,
                    .judge = config_.verify && !u.busy && u.state != UserState::kUnknown,
                    .version = u.version};
}

bool UserModel::can_issue() const {
  if (!config_.storm) return true;
  return starting() || (logins_ended_ == users_.size() && next_lookup_ < users_.size());
}

RequestTag UserModel::next() {
  if (config_.storm) {
    if (starting()) return start_own(next_login_++, Op::kLogin);
    return start_lookup(next_lookup_++);
  }
  if (starting()) {
    const uint32_t user = next_login_++;
    if (!users_[user].busy) return start_own(user, Op::kLogin);
  }
  const uint32_t n = size();
  uint64_t r = rng_.below(mix_total_ ? mix_total_ : 1);
  const Mix& m = config_.mix;
  if (r >= m.login + m.heartbeat && r < m.login + m.heartbeat + m.lookup) {
    return start_lookup(static_cast<uint32_t>(rng_.below(n)));
  }
  // A few draws for an idle user; a busy population (fewer users than the window) gets lookups.
  for (int attempt = 0; attempt < 4; ++attempt) {
    const auto user = static_cast<uint32_t>(rng_.below(n));
    const User& u = users_[user];
    if (u.busy) continue;
    const bool in = u.state == UserState::kLoggedIn;
    if (r < m.login) return start_own(user, Op::kLogin);
    if (r < m.login + m.heartbeat) return start_own(user, in ? Op::kHeartbeat : Op::kLogin);
    return start_own(user, in ? Op::kLogout : Op::kLogin);
  }
  return start_lookup(static_cast<uint32_t>(rng_.below(n)));
}

void UserModel::fail(uint32_t user, Op op, std::optional<Endpoint> expected,
                     const client::Message& reply) {
  ++counts_.verify_failed;
  if (failures_.size() < kMaxFailures) {
    failures_.push_back(VerifyFailure{.user_id = id_of(user),
                                      .op = op,
                                      .expected = expected,
                                      .status = reply.status,
                                      .got = reply.endpoint});
  }
}

void UserModel::judge_lookup(const RequestTag& tag, const client::Message* reply) {
  const User& u = users_[tag.user];
  if (!tag.judge || reply == nullptr || u.busy || u.version != tag.version) {
    ++counts_.unjudged;
    return;
  }
  if (u.state == UserState::kLoggedIn) {
    const Endpoint want = registered_endpoint(tag.user);
    if (reply->status == Status::kOk && reply->endpoint == want) {
      ++counts_.verified_ok;
    } else if (reply->status == Status::kOk || reply->status == Status::kNotFound) {
      fail(tag.user, Op::kLookup, want, *reply);
    } else {
      ++counts_.unjudged;
    }
    return;
  }
  // Logged out: the record must be gone.
  if (reply->status == Status::kNotFound) {
    ++counts_.verified_ok;
  } else if (reply->status == Status::kOk) {
    fail(tag.user, Op::kLookup, std::nullopt, *reply);
  } else {
    ++counts_.unjudged;
  }
}

void UserModel::complete(const RequestTag& tag, const client::Message* reply) {
  if (config_.storm) ++(tag.op == Op::kLogin ? logins_ended_ : lookups_ended_);
  if (tag.op == Op::kLookup) {
    if (config_.verify) judge_lookup(tag, reply);
    return;
  }
  User& u = users_[tag.user];
  u.busy = false;
  ++u.version;
  if (reply == nullptr) {
    u.state = UserState::kUnknown;
    return;
  }
  switch (tag.op) {
    case Op::kLogin:
    case Op::kHeartbeat:
      if (reply->status != Status::kOk) {
        u.state = UserState::kUnknown;
        return;
      }
      u.state = UserState::kLoggedIn;
      if (config_.verify) {
        ++counts_.echo_checked;
        // The user's one request in flight was this write, so what it registers is its own.
        const Endpoint want = registered_endpoint(tag.user);
        if (reply->endpoint != want) fail(tag.user, tag.op, want, *reply);
      }
      return;
    case Op::kLogout:
      u.state = reply->status == Status::kOk || reply->status == Status::kNotFound
                    ? UserState::kLoggedOut
                    : UserState::kUnknown;
      return;
    default:
      return;
  }
}

}  // namespace imhash::sim
