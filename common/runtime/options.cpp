#include "common/runtime/options.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <boost/system/system_error.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "common/codec/endpoint.h"
#include "common/runtime/log_format.h"

namespace po = boost::program_options;

namespace imhash {

namespace {

// Where the log level came from, for reload_log_level(). Written once by Options::parse on the
// main thread before any other thread starts; read on the main thread.
struct LogLevelSource {
  std::string config_file;  // empty: none
  bool from_flag = false;   // --log-level on the command line wins over the file
};
LogLevelSource log_level_source;
bool log_json = false;  // --log-format json is in force (set by Options::parse)

std::optional<spdlog::level::level_enum> parse_level(const std::string& name) {
  const auto level = spdlog::level::from_str(name);
  if (level == spdlog::level::off && name != "off") return std::nullopt;
  return level;
}

}  // namespace

Options::Options(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)), specific_("Options") {}

std::optional<int> Options::parse(int argc, char** argv) {
  po::options_description common("Common options");
  common.add_options()("help,h", "print this help and exit")(
      "log-level", po::value<std::string>()->default_value("info"),
      "trace, debug, info, warn, error, critical or off (SIGHUP re-reads it from --config-file)")(
      "log-format", po::value<std::string>()->default_value("text"),
      "text, or json: one JSON object per line (time, level, logger, message) for journald and "
      "log shippers")(
      "config-file", po::value<std::string>(),
      "read options from FILE: one 'key = value' per line, keys as the long flags; flags win");
  po::options_description all;
  all.add(specific_).add(common);

  try {
    po::store(po::parse_command_line(argc, argv, all), vm_);
    if (vm_.count("help")) {
      std::cout << program_ << " - " << summary_ << "\n\n" << all << std::endl;
      return kExitOk;
    }
    log_level_source.from_flag = vm_.count("log-level") && !vm_["log-level"].defaulted();
    if (vm_.count("config-file")) {
      const auto path = vm_["config-file"].as<std::string>();
      log_level_source.config_file = path;
      std::ifstream in(path);
      if (!in) throw ConfigError("cannot read config file " + path);
      try {
        po::store(po::parse_config_file(in, all), vm_);
      } catch (const po::error& e) {
        throw ConfigError("config file " + path + ": " + e.what());
      }
    }
    po::notify(vm_);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }

  const auto level = parse_level(vm_["log-level"].as<std::string>());
  if (!level) {
    throw UsageError("--log-level: unknown level '" + vm_["log-level"].as<std::string>() + "'");
  }
  const auto format = parse_log_format(vm_["log-format"].as<std::string>());
  if (!format) {
    throw UsageError("--log-format must be text or json, not '" +
                     vm_["log-format"].as<std::string>() + "'");
  }
  // Logs go to stderr so that stdout carries only the machine-readable lines ("listening on").
  spdlog::set_default_logger(spdlog::stderr_color_mt(program_));
  spdlog::set_level(*level);
  spdlog::set_formatter(make_log_formatter(*format));
  log_json = *format == LogFormat::kJson;
  return std::nullopt;
}

void reload_log_level() {
  const auto& src = log_level_source;
  const auto current = spdlog::level::to_string_view(spdlog::get_level());
  if (src.config_file.empty()) {
    spdlog::info("SIGHUP: no --config-file to re-read the log level from (it stays {})", current);
    return;
  }
  if (src.from_flag) {
    spdlog::info("SIGHUP: --log-level on the command line wins over {} (the level stays {})",
                 src.config_file, current);
    return;
  }
  std::ifstream in(src.config_file);
  po::variables_map vm;
  po::options_description only("log level");
  only.add_options()("log-level", po::value<std::string>()->default_value("info"), "");
  try {
    if (!in) throw std::runtime_error("cannot read it");
    po::store(po::parse_config_file(in, only, /*allow_unregistered=*/true), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    spdlog::error("SIGHUP: {}: {} (the log level stays {})", src.config_file, e.what(), current);
    return;
  }
  const auto name = vm["log-level"].as<std::string>();
  const auto level = parse_level(name);
  if (!level) {
    spdlog::error("SIGHUP: {}: unknown log level '{}' (the level stays {})", src.config_file, name,
                  current);
    return;
  }
  spdlog::set_level(*level);
  spdlog::info("SIGHUP: log level {} (from {})", name, src.config_file);
}

namespace {

// The one line a program that cannot go on leaves on stderr: plain text, or, once --log-format
// json is in force, a JSON line like every other (so a log shipper reads the reason too).
void say_fatal(const char* program, const std::string& text) {
  if (log_json) {
    spdlog::critical("{}", text);
    spdlog::default_logger()->flush();
  } else {
    std::fprintf(stderr, "%s: %s\n", program, text.c_str());
  }
}

}  // namespace

int run_main(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const UsageError& e) {
    say_fatal(program, e.what() + std::string("\nTry '") + program + " --help'.");
    return kExitUsage;
  } catch (const ConfigError& e) {
    say_fatal(program, e.what());
    return kExitConfig;
  } catch (const boost::system::system_error& e) {
    say_fatal(program, e.what());
    return kExitUnavailable;
  } catch (const std::exception& e) {
    say_fatal(program, std::string("internal error: ") + e.what());
    return kExitSoftware;
  }
}

void announce_listening(const std::string& address) {
  std::printf("listening on %s\n", address.c_str());
  std::fflush(stdout);
}

HostPort parse_host_port(const std::string& text, const std::string& what) {
  HostPort hp;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      throw UsageError(what + ": expected [IPV6]:PORT, got '" + text + "'");
    }
    hp.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      throw UsageError(what + ": expected HOST:PORT, got '" + text + "'");
    }
    hp.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  const std::optional<uint16_t> port = parse_port(port_text);
  if (!port) throw UsageError(what + ": bad port '" + port_text + "' in '" + text + "'");
  hp.port = *port;
  return hp;
}

}  // namespace imhash
