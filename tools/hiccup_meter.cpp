// hiccup_meter: how much CPU time this machine takes away from a thread that wants all of it.
//
// Each of --threads threads spins reading the monotonic clock for --duration seconds; any gap
// between two readings longer than --threshold-us is time the thread did not run (an interrupt, a
// preemption, or, on a virtual machine, the host running something else on the vCPU). It prints,
// per thread, the number of gaps, the time lost and the longest gap. Every scripts/bench run
// records it beside the latency figures: a request cannot be answered faster than the longest
// hiccup of the cores it crosses (the same idea as jHiccup). Spins and measures only; sends
// nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/runtime/options.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Hiccups {
  uint64_t over_threshold = 0;
  uint64_t over_1ms = 0;
  Clock::duration lost{};
  Clock::duration longest{};
};

Hiccups spin(Clock::duration run_for, Clock::duration threshold) {
  Hiccups h;
  auto prev = Clock::now();
  const auto end = prev + run_for;
  while (prev < end) {
    const auto now = Clock::now();
    const auto gap = now - prev;
    prev = now;
    if (gap <= threshold) continue;
    ++h.over_threshold;
    h.over_1ms += gap > std::chrono::milliseconds(1);
    h.lost += gap;
    h.longest = std::max(h.longest, gap);
  }
  return h;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int meter_main(int argc, char** argv) {
  namespace po = boost::program_options;
  imhash::Options opts("hiccup_meter",
                       "spins on every core and reports the time the machine took away");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  opts.add()("duration", po::value<double>()->default_value(5), "seconds to spin")(
      "threads", po::value<uint32_t>()->default_value(cores), "spinning threads (default: cores)")(
      "threshold-us", po::value<uint32_t>()->default_value(100),
      "gaps longer than this count as hiccups (microseconds)");
  if (auto code = opts.parse(argc, argv)) return *code;
  const double seconds = opts.get<double>("duration");
  const uint32_t threads = opts.get<uint32_t>("threads");
  const uint32_t threshold_us = opts.get<uint32_t>("threshold-us");
  if (!(seconds > 0 && seconds <= 3600)) throw imhash::UsageError("--duration must be 0 to 3600");
  if (threads == 0 || threads > 1024) throw imhash::UsageError("--threads must be 1 to 1024");
  if (threshold_us == 0) throw imhash::UsageError("--threshold-us must be at least 1");

  const auto run_for =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  const auto threshold = std::chrono::microseconds(threshold_us);
  std::vector<Hiccups> results(threads);
  std::vector<std::thread> pool;
  for (uint32_t i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] { results[i] = spin(run_for, threshold); });
  }
  for (auto& t : pool) t.join();
  for (uint32_t i = 0; i < threads; ++i) {
    const Hiccups& h = results[i];
    std::printf(
        "thread %u: hiccups over %u us: %lu (over 1 ms: %lu), lost %.1f ms of %.0f (%.2f%%), "
        "longest %.2f ms\n",
        i, threshold_us, static_cast<unsigned long>(h.over_threshold),
        static_cast<unsigned long>(h.over_1ms), ms(h.lost), seconds * 1000,
        100 * ms(h.lost) / (seconds * 1000), ms(h.longest));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return imhash::run_main("hiccup_meter", meter_main, argc, argv); }
