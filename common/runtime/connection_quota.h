// ConnectionQuota: how many TCP connections a listener holds, in total and per source address,
// so that one host (or a flood of connections) cannot take every file descriptor and the memory
// behind them. A listener asks admit() for each accepted connection and keeps the Ticket for as
// long as the connection lives; the count drops when the ticket goes.
//
// Thread rules: admit() on the accepting thread; a Ticket may be moved to and destroyed on any
// thread (a hash server hands connections to shard threads), so the counts sit behind a mutex
// that is touched once per connect and once per close, never per request.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace imhash {

class ConnectionQuota {
 public:
  struct Limits {
    size_t total = 4096;       // 0: no limit
    size_t per_source = 1024;  // per peer IP address (IPv4-mapped IPv6 counts as IPv4); 0: none
  };
  enum class Refusal { kTotal, kPerSource };

  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&&) noexcept = default;
    Ticket& operator=(Ticket&& other) noexcept;  // gives back the count this one held
    ~Ticket() { release(); }

   private:
    friend class ConnectionQuota;
    struct State;
    void release() noexcept;
    Ticket(std::shared_ptr<State> state, boost::asio::ip::address source)
        : state_(std::move(state)), source_(source) {}
    std::shared_ptr<State> state_;
    boost::asio::ip::address source_;
  };

  explicit ConnectionQuota(Limits limits);

  // A ticket for one more connection from `source`, or why not.
  std::optional<Ticket> admit(const boost::asio::ip::address& source, Refusal& why);
  size_t open() const;
  const Limits& limits() const { return limits_; }

 private:
  Limits limits_;
  std::shared_ptr<Ticket::State> state_;
};

const char* to_string(ConnectionQuota::Refusal r);

}  // namespace imhash
