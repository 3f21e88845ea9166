// Helpers of udp_sim's unit tests: replies as a server would send them, a small population, and a
// correct server's answer to any request of the model.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <optional>

#include "tools/udp_sim/user_model.h"

namespace imhash::sim::testing {

using client::Message;
using client::Op;
using client::Status;

// The reply to `t`, as a server sends it.
inline Message reply(const RequestTag& t, uint64_t user_id, Status status,
                     std::optional<Endpoint> endpoint = std::nullopt) {
  Message m;
  m.op = t.op;
  m.response = true;
  m.user_id = user_id;
  m.status = status;
  m.endpoint = endpoint;
  if (t.op == Op::kLookup && status == Status::kOk) m.age = 0;
  return m;
}

// `users` users from id 1000 on 4 sockets, 10% of them IPv6, seed 99.
inline UserModel::Config model_config(uint32_t users, Mix mix = Mix{}, bool verify = true) {
  UserModel::Config c;
  c.first_user = 1000;
  c.users = users;
  c.mix = mix;
  c.ipv6_percent = 10;
  c.sockets = 4;
  c.verify = verify;
  c.seed = 99;
  return c;
}

// Completes `t` as a correct server would, given what the server holds in `store`.
inline void answer_correctly(UserModel& m, const RequestTag& t,
                             std::map<uint64_t, Endpoint>& store) {
  const uint64_t id = m.id_of(t.user);
  Message r;
  switch (t.op) {
    case Op::kLogin:
    case Op::kHeartbeat:
      store[id] = *m.endpoint_to_send(t);
      r = reply(t, id, Status::kOk, store[id]);
      break;
    case Op::kLogout:
      store.erase(id);
      r = reply(t, id, Status::kOk);
      break;
    case Op::kLookup: {
      auto it = store.find(id);
      r = it == store.end() ? reply(t, id, Status::kNotFound)
                            : reply(t, id, Status::kOk, it->second);
      break;
    }
    default:
      FAIL("unexpected op");
  }
  m.complete(t, &r);
}

}  // namespace imhash::sim::testing
