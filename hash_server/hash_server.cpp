#include "hash_server/hash_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/options.h"

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace imhash {

using namespace frame;

namespace {
// A peer that connects and says nothing is dropped after this long.
constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
}  // namespace

HashServer::HashServer(HashServerConfig config)
    : config_(std::move(config)), acceptor_(ctx_), signals_(ctx_, SIGINT, SIGTERM) {
  table_version_ = config_.router ? config_.router->version() : 0;
  for (uint32_t i = 0; i < config_.shards; ++i) {
    shards_.push_back(std::make_unique<Shard>(i, config_.shards, config_.name));
    shards_.back()->set_router(config_.router);
  }
}

void HashServer::run() {
  tcp::resolver resolver(ctx_);
  const auto endpoint =
      *resolver.resolve(config_.listen_host, std::to_string(config_.listen_port)).begin();
  acceptor_.open(endpoint.endpoint().protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(endpoint.endpoint());
  acceptor_.listen();
  const auto bound = acceptor_.local_endpoint();

  for (auto& s : shards_) s->start();
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    stop();
  });
  asio::co_spawn(ctx_, accept_loop(), asio::detached);

  spdlog::info("hash server {} with {} shards on {}", config_.name, config_.shards,
               bound.address().to_string() + ":" + std::to_string(bound.port()));
  const std::string addr = bound.address().is_v6()
                               ? "[" + bound.address().to_string() + "]"
                               : bound.address().to_string();
  announce_listening(addr + ":" + std::to_string(bound.port()));
  ctx_.run();
  for (auto& s : shards_) s->join();
  spdlog::info("stopped");
}

void HashServer::stop() {
  boost::system::error_code ec;
  acceptor_.close(ec);
  signals_.cancel(ec);
  for (auto& s : shards_) s->stop();
}

asio::awaitable<void> HashServer::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
    if (ec) {
      spdlog::warn("accept: {}", ec.message());
      continue;
    }
    asio::co_spawn(ctx_, handshake(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> HashServer::handshake(tcp::socket socket) {
  std::vector<uint8_t> in(4 + kMaxFrameLength);
  size_t have = 0;
  Header h;
  std::span<const uint8_t> body;
  size_t used = 0;
  asio::steady_timer deadline(ctx_, kHandshakeTimeout);
  for (;;) {
    const DecodeStatus st = next_frame({in.data(), have}, h, body, used);
    if (st == DecodeStatus::kOk) break;
    if (st != DecodeStatus::kNeedMore || have == in.size()) {
      spdlog::warn("handshake: {}", to_string(st));
      co_return;
    }
    auto result = co_await (
        socket.async_read_some(asio::buffer(in.data() + have, in.size() - have),
                               asio::as_tuple(asio::use_awaitable)) ||
        deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (result.index() == 1) {
      spdlog::warn("handshake: timed out");
      co_return;
    }
    auto [ec, n] = std::get<0>(result);
    if (ec) co_return;
    have += n;
  }

  Request q;
  Response r{.type = FrameType::kHello, .correlation = h.correlation,
             .table_version = table_version_};
  const bool ok = h.type == FrameType::kHello && decode_request(h, body, q) == DecodeStatus::kOk;
  if (!ok) {
    r.status = FrameStatus::kBadRequest;
  } else if (q.protocol_version != kProtocolVersion) {
    r.status = FrameStatus::kUnsupported;
  } else if (q.shard >= config_.shards) {
    r.status = FrameStatus::kWrongShard;
  } else {
    r.protocol_version = kProtocolVersion;
    r.shard_count = static_cast<uint16_t>(config_.shards);
    r.name = config_.name;
  }
  std::vector<uint8_t> out;
  append_response(r, out);
  auto [ec, n] =
      co_await asio::async_write(socket, asio::buffer(out), asio::as_tuple(asio::use_awaitable));
  if (ec || r.status != FrameStatus::kOk) {
    if (r.status != FrameStatus::kOk) {
      spdlog::warn("handshake refused: {}", to_string(r.status));
    }
    co_return;
  }
  spdlog::debug("{} bound to shard {}", q.name, q.shard);
  std::vector<uint8_t> leftover(in.begin() + static_cast<ptrdiff_t>(used),
                                in.begin() + static_cast<ptrdiff_t>(have));
  const auto protocol = socket.local_endpoint().protocol();
  shards_[q.shard]->adopt(protocol, socket.release(), std::move(leftover));
}

}  // namespace imhash
