// imctl: the operator's command-line client of the config server's admin API (docs/design.md §7,
// docs/admin_api.md). Glue only: parse the arguments, make one request (through the --admin list,
// following a standby to the leader: follow_leader in imctl_format.h), print the outcome.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "admin_api/admin_guard.h"
#include "common/links/http_client.h"
#include "common/runtime/key_file.h"
#include "common/runtime/options.h"
#include "common/security/token.h"
#include "imctl/imctl_command.h"
#include "imctl/imctl_format.h"

namespace {

// One request of `inv`, asking the addresses of `order` in turn (the outcome names who answered).
imhash::AdminFollow ask(const imhash::ImctlInvocation& inv,
                        const std::vector<imhash::AdminAddress>& order, const std::string& token) {
  return imhash::follow_leader(inv, order, [&](const imhash::AdminAddress& a) {
    return imhash::http_exchange(a.host, a.port, inv.method, inv.target, inv.body, inv.timeout,
                                 token);
  });
}

// Prints an outcome: its text on stdout (flushed first), its error on stderr.
void print(const imhash::ImctlOutput& output) {
  std::fwrite(output.out.data(), 1, output.out.size(), stdout);
  std::fflush(stdout);
  std::fwrite(output.err.data(), 1, output.err.size(), stderr);
}

int imctl_main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  imhash::ImctlParse parse = imhash::parse_imctl_args(args, std::getenv(imhash::kImctlAdminEnv));
  if (parse.help) {
    std::fputs(imhash::imctl_usage().c_str(), stdout);
    return imhash::kExitOk;
  }
  if (!parse.invocation) {
    std::fprintf(stderr, "imctl: %s\n\n%s", parse.error.c_str(), imhash::imctl_usage().c_str());
    return imhash::kExitUsage;
  }
  imhash::ImctlInvocation& inv = *parse.invocation;
  if (inv.token_file.empty()) {
    if (const char* env = std::getenv("IMHASH_ADMIN_TOKEN_FILE"); env && *env) inv.token_file = env;
  }
  // A bad token file throws ConfigError (78) naming it.
  const std::string token =
      inv.token_file.empty() ? std::string() : imhash::load_admin_token_file(inv.token_file);
  if (inv.command == imhash::ImctlCommand::kToken) {
    // Local: the key file is the login servers' (docs/design.md §6); a bad one throws ConfigError
    // (78).
    const std::vector<uint8_t> key = imhash::load_key_file(inv.key_file);
    const uint64_t expiry = static_cast<uint64_t>(std::time(nullptr)) + inv.token_ttl_s;
    if (expiry > UINT32_MAX) {
      std::fprintf(stderr, "imctl: token: --ttl runs past the largest expiry (year 2106)\n");
      return imhash::kExitUsage;
    }
    const std::string out = imhash::format_token(
        imhash::make_token(key, inv.token_user, static_cast<uint32_t>(expiry)), inv.json);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return imhash::kExitOk;
  }
  if (inv.watch) {
    // Redraws the status every second until interrupted (Ctrl-C); an unreachable config server
    // is shown, not fatal, so the view recovers when it comes back. Each poll asks the one that
    // answered the previous first (the leader), then the list.
    std::optional<imhash::AdminAddress> answered;
    for (;;) {
      const imhash::AdminFollow polled = ask(inv, imhash::admin_order(inv.admins, answered), token);
      answered = polled.answered;
      std::fputs("\033[H\033[2J", stdout);
      std::fwrite(polled.output.out.data(), 1, polled.output.out.size(), stdout);
      std::fwrite(polled.output.err.data(), 1, polled.output.err.size(), stdout);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  const imhash::AdminFollow done = ask(inv, inv.admins, token);
  print(done.output);
  if (done.output.exit_code != imhash::kExitOk || !inv.wait) return done.output.exit_code;
  // drain --wait: one progress line a second until the server holds nothing, bounded by
  // --timeout; the polls ask the config server that answered last first. A poll that fails (every
  // address) ends the wait with its error.
  const imhash::ImctlInvocation poll = imhash::drain_poll_invocation(inv);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(inv.wait_timeout_s);
  std::optional<imhash::AdminAddress> answered = done.answered;
  for (;;) {
    const imhash::AdminFollow polled = ask(poll, imhash::admin_order(inv.admins, answered), token);
    answered = polled.answered;
    print(polled.output);
    if (polled.output.exit_code != imhash::kExitOk) return polled.output.exit_code;
    if (imhash::drained_reply(polled.outcome)) return imhash::kExitOk;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr, "imctl: drain: %s is not drained after %u s (--timeout)\n",
                   inv.server.c_str(), inv.wait_timeout_s);
      return imhash::kImctlExitTimeout;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

int main(int argc, char** argv) { return imhash::run_main("imctl", imctl_main, argc, argv); }
