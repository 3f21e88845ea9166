// The pure parts of the etcd control plane (issue 17): the --store URL, the key layout, the
// election's record of a config server, and the range end of a prefix.
#include "config_server/control_plane.h"

#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "common/runtime/options.h"
#include "config_server/etcd_client.h"
#include "config_server/etcd_state_store.h"
#include "config_server/leadership.h"

using namespace imhash;

TEST_CASE("control_plane: --store etcd URLs") {
  const EtcdUrl one = parse_etcd_url("etcd://127.0.0.1:2379", "--store");
  REQUIRE(one.endpoints.size() == 1);
  CHECK(one.endpoints[0].host == "127.0.0.1");
  CHECK(one.endpoints[0].port == 2379);
  CHECK(one.prefix == "/imhash");

  const EtcdUrl three =
      parse_etcd_url("etcd://10.0.0.1:2379,10.0.0.2:2379,[::1]:2381/im/prod/", "--store");
  REQUIRE(three.endpoints.size() == 3);
  CHECK(three.endpoints[1].host == "10.0.0.2");
  CHECK(three.endpoints[2].host == "::1");
  CHECK(three.endpoints[2].port == 2381);
  CHECK(three.prefix == "/im/prod");

  for (const char* bad :
       {"127.0.0.1:2379", "http://127.0.0.1:2379", "etcd://", "etcd://,", "etcd://127.0.0.1:2379,",
        "etcd://127.0.0.1", "etcd://127.0.0.1:0", "etcd://127.0.0.1:2379,127.0.0.1:2379",
        "etcd://127.0.0.1:2379/", "etcd://127.0.0.1:2379//x", "etcd://h:99999"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_etcd_url(bad, "--store"), UsageError);
  }
}

TEST_CASE("control_plane: the keys under a prefix sort history entries by version") {
  const EtcdKeys k("/imhash");
  CHECK(k.prefix == "/imhash/");
  CHECK(k.version == "/imhash/version");
  CHECK(k.pending == "/imhash/pending_purges");
  CHECK(k.leader == "/imhash/leader");
  CHECK(k.members == "/imhash/members/");
  CHECK(k.history_key(42) == "/imhash/history/00000000000000000042");
  CHECK(k.history_key(9) < k.history_key(10));
  CHECK(k.history_key(~0ULL) == "/imhash/history/18446744073709551615");
  CHECK(EtcdKeys("/x/").prefix == "/x/");
}

TEST_CASE("control_plane: a config server's record round-trips, and a bad one is refused") {
  const ConfigServerInfo a{"cfg-a", "10.0.0.1:7000", "10.0.0.1:7100"};
  const auto back = ConfigServerInfo::of_json(boost::json::serialize(a.to_json()));
  REQUIRE(back);
  CHECK(*back == a);
  CHECK_FALSE(ConfigServerInfo::of_json("{\"name\":\"x\"}"));
  CHECK_FALSE(ConfigServerInfo::of_json("[]"));
  CHECK_FALSE(ConfigServerInfo::of_json("not json"));
  CHECK_FALSE(ConfigServerInfo::of_json(R"({"name":1,"node":"a","admin":"b"})"));
}

TEST_CASE("control_plane: the range end of a prefix") {
  CHECK(etcd_prefix_end("/imhash/") == "/imhash0");
  CHECK(etcd_prefix_end("a") == "b");
  CHECK(etcd_prefix_end(std::string("a\xff", 2)) == "b");
  CHECK(etcd_prefix_end(std::string("\xff\xff", 2)) == std::string(1, '\0'));
}
