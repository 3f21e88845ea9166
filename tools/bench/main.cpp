// imhash_bench: the benchmark driver. `imhash_bench SCENARIO [--set KEY=VALUE]... [--rounds N]
// [--base BUILD_DIR] [--out FILE] [--work DIR] [--hiccups SECONDS]` runs one scenario
// (tools/bench/scenario_*.cpp) and writes one JSON result: the scenario, when, the commit (and
// the base build's), the host, the settings, the host's hiccups, every figure and the report.
// Exit codes: 0 the scenario ran, 1 it failed (the result still written, with "error"), 2 a bad
// command line. Single-threaded (bar the signal watcher of programs.h).
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "tools/bench/bench.h"
#include "tools/bench/host.h"
#include "tools/bench/programs.h"
#include "tools/bench/result_file.h"

namespace po = boost::program_options;
using namespace imhash::bench;

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void print_usage(std::ostream& out, const po::options_description& flags) {
  out << "usage: imhash_bench SCENARIO [--set KEY=VALUE]... [--rounds N] [--base BUILD_DIR]\n"
         "                    [--out FILE] [--work DIR] [--hiccups SECONDS]\n"
         "       imhash_bench SCENARIO --help   (the scenario's settings, with their defaults)\n"
         "Runs one benchmark scenario against this build's programs (and, with --base, another\n"
         "build's, in alternated rounds) and writes its result as one JSON file.\n\n"
      << flags << "\nscenarios:\n";
  for (const auto& [name, s] : scenarios()) {
    std::string left = "  " + std::string(name);
    left.resize(std::max<size_t>(left.size() + 2, 12), ' ');
    out << left << s.summary << "\n";
  }
}

std::map<std::string, std::string> parse_sets(const std::vector<std::string>& sets) {
  std::map<std::string, std::string> given;
  for (const std::string& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--set " + s + ": want KEY=VALUE");
    if (!given.emplace(s.substr(0, eq), s.substr(eq + 1)).second) {
      throw UsageError("--set " + s.substr(0, eq) + " given twice");
    }
  }
  return given;
}

std::string absolute(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

struct Args {
  std::string command;  // the command line, for the result (a table names what made it)
  std::string scenario;
  std::vector<std::string> sets;
  int rounds = 4;
  std::string base, out, work;
  double hiccup_seconds = 3;
  bool help = false;
};

int run(const Args& args, const Scenario& scenario) {
  const std::map<std::string, std::string> given = parse_sets(args.sets);
  Result result;
  // The describing pass: the scenario reads its settings and returns. It gives --help, and it
  // checks the --set values and that each key is one the scenario reads, before anything starts.
  {
    Settings probe(given);
    probe.describing = true;
    Context ctx{imhash::test::Binaries::built_in(),
                std::nullopt,
                "",
                "",
                IMHASH_SOURCE_DIR,
                "",
                args.rounds,
                probe,
                result};
    try {
      scenario.run(ctx);
    } catch (const std::exception& e) {
      throw UsageError(e.what());
    }
    if (args.help) {
      std::cout << "imhash_bench " << scenario.name << ": " << scenario.summary << "\n"
                << "settings (--set KEY=VALUE):\n";
      for (const std::string& line : probe.help_lines()) std::cout << line << "\n";
      return 0;
    }
    for (const std::string& key : probe.unread()) {
      throw UsageError("--set " + key + ": scenario " + std::string(scenario.name) +
                       " has no such setting (imhash_bench " + std::string(scenario.name) +
                       " --help)");
    }
  }

  const std::string source_dir = IMHASH_SOURCE_DIR;
  const Stamp stamp = Stamp::now();
  Settings settings(given);
  Context ctx{imhash::test::Binaries::built_in(),
              std::nullopt,
              IMHASH_BUILD_DIR,
              "",
              source_dir,
              "",
              args.rounds,
              settings,
              result};
  boost::json::object doc;
  doc["scenario"] = std::string(scenario.name);
  doc["started_utc"] = stamp.iso;
  doc["command"] = args.command;
  doc["commit"] = git_commit(source_dir);
  doc["build"] = ctx.self_dir;
  if (!args.base.empty()) {
    ctx.base_dir = absolute(args.base);
    try {
      ctx.base = imhash::test::Binaries::of_build(ctx.base_dir);
    } catch (const std::exception& e) {
      throw UsageError(std::string("--base: ") + e.what());
    }
    const std::string base_source = source_of_build(ctx.base_dir);
    boost::json::object base{{"dir", ctx.base_dir}};
    base["commit"] =
        base_source.empty() ? boost::json::value("unknown") : git_commit(base_source).at("commit");
    doc["base"] = std::move(base);
  }
  const std::string commit = doc["commit"].as_object().at("commit").as_string().c_str();
  const std::string out_path =
      args.out.empty() ? default_result_path(source_dir, std::string(scenario.name), stamp, commit)
                       : absolute(args.out);
  ctx.work_dir = absolute(args.work.empty() ? "/tmp/imhash-bench-" + std::string(scenario.name) +
                                                  "-" + stamp.file + "-" + std::to_string(getpid())
                                            : args.work);
  std::filesystem::create_directories(ctx.work_dir);
  doc["work_dir"] = ctx.work_dir;
  doc["rounds"] = args.rounds;
  doc["host"] = host_info();

  int code = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    // The harness writes its children's logs and state into the current directory.
    const InDirectory in(ctx.work_dir);
    if (args.hiccup_seconds > 0) {
      try {
        doc["hiccups"] = hiccups(ctx.self.hiccup_meter, args.hiccup_seconds);
        const auto& h = doc["hiccups"].as_object();
        char line[160];
        std::snprintf(line, sizeof line,
                      "hiccups (%.3g s, every core spinning): longest %.2f ms, lost %.1f ms in all",
                      args.hiccup_seconds, h.at("longest_ms").to_number<double>(),
                      h.at("lost_ms").to_number<double>());
        result.say(line);
      } catch (const std::exception& e) {
        doc["hiccups"] = {{"error", e.what()}};
      }
    }
    try {
      scenario.run(ctx);
    } catch (const std::exception& e) {
      std::cerr << "imhash_bench: " << scenario.name << " failed: " << e.what() << "\n"
                << "   logs: " << ctx.work_dir << "\n";
      doc["error"] = e.what();
      code = kExitFailed;
    }
  }
  doc["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  doc["host"].as_object()["load_average_end"] = load_average();
  doc["settings"] = settings.used();
  doc["figures"] = std::move(result.figures);
  doc["report"] = result.report();
  write_result(out_path, doc);
  std::cout << "result: " << out_path << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  args.command = "imhash_bench";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_of(" \t'\"\\$") == std::string::npos;
    args.command += " " + (plain ? a : "'" + a + "'");
  }
  po::options_description flags("options");
  flags.add_options()(
      "set", po::value(&args.sets)->composing(),
      "KEY=VALUE: a setting of the scenario (repeatable; SCENARIO --help lists them)")(
      "rounds", po::value(&args.rounds)->default_value(4),
      "rounds of each measurement (alternated base/self with --base)")(
      "base", po::value(&args.base), "BUILD_DIR: another build to A/B this one against")(
      "out", po::value(&args.out),
      "FILE: the result (default docs/results/SCENARIO/YYYYMMDD-HHMMSS-COMMIT7.json)")(
      "work", po::value(&args.work),
      "DIR: the children's logs and files (default /tmp/imhash-bench-SCENARIO-...; kept)")(
      "hiccups", po::value(&args.hiccup_seconds)->default_value(3),
      "SECONDS of tools/hiccup_meter before the scenario (0: none)")(
      "help,h", po::bool_switch(&args.help), "this text, or with SCENARIO its settings");
  po::options_description all;
  all.add(flags).add_options()("scenario", po::value(&args.scenario));
  po::positional_options_description positional;
  positional.add("scenario", 1);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
    if (args.scenario.empty()) {
      print_usage(args.help ? std::cout : std::cerr, flags);
      return args.help ? 0 : kExitUsage;
    }
    const auto it = scenarios().find(args.scenario);
    if (it == scenarios().end()) {
      throw UsageError("no scenario \"" + args.scenario + "\" (imhash_bench --help lists them)");
    }
    if (args.rounds < 1 || args.rounds > 1000) throw UsageError("--rounds must be 1 to 1000");
    kill_children_on_signal();
    return run(args, it->second);
  } catch (const po::error& e) {
    std::cerr << "imhash_bench: " << e.what() << " (imhash_bench --help)\n";
    return kExitUsage;
  } catch (const UsageError& e) {
    std::cerr << "imhash_bench: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "imhash_bench: " << e.what() << "\n";
    return kExitFailed;
  }
}
