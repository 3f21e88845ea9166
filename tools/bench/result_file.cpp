#include "tools/bench/result_file.h"

#include <charconv>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace imhash::bench {

Stamp Stamp::now() {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char file[32], iso[32];
  std::strftime(file, sizeof file, "%Y%m%d-%H%M%S", &utc);
  std::strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return Stamp{file, iso};
}

std::string default_result_path(const std::string& source_dir, const std::string& scenario,
                                const Stamp& stamp, const std::string& commit) {
  return source_dir + "/docs/results/" + scenario + "/" + stamp.file + "-" + commit.substr(0, 7) +
         ".json";
}

namespace {

void indent(std::string& out, int depth) {
  out += '\n';
  out.append(static_cast<size_t>(depth) * 2, ' ');
}

// Arrays of plain numbers stay on one line (a load average, a list of rates); objects and other
// arrays get a line per member.
void write(std::string& out, const boost::json::value& v, int depth) {
  if (const auto* o = v.if_object()) {
    if (o->empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (const auto& [key, member] : *o) {
      out += first ? "" : ",";
      first = false;
      indent(out, depth + 1);
      out += boost::json::serialize(boost::json::value(key));
      out += ": ";
      write(out, member, depth + 1);
    }
    indent(out, depth);
    out += '}';
  } else if (const auto* a = v.if_array()) {
    bool flat = true;
    for (const auto& e : *a) flat = flat && (e.is_number() || e.is_bool() || e.is_null());
    if (flat || a->empty()) {
      out += '[';
      for (size_t i = 0; i < a->size(); ++i) {
        if (i) out += ", ";
        write(out, (*a)[i], depth);
      }
      out += ']';
      return;
    }
    out += '[';
    bool first = true;
    for (const auto& e : *a) {
      out += first ? "" : ",";
      first = false;
      indent(out, depth + 1);
      write(out, e, depth + 1);
    }
    indent(out, depth);
    out += ']';
  } else if (v.is_double()) {
    // The shortest text that reads back as the same double ("0.55", "2127"), not Boost.JSON's
    // "2.127E3"; JSON has no NaN or infinity.
    const double d = v.get_double();
    if (!std::isfinite(d)) {
      out += "null";
      return;
    }
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, d);
    out.append(buf, r.ptr);
  } else {
    out += boost::json::serialize(v);
  }
}

}  // namespace

std::string pretty(const boost::json::value& value) {
  std::string out;
  write(out, value, 0);
  return out + "\n";
}

void write_result(const std::string& path, const boost::json::value& value) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << pretty(value);
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace imhash::bench
