// hash_bench: load generator for one hash server, the counterpart of redis-benchmark for the
// benchmark driver (scripts/bench hash). Opens --connections links spread over the server's shards,
// keeps --pipeline requests in flight on each, and prints operations per second for UPSERT ("set")
// and GET ("get"). With --fill N (or --fill-levels N1,N2,...) it instead loads records (ids
// first-id and up) and prints the server's RSS growth per record at each level; --aged-percent P
// writes P% of them 3600 seconds old, and --purge-aged then purges records older than 1800 seconds
// on every shard and prints the RSS per remaining record.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/codec/frame_protocol.h"
#include "common/codec/stream_buffer.h"
#include "common/routing/shard_map.h"
#include "common/runtime/clock.h"
#include "common/runtime/options.h"

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
  bool ipv6 = false;          // UPSERTs carry an IPv6 endpoint
  uint32_t aged_percent = 0;  // UPSERTs of ids with id % 100 < this are 3600 s old
};

constexpr uint32_t kAgedSeconds = 3600;
constexpr uint32_t kPurgeOlderThan = 1800;

Endpoint endpoint_of(uint64_t id, bool ipv6) {
  if (!ipv6) return Endpoint::v4(0x0a000000u | static_cast<uint32_t>(id & 0xffffff), 4000);
  std::array<uint8_t, 16> a{0x20, 0x01, 0x0d, 0xb8};
  for (int i = 0; i < 8; ++i) a[8 + i] = static_cast<uint8_t>(id >> (56 - 8 * i));
  return Endpoint::v6(a, 4000);
}

// Reads exactly one frame from `socket` (the handshake's, or the answer to a lone request).
asio::awaitable<Response> read_response(tcp::socket& socket) {
  StreamBuffer in(4096);
  for (;;) {
    Response r;
    bool bad = false;
    const auto st = drain_frames(in, [&](const Header& h, std::span<const uint8_t> body) {
      bad = decode_response(h, body, r) != DecodeStatus::kOk;
      return false;
    });
    if (st == DecodeStatus::kOk) {
      if (bad) throw std::runtime_error("bad reply");
      r.name = {};
      co_return r;
    }
    if (st != DecodeStatus::kNeedMore) throw std::runtime_error("bad frame from server");
    const auto space = in.space();
    in.commit(co_await socket.async_read_some(asio::buffer(space.data(), space.size()),
                                              asio::use_awaitable));
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
  Response r = co_await read_response(socket);
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
asio::awaitable<void> drive(const BenchConfig& cfg, tcp::socket socket,
                            std::span<const uint64_t> ids, size_t first, FrameType type,
                            uint32_t pipeline, std::chrono::steady_clock::time_point until,
                            uint64_t rounds, uint64_t* done, uint64_t* errors) {
  std::vector<uint8_t> out;
  StreamBuffer in(1 << 20);
  size_t next = first;
  for (uint64_t round = 0;
       (rounds == 0 || round < rounds) && std::chrono::steady_clock::now() < until; ++round) {
    out.clear();
    const auto made_ms = static_cast<uint32_t>(unix_millis());  // kFlagTimed: Unix ms mod 2^32
    for (uint32_t i = 0; i < pipeline; ++i) {
      Request q{.type = type, .correlation = i, .id = ids[next++ % ids.size()]};
      if (type == FrameType::kUpsert) {
        // As a login server writes: saying when the write was made.
        q.flags = frame::kFlagTimed;
        q.endpoint = endpoint_of(q.id, cfg.ipv6);
        q.age_seconds = made_ms - (q.id % 100 < cfg.aged_percent ? kAgedSeconds * 1000 : 0);
      }
      append_request(q, out);
    }
    co_await asio::async_write(socket, asio::buffer(out), asio::use_awaitable);
    uint32_t replies = 0;
    while (replies < pipeline) {
      const auto st = drain_frames(in, [&](const Header& h, std::span<const uint8_t>) {
        if (h.status != 0 && !(type == FrameType::kGet && h.status == 1)) ++*errors;
        ++replies;
        return true;
      });
      if (st != DecodeStatus::kNeedMore) throw std::runtime_error("bad frame from server");
      if (replies < pipeline) {
        const auto space = in.space();
        in.commit(co_await socket.async_read_some(asio::buffer(space.data(), space.size()),
                                                  asio::use_awaitable));
      }
    }
    *done += pipeline;
  }
}

struct Phase {
  double per_second = 0;
  uint64_t requests = 0;
};

Phase run_phase(const BenchConfig& cfg, FrameType type) {
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
                         drive(cfg, std::move(sockets[c]), mine, first, type, cfg.pipeline, until,
                               0, &done, &errors),
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
  return Phase{static_cast<double>(done) / secs, done};
}

// CPU seconds the process has used (all threads, user and system), from /proc/PID/stat.
double cpu_seconds(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string line;
  std::getline(in, line);
  // Fields after the command name (which may hold spaces) in parentheses: utime is the 12th.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 1; i <= 13 && rest >> field; ++i) {
    if (i == 12) utime = std::stoull(field);
    if (i == 13) stime = std::stoull(field);
  }
  if (!in) throw std::runtime_error("cannot read /proc/" + pid + "/stat");
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Opens one connection per shard (HELLO to shard 0 first tells the shard count).
asio::awaitable<std::vector<tcp::socket>> connect_all(const BenchConfig& cfg) {
  uint16_t shard_count = 1;
  { co_await connect_shard(cfg, 0, &shard_count); }
  std::vector<tcp::socket> sockets;
  for (uint16_t s = 0; s < shard_count; ++s)
    sockets.push_back(co_await connect_shard(cfg, s, nullptr));
  co_return sockets;
}

// Sends one request and reads its response on a connection with nothing else in flight.
asio::awaitable<Response> call(tcp::socket& socket, const Request& q) {
  std::vector<uint8_t> out;
  append_request(q, out);
  co_await asio::async_write(socket, asio::buffer(out), asio::use_awaitable);
  co_return co_await read_response(socket);
}

// UPSERTs ids [from, to) over one connection per shard, pipelined.
void load(const BenchConfig& cfg, uint64_t from, uint64_t to, uint64_t* errors) {
  asio::io_context ctx(1);
  uint64_t done = 0;
  std::vector<std::vector<uint64_t>> ids;  // per shard; outlives the connections
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto sockets = co_await connect_all(cfg);
        const auto shard_count = static_cast<uint16_t>(sockets.size());
        ids.resize(shard_count);
        for (uint16_t s = 0; s < shard_count; ++s) {
          ids[s] = shard_ids(s, shard_count, to - from, from);
          if (ids[s].empty()) continue;
          // Whole pipelines, rounded up: the few extra requests repeat ids (replaces).
          const uint64_t rounds = (ids[s].size() + cfg.pipeline - 1) / cfg.pipeline;
          asio::co_spawn(
              co_await asio::this_coro::executor,
              drive(cfg, std::move(sockets[s]), ids[s], 0, FrameType::kUpsert, cfg.pipeline,
                    std::chrono::steady_clock::time_point::max(), rounds, &done, errors),
              asio::detached);
        }
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  ctx.run();
}

// PURGE OLDER_THAN on every shard, waits for each to finish; returns the records left.
uint64_t purge_aged(const BenchConfig& cfg) {
  asio::io_context ctx(1);
  uint64_t records = 0;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto sockets = co_await connect_all(cfg);
        for (auto& socket : sockets) {
          Request q{.type = FrameType::kPurge, .age_seconds = kPurgeOlderThan};
          q.purge = PurgeAction::kOlderThan;
          co_await call(socket, q);
        }
        asio::steady_timer timer(co_await asio::this_coro::executor);
        for (auto& socket : sockets) {
          for (;;) {
            Request q{.type = FrameType::kPurge};
            q.purge = PurgeAction::kStatus;
            const Response r = co_await call(socket, q);
            if (r.purge.state != PurgeState::kRunning) break;
            timer.expires_after(std::chrono::milliseconds(50));
            co_await timer.async_wait(asio::use_awaitable);
          }
          const Response st = co_await call(socket, Request{.type = FrameType::kStats});
          records += st.stats[kStatRecords];
        }
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  ctx.run();
  return records;
}

uint64_t rss_bytes(const std::string& pid);

int fill(BenchConfig cfg, const std::vector<uint64_t>& levels, const std::string& pid, bool purge) {
  cfg.pipeline = 256;
  const uint64_t before = rss_bytes(pid);
  uint64_t errors = 0, loaded = 0;
  for (uint64_t n : levels) {
    load(cfg, cfg.first_id + loaded, cfg.first_id + n, &errors);
    loaded = n;
    const uint64_t after = rss_bytes(pid);
    std::printf("records %lu  rss_before %lu  rss_after %lu  bytes_per_record %.1f\n",
                static_cast<unsigned long>(n), static_cast<unsigned long>(before),
                static_cast<unsigned long>(after),
                static_cast<double>(after - before) / static_cast<double>(n));
    std::fflush(stdout);
  }
  if (purge) {
    const uint64_t left = purge_aged(cfg);
    const uint64_t after = rss_bytes(pid);
    std::printf("after purge: records %lu  rss_after %lu  bytes_per_remaining_record %.1f\n",
                static_cast<unsigned long>(left), static_cast<unsigned long>(after),
                left ? static_cast<double>(after - before) / static_cast<double>(left) : 0.0);
  }
  return errors ? 1 : 0;
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
      "fill-levels", po::value<std::string>(),
      "instead: load up to each of N1,N2,... records in turn, reporting RSS growth per record "
      "(from the same baseline) at each")("pid", po::value<std::string>(),
                                          "with --fill: the hash server's process id")(
      "ipv6", po::bool_switch(), "UPSERTs carry IPv6 endpoints (2001:db8::ID)")(
      "aged-percent", po::value<uint32_t>()->default_value(0),
      "UPSERTs of ids with id % 100 below this are written 3600 seconds old")(
      "purge-aged", po::bool_switch(),
      "after the fill: purge records older than 1800 s on every shard, wait for it, and report "
      "RSS growth per remaining record");
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
  cfg.ipv6 = opts.get<bool>("ipv6");
  cfg.aged_percent = opts.get<uint32_t>("aged-percent");
  if (cfg.aged_percent > 100) throw UsageError("--aged-percent must be at most 100");
  if (cfg.connections == 0 || cfg.pipeline == 0 || cfg.keys == 0) {
    throw UsageError("--connections, --pipeline and --keys must be positive");
  }

  if (opts.has("fill") || opts.has("fill-levels")) {
    if (!opts.has("pid")) throw UsageError("--fill and --fill-levels need --pid");
    std::vector<uint64_t> levels;
    if (opts.has("fill")) levels.push_back(opts.get<uint64_t>("fill"));
    if (opts.has("fill-levels")) {
      std::istringstream in(opts.get<std::string>("fill-levels"));
      for (std::string item; std::getline(in, item, ',');) {
        char* end = nullptr;
        const uint64_t n = std::strtoull(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || n == 0 || (!levels.empty() && n <= levels.back())) {
          throw UsageError("--fill-levels: increasing record counts, e.g. 2000000,3300000");
        }
        levels.push_back(n);
      }
    }
    return fill(cfg, levels, opts.get<std::string>("pid"), opts.get<bool>("purge-aged"));
  }

  // With --pid, also the server's CPU time per request: on a shared machine the rate follows the
  // neighbours, the CPU a request costs much less so.
  const std::string pid = opts.has("pid") ? opts.get<std::string>("pid") : "";
  auto timed = [&](FrameType type, double& cpu_us) {
    const double before = pid.empty() ? 0 : cpu_seconds(pid);
    const Phase p = run_phase(cfg, type);
    if (!pid.empty() && p.requests > 0) {
      cpu_us = (cpu_seconds(pid) - before) * 1e6 / static_cast<double>(p.requests);
    }
    return p.per_second;
  };
  double set_cpu = 0, get_cpu = 0;
  const double set = timed(FrameType::kUpsert, set_cpu);
  const double get = timed(FrameType::kGet, get_cpu);
  std::printf("SET: %.0f requests per second\nGET: %.0f requests per second\n", set, get);
  if (!pid.empty()) {
    std::printf(
        "SET_CPU: %.3f us of server CPU per request\nGET_CPU: %.3f us of server CPU per "
        "request\n",
        set_cpu, get_cpu);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return imhash::run_main("hash_bench", bench_main, argc, argv); }
