// The docs' commands are the ones the programs accept: every line in a fenced code block of
// docs/operations.md that starts with "imctl " is run, in document order, against a local cluster
// (a config server, hash1..hash4 registered with it, login1 once the first "imctl server add" has
// run). Conventions (stated at the top of docs/operations.md): a line must exit 0, unless it ends
// with "# exits N"; a line ending with "# not run" is skipped. A line "<!-- docs test: new
// cluster -->" outside the code blocks starts a fresh cluster for the commands after it (the
// runbook starts from an empty table).
#include <doctest/doctest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "harness/config_cluster.h"

namespace {

using imhash::test::ConfigCluster;
using imhash::test::ConfigClusterOptions;

struct DocCommand {
  int line = 0;                   // 1-based line in the document
  std::string text;               // the command as written, without its comment
  std::vector<std::string> args;  // after "imctl"
  int expected_exit = 0;
  bool run = true;
  int cluster = 0;  // which fresh cluster it runs on (0, then 1 after the first marker...)
};

constexpr const char* kNewCluster = "<!-- docs test: new cluster -->";

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Extracts the imctl lines of fenced code blocks. Throws on a comment it does not understand, so a
// typo in a marker cannot silently turn a check off.
std::vector<DocCommand> extract_commands(const std::string& markdown) {
  std::vector<DocCommand> out;
  std::istringstream in(markdown);
  std::string raw;
  bool fenced = false;
  int cluster = 0;
  for (int line_no = 1; std::getline(in, raw); ++line_no) {
    const std::string line = trim(raw);
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    if (!fenced && line == kNewCluster) ++cluster;
    if (!fenced && line.rfind("<!-- docs test", 0) == 0 && line != kNewCluster) {
      throw std::runtime_error("line " + std::to_string(line_no) + ": unknown marker '" + line +
                               "' (expected '" + kNewCluster + "')");
    }
    if (!fenced || line.rfind("imctl ", 0) != 0) continue;
    DocCommand c;
    c.line = line_no;
    c.cluster = cluster;
    std::string command = line;
    if (const size_t hash = line.find('#'); hash != std::string::npos) {
      command = trim(line.substr(0, hash));
      const std::string comment = trim(line.substr(hash + 1));
      if (comment == "not run") {
        c.run = false;
      } else if (comment.rfind("exits ", 0) == 0) {
        c.expected_exit = std::stoi(comment.substr(6));
      } else {
        throw std::runtime_error("line " + std::to_string(line_no) + ": unknown comment '" +
                                 comment + "' (expected '# not run' or '# exits N')");
      }
    }
    c.text = command;
    std::istringstream words(command.substr(6));
    for (std::string w; words >> w;) c.args.push_back(w);
    out.push_back(std::move(c));
  }
  if (fenced) throw std::runtime_error("unterminated code block");
  return out;
}

std::string read_doc() {
  const std::string path = IMHASH_SOURCE_DIR "/docs/operations.md";
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("docs: the extractor reads fenced imctl lines, expected exits and not-run marks") {
  const std::string md =
      "imctl status outside a block is prose\n"
      "```\n"
      "imctl server add hash1 hash2\n"
      "  imctl merge 0-9   # exits 1\n"
      "nft add rule inet filter input tcp dport 7001 drop\n"
      "imctl token 42 --ttl 1h --key-file k   # not run\n"
      "```\n"
      "imctl where 1\n"
      "<!-- docs test: new cluster -->\n"
      "```\n"
      "imctl status\n"
      "```\n";
  const auto cmds = extract_commands(md);
  REQUIRE(cmds.size() == 4);
  CHECK(cmds[2].cluster == 0);
  CHECK(cmds[3].cluster == 1);
  CHECK_THROWS(extract_commands("<!-- docs test: new clusters -->\n"));
  CHECK(cmds[0].line == 3);
  CHECK(cmds[0].args == std::vector<std::string>{"server", "add", "hash1", "hash2"});
  CHECK(cmds[0].expected_exit == 0);
  CHECK(cmds[1].args == std::vector<std::string>{"merge", "0-9"});
  CHECK(cmds[1].expected_exit == 1);
  CHECK_FALSE(cmds[2].run);
  CHECK_THROWS(extract_commands("```\nimctl status # sometimes\n```\n"));
  CHECK_THROWS(extract_commands("```\nimctl status\n"));
}

TEST_CASE("docs: every imctl command in docs/operations.md runs against a local cluster") {
  const auto commands = extract_commands(read_doc());
  // The document walks through the whole life of a cluster; far fewer lines means the extractor or
  // the document broke.
  REQUIRE(commands.size() >= 25);

  int ran = 0;
  int clusters = 0;
  for (size_t first = 0; first < commands.size();) {
    // One fresh cluster per group: a config server, hash1..hash4 registered, login1 once the
    // first "server add" has run.
    const int group = commands[first].cluster;
    ConfigClusterOptions options;
    options.initial_mode = "ring";  // the config server's default, which the document starts from
    ConfigCluster cluster(options);
    cluster.start_config();
    for (int i = 1; i <= 4; ++i) cluster.start_hash(i);
    bool login_started = false;
    ++clusters;
    size_t i = first;
    for (; i < commands.size() && commands[i].cluster == group; ++i) {
      const DocCommand& c = commands[i];
      if (!c.run) continue;
      INFO("docs/operations.md:" << c.line << ": " << c.text);
      const auto r = cluster.imctl(c.args);
      INFO("output: " << r.out);
      CHECK(r.exit_code == c.expected_exit);
      ++ran;
      if (!login_started && r.exit_code == 0 && c.args.size() >= 2 && c.args[0] == "server" &&
          c.args[1] == "add") {
        cluster.start_login(1);
        login_started = true;
      }
    }
    CHECK(login_started);
    first = i;
  }
  CHECK(clusters == 2);  // the walk through §2-§8, then the runbook (§12)
  CHECK(ran >= 20);
}
