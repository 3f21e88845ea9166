#include "config_server/state_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/options.h"
#include "common/table_json.h"

namespace json = boost::json;

namespace imhash {

namespace {

std::string errno_text() { return std::strerror(errno); }

bool write_all(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

StateStore::StateStore(std::string dir) : dir_(std::move(dir)), path_(dir_ + "/state.json") {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw ConfigError("cannot create state directory " + dir_ + ": " + ec.message());
  // A leftover temporary file is an interrupted write: the rename never happened, so the state
  // file still holds the last committed state.
  std::filesystem::remove(path_ + ".tmp", ec);

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
}

const Table* StateStore::at_version(uint64_t version) const {
  for (const auto& h : history_) {
    if (h.version == version) return &h.table;
  }
  return nullptr;
}

std::string StateStore::commit(Table next, std::string change) {
  if (next.version != version() + 1) return "internal error: version must grow by one";
  if (auto err = validate(next); !err.empty()) return err;
  std::deque<HistoryEntry> history = history_;
  history.push_front(HistoryEntry{next.version, static_cast<uint64_t>(std::time(nullptr)),
                                  std::move(change), next});
  while (history.size() > kMaxHistory) history.pop_back();

  json::array entries;
  for (const auto& h : history) {
    boost::system::error_code ec;
    entries.push_back(json::object{{"time", h.time},
                                   {"change", h.change},
                                   {"table", json::parse(table_to_json(h.table), ec)}});
  }
  const std::string text =
      json::serialize(json::object{{"format", 1}, {"history", std::move(entries)}}) + "\n";
  if (auto err = write_file(text); !err.empty()) return err;
  history_ = std::move(history);
  current_ = std::move(next);
  return {};
}

std::string StateStore::write_file(const std::string& text) const {
  const std::string tmp = path_ + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot write " + tmp + ": " + errno_text();
  const bool ok = write_all(fd, text) && ::fsync(fd) == 0;
  const std::string why = ok ? "" : errno_text();
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return "cannot write " + tmp + ": " + why;
  }
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    return "cannot replace " + path_ + ": " + err;
  }
  // The rename is durable only once the directory entry is on disk.
  const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace imhash
