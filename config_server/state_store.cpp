#include "config_server/state_store.h"

#include <boost/json.hpp>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/durable_file.h"
#include "common/options.h"
#include "common/table_json.h"

namespace json = boost::json;

namespace imhash {

namespace {
constexpr const char* kStateFile = "state.json";

// A JSON integer that fits a uint64_t.
std::optional<uint64_t> unsigned_of(const json::value* v) {
  if (!v) return std::nullopt;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64() && v->get_int64() >= 0) return static_cast<uint64_t>(v->get_int64());
  return std::nullopt;
}
}  // namespace

StateStore::StateStore(std::string dir) : dir_(std::move(dir)), path_(dir_ + "/" + kStateFile) {
  if (auto err = make_directory(dir_); !err.empty()) throw ConfigError("state directory: " + err);
  // A leftover temporary file is an interrupted write: the state file still holds the last
  // committed state.
  remove_interrupted_write(dir_, kStateFile);

  std::ifstream in(path_);
  if (!in) {
    if (std::filesystem::exists(path_)) throw ConfigError("cannot read " + path_);
    return;  // a new cluster
  }
  std::stringstream buf;
  buf << in.rdbuf();
  boost::system::error_code jec;
  json::value root = json::parse(buf.str(), jec);
  if (jec || !root.is_object()) throw ConfigError(path_ + ": not a JSON object: " + jec.message());
  const json::object& o = root.as_object();
  const json::array* hist = o.if_contains("history") ? o.at("history").if_array() : nullptr;
  if (!hist) throw ConfigError(path_ + ": missing \"history\" array");
  for (const json::value& e : *hist) {
    const json::object* eo = e.if_object();
    if (!eo || !eo->contains("table") || !eo->contains("time") || !eo->contains("change")) {
      throw ConfigError(path_ + ": malformed history entry");
    }
    auto table = parse_table_json(json::serialize(eo->at("table")));
    if (!table.table) throw ConfigError(path_ + ": history: " + table.error);
    HistoryEntry h;
    h.version = table.table->version;
    h.time = eo->at("time").to_number<uint64_t>();
    h.change = eo->at("change").is_string() ? std::string(eo->at("change").as_string()) : "";
    h.table = std::move(*table.table);
    history_.push_back(std::move(h));
  }
  if (!history_.empty()) current_ = history_.front().table;
  // "pending_purges" came with issue 13: a state file written before it has none.
  if (const json::value* pending = o.if_contains("pending_purges")) {
    const json::array* list = pending->if_array();
    if (!list) throw ConfigError(path_ + ": \"pending_purges\" must be an array");
    for (const json::value& e : *list) {
      const json::object* eo = e.if_object();
      const json::value* server = eo ? eo->if_contains("server") : nullptr;
      const auto version = unsigned_of(eo ? eo->if_contains("version") : nullptr);
      const auto not_before = unsigned_of(eo ? eo->if_contains("not_before_ms") : nullptr);
      const json::value* streams = eo ? eo->if_contains("streams") : nullptr;
      if (!server || !server->is_string() || !version || !not_before ||
          (streams && !streams->is_bool())) {
        throw ConfigError(path_ + ": malformed pending purge " + json::serialize(e));
      }
      pending_.push_back(PendingPurge{std::string(server->get_string()), *version, *not_before,
                                      streams && streams->get_bool()});
    }
  }
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
  while (history.size() > kMaxHistory) history.pop_back();
  if (auto err = write(history, pending); !err.empty()) return err;
  history_ = std::move(history);
  current_ = std::move(next);
  pending_ = std::move(pending);
  return {};
}

std::string StateStore::set_pending_purges(std::vector<PendingPurge> pending) {
  if (auto err = write(history_, pending); !err.empty()) return err;
  pending_ = std::move(pending);
  return {};
}

std::string StateStore::write(const std::deque<HistoryEntry>& history,
                              const std::vector<PendingPurge>& pending) {
  json::array entries;
  for (const auto& h : history) {
    boost::system::error_code ec;
    entries.push_back(json::object{{"time", h.time},
                                   {"change", h.change},
                                   {"table", json::parse(table_to_json(h.table), ec)}});
  }
  json::array purges;
  for (const PendingPurge& p : pending) {
    purges.push_back(json::object{{"server", p.server},
                                  {"version", p.version},
                                  {"not_before_ms", p.not_before_ms},
                                  {"streams", p.streams}});
  }
  const std::string text =
      json::serialize(json::object{
          {"format", 1}, {"history", std::move(entries)}, {"pending_purges", std::move(purges)}}) +
      "\n";
  return replace_file_durably(dir_, kStateFile, text);
}

}  // namespace imhash
