// The options helper every imhash program uses (docs/design.md §7): one shape for all command
// lines.
// --help prints the options with their defaults; --log-level sets spdlog's level, --log-format
// the shape of the log lines (common/runtime/log_format.h); --config-file
// FILE reads the same keys as the flags ("key = value" lines, flags win over the file); port 0
// means "pick a free port". Used from main() only, before any thread starts.
#pragma once

#include <boost/program_options.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace imhash {

// sysexits.h codes, so scripts can tell a usage error from a runtime failure.
enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 64,        // EX_USAGE: bad flag or value
  kExitUnavailable = 69,  // EX_UNAVAILABLE: a listener could not bind, a peer could not be reached
  kExitSoftware = 70,     // EX_SOFTWARE: an internal error
  kExitConfig = 78,       // EX_CONFIG: a config or table file is unreadable or invalid
};

// Thrown for a bad command line; main() prints it with the program name and exits kExitUsage.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Thrown for a bad config or table file; main() exits kExitConfig.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Options {
 public:
  Options(std::string program, std::string summary);

  // Program-specific options: opts.add()("listen", po::value<std::string>()->default_value(..),
  // "...")
  boost::program_options::options_description_easy_init add() { return specific_.add_options(); }

  // Parses argv (and --config-file). Returns an exit code when the program should stop now
  // (--help, --version); throws UsageError / ConfigError on bad input. Sets up logging.
  std::optional<int> parse(int argc, char** argv);

  const boost::program_options::variables_map& vm() const { return vm_; }
  template <typename T>
  T get(const std::string& key) const {
    return vm_[key].as<T>();
  }
  bool has(const std::string& key) const { return vm_.count(key) > 0 && !vm_[key].defaulted(); }

 private:
  std::string program_;
  std::string summary_;
  boost::program_options::options_description specific_;
  boost::program_options::variables_map vm_;
};

// Runs `body` and maps the start-up exceptions onto exit codes with one clear line on stderr.
int run_main(const char* program, int (*body)(int, char**), int argc, char** argv);

// Prints "listening on ADDRESS" on stdout and flushes: tests and scripts wait for this line.
void announce_listening(const std::string& address);

// Sets the log level again from the --config-file that Options::parse read (a "log-level" line;
// none: info), unless --log-level was on the command line (flags win). A file that cannot be read
// or names no level is logged and the level kept. Main thread (the daemons call it on SIGHUP,
// through Lifecycle).
void reload_log_level();

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// "127.0.0.1:7000", "[::1]:0", "localhost:7000". Throws UsageError naming `what` on bad input.
HostPort parse_host_port(const std::string& text, const std::string& what);

}  // namespace imhash
