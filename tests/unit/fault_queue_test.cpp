// Tests of lossy_relay's rules (tools/lossy_relay/fault_queue.h): what is lost, duplicated,
// reordered and delayed, in which order packets come out, and the bounds.
#include "tools/lossy_relay/fault_queue.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace imhash;

namespace {

constexpr int64_t kMs = 1'000'000;

std::span<const char> packet_of(const std::string& s) { return std::span(s.data(), s.size()); }

// Every packet due by `now`, in the order they come out, as text.
std::vector<std::string> drain(FaultQueue& q, int64_t now) {
  std::vector<std::string> out;
  FaultQueue::Packet p;
  while (q.pop_due(now, p)) out.emplace_back(p.data.begin(), p.data.end());
  return out;
}

}  // namespace

TEST_CASE("fault_queue: without faults every packet goes at once, in order") {
  FaultQueue q(FaultParams{});
  q.offer(0, 7, packet_of("a"), 0);
  q.offer(1, 8, packet_of("b"), 0);
  q.offer(0, 7, packet_of("c"), 0);
  CHECK(q.next_due() == 0);
  FaultQueue::Packet p;
  REQUIRE(q.pop_due(0, p));
  CHECK(p.dir == 0);
  CHECK(p.key == 7);
  CHECK(drain(q, 0) == std::vector<std::string>{"b", "c"});
  CHECK(q.counts(0).received == 2);
  CHECK(q.counts(1).received == 1);
  CHECK(q.waiting() == 0);
}

TEST_CASE("fault_queue: a delay holds each packet until it is due") {
  FaultQueue q(FaultParams{.delay_ns = 10 * kMs});
  q.offer(0, 0, packet_of("a"), 0);
  q.offer(0, 0, packet_of("b"), 3 * kMs);
  CHECK(drain(q, 9 * kMs).empty());
  CHECK(q.next_due() == 10 * kMs);
  CHECK(drain(q, 10 * kMs) == std::vector<std::string>{"a"});
  CHECK(drain(q, 20 * kMs) == std::vector<std::string>{"b"});
}

TEST_CASE("fault_queue: loss, duplication and reordering at their rates, and repeatable by seed") {
  const FaultParams params{.loss = 0.2,
                           .duplicate = 0.1,
                           .reorder = 0.3,
                           .delay_ns = 50 * kMs,
                           .jitter_ns = 0,
                           .seed = 42};
  FaultQueue q(params), again(params);
  constexpr int kPackets = 20000;
  for (int i = 0; i < kPackets; ++i) {
    const std::string s = std::to_string(i);
    q.offer(0, 0, packet_of(s), i * kMs / 100);  // 100 a millisecond
    again.offer(0, 0, packet_of(s), i * kMs / 100);
  }
  const FaultCounts& c = q.counts(0);
  CHECK(c.received == kPackets);
  CHECK(c.lost == doctest::Approx(0.2 * kPackets).epsilon(0.1));
  CHECK(c.duplicated == doctest::Approx(0.1 * 0.8 * kPackets).epsilon(0.15));
  const std::vector<std::string> out = drain(q, 10'000 * kMs);
  CHECK(out.size() == c.received - c.lost + c.duplicated);
  CHECK(out == drain(again, 10'000 * kMs));  // the same seed, the same run
  // Reordered packets overtook delayed ones: the output is not in the order offered.
  size_t inversions = 0;
  for (size_t i = 1; i < out.size(); ++i) inversions += std::stoi(out[i]) < std::stoi(out[i - 1]);
  CHECK(c.reordered > 0);
  CHECK(inversions > 0);
}

TEST_CASE("fault_queue: jitter spreads the delay within its bounds") {
  FaultQueue q(FaultParams{.delay_ns = 20 * kMs, .jitter_ns = 5 * kMs, .seed = 1});
  for (int i = 0; i < 1000; ++i) q.offer(0, 0, packet_of("x"), 0);
  CHECK(drain(q, 15 * kMs - 1).empty());
  const size_t early = drain(q, 20 * kMs).size();
  CHECK(early > 300);
  CHECK(early < 700);
  CHECK(drain(q, 25 * kMs).size() == 1000 - early);
}

TEST_CASE("fault_queue: past its bounds a packet is dropped as overflow") {
  FaultQueue q(FaultParams{.delay_ns = kMs, .max_queued = 2, .max_bytes = 5});
  q.offer(0, 0, packet_of("abc"), 0);
  q.offer(0, 0, packet_of("def"), 0);  // 6 bytes would wait: over max_bytes
  q.offer(1, 0, packet_of("g"), 0);
  q.offer(1, 0, packet_of("h"), 0);  // a third packet: over max_queued
  CHECK(q.waiting() == 2);
  CHECK(q.counts(0).overflow == 1);
  CHECK(q.counts(1).overflow == 1);
  CHECK(drain(q, kMs) == std::vector<std::string>{"abc", "g"});
}

TEST_CASE("fault_queue: a summary names every count") {
  FaultCounts f{.received = 9, .lost = 1, .duplicated = 2, .reordered = 3, .overflow = 4};
  CHECK(describe(f, SendCounts{.forwarded = 5, .send_failed = 6, .expired = 7}) ==
        "received 9 forwarded 5 lost 1 duplicated 2 reordered 3 overflow 4 send_failed 6 "
        "expired 7");
}
