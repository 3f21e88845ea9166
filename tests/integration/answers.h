// What the integration tests' users register and how they read an answer: one endpoint per user id
// (so a LOOKUP can be checked against the LOGIN that stored it), and the status of an answer that
// must have come. Used from the test's thread.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <optional>

#include "common/codec/client_protocol.h"
#include "common/codec/endpoint.h"

namespace imhash::test {

// The endpoint user `user` logs in from: 10.0.0.0/8 plus the id, port 1 + id % 65535.
inline Endpoint endpoint_of(uint64_t user) {
  return Endpoint::v4(0x0a000000u + static_cast<uint32_t>(user),
                      static_cast<uint16_t>(1 + user % 65535));
}

// The status of an answer; the test stops if none came.
inline client::Status status_of(const std::optional<client::Message>& m) {
  REQUIRE(m.has_value());
  return m->status;
}

}  // namespace imhash::test
