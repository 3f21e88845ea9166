// The table a hash or login server keeps in its --state-dir: replaced atomically (the shared
// durable-file code the config server's state uses), never moved back to an older version, and a
// missing or damaged file is no reason not to start.
#include "common/runtime/saved_table.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/routing/table_json.h"
#include "common/runtime/durable_file.h"
#include "common/runtime/options.h"
#include "harness/log_file.h"
#include "harness/temp_dir.h"

using namespace imhash;
namespace fs = std::filesystem;

namespace {

// A fresh directory, removed afterwards.
struct TempDir : test::TempDir {
  explicit TempDir(const char* name) : test::TempDir("saved", name) {}
};

Table table_at(uint64_t version, const std::string& address = "127.0.0.1:7001") {
  Table t;
  t.version = version;
  t.mode = RoutingMode::kRing;
  t.servers = {{"hash1", address, 2, 1}};
  return t;
}

}  // namespace

TEST_CASE("saved_table: saves newer versions only, loads what it saved, in the table format") {
  TempDir dir("roundtrip");
  const std::string state = dir.path + "/state";  // made by the constructor
  {
    SavedTable saved(state, "login", "login1");
    CHECK(saved.path() == state + "/login-login1.table.json");
    CHECK_FALSE(saved.load());  // nothing yet
    CHECK(saved.version() == 0);
    saved.save(table_at(3));
    CHECK(saved.version() == 3);
    saved.save(table_at(2, "10.0.0.1:1"));  // older: never goes back
    saved.save(table_at(3, "10.0.0.1:1"));  // the same version again: kept as it was
    CHECK(saved.version() == 3);
  }
  // A table file --table takes, as written by table_to_json.
  CHECK(test::file_text(state + "/login-login1.table.json") == table_to_json(table_at(3)));
  SavedTable again(state, "login", "login1");
  const auto loaded = again.load();
  REQUIRE(loaded);
  CHECK(*loaded == table_at(3));
  CHECK(again.version() == 3);
  again.save(table_at(2));  // after a load too: older versions are not written
  CHECK(test::file_text(again.path()) == table_to_json(table_at(3)));
  again.save(table_at(4));
  CHECK(test::file_text(again.path()) == table_to_json(table_at(4)));
  // Another daemon in the same directory has a file of its own.
  SavedTable other(state, "hash", "hash1");
  CHECK_FALSE(other.load());
}

TEST_CASE("saved_table: a damaged file or an interrupted write is ignored, never fatal") {
  TempDir dir("damaged");
  REQUIRE(make_directory(dir.path).empty());
  const std::string file = dir.path + "/" + SavedTable::file_name("hash", "hash2");
  std::ofstream(file) << "{\"version\": 1, \"mode\": ";  // torn (not what our writes leave)
  std::ofstream(file + ".tmp") << "half a table";        // a write killed before its rename
  SavedTable saved(dir.path, "hash", "hash2");
  CHECK_FALSE(fs::exists(file + ".tmp"));  // the leftover is removed
  CHECK_FALSE(saved.load());               // logged and ignored
  saved.save(table_at(1));
  CHECK(saved.load() == table_at(1));
}

TEST_CASE("saved_table: a state directory that cannot be made is a config error") {
  TempDir dir("blocked");
  REQUIRE(make_directory(dir.path).empty());
  std::ofstream(dir.path + "/file") << "x";
  CHECK_THROWS_AS(SavedTable(dir.path + "/file/sub", "login", "l"), ConfigError);
}

TEST_CASE("durable_file: replace_file_durably replaces the whole file or reports why not") {
  TempDir dir("durable");
  REQUIRE(make_directory(dir.path).empty());
  CHECK(replace_file_durably(dir.path, "f.json", "one").empty());
  CHECK(test::file_text(dir.path + "/f.json") == "one");
  CHECK(replace_file_durably(dir.path, "f.json", "two, longer").empty());
  CHECK(test::file_text(dir.path + "/f.json") == "two, longer");
  CHECK_FALSE(fs::exists(dir.path + "/f.json.tmp"));
  const std::string err = replace_file_durably(dir.path + "/missing", "f.json", "x");
  CHECK(err.find("cannot write " + dir.path + "/missing/f.json.tmp") == 0);
}

TEST_CASE("saved_table: newer_table picks the higher version, the first on a tie") {
  CHECK_FALSE(newer_table(std::nullopt, std::nullopt));
  CHECK(newer_table(table_at(2), std::nullopt)->version == 2);
  CHECK(newer_table(std::nullopt, table_at(2))->version == 2);
  CHECK(newer_table(table_at(2), table_at(5))->version == 5);
  CHECK(newer_table(table_at(5), table_at(2))->version == 5);
  CHECK(newer_table(table_at(5, "a:1"), table_at(5, "b:2"))->servers[0].address == "a:1");
}
