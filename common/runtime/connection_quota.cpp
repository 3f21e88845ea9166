#include "common/runtime/connection_quota.h"

namespace imhash {

struct ConnectionQuota::Ticket::State {
  mutable std::mutex mu;
  size_t total = 0;
  std::map<boost::asio::ip::address, size_t> per_source;
};

namespace {
boost::asio::ip::address canonical(const boost::asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  }
  return a;
}
}  // namespace

ConnectionQuota::Ticket& ConnectionQuota::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
    source_ = other.source_;
  }
  return *this;
}

void ConnectionQuota::Ticket::release() noexcept {
  if (!state_) return;
  const std::lock_guard lock(state_->mu);
  --state_->total;
  if (auto it = state_->per_source.find(source_); it != state_->per_source.end()) {
    if (--it->second == 0) state_->per_source.erase(it);
  }
  state_.reset();
}

ConnectionQuota::ConnectionQuota(Limits limits)
    : limits_(limits), state_(std::make_shared<Ticket::State>()) {}

std::optional<ConnectionQuota::Ticket> ConnectionQuota::admit(
    const boost::asio::ip::address& source, Refusal& why) {
  const auto key = canonical(source);
  const std::lock_guard lock(state_->mu);
  if (limits_.total != 0 && state_->total >= limits_.total) {
    why = Refusal::kTotal;
    return std::nullopt;
  }
  size_t& from_source = state_->per_source[key];
  if (limits_.per_source != 0 && from_source >= limits_.per_source) {
    why = Refusal::kPerSource;
    return std::nullopt;
  }
  ++from_source;
  ++state_->total;
  return Ticket(state_, key);
}

size_t ConnectionQuota::open() const {
  const std::lock_guard lock(state_->mu);
  return state_->total;
}

const char* to_string(ConnectionQuota::Refusal r) {
  return r == ConnectionQuota::Refusal::kTotal ? "too many connections"
                                               : "too many connections from this address";
}

}  // namespace imhash
