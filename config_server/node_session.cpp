#include "config_server/node_session.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "common/endpoint.h"
#include "config_server/config_service.h"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace imhash {

namespace {
// A node that sends more than this unanswered is cut off: bounded memory per link.
constexpr size_t kMaxQueued = 64 << 20;
}  // namespace

NodeSession::NodeSession(tcp::socket socket, ConfigService& service)
    : socket_(std::move(socket)), service_(service) {
  boost::system::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  if (!ec) peer_ = format_host_port(ep.address().to_string(), ep.port());
  socket_.set_option(tcp::no_delay(true), ec);
}

void NodeSession::start() {
  asio::co_spawn(
      socket_.get_executor(), [self = shared_from_this()] { return self->read_loop(); },
      asio::detached);
}

void NodeSession::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

void NodeSession::send(const control::Message& m) {
  if (closed_) return;
  control::append_message(m, queued_);
  if (queued_.size() > kMaxQueued) {
    spdlog::warn("node {} ({}) is not reading; closing its link", key, peer_);
    close();
    return;
  }
  write_next();
}

void NodeSession::write_next() {
  if (write_in_progress_ || queued_.empty() || closed_) return;
  write_in_progress_ = true;
  writing_.swap(queued_);
  asio::async_write(socket_, asio::buffer(writing_),
                    [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                      self->write_in_progress_ = false;
                      self->writing_.clear();
                      if (ec) {
                        self->close();
                        return;
                      }
                      self->write_next();
                    });
}

asio::awaitable<void> NodeSession::read_loop() {
  std::vector<uint8_t> in(64 * 1024);
  size_t have = 0;
  for (;;) {
    if (have == in.size()) in.resize(in.size() * 2);
    auto [ec, n] = co_await socket_.async_read_some(
        asio::buffer(in.data() + have, in.size() - have), asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    have += n;
    size_t off = 0;
    bool bad = false;
    for (;;) {
      control::Message m;
      size_t used = 0;
      std::string error;
      const auto st = control::next_message({in.data() + off, have - off}, m, used, error);
      if (st == control::DecodeStatus::kNeedMore) break;
      if (st != control::DecodeStatus::kOk) {
        spdlog::warn("node link {}: bad message: {}; closing", peer_, error);
        bad = true;
        break;
      }
      off += used;
      service_.on_message(*this, m);
      if (closed_) break;
    }
    if (bad || closed_) break;
    std::memmove(in.data(), in.data() + off, have - off);
    have -= off;
  }
  close();
  service_.on_disconnect(*this);
}

}  // namespace imhash
