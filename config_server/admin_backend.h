// AdminBackend: what the admin API (HTTP/JSON, config_server/admin_http.h) asks of the config
// server. Each call returns an HTTP status and a JSON body; errors carry {"error": "sentence"}.
// The HTTP layer does the parsing and validation of the request syntax; the backend judges the
// request against the cluster state (unknown server, overlapping range, ...).
//
// Thread rules: called on the config server's main io_context thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "admin_api/admin_contract.h"
#include "common/codec/frame_protocol.h"
#include "common/routing/table.h"

namespace imhash {

class AdminBackend {
 public:
  virtual ~AdminBackend() = default;

  // GET /v1/status: {"version", "mode", "converged", "nodes": [...], "purges": [...]}
  virtual AdminResult status() = 0;
  // GET /v1/table: the current table, as in a table file, plus nothing else.
  virtual AdminResult table() = 0;
  // GET /v1/history?limit=N: {"versions": [{"version", "time", "change", "table"}...]} newest
  // first.
  virtual AdminResult history(uint64_t limit) = 0;
  // GET /v1/servers: {"servers": [{"name","address","shards","weight","state","records"}...]}
  virtual AdminResult servers() = 0;
  // GET /v1/where/ID: {"id", "server", "shard", "address", "version", "replicas": [{"server",
  // "shard", "address"}...]}: the owner (the primary), then its replicas in order (none when the
  // table keeps one copy of each record).
  virtual AdminResult where(uint64_t id) = 0;

  // Changes: each writes a new version durably, pushes it, and answers
  // {"version": N, "change": "what changed", "table": {...}}.
  // POST /v1/mode {"mode": "modulo"|"range"|"ring", "modulo_hash": "mix"|"identity" (optional)}
  virtual AdminResult set_mode(RoutingMode mode, std::optional<ModuloHash> modulo_hash) = 0;
  // POST /v1/replicas {"replicas": 1..kMaxReplicas}: the copies kept of each record.
  virtual AdminResult set_replicas(uint32_t replicas) = 0;
  // POST /v1/servers {"servers": [{"name", "address"?, "shards"?, "weight"?}...]}
  virtual AdminResult add_servers(const std::vector<ServerSpec>& servers) = 0;
  // POST /v1/servers/set {"name", "address"?, "weight"?} (at least one of the two): the server
  // changed in place, keeping its place and ranges (an address change moves no id).
  virtual AdminResult set_server(const std::string& name, const std::optional<std::string>& address,
                                 const std::optional<uint32_t>& weight) = 0;
  // POST /v1/servers/remove {"names": [...]}
  virtual AdminResult remove_servers(const std::vector<std::string>& names) = 0;
  // POST /v1/assign {"lo", "hi", "server"}   (ids as JSON numbers or decimal strings)
  virtual AdminResult assign(uint64_t lo, uint64_t hi, const std::string& server) = 0;
  // POST /v1/split {"at"}
  virtual AdminResult split(uint64_t at) = 0;
  // POST /v1/merge {"lo", "hi"}
  virtual AdminResult merge(uint64_t lo, uint64_t hi) = 0;

  // POST /v1/purge {"server", "kind": "not_owned"|"older_than"|"all"|"cancel", "age_s"?}
  // answers {"server", "purge": {...progress...}}
  virtual AdminResult purge(const std::string& server, frame::PurgeAction kind,
                            uint32_t age_seconds) = 0;
  // GET /v1/purge: {"purges": [{"server", "shard", "kind", "state", "scanned", "total",
  // "deleted"}...]}
  virtual AdminResult purge_status() = 0;

  // POST /v1/servers/NAME/drain (no body, or {}): NAME leaves the table by streaming (the table
  // edit of `server remove`); answers the change plus {"drain": {...}} (again for a server already
  // being drained: no change, the current version and the drain).
  virtual AdminResult drain(const std::string& server) = 0;
  // GET /v1/servers/NAME/drain: {"server", "version", "records", "stream", "pending_purge",
  // "drained"}; 404 if NAME is not being drained.
  virtual AdminResult drain_status(const std::string& server) = 0;
  // GET /v1/streams: {"streams": [{"server", "state", "version", "sent", "total", ...}...]}
  virtual AdminResult streams() = 0;
  // POST /v1/streams/NAME/cancel | restart (no body, or {}): answers {"server", "requested",
  // "version"}.
  virtual AdminResult stream_control(const std::string& server, StreamControl action) = 0;

  // A standby config server (several against one store) answers every request but GET /healthz
  // with this: 503 {"error", "leader": {"name", "admin", "node"}} ("leader" absent when none is
  // known). nullopt: it serves.
  virtual std::optional<AdminResult> standby_answer() { return std::nullopt; }
};

}  // namespace imhash
