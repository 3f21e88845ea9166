// imctl: the operator's command-line client of the config server's admin API (DESIGN §7,
// docs/admin_api.md). Glue only: parse the arguments, make one HTTP request, print the outcome.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/options.h"
#include "config_server/imctl_command.h"
#include "config_server/imctl_format.h"
#include "config_server/imctl_http.h"

namespace {

int imctl_main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const imhash::ImctlParse parse =
      imhash::parse_imctl_args(args, std::getenv(imhash::kImctlAdminEnv));
  if (parse.help) {
    std::fputs(imhash::imctl_usage().c_str(), stdout);
    return imhash::kExitOk;
  }
  if (!parse.invocation) {
    std::fprintf(stderr, "imctl: %s\n\n%s", parse.error.c_str(), imhash::imctl_usage().c_str());
    return imhash::kExitUsage;
  }
  const imhash::ImctlInvocation& inv = *parse.invocation;
  const imhash::HttpOutcome outcome =
      imhash::http_exchange(inv.host, inv.port, inv.method, inv.target, inv.body, inv.timeout);
  const imhash::ImctlOutput output = imhash::imctl_output(inv, outcome);
  std::fwrite(output.out.data(), 1, output.out.size(), stdout);
  std::fflush(stdout);
  std::fwrite(output.err.data(), 1, output.err.size(), stderr);
  return output.exit_code;
}

}  // namespace

int main(int argc, char** argv) { return imhash::run_main("imctl", imctl_main, argc, argv); }
