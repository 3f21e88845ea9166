#include "config_server/file_state_store.h"

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/runtime/durable_file.h"
#include "common/runtime/options.h"

namespace json = boost::json;

namespace imhash {

namespace {
constexpr const char* kStateFile = "state.json";
}  // namespace

FileStateStore::FileStateStore(std::string dir)
    : dir_(std::move(dir)), path_(dir_ + "/" + kStateFile) {
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
  std::deque<HistoryEntry> history;
  for (const json::value& e : *hist) history.push_back(entry_of(e, path_));
  // "pending_purges" came with issue 13: a state file written before it has none.
  std::vector<PendingPurge> pending;
  if (const json::value* p = o.if_contains("pending_purges")) pending = pending_of(*p, path_);
  assign(std::move(history), std::move(pending));
}

std::string FileStateStore::persist(const std::deque<HistoryEntry>& history,
                                    const HistoryEntry* /*added*/,
                                    const std::vector<uint64_t>& /*dropped*/,
                                    const std::vector<PendingPurge>& pending) {
  json::array entries;
  for (const auto& h : history) entries.push_back(entry_json(h));
  const std::string text =
      json::serialize(json::object{{"format", 1},
                                   {"history", std::move(entries)},
                                   {"pending_purges", pending_json(pending)}}) +
      "\n";
  return replace_file_durably(dir_, kStateFile, text);
}

}  // namespace imhash
