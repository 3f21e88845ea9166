#include "config_server/state_store.h"

#include <boost/json.hpp>
#include <ctime>

#include "common/routing/table_json.h"
#include "common/runtime/options.h"

namespace json = boost::json;

namespace imhash {

namespace {

// A JSON integer that fits a uint64_t.
std::optional<uint64_t> unsigned_of(const json::value* v) {
  if (!v) return std::nullopt;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64() && v->get_int64() >= 0) return static_cast<uint64_t>(v->get_int64());
  return std::nullopt;
}

}  // namespace

json::value StateStore::entry_json(const HistoryEntry& h) {
  boost::system::error_code ec;
  return json::object{
      {"time", h.time}, {"change", h.change}, {"table", json::parse(table_to_json(h.table), ec)}};
}

HistoryEntry StateStore::entry_of(const json::value& e, const std::string& where) {
  const json::object* eo = e.if_object();
  const auto time = unsigned_of(eo ? eo->if_contains("time") : nullptr);
  if (!eo || !eo->contains("table") || !time || !eo->contains("change")) {
    throw ConfigError(where + ": malformed history entry");
  }
  auto table = parse_table_json(json::serialize(eo->at("table")));
  if (!table.table) throw ConfigError(where + ": history: " + table.error);
  HistoryEntry h;
  h.version = table.table->version;
  h.time = *time;
  h.change = eo->at("change").is_string() ? std::string(eo->at("change").as_string()) : "";
  h.table = std::move(*table.table);
  return h;
}

json::value StateStore::pending_json(const std::vector<PendingPurge>& pending) {
  json::array purges;
  for (const PendingPurge& p : pending) {
    purges.push_back(json::object{{"server", p.server},
                                  {"version", p.version},
                                  {"not_before_ms", p.not_before_ms},
                                  {"streams", p.streams}});
  }
  return purges;
}

std::vector<PendingPurge> StateStore::pending_of(const json::value& v, const std::string& where) {
  const json::array* list = v.if_array();
  if (!list) throw ConfigError(where + ": \"pending_purges\" must be an array");
  std::vector<PendingPurge> out;
  for (const json::value& e : *list) {
    const json::object* eo = e.if_object();
    const json::value* server = eo ? eo->if_contains("server") : nullptr;
    const auto version = unsigned_of(eo ? eo->if_contains("version") : nullptr);
    const auto not_before = unsigned_of(eo ? eo->if_contains("not_before_ms") : nullptr);
    const json::value* streams = eo ? eo->if_contains("streams") : nullptr;
    if (!server || !server->is_string() || !version || !not_before ||
        (streams && !streams->is_bool())) {
      throw ConfigError(where + ": malformed pending purge " + json::serialize(e));
    }
    out.push_back(PendingPurge{std::string(server->get_string()), *version, *not_before,
                               streams && streams->get_bool()});
  }
  return out;
}

void StateStore::assign(std::deque<HistoryEntry> history, std::vector<PendingPurge> pending) {
  history_ = std::move(history);
  current_.reset();
  if (!history_.empty()) current_ = history_.front().table;
  pending_ = std::move(pending);
}

const Table* StateStore::at_version(uint64_t version) const {
  for (const auto& h : history_) {
    if (h.version == version) return &h.table;
  }
  return nullptr;
}

std::string StateStore::commit(Table next, std::string change, std::vector<PendingPurge> pending) {
  if (next.version != version() + 1) return "internal error: version must grow by one";
  if (auto err = validate(next); !err.empty()) return err;
  std::deque<HistoryEntry> history = history_;
  history.push_front(HistoryEntry{next.version, static_cast<uint64_t>(std::time(nullptr)),
                                  std::move(change), next});
  std::vector<uint64_t> dropped;
  while (history.size() > kMaxHistory) {
    dropped.push_back(history.back().version);
    history.pop_back();
  }
  if (auto err = persist(history, &history.front(), dropped, pending); !err.empty()) return err;
  history_ = std::move(history);
  current_ = std::move(next);
  pending_ = std::move(pending);
  return {};
}

std::string StateStore::set_pending_purges(std::vector<PendingPurge> pending) {
  if (auto err = persist(history_, nullptr, {}, pending); !err.empty()) return err;
  pending_ = std::move(pending);
  return {};
}

}  // namespace imhash
