#include "tools/nemesis/history.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>

#include "common/codec/enum_names.h"

namespace imhash::history {

using client::Op;
using client::Status;

namespace {

constexpr std::array<Op, 4> kHistoryOps = {Op::kLogin, Op::kHeartbeat, Op::kLookup, Op::kLogout};
constexpr std::array<Status, 8> kStatuses = {
    Status::kOk,      Status::kNotFound,     Status::kBadRequest,  Status::kUnavailable,
    Status::kTimeout, Status::kUnauthorized, Status::kRateLimited, Status::kUnsupportedVersion};
constexpr std::string_view kNoReplyName = "none";
constexpr std::string_view kNoEndpoint = "-";
constexpr size_t kHistoryFields = 6;
constexpr size_t kWindowFields = 4;

// `text` in quotes for a message, cut short: a corrupt line may be megabytes of anything.
std::string quoted(std::string_view text) {
  constexpr size_t kShown = 60;
  std::string out = "'";
  out.append(text.substr(0, kShown));
  if (text.size() > kShown) out += "...";
  return out += '\'';
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Splits `line` at single spaces into exactly N `fields` (`names` says which, for the message);
// returns what is wrong, or "". An empty field counts: two spaces in a row make a field that
// parses as nothing.
template <size_t N>
std::string split_fields(std::string_view line, std::array<std::string_view, N>& fields,
                         const char* names) {
  size_t count = 0;
  for (;;) {
    const size_t space = line.find(' ');
    if (count < N) fields[count] = line.substr(0, space);
    ++count;
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  if (count == N) return {};
  return "expected " + std::to_string(N) + " fields separated by single spaces (" + names +
         "), found " + std::to_string(count);
}

// Reads `in` line by line (one buffer for the whole file) and hands each line, with its number,
// to `on_line`, which returns an error message or "". Stops at the first error.
template <typename OnLine>
std::optional<InputError> for_each_line(std::istream& in, std::string_view file,
                                        bool need_final_newline, OnLine on_line) {
  std::string line;
  uint32_t number = 0;
  while (std::getline(in, line)) {
    if (number == std::numeric_limits<uint32_t>::max()) {
      return InputError{std::string(file), number, "more than 4294967295 lines"};
    }
    ++number;
    if (need_final_newline && in.eof()) {
      return InputError{std::string(file), number,
                        "the last line does not end in a newline (a truncated file?)"};
    }
    if (std::string message = on_line(std::string_view(line), number); !message.empty()) {
      return InputError{std::string(file), number, std::move(message)};
    }
  }
  if (in.bad()) return InputError{std::string(file), number, "read error"};
  return std::nullopt;
}

// An Event from the six fields of a history line, or what is wrong with them.
std::string parse_event(const std::array<std::string_view, kHistoryFields>& f, Event& e) {
  const std::optional<uint64_t> invoke = parse_u64(f[0]);
  if (!invoke) return "invoke_ns " + quoted(f[0]) + " is not an unsigned decimal";
  const std::optional<uint64_t> complete = parse_u64(f[1]);
  if (!complete) return "complete_ns " + quoted(f[1]) + " is not an unsigned decimal";
  if (*complete < *invoke) {
    return "complete_ns " + std::string(f[1]) + " is before invoke_ns " + std::string(f[0]);
  }
  const std::optional<Op> op = parse_name(f[2], kHistoryOps, client::to_string);
  if (!op)
    return "unknown op " + quoted(f[2]) + " (" + name_list(kHistoryOps, client::to_string) + ")";
  const std::optional<uint64_t> user = parse_u64(f[3]);
  if (!user) return "user_id " + quoted(f[3]) + " is not an unsigned 64-bit decimal";
  if (f[4] != kNoReplyName) {
    e.status = parse_name(f[4], kStatuses, client::to_string);
    if (!e.status) {
      return "unknown status " + quoted(f[4]) + " (" + name_list(kStatuses, client::to_string) +
             " or \"none\")";
    }
  }
  if (f[5] != kNoEndpoint) {
    const std::optional<Endpoint> endpoint = parse_endpoint(f[5]);
    if (!endpoint) {
      return "endpoint " + quoted(f[5]) +
             " is neither '-' nor an address as 10.0.0.7:4242 or [2001:db8::1]:443";
    }
    e.endpoint = *endpoint;
  }
  const bool writes_endpoint = *op == Op::kLogin || *op == Op::kHeartbeat;
  if (writes_endpoint && !e.endpoint.valid()) {
    return std::string(client::to_string(*op)) + " without the endpoint it wrote ('-')";
  }
  if (*op == Op::kLogout && e.endpoint.valid()) {
    return "LOGOUT with an endpoint " + quoted(f[5]) + " (it carries none: '-')";
  }
  e.invoke_ns = *invoke;
  e.complete_ns = *complete;
  e.op = *op;
  e.user_id = *user;
  return {};
}

bool is_kind_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

std::string parse_window(const std::array<std::string_view, kWindowFields>& f, Window& w) {
  const std::optional<uint64_t> start = parse_u64(f[0]);
  if (!start) return "start_ns " + quoted(f[0]) + " is not an unsigned decimal";
  const std::optional<uint64_t> end = parse_u64(f[1]);
  if (!end) return "end_ns " + quoted(f[1]) + " is not an unsigned decimal";
  if (*end < *start)
    return "end_ns " + std::string(f[1]) + " is before start_ns " + std::string(f[0]);
  if (f[2].empty() || !std::all_of(f[2].begin(), f[2].end(), is_kind_char)) {
    return "kind " + quoted(f[2]) + " is not a word (letters, digits, '-', '_', '.')";
  }
  if (f[3] == "*") {
    w.excuses.fill(true);
  } else {
    for (std::string_view rest = f[3];;) {
      const size_t comma = rest.find(',');
      const std::string_view name = rest.substr(0, comma);
      const std::optional<Rule> rule = parse_name(name, kRules, to_string);
      if (!rule) {
        return "unknown rule " + quoted(name) + " (" + name_list(kRules, to_string) + ", or *)";
      }
      w.excuses[static_cast<size_t>(*rule)] = true;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  w.start_ns = *start;
  w.end_ns = *end;
  w.kind = std::string(f[2]);
  return {};
}

}  // namespace

std::string InputError::to_string() const {
  if (line == 0) return file + ": " + message;
  return file + ":" + std::to_string(line) + ": " + message;
}

std::optional<InputError> parse_history(std::istream& in, std::string_view file, History& into) {
  if (into.files.size() > std::numeric_limits<uint16_t>::max()) {
    return InputError{std::string(file), 0, "more than 65536 history files"};
  }
  const auto file_index = static_cast<uint16_t>(into.files.size());
  into.files.emplace_back(file);
  bool header_seen = false;
  std::optional<InputError> error = for_each_line(
      in, file, /*need_final_newline=*/true, [&](std::string_view line, uint32_t number) {
        if (!header_seen) {
          header_seen = true;
          if (line == kHeaderLine) return std::string();
          return "the first line must be '" + std::string(kHeaderLine) +
                 "' (a history of version 1), not " + quoted(line);
        }
        if (line.starts_with('#')) return std::string();
        if (line.empty()) return std::string("an empty line");
        std::array<std::string_view, kHistoryFields> fields;
        std::string message =
            split_fields(line, fields, "invoke_ns complete_ns op user_id status endpoint");
        if (!message.empty()) return message;
        Event e;
        message = parse_event(fields, e);
        if (!message.empty()) return message;
        e.file = file_index;
        e.line = number;
        into.events.push_back(e);
        return std::string();
      });
  if (!error && !header_seen) {
    error = InputError{std::string(file), 1,
                       "empty file (a history starts with '" + std::string(kHeaderLine) + "')"};
  }
  return error;
}

std::optional<InputError> read_history_file(const std::string& path, History& into) {
  std::ifstream in(path);
  if (!in) return InputError{path, 0, "cannot open the file"};
  return parse_history(in, path, into);
}

void append_line(std::string& out, const Event& e) {
  out += std::to_string(e.invoke_ns);
  out += ' ';
  out += std::to_string(e.complete_ns);
  out += ' ';
  out += client::to_string(e.op);
  out += ' ';
  out += std::to_string(e.user_id);
  out += ' ';
  out += e.status ? std::string_view(client::to_string(*e.status)) : kNoReplyName;
  out += ' ';
  out += e.endpoint.valid() ? e.endpoint.to_string() : std::string(kNoEndpoint);
  out += '\n';
}

const char* to_string(Rule r) {
  switch (r) {
    case Rule::kPhantom:
      return "phantom";
    case Rule::kStale:
      return "stale";
    case Rule::kLogoutUndone:
      return "logout_undone";
    case Rule::kWriteLost:
      return "write_lost";
    case Rule::kUnavailable:
      return "unavailable";
    case Rule::kNoReply:
      return "no_reply";
  }
  return "unknown";
}

std::optional<InputError> parse_windows(std::istream& in, std::string_view file,
                                        std::vector<Window>& into) {
  return for_each_line(
      in, file, /*need_final_newline=*/false, [&](std::string_view line, uint32_t) {
        if (line.empty() || line.starts_with('#')) return std::string();
        std::array<std::string_view, kWindowFields> fields;
        std::string message = split_fields(line, fields, "start_ns end_ns kind rules");
        if (!message.empty()) return message;
        Window w;
        message = parse_window(fields, w);
        if (message.empty()) into.push_back(std::move(w));
        return message;
      });
}

std::optional<InputError> read_windows_file(const std::string& path, std::vector<Window>& into) {
  std::ifstream in(path);
  if (!in) return InputError{path, 0, "cannot open the file"};
  return parse_windows(in, path, into);
}

}  // namespace imhash::history
