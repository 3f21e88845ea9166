// ConfigAddresses: the config server addresses a node may dial (--config A:P,B:P,C:P), in the order
// given, and the one its ConfigLink is on. The link starts on the first; after a failed connect or
// a lost session it moves to the next (after the last, the first again), so a node finds whichever
// of them answers. Kept apart from the link's I/O so that later ways of choosing (a config server
// that answers with another one's address) change only this.
//
// A plain value; not thread-safe (the ConfigLink's thread).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/runtime/options.h"

namespace imhash {

class ConfigAddresses {
 public:
  // "HOST:PORT" or several joined by commas (spaces around them are allowed). Throws UsageError
  // naming `what` for an empty list, a malformed or repeated address, or port 0.
  static ConfigAddresses parse(std::string_view list, const std::string& what);

  const HostPort& current() const { return all_[at_]; }
  const std::string& current_text() const { return text_[at_]; }
  size_t position() const { return at_; }  // 0-based index of current()
  size_t size() const { return all_.size(); }
  // Moves to the next address (wrapping); returns it.
  const std::string& advance();
  // Moves to the address written `text` ("HOST:PORT" as given); false (and no move) if it is not
  // one of them.
  bool move_to(const std::string& text);
  // "HOST:PORT" of every address, joined by commas.
  std::string to_string() const;
  // "config server A:P", or with several "config server B:P (2 of 3)", for log lines.
  std::string describe() const;

 private:
  std::vector<HostPort> all_;
  std::vector<std::string> text_;
  size_t at_ = 0;
};

}  // namespace imhash
