// Tests of the config server's book of refills (config_server/refills.h): a refill completes when
// every peer it waits for reports a stream done at its version or later with the refilled server
// among the stream's `lost`, or has gone; older, running or unrelated reports do not count.
#include "config_server/refills.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace imhash;
using control::StreamReport;
using control::StreamState;

namespace {

StreamReport report(uint64_t version, StreamState state, std::vector<std::string> lost) {
  StreamReport r;
  r.version = version;
  r.state = state;
  r.lost = std::move(lost);
  return r;
}

}  // namespace

TEST_CASE("refills: complete once every peer's stream with the server as lost is done") {
  Refills book;
  book.start("hash2", 7, {"hash1", "hash2", "hash3"}, 0);
  REQUIRE(book.refilling("hash2"));
  CHECK(book.all().at("hash2").waiting == std::set<std::string>{"hash1", "hash3"});
  // Not counted: running, an older version, a stream that did not refill hash2, a stranger.
  CHECK(book.on_report("hash1", report(7, StreamState::kRunning, {"hash2"}), 0).empty());
  CHECK(book.on_report("hash1", report(6, StreamState::kDone, {"hash2"}), 0).empty());
  CHECK(book.on_report("hash1", report(7, StreamState::kDone, {}), 0).empty());
  CHECK(book.on_report("hash9", report(7, StreamState::kDone, {"hash2"}), 0).empty());
  CHECK(book.all().at("hash2").waiting.size() == 2);
  // Counted: done at the version, or a later one.
  CHECK(book.on_report("hash1", report(7, StreamState::kDone, {"hash2"}), 0).empty());
  CHECK(book.all().at("hash2").done == std::set<std::string>{"hash1"});
  CHECK(book.on_report("hash3", report(9, StreamState::kDone, {"hash4", "hash2"}), 7) ==
        std::vector<std::string>{"hash2"});
  // Its streams are done; it stays in the book (the login servers' held writes are next) until
  // cancelled, and is not returned again.
  REQUIRE(book.refilling("hash2"));
  CHECK(book.all().at("hash2").streams_done_ns == 7);
  CHECK(book.json(0).at(0).as_object().at("streams_done").as_bool());
  CHECK(book.on_report("hash3", report(9, StreamState::kDone, {"hash2"}), 8).empty());
  book.cancel("hash2");
  CHECK_FALSE(book.refilling("hash2"));
}

TEST_CASE("refills: a peer that goes away is not waited for, and a start again starts over") {
  Refills book;
  book.start("hash1", 3, {"hash2", "hash3"}, 0);
  book.start("hash4", 3, {"hash2", "hash3"}, 0);
  CHECK(book.on_report("hash2", report(3, StreamState::kDone, {"hash1", "hash4"}), 0).empty());
  CHECK(book.drop_peer("hash3", 5) == std::vector<std::string>{"hash1", "hash4"});
  CHECK(book.clear() == std::vector<std::string>{"hash1", "hash4"});

  book.start("hash1", 5, {"hash2"}, 0);
  book.start("hash1", 6, {"hash2", "hash3"}, 0);  // restarted again: only the new start counts
  CHECK(book.on_report("hash2", report(5, StreamState::kDone, {"hash1"}), 0).empty());
  book.cancel("hash1");
  CHECK_FALSE(book.refilling("hash1"));
  book.start("hash5", 1, {}, 1'000'000'000);  // nobody to wait for: complete at the next event
  CHECK(book.drop_peer("nobody", 5) == std::vector<std::string>{"hash5"});
  book.cancel("hash5");
  book.start("hash6", 1, {"hash2"}, 1'000'000'000);
  const auto j = book.json(4'000'000'000);
  REQUIRE(j.size() == 1);
  CHECK(j[0].as_object().at("server").as_string() == "hash6");
  CHECK(j[0].as_object().at("seconds").to_number<int64_t>() == 3);
  CHECK(book.clear() == std::vector<std::string>{"hash6"});
}

TEST_CASE("refills: progress is the mean of the peers' streams, records the sum sent to it") {
  Refills book;
  book.start("hash2", 7, {"hash1", "hash3"}, 0);
  const auto progress = [&] { return book.json(0).at(0).as_object(); };
  CHECK(progress().at("progress").as_double() == 0.0);
  CHECK(progress().at("records_sent").as_uint64() == 0);
  StreamReport running = report(7, StreamState::kRunning, {"hash2"});
  running.scanned = 250;
  running.total = 1000;
  running.targets = {{"hash2", 40}, {"hash4", 99}};  // hash4's share is not the refill's
  CHECK(book.on_report("hash1", running, 0).empty());
  CHECK(progress().at("progress").as_double() == doctest::Approx(0.125));
  CHECK(progress().at("records_sent").as_uint64() == 40);
  // A stream that is not this refill's (no hash2 among its lost) says nothing of it.
  StreamReport other = running;
  other.lost = {};
  other.scanned = 1000;
  CHECK(book.on_report("hash3", other, 0).empty());
  CHECK(progress().at("progress").as_double() == doctest::Approx(0.125));
  StreamReport done = report(7, StreamState::kDone, {"hash2"});
  done.targets = {{"hash2", 100}};
  CHECK(book.on_report("hash1", done, 0).empty());
  CHECK(progress().at("progress").as_double() == doctest::Approx(0.5));
  CHECK(progress().at("records_sent").as_uint64() == 100);
}
