#include "common/runtime/saved_table.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "common/routing/table_json.h"
#include "common/runtime/durable_file.h"
#include "common/runtime/options.h"

namespace imhash {

std::string SavedTable::file_name(const std::string& role, const std::string& name) {
  return role + "-" + name + ".table.json";
}

SavedTable::SavedTable(std::string dir, const std::string& role, const std::string& name)
    : dir_(std::move(dir)), file_(file_name(role, name)), path_(dir_ + "/" + file_) {
  if (auto err = make_directory(dir_); !err.empty()) throw ConfigError("--state-dir: " + err);
  remove_interrupted_write(dir_, file_);
}

std::optional<Table> SavedTable::load() {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return std::nullopt;
  TableResult loaded = load_table_file(path_);
  if (!loaded.table) {
    spdlog::error("saved table ignored: {}", loaded.error);
    return std::nullopt;
  }
  version_ = loaded.table->version;
  return std::move(loaded.table);
}

void SavedTable::save(const Table& table) {
  if (table.version <= version_) return;
  if (auto err = replace_file_durably(dir_, file_, table_to_json(table)); !err.empty()) {
    spdlog::error("cannot save table version {}: {}", table.version, err);
    return;
  }
  version_ = table.version;
  spdlog::debug("table version {} saved in {}", table.version, path_);
}

std::optional<Table> newer_table(std::optional<Table> a, std::optional<Table> b) {
  if (!a) return b;
  if (b && b->version > a->version) return b;
  return a;
}

}  // namespace imhash
