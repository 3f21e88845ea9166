// Fuzz target for the routing table's JSON reader (common/routing/routing_table.h) and the routers
// built from what it accepts. Invariants, checked with abort() so they hold in release builds too:
//   - parse_table_json never throws; it returns a table or a non-empty error, never both;
//   - an accepted table validates, and table_to_json -> parse_table_json gives it back unchanged
//     (and the same text again);
//   - Router::compile accepts it, and every route names an existing server and shard; in range
//     mode, both ends of every range route to that range's server;
//   - range edits on an accepted table return a valid table or an error.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "common/codec/hash.h"
#include "common/routing/router.h"
#include "common/routing/routing_table.h"
#include "config_server/table_edits.h"

namespace {

[[noreturn]] void violated(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_table_json: invariant violated: %s %s\n", what, detail.c_str());
  std::abort();
}

void check_edit(const imhash::TableResult& r, const char* what) {
  if (r.ok() == !r.error.empty())
    violated(what, "returned both or neither of a table and an error");
  if (r.ok() && !imhash::validate(*r.table).empty()) violated(what, imhash::validate(*r.table));
}

void check_table(const imhash::Table& t, uint64_t seed) {
  using namespace imhash;
  if (std::string error = validate(t); !error.empty()) violated("accepted an invalid table", error);

  const std::string json = table_to_json(t);
  TableResult again = parse_table_json(json);
  if (!again.ok()) violated("table_to_json output does not parse", again.error + "\n" + json);
  if (!(*again.table == t)) violated("round trip changed the table", json);
  if (table_to_json(*again.table) != json) violated("round trip changed the text", json);

  std::shared_ptr<const Router> router;
  try {
    router = Router::compile(t);
  } catch (const std::exception& e) {
    violated("compile threw", e.what());
  }
  const uint64_t ids[] = {0, 1, 2, uint64_t{1} << 63, ~uint64_t{0}, seed, fmix64(seed), ~seed};
  for (uint64_t id : ids) {
    const Route r = router->route(id);
    if (r.server >= t.servers.size()) violated("owner out of range");
    if (r.server != router->owner(id)) violated("route and owner disagree");
    if (r.shard >= t.servers[r.server].shards) violated("shard out of range");
    if (!router->owns(id, t.servers[r.server].name)) violated("owns disagrees with owner");
  }
  if (t.mode == RoutingMode::kRange) {
    for (size_t i = 0; i < t.ranges.size() && i < 256; ++i) {
      const IdRange& range = t.ranges[i];
      const auto expected = static_cast<uint32_t>(t.server_index(range.server));
      if (router->owner(range.lo) != expected || router->owner(range.hi) != expected) {
        violated("range lookup", range.server);
      }
    }
    const uint64_t a = fmix64(seed) % 1000, b = a + seed % 1000;
    check_edit(split_range(t, a), "split_range");
    check_edit(merge_ranges(t, a, b), "merge_ranges");
    check_edit(assign_range(t, a, b, t.servers[seed % t.servers.size()].name), "assign_range");
    check_edit(remove_server(t, t.servers[seed % t.servers.size()].name), "remove_server");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  imhash::TableResult result;
  try {
    result = imhash::parse_table_json(text);
  } catch (const std::exception& e) {
    violated("parse_table_json threw", e.what());
  }
  if (result.ok() == !result.error.empty()) violated("parse returned both or neither");
  if (!result.ok()) return 0;
  uint64_t seed = 0;
  for (size_t i = 0; i < size; ++i) seed = seed * 31 + data[i];
  check_table(*result.table, seed);
  return 0;
}
