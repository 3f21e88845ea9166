// The routing table's JSON form: the table file that login and hash servers read with --table, the
// config server's stored tables, and the "table" of a control-protocol push (docs/protocol.md §4).
// Pure except load_table_file (which reads a file); any thread.
//
// The format (what parse_table_json reads and table_to_json writes):
//
//   {
//     "version": 3,                     // required, integer 0 .. 2^64-1
//     "mode": "range",                  // required: "modulo" | "range" | "ring"
//     "modulo_hash": "mix",             // optional: "mix" (default) | "identity" (plain id mod N)
//     "servers": [                      // required, 1 .. 1024 entries
//       {"name": "hash1",               // required: 1..64 chars of [A-Za-z0-9._-], unique
//        "address": "127.0.0.1:7001",   // optional, default "": "HOST:PORT" of its TCP listener
//        "shards": 4,                   // optional, default 1, 1 .. 1024
//        "weight": 1}                   // optional, default 1, 1 .. 1000 (used by ring mode)
//     ],
//     "ranges": [                       // range mode only (required there; absent or []
//     otherwise):
//       {"lo": 0, "hi": 9223372036854775807, "server": "hash1"},     // inclusive, sorted, covering
//       {"lo": 9223372036854775808, "hi": 18446744073709551615, "server": "hash2"}  // 0..2^64-1
//     ]
//   }
//
// Ids are plain JSON integers (no quotes); negative numbers, fractions and exponents are rejected.
// Unknown and duplicate keys are rejected with an error naming the key, so that a typo in an
// operator's file is loud. (The // comments above are explanation only; the format is strict JSON.)
#pragma once

#include <string>
#include <string_view>

#include "common/routing/table.h"

namespace imhash {

class JsonObject;

TableResult parse_table_json(std::string_view json);   // parses and validates
std::string table_to_json(const Table& table);         // one server / range per line; round-trips
TableResult load_table_file(const std::string& path);  // errors mention the path

// Reads the members of a table object (a table file's root, or the "table" of a control message)
// into `out` with the checks above but without validate(); false with the reader's error set,
// which names each member by its path from the document's root ("table.servers[2].name").
bool read_table(JsonObject& object, Table& out);

}  // namespace imhash
