// hash_bench: load generator for one hash server, the counterpart of redis-benchmark for
// scripts/bench.sh. Opens --connections links spread over the server's shards, keeps --pipeline
// requests in flight on each, and prints operations per second for UPSERT ("set") and GET ("get").
// With --fill N it instead loads N records and prints the server's RSS growth per record.
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <chrono>
#include <fstream>
#include <iostream>

#include "common/frame_protocol.h"
#include "common/options.h"
#include "common/shard_map.h"

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace imhash;
using namespace imhash::frame;

namespace {

struct BenchConfig {
  std::string host;
  std::string port;
  uint32_t connections = 50;
  uint32_t pipeline = 16;
  double seconds = 5;
  uint64_t keys = 1'000'000;
  uint64_t first_id = 0;
};

// Reads exactly one frame from `socket` into `buf` (used for the handshake).
asio::awaitable<Response> read_response(tcp::socket& socket, std::vector<uint8_t>& buf,
                                        size_t& have) {
  for (;;) {
    Header h;
    std::span<const uint8_t> body;
    size_t used = 0;
    const auto st = next_frame({buf.data(), have}, h, body, used);
    if (st == DecodeStatus::kOk) {
      Response r;
      if (decode_response(h, body, r) != DecodeStatus::kOk) throw std::runtime_error("bad reply");
      r.name = {};
      std::memmove(buf.data(), buf.data() + used, have - used);
      have -= used;
      co_return r;
    }
    if (st != DecodeStatus::kNeedMore) throw std::runtime_error("bad frame from server");
    have += co_await socket.async_read_some(asio::buffer(buf.data() + have, buf.size() - have),
                                            asio::use_awaitable);
  }
}

asio::awaitable<tcp::socket> connect_shard(const BenchConfig& cfg, uint16_t shard,
                                           uint16_t* shard_count) {
  auto ex = co_await asio::this_coro::executor;
  tcp::resolver resolver(ex);
  tcp::socket socket(ex);
  co_await asio::async_connect(
      socket, co_await resolver.async_resolve(cfg.host, cfg.port, asio::use_awaitable),
      asio::use_awaitable);
  socket.set_option(tcp::no_delay(true));
  Request hello{.type = FrameType::kHello, .protocol_version = kProtocolVersion};
  hello.shard = shard;
  hello.name = "hash_bench";
  std::vector<uint8_t> out;
  append_request(hello, out);
  co_await asio::async_write(socket, asio::buffer(out), asio::use_awaitable);
  std::vector<uint8_t> buf(4096);
  size_t have = 0;
  Response r = co_await read_response(socket, buf, have);
  if (r.status != FrameStatus::kOk) throw std::runtime_error("handshake refused");
  if (shard_count) *shard_count = r.shard_count;
  co_return socket;
}

// Ids that `shard` owns, cycled through by one connection.
std::vector<uint64_t> shard_ids(uint16_t shard, uint16_t shard_count, uint64_t keys,
                                uint64_t first_id) {
  std::vector<uint64_t> ids;
  for (uint64_t id = first_id; id < first_id + keys; ++id) {
    if (shard_of(id, shard_count) == shard) ids.push_back(id);
  }
  return ids;
}

// One connection: write `pipeline` requests, read as many replies, repeat until `until`.
// `rounds` bounds the number of pipelines sent (0: no bound). It cycles through `ids` from
// `first`, so that connections sharing a shard do not all ask for the same ids at once.
asio::awaitable<void> drive(tcp::socket socket, std::span<const uint64_t> ids, size_t first,
                            FrameType type, uint32_t pipeline,
                            std::chrono::steady_clock::time_point until, uint64_t rounds,
                            uint64_t* done, uint64_t* errors) {
  std::vector<uint8_t> out, in(1 << 20);
  size_t have = 0, next = first;
  for (uint64_t round = 0;
       (rounds == 0 || round < rounds) && std::chrono::steady_clock::now() < until; ++round) {
    out.clear();
    for (uint32_t i = 0; i < pipeline; ++i) {
      Request q{.type = type, .correlation = i, .id = ids[next++ % ids.size()]};
      q.endpoint = Endpoint::v4(0x0a000000u | static_cast<uint32_t>(q.id & 0xffffff), 4000);
      append_request(q, out);
    }
    co_await asio::async_write(socket, asio::buffer(out), asio::use_awaitable);
    uint32_t replies = 0;
    while (replies < pipeline) {
      size_t off = 0;
      for (;;) {
        Header h;
        std::span<const uint8_t> body;
        size_t used = 0;
        const auto st = next_frame({in.data() + off, have - off}, h, body, used);
        if (st == DecodeStatus::kNeedMore) break;
        if (st != DecodeStatus::kOk) throw std::runtime_error("bad frame from server");
        if (h.status != 0 && !(type == FrameType::kGet && h.status == 1)) ++*errors;
        off += used;
        ++replies;
      }
      std::memmove(in.data(), in.data() + off, have - off);
      have -= off;
      if (replies < pipeline) {
        have += co_await socket.async_read_some(asio::buffer(in.data() + have, in.size() - have),
                                                asio::use_awaitable);
      }
    }
    *done += pipeline;
  }
}

double run_phase(const BenchConfig& cfg, FrameType type) {
  asio::io_context ctx(1);
  uint64_t done = 0, errors = 0;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<uint64_t>> ids;  // per shard; outlives the connections, which share it
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        uint16_t shard_count = 1;
        { co_await connect_shard(cfg, 0, &shard_count); }
        ids.resize(shard_count);
        for (uint16_t s = 0; s < shard_count; ++s)
          ids[s] = shard_ids(s, shard_count, cfg.keys, cfg.first_id);
        std::vector<tcp::socket> sockets;
        for (uint32_t c = 0; c < cfg.connections; ++c) {
          sockets.push_back(co_await connect_shard(cfg, uint16_t(c % shard_count), nullptr));
        }
        start = std::chrono::steady_clock::now();
        const auto until = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(cfg.seconds));
        for (uint32_t c = 0; c < cfg.connections; ++c) {
          const auto& mine = ids[c % shard_count];
          const size_t first = mine.size() * (c / shard_count) * shard_count / cfg.connections;
          asio::co_spawn(co_await asio::this_coro::executor,
                         drive(std::move(sockets[c]), mine, first, type, cfg.pipeline, until, 0,
                               &done, &errors),
                         asio::detached);
        }
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  ctx.run();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (errors) std::cerr << "hash_bench: " << errors << " error replies\n";
  return static_cast<double>(done) / secs;
}

uint64_t rss_bytes(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/status");
  std::string key;
  uint64_t kb = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kb;
      return kb * 1024;
    }
    in.ignore(1 << 12, '\n');
  }
  throw std::runtime_error("cannot read VmRSS of pid " + pid);
}

int bench_main(int argc, char** argv) {
  Options opts("hash_bench", "load generator for one hash server (UPSERT and GET per second)");
  namespace po = boost::program_options;
  opts.add()("target", po::value<std::string>()->required(), "hash server HOST:PORT")(
      "connections,c", po::value<uint32_t>()->default_value(50), "connections")(
      "pipeline,P", po::value<uint32_t>()->default_value(16), "requests in flight per connection")(
      "duration", po::value<double>()->default_value(5), "seconds per phase")(
      "keys", po::value<uint64_t>()->default_value(1'000'000), "distinct ids")(
      "first-id", po::value<uint64_t>()->default_value(0), "ids used: first-id .. first-id+keys-1")(
      "fill", po::value<uint64_t>(), "instead: load N records and report RSS growth per record")(
      "pid", po::value<std::string>(), "with --fill: the hash server's process id");
  if (auto code = opts.parse(argc, argv)) return *code;
  BenchConfig cfg;
  const auto target = parse_host_port(opts.get<std::string>("target"), "--target");
  cfg.host = target.host;
  cfg.port = std::to_string(target.port);
  cfg.connections = opts.get<uint32_t>("connections");
  cfg.pipeline = opts.get<uint32_t>("pipeline");
  cfg.seconds = opts.get<double>("duration");
  cfg.keys = opts.get<uint64_t>("keys");
  cfg.first_id = opts.get<uint64_t>("first-id");
  if (cfg.connections == 0 || cfg.pipeline == 0 || cfg.keys == 0) {
    throw UsageError("--connections, --pipeline and --keys must be positive");
  }

  if (opts.has("fill")) {
    if (!opts.has("pid")) throw UsageError("--fill needs --pid");
    const auto pid = opts.get<std::string>("pid");
    const uint64_t n = opts.get<uint64_t>("fill");
    const uint64_t before = rss_bytes(pid);
    // Every id once: `keys` = n, and each connection stops after its share.
    cfg.keys = n;
    cfg.pipeline = 256;
    asio::io_context ctx(1);
    uint64_t done = 0, errors = 0;
    std::vector<std::vector<uint64_t>> ids;  // per shard; outlives the connections
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          uint16_t shard_count = 1;
          { co_await connect_shard(cfg, 0, &shard_count); }
          ids.resize(shard_count);
          for (uint16_t s = 0; s < shard_count; ++s) {
            ids[s] = shard_ids(s, shard_count, n, cfg.first_id);
            if (ids[s].empty()) continue;
            auto socket = co_await connect_shard(cfg, s, nullptr);
            // Whole pipelines, rounded up: the few extra requests repeat ids (replaces).
            const uint64_t rounds = (ids[s].size() + cfg.pipeline - 1) / cfg.pipeline;
            asio::co_spawn(
                co_await asio::this_coro::executor,
                drive(std::move(socket), ids[s], 0, FrameType::kUpsert, cfg.pipeline,
                      std::chrono::steady_clock::time_point::max(), rounds, &done, &errors),
                asio::detached);
          }
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
    ctx.run();
    const uint64_t after = rss_bytes(pid);
    std::printf("records %lu  rss_before %lu  rss_after %lu  bytes_per_record %.1f\n",
                static_cast<unsigned long>(n), static_cast<unsigned long>(before),
                static_cast<unsigned long>(after),
                static_cast<double>(after - before) / static_cast<double>(n));
    return errors ? 1 : 0;
  }

  const double set = run_phase(cfg, FrameType::kUpsert);
  const double get = run_phase(cfg, FrameType::kGet);
  std::printf("SET: %.0f requests per second\nGET: %.0f requests per second\n", set, get);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return imhash::run_main("hash_bench", bench_main, argc, argv); }
