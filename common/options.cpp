#include "common/options.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <boost/system/system_error.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "common/endpoint.h"

namespace po = boost::program_options;

namespace imhash {

Options::Options(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)), specific_("Options") {}

std::optional<int> Options::parse(int argc, char** argv) {
  po::options_description common("Common options");
  common.add_options()("help,h", "print this help and exit")(
      "log-level", po::value<std::string>()->default_value("info"),
      "trace, debug, info, warn, error, critical or off")(
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
    if (vm_.count("config-file")) {
      const auto path = vm_["config-file"].as<std::string>();
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

  const auto level = spdlog::level::from_str(vm_["log-level"].as<std::string>());
  if (level == spdlog::level::off && vm_["log-level"].as<std::string>() != "off") {
    throw UsageError("--log-level: unknown level '" + vm_["log-level"].as<std::string>() + "'");
  }
  // Logs go to stderr so that stdout carries only the machine-readable lines ("listening on").
  spdlog::set_default_logger(spdlog::stderr_color_mt(program_));
  spdlog::set_level(level);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %n %^%l%$ %v");
  return std::nullopt;
}

int run_main(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\nTry '%s --help'.\n", program, e.what(), program);
    return kExitUsage;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return kExitConfig;
  } catch (const boost::system::system_error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return kExitUnavailable;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
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
