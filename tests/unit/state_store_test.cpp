// The config server's state file: the table history and the pending automatic purges (issue 13)
// are written together and read back after a restart; a state file from before the pending purges
// still loads.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/runtime/options.h"
#include "config_server/file_state_store.h"
#include "harness/log_file.h"
#include "harness/temp_dir.h"
#include "tests/sample_tables.h"

using namespace imhash;
namespace fs = std::filesystem;

namespace {

// A fresh directory, removed afterwards.
struct StateDir : test::TempDir {
  explicit StateDir(const char* name) : test::TempDir("state", name) {}
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

}  // namespace

TEST_CASE("state_store: pending purges are written with the table and read back") {
  StateDir dir("pending");
  const std::vector<PendingPurge> first{{"hash1", 2, 1764615094000, true},
                                        {"hash2", 2, 1764615094000, false}};
  {
    FileStateStore store(dir.path);
    CHECK(store.pending_purges().empty());
    REQUIRE(store.commit(test::ring_of(1, {"hash1", "hash2"}), "server added hash1 hash2", {}) ==
            "");
    REQUIRE(store.commit(test::ring_of(2, {"hash1", "hash2", "hash3"}), "server added hash3",
                         first) == "");
    CHECK(store.pending_purges() == first);
  }
  {
    FileStateStore store(dir.path);
    CHECK(store.version() == 2);
    CHECK(store.pending_purges() == first);
    // One was sent: rewritten alone, the table stays.
    REQUIRE(store.set_pending_purges({first[1]}) == "");
    CHECK(store.version() == 2);
  }
  {
    FileStateStore store(dir.path);
    CHECK(store.version() == 2);
    CHECK(store.history().size() == 2);
    CHECK(store.pending_purges() == std::vector<PendingPurge>{first[1]});
    REQUIRE(store.set_pending_purges({}) == "");
  }
  FileStateStore store(dir.path);
  CHECK(store.pending_purges().empty());
  CHECK(test::file_text(store.path()).find("\"pending_purges\":[]") != std::string::npos);
}

TEST_CASE("state_store: a failed commit changes neither the table nor the pending purges") {
  StateDir dir("badcommit");
  FileStateStore store(dir.path);
  const std::vector<PendingPurge> pending{{"hash1", 1, 5, false}};
  REQUIRE(store.commit(test::ring_of(1, {"hash1"}), "added", pending) == "");
  // A version that does not grow by one is refused before anything is written.
  CHECK(store.commit(test::ring_of(3, {"hash1"}), "skip", {}) != "");
  CHECK(store.version() == 1);
  CHECK(store.pending_purges() == pending);
}

TEST_CASE("state_store: a state file without pending purges (before issue 13) loads") {
  StateDir dir("old");
  fs::create_directories(dir.path);
  write_file(dir.path + "/state.json",
             R"({"format":1,"history":[{"time":1700000000,"change":"server added hash1",)"
             R"("table":{"version":1,"mode":"ring","servers":[{"name":"hash1",)"
             R"("address":"127.0.0.1:7001","shards":4}]}}]})");
  FileStateStore store(dir.path);
  CHECK(store.version() == 1);
  CHECK(store.pending_purges().empty());
  // An entry without "streams" (written by hand) is one that does not stream.
  write_file(dir.path + "/state.json",
             R"({"format":1,"history":[{"time":1700000000,"change":"server added hash1",)"
             R"("table":{"version":1,"mode":"ring","servers":[{"name":"hash1",)"
             R"("address":"127.0.0.1:7001","shards":4}]}}],)"
             R"("pending_purges":[{"server":"hash1","version":1,"not_before_ms":7}]})");
  FileStateStore again(dir.path);
  CHECK(again.pending_purges() == std::vector<PendingPurge>{{"hash1", 1, 7, false}});
}

TEST_CASE("state_store: a malformed pending purge is refused at start-up") {
  StateDir dir("malformed");
  fs::create_directories(dir.path);
  const std::string history =
      R"({"format":1,"history":[{"time":1700000000,"change":"added","table":{"version":1,)"
      R"("mode":"ring","servers":[{"name":"hash1","address":"127.0.0.1:7001","shards":4}]}}],)";
  for (
      const std::string& bad :
      {std::string(R"("pending_purges":{}})"), std::string(R"("pending_purges":[1]})"),
       std::string(R"("pending_purges":[{"server":"hash1","version":-1,"not_before_ms":0}]})"),
       std::string(R"("pending_purges":[{"server":"hash1","not_before_ms":0}]})"),
       std::string(
           R"("pending_purges":[{"server":"hash1","version":1,"not_before_ms":0,"streams":1}]})")}) {
    CAPTURE(bad);
    write_file(dir.path + "/state.json", history + bad);
    CHECK_THROWS_AS(FileStateStore(dir.path), ConfigError);
  }
}
