#include "common/runtime/config_addresses.h"

#include <algorithm>

namespace imhash {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

ConfigAddresses ConfigAddresses::parse(std::string_view list, const std::string& what) {
  ConfigAddresses out;
  size_t from = 0;
  for (;;) {
    const size_t comma = list.find(',', from);
    const std::string item(trim(list.substr(
        from, comma == std::string_view::npos ? std::string_view::npos : comma - from)));
    if (item.empty()) {
      throw UsageError(what + ": expected HOST:PORT[,HOST:PORT...], got '" + std::string(list) +
                       "'");
    }
    HostPort hp = parse_host_port(item, what);
    if (hp.port == 0) throw UsageError(what + ": port 0 in '" + item + "'");
    if (std::find(out.text_.begin(), out.text_.end(), item) != out.text_.end()) {
      throw UsageError(what + ": '" + item + "' is listed twice");
    }
    out.all_.push_back(std::move(hp));
    out.text_.push_back(item);
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
  return out;
}

const std::string& ConfigAddresses::advance() {
  at_ = (at_ + 1) % all_.size();
  return text_[at_];
}

bool ConfigAddresses::move_to(const std::string& text) {
  for (size_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == text) {
      at_ = i;
      return true;
    }
  }
  return false;
}

std::string ConfigAddresses::to_string() const {
  std::string out;
  for (const std::string& t : text_) out += (out.empty() ? "" : ",") + t;
  return out;
}

std::string ConfigAddresses::describe() const {
  std::string out = "config server " + text_[at_];
  if (all_.size() > 1) {
    out += " (" + std::to_string(at_ + 1) + " of " + std::to_string(all_.size()) + ")";
  }
  return out;
}

}  // namespace imhash
