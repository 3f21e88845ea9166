#include "imctl/imctl_format.h"

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>

#include "admin_api/admin_contract.h"
#include "common/codec/printable.h"
#include "common/routing/table_text.h"
#include "common/runtime/options.h"

namespace imhash {

namespace json = boost::json;

const json::value* reply_field(const json::value& v, std::string_view key) {
  const json::object* object = v.if_object();
  return object ? object->if_contains(json::string_view(key.data(), key.size())) : nullptr;
}

std::string reply_error(const HttpReply& reply, const json::value* body) {
  const json::value* error = body ? reply_field(*body, "error") : nullptr;
  if (error && error->is_string()) return printable(std::string_view(error->get_string()), 1000);
  return "the config server answered HTTP " + std::to_string(reply.status);
}

namespace {

constexpr std::string_view kMissing = "-";

const json::array* array_field(const json::value& v, std::string_view key) {
  const json::value* a = reply_field(v, key);
  return a ? a->if_array() : nullptr;
}

std::optional<uint64_t> number(const json::value* v) {
  if (!v) return std::nullopt;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64() && v->get_int64() >= 0) return static_cast<uint64_t>(v->get_int64());
  if (v->is_string()) return parse_decimal_id(std::string_view(v->get_string()));
  return std::nullopt;
}

// Any JSON value as a table cell.
std::string text(const json::value* v) {
  if (!v || v->is_null()) return std::string(kMissing);
  switch (v->kind()) {
    case json::kind::string:
      return printable(std::string_view(v->get_string()), 200);
    case json::kind::bool_:
      return v->get_bool() ? "yes" : "no";
    case json::kind::int64:
      return std::to_string(v->get_int64());
    case json::kind::uint64:
      return std::to_string(v->get_uint64());
    case json::kind::double_: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", v->get_double());
      return buf;
    }
    default:
      return printable(json::serialize(*v), 200);
  }
}

std::string text(const json::value& object, std::string_view key) {
  return text(reply_field(object, key));
}

std::string mode_text(const json::value& body) {
  std::string mode = text(body, "mode");
  if (mode == "modulo" && reply_field(body, "modulo_hash"))
    mode += " (" + text(body, "modulo_hash") + ")";
  return mode;
}

// ", replicas 2" when the table keeps more than one copy of each record (a table without the key,
// or a server before replicas, keeps one: nothing is said).
std::string replicas_text(const json::value& body) {
  const json::value* replicas = reply_field(body, "replicas");
  if (!replicas || number(replicas) == 1u) return {};
  return ", replicas " + text(replicas);
}

// A duration in milliseconds, integer or fractional; nullopt if `v` is not one.
std::optional<std::string> duration_text(const json::value* v) {
  if (auto ms = number(v)) return format_duration_ms(*ms);
  if (!v || !v->is_double() || !(v->get_double() >= 0) || v->get_double() > 1e15) {
    return std::nullopt;
  }
  if (v->get_double() < 0.05) return std::string("<0.1ms");
  if (v->get_double() < 10) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.1fms", v->get_double());
    return buf;
  }
  return format_duration_ms(static_cast<uint64_t>(v->get_double() + 0.5));
}

// Time since the node's last heartbeat, in milliseconds under whichever name the server uses.
std::string heartbeat_text(const json::value& node) {
  for (std::string_view key : {"last_heartbeat_ms", "heartbeat_age_ms"}) {
    if (auto ms = duration_text(reply_field(node, key))) return *ms + " ago";
  }
  return text(node, "last_heartbeat");
}

// A node's record count: "records", or "records" among its "stats".
std::string records_text(const json::value& node) {
  if (const json::value* r = reply_field(node, "records")) return text(r);
  if (const json::value* stats = reply_field(node, "stats")) return text(*stats, "records");
  return std::string(kMissing);
}

std::string time_text(const json::value* v) {
  if (auto n = number(v)) {
    return format_unix_time(*n > 100'000'000'000 ? *n / 1000 : *n);  // seconds or milliseconds
  }
  return text(v);
}

std::string progress_text(const json::value& purge) {
  const auto scanned = number(reply_field(purge, "scanned"));
  const auto total = number(reply_field(purge, "total"));
  if (!scanned || !total) return std::string(kMissing);
  return progress_bar(*scanned, *total) + "  " + std::to_string(*scanned) + "/" +
         std::to_string(*total);
}

TextTable purge_table() {
  return TextTable({"SERVER", "SHARD", "KIND", "STATE", "PROGRESS", "DELETED"});
}

void add_purge_row(TextTable& table, const json::value& purge, const std::string& server) {
  table.add({server, text(purge, "shard"), text(purge, "kind"), text(purge, "state"),
             progress_text(purge), text(purge, "deleted")});
}

// "hash1 after version 8: waits for grace period (3.1 s left); stream (...)" or "... ready".
std::string pending_purge_phrase(const json::value& p) {
  std::string waits;
  if (const json::array* list = array_field(p, "waits_for")) {
    for (const json::value& w : *list) waits += (waits.empty() ? "" : "; ") + text(&w);
  }
  const json::value* held = reply_field(p, "held");
  return text(p, "server") + " after version " + text(p, "version") + ": " +
         (held && held->is_bool() && held->get_bool() ? "HELD, " : "") +
         (waits.empty() ? std::string("ready, sent at the next check") : "waits for " + waits);
}

}  // namespace

// ---- Pieces -------------------------------------------------------------------------------------

std::string progress_bar(uint64_t done, uint64_t total, size_t width) {
  const long double fraction =
      total == 0 ? 0.0L : std::min(1.0L, static_cast<long double>(done) / total);
  const auto filled = static_cast<size_t>(fraction * static_cast<long double>(width));
  const auto percent = static_cast<unsigned>(fraction * 100.0L);
  char pct[8];
  std::snprintf(pct, sizeof pct, "%3u%%", percent);
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] " + pct;
}

std::string format_duration_ms(uint64_t ms) {
  char buf[48];
  const uint64_t s = ms / 1000;
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%llums", static_cast<unsigned long long>(ms));
  } else if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llu.%llus", static_cast<unsigned long long>(s),
                  static_cast<unsigned long long>(ms % 1000 / 100));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%llum%02llus", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lluh%02llum", static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llud%02lluh", static_cast<unsigned long long>(s / 86400),
                  static_cast<unsigned long long>(s % 86400 / 3600));
  }
  return buf;
}

std::string format_unix_time(uint64_t seconds) {
  using namespace std::chrono;
  // Years beyond 9999 do not fit the format; no server sends them.
  seconds = std::min<uint64_t>(seconds, 253402300799);  // 9999-12-31T23:59:59Z
  const sys_seconds tp{std::chrono::seconds(static_cast<int64_t>(seconds))};
  const sys_days day = floor<days>(tp);
  const year_month_day ymd{day};
  const hh_mm_ss hms{tp - day};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return buf;
}

std::string TextTable::render() const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : std::string(kMissing);
      line += cell;
      if (i + 1 < widths.size()) line += std::string(widths[i] - cell.size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
  return out;
}

// ---- Replies ------------------------------------------------------------------------------------

std::string format_status(const json::value& body) {
  std::string out = "table version " + text(body, "version") + ", mode " + mode_text(body) +
                    replicas_text(body) + ", converged: " + text(body, "converged") + "\n";
  if (const json::value* change = reply_field(body, "last_change")) {
    const auto reached = duration_text(reply_field(*change, "reached_every_node_ms"));
    out += "version " + text(*change, "version") +
           (reached ? " reached every node in " + *reached
                    : std::string(" has not reached every node yet")) +
           "\n";
  }
  if (const json::value* plane = reply_field(body, "control_plane"); plane && plane->is_object()) {
    // Several config servers on one store (or one on a file); older servers send none.
    out += format_control_plane(*plane);
  }
  if (const json::array* list = array_field(body, "pending_purges"); list && !list->empty()) {
    // One per hash server, with what it waits for (issue 13).
    out += "pending purges of old copies:\n";
    for (const json::value& p : *list) out += "  " + pending_purge_phrase(p) + "\n";
  } else if (const json::value* pending = reply_field(body, "pending_purge")) {
    std::string servers;
    if (const json::array* list = array_field(*pending, "servers")) {
      for (const json::value& s : *list) servers += " " + text(&s);
    }
    out += "pending purge of old copies after version " + text(*pending, "version") + ":" +
           (servers.empty() ? std::string(" -") : servers) + "\n";
  }
  if (const json::array* drains = array_field(body, "drains"); drains && !drains->empty()) {
    out += "drains:\n";
    for (const json::value& d : *drains) out += "  " + drain_progress_line(d) + "\n";
  }
  if (const json::array* refills = array_field(body, "refills"); refills && !refills->empty()) {
    // Replicas: servers that restarted empty, being refilled by the others.
    out += "refills (lookups read another copy until the server has caught up):\n";
    const auto names = [](const json::array* list) {
      std::string joined;
      if (list) {
        for (const json::value& s : *list) joined += (joined.empty() ? "" : ", ") + text(&s);
      }
      return joined.empty() ? std::string(kMissing) : joined;
    };
    for (const json::value& r : *refills) {
      // Its peers' streams first, then the login servers' held writes (docs/design.md §3).
      const json::value* streamed = reply_field(r, "streams_done");
      const std::string waiting = streamed && streamed->is_bool() && streamed->get_bool()
                                      ? "the login servers " +
                                            names(array_field(r, "login_servers_holding")) +
                                            " to send what they hold for it"
                                      : "the streams of " + names(array_field(r, "waiting"));
      std::string along;
      if (const json::value* p = reply_field(r, "progress"); p && p->is_number()) {
        along = ", " + std::to_string(static_cast<int>(p->to_number<double>() * 100 + 0.5)) +
                "% scanned, " + text(r, "records_sent") + " records in";
      }
      out += "  " + text(r, "server") + " at version " + text(r, "version") + ", for " +
             text(r, "seconds") + " s" + along + ", waiting for " + waiting + "\n";
    }
  }
  out += "\n";
  const json::array* nodes = array_field(body, "nodes");
  if (!nodes || nodes->empty()) {
    out += "no nodes are connected\n";
  } else {
    // With replicas, LAG: the writes the login servers hold for a hash server, not applied there
    // yet (its links could not take them).
    const bool replicated = !replicas_text(body).empty();
    std::vector<std::string> header{"ROLE",    "NAME",      "ADDRESS", "STATE",
                                    "VERSION", "HEARTBEAT", "RECORDS", "REQUESTS/S"};
    if (replicated) header.push_back("LAG");
    TextTable table(std::move(header));
    for (const json::value& node : *nodes) {
      std::vector<std::string> row{text(node, "role"),    text(node, "name"),
                                   text(node, "address"), text(node, "state"),
                                   text(node, "version"), heartbeat_text(node),
                                   records_text(node),    text(node, "requests_per_s")};
      if (replicated) {
        row.push_back(reply_field(node, "replication_lag") ? text(node, "replication_lag")
                                                           : std::string(kMissing));
      }
      table.add(std::move(row));
    }
    out += table.render();
  }
  if (nodes) {
    // Streams that are running, or ended otherwise than idle (the idle ones say nothing).
    std::string streams;
    for (const json::value& node : *nodes) {
      const json::value* stream = reply_field(node, "stream");
      if (!stream || !stream->is_object() || text(*stream, "state") == "idle") continue;
      streams += "  " + text(node, "name") + ": " + stream_phrase(stream) + "\n";
    }
    if (!streams.empty()) out += "\nstreams:\n" + streams;
  }
  const json::array* purges = array_field(body, "purges");
  if (purges && !purges->empty()) {
    TextTable table = purge_table();
    for (const json::value& purge : *purges) add_purge_row(table, purge, text(purge, "server"));
    out += "\npurges:\n" + table.render();
  }
  return out;
}

std::string format_control_plane(const json::value& plane) {
  // "cfg-b (127.0.0.1:7101)": a config server by name and admin address.
  const auto server = [](const json::value& s) {
    std::string out = text(s, "name");
    const json::value* admin = reply_field(s, "admin");
    if (admin && admin->is_string() && !admin->get_string().empty())
      out += " (" + text(admin) + ")";
    return out;
  };
  const std::string role = text(plane, "role");
  const json::value* leader = reply_field(plane, "leader");
  const bool leader_known = leader && leader->is_object();
  std::string who;
  if (role == "single") {
    // A file store: no election, no standbys.
    who = "single config server";
    const json::value* name = reply_field(plane, "name");
    if (name && name->is_string() && !name->get_string().empty()) who += " " + text(name);
  } else {
    if (role == "leader") {
      who = "leader " + (leader_known ? server(*leader) : text(plane, "name"));
    } else {
      // A standby answers status with 503, so this is a role of a newer server: shown as it is.
      who = role + " " + text(plane, "name") + ", " +
            (leader_known ? "leader " + server(*leader) : std::string("no leader known"));
    }
    if (const json::array* standbys = array_field(plane, "standbys")) {
      std::string list;
      for (const json::value& s : *standbys) list += (list.empty() ? "" : ", ") + server(s);
      who += list.empty() ? std::string(", no standbys") : ", standbys " + list;
    }
  }
  std::string store = "store " + text(plane, "store");
  if (const json::value* latency = reply_field(plane, "store_latency_ms")) {
    if (const auto last = duration_text(reply_field(*latency, "last"))) store += ", last " + *last;
    if (const auto mean = duration_text(reply_field(*latency, "mean"))) store += ", mean " + *mean;
  }
  if (const auto errors = number(reply_field(plane, "store_errors"))) {
    store += ", " + std::to_string(*errors) + (*errors == 1 ? " error" : " errors");
  }
  std::string out = "control plane: " + who + "; " + store;
  if (out.size() > 120) out = "control plane: " + who + "\n  " + store;
  out += "\n";
  const json::value* problem = reply_field(plane, "problem");
  if (problem && problem->is_string() && !problem->get_string().empty()) {
    out += "  problem: " + printable(std::string_view(problem->get_string()), 1000) + "\n";
  }
  return out;
}

std::string format_table(const json::value& body) {
  std::string out = "table version " + text(body, "version") + ", mode " + mode_text(body) +
                    replicas_text(body) + "\n\n";
  TextTable servers({"SERVER", "ADDRESS", "SHARDS", "WEIGHT"});
  if (const json::array* list = array_field(body, "servers")) {
    for (const json::value& s : *list) {
      servers.add({text(s, "name"), text(s, "address"), text(s, "shards"), text(s, "weight")});
    }
  }
  out += servers.render();
  if (const json::array* ranges = array_field(body, "ranges")) {
    TextTable table({"RANGE", "SERVER", "SHARE"});
    for (const json::value& r : *ranges) {
      const auto lo = number(reply_field(r, "lo")), hi = number(reply_field(r, "hi"));
      std::string range(kMissing), share(kMissing);
      if (lo && hi && *lo <= *hi) {
        range = format_id_range(*lo, *hi);
        const long double ids = static_cast<long double>(*hi - *lo) + 1.0L;
        char buf[32];
        const long double percent = ids * 100.0L / 18446744073709551616.0L;
        std::snprintf(buf, sizeof buf, "%.2Lf%%", percent);
        share = percent < 0.005L ? "<0.01%" : buf;
      }
      table.add({range, text(r, "server"), share});
    }
    out += "\n" + table.render();
  }
  return out;
}

std::string format_servers(const json::value& body) {
  const json::array* list = array_field(body, "servers");
  if (!list || list->empty()) return "no servers\n";
  TextTable table({"NAME", "ADDRESS", "SHARDS", "WEIGHT", "STATE", "RECORDS"});
  for (const json::value& s : *list) {
    table.add({text(s, "name"), text(s, "address"), text(s, "shards"), text(s, "weight"),
               text(s, "state"), records_text(s)});
  }
  return table.render();
}

std::string format_history(const json::value& body) {
  const json::array* list = array_field(body, "versions");
  if (!list || list->empty()) return "no versions\n";
  TextTable table({"VERSION", "TIME", "CHANGE"});
  for (const json::value& v : *list) {
    table.add({text(v, "version"), time_text(reply_field(v, "time")), text(v, "change")});
  }
  return table.render();
}

std::string format_where(const json::value& body) {
  const json::array* replicas = array_field(body, "replicas");
  if (!replicas || replicas->empty()) {
    return "id " + text(body, "id") + ": server " + text(body, "server") + ", shard " +
           text(body, "shard") + ", address " + text(body, "address") + " (table version " +
           text(body, "version") + ")\n";
  }
  // The owner (the primary) first, then its replicas in the order the router gives them.
  TextTable table({"COPY", "SERVER", "SHARD", "ADDRESS"});
  table.add({"primary", text(body, "server"), text(body, "shard"), text(body, "address")});
  for (const json::value& r : *replicas) {
    table.add({"replica", text(r, "server"), text(r, "shard"), text(r, "address")});
  }
  return "id " + text(body, "id") + " (table version " + text(body, "version") + "), " +
         std::to_string(replicas->size() + 1) + " copies:\n" + table.render();
}

std::string format_change(const json::value& body) {
  const json::value* change = reply_field(body, "change");
  return "table version " + text(body, "version") + (change ? ": " + text(change) : "") + "\n";
}

std::string format_purge(const json::value& body) {
  const std::string server = text(body, "server");
  std::string out;
  if (const json::value* requested = reply_field(body, "requested")) {
    out = "purge " + text(requested) + " requested on " + server + "\n";
  }
  // The progress: {"purge": {...}} or {"purge": {"shards": [...]}}, or "shards" beside "server".
  const json::value* purge = reply_field(body, "purge");
  const json::value& progress = purge && purge->is_object() ? *purge : body;
  TextTable table = purge_table();
  if (const json::array* shards = array_field(progress, "shards")) {
    for (const json::value& shard : *shards) add_purge_row(table, shard, server);
  } else if (reply_field(progress, "state")) {
    add_purge_row(table, progress, server);
  }
  if (table.rows() == 0) return out + "no progress reported yet by " + server + "\n";
  return out + table.render();
}

std::string format_purges(const json::value& body, std::string_view server) {
  TextTable table = purge_table();
  if (const json::array* list = array_field(body, "purges")) {
    for (const json::value& purge : *list) {
      const std::string name = text(purge, "server");
      if (server.empty() || name == server) add_purge_row(table, purge, name);
    }
  }
  if (table.rows() == 0) {
    return server.empty() ? "no purges\n" : "no purges on " + std::string(server) + "\n";
  }
  return table.render();
}

std::string stream_phrase(const json::value* stream) {
  if (!stream || !stream->is_object()) return "no report";
  std::string out = text(*stream, "state") + " at version " + text(*stream, "version") + ": " +
                    text(*stream, "sent") + " records sent";
  const std::string state = text(*stream, "state");
  if (state == "running") {
    const auto scanned = number(reply_field(*stream, "scanned"));
    const auto total = number(reply_field(*stream, "total"));
    if (scanned && total) out += ", " + progress_bar(*scanned, *total);
    out += ", " + text(*stream, "rate") + "/s";
    if (auto eta = number(reply_field(*stream, "eta_ms")))
      out += ", ETA " + format_duration_ms(*eta);
  }
  if (auto restarts = number(reply_field(*stream, "restarts")); restarts && *restarts > 0) {
    out += ", " + std::to_string(*restarts) + " restarts";
  }
  return out;
}

bool drain_done(const json::value& drain) {
  const json::value* drained = reply_field(drain, "drained");
  return drained && drained->is_bool() && drained->get_bool();
}

std::string drain_progress_line(const json::value& drain) {
  std::string out = text(drain, "server") + " (out of the table at version " +
                    text(drain, "version") + ", " + text(drain, "state") + "): ";
  if (drain_done(drain)) return out + "drained, it holds nothing";
  out += text(drain, "records") + " records; stream " + stream_phrase(reply_field(drain, "stream"));
  const json::value* pending = reply_field(drain, "pending_purge");
  if (pending && pending->is_object()) {
    out += "; purge pending: " +
           pending_purge_phrase(*pending).substr(text(*pending, "server").size() + 1);
  } else {
    const json::value* sent = reply_field(drain, "purge_sent");
    out += sent && sent->is_bool() && sent->get_bool() ? "; purge sent" : "; no purge pending";
  }
  return out;
}

bool drained_reply(const HttpOutcome& outcome) {
  if (outcome.failure != HttpFailure::kNone || outcome.reply.status != 200) return false;
  json::error_code ec;
  const json::value body = json::parse(outcome.reply.body, ec);
  return !ec && drain_done(body);
}

ImctlInvocation drain_poll_invocation(const ImctlInvocation& drain) {
  ImctlInvocation poll = drain;
  poll.command = ImctlCommand::kDrainStatus;
  poll.method = boost::beast::http::verb::get;
  poll.body.clear();
  poll.wait = false;
  return poll;
}

std::string format_drain(const json::value& body) {
  // POST: {"version", "change", "table", "drain": {...}}; GET: the drain object itself.
  if (reply_field(body, "change")) {
    const json::value* drain = reply_field(body, "drain");
    return format_change(body) + (drain ? drain_progress_line(*drain) + "\n" : std::string());
  }
  return drain_progress_line(body) + "\n";
}

std::string format_streams(const json::value& body) {
  const json::array* list = array_field(body, "streams");
  if (!list || list->empty()) return "no hash servers\n";
  TextTable table({"SERVER", "NODE", "STREAM", "VERSION", "SENT", "PROGRESS", "RATE/S", "ETA",
                   "RESTARTS", "TARGETS"});
  for (const json::value& row : *list) {
    const json::value* stream = reply_field(row, "stream");
    if (!stream || !stream->is_object()) {
      table.add({text(row, "server"), text(row, "state"), "no report", "-", "-", "-", "-", "-", "-",
                 "-"});
      continue;
    }
    std::string targets;
    if (const json::array* t = array_field(*stream, "targets")) {
      for (const json::value& target : *t) {
        targets +=
            (targets.empty() ? "" : " ") + text(target, "name") + "=" + text(target, "records");
      }
    }
    const auto eta = number(reply_field(*stream, "eta_ms"));
    table.add({text(row, "server"), text(row, "state"), text(*stream, "state"),
               text(*stream, "version"), text(*stream, "sent"), progress_text(*stream),
               text(*stream, "rate"),
               eta && text(*stream, "state") == "running" ? format_duration_ms(*eta)
                                                          : std::string(kMissing),
               text(*stream, "restarts"), targets.empty() ? std::string(kMissing) : targets});
  }
  return table.render();
}

std::string format_stream_control(const json::value& body) {
  return "stream " + text(body, "requested") + " sent to " + text(body, "server") +
         " (table version " + text(body, "version") + ")\n";
}

std::string format_reply(const ImctlInvocation& inv, const json::value& body) {
  switch (inv.command) {
    case ImctlCommand::kStatus:
      return format_status(body);
    case ImctlCommand::kTable:
      return format_table(body);
    case ImctlCommand::kServers:
      return format_servers(body);
    case ImctlCommand::kHistory:
      return format_history(body);
    case ImctlCommand::kWhere:
      return format_where(body);
    case ImctlCommand::kPurge:
      return format_purge(body);
    case ImctlCommand::kPurgeStatus:
      return format_purges(body, inv.server);
    case ImctlCommand::kMode:
    case ImctlCommand::kReplicas:
    case ImctlCommand::kServerAdd:
    case ImctlCommand::kServerSet:
    case ImctlCommand::kServerRemove:
    case ImctlCommand::kAssign:
    case ImctlCommand::kSplit:
    case ImctlCommand::kMerge:
      return format_change(body);
    case ImctlCommand::kDrain:
    case ImctlCommand::kDrainStatus:
      return format_drain(body);
    case ImctlCommand::kStreamStatus:
      return format_streams(body);
    case ImctlCommand::kStreamCancel:
    case ImctlCommand::kStreamRestart:
      return format_stream_control(body);
    case ImctlCommand::kToken:
      break;  // made locally (imctl_main.cpp), never an admin API reply
  }
  return json::serialize(body) + "\n";
}

// ---- Following the leader ----------------------------------------------------------------------

}  // namespace imhash
