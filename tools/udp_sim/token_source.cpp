#include "tools/udp_sim/token_source.h"

#include <algorithm>

#include "common/security/token.h"

namespace imhash::sim {

TokenSource::TokenSource(std::span<const uint8_t> key, uint64_t first_user, uint32_t users)
    : mac_(key), first_user_(first_user), entries_(users) {}

client::Token TokenSource::token_for(uint32_t user, uint32_t now) {
  Entry& e = entries_[user];
  const uint64_t id = first_user_ + user;
  if (e.expiry == 0 || uint64_t{e.expiry} < uint64_t{now} + kRenewBefore) {
    const auto expiry =
        static_cast<uint32_t>(std::min<uint64_t>(uint64_t{now} + kValidity, UINT32_MAX));
    // On an OpenSSL failure keep the old token (the server will refuse it) and try again next time.
    if (const auto mac = mac_(id, expiry)) {
      e.expiry = expiry;
      e.mac = *mac;
      ++macs_computed_;
    }
  }
  client::Token t;
  t.user_id = id;
  t.expiry = e.expiry;
  t.mac = e.mac;
  return t;
}

}  // namespace imhash::sim
