// imctl's way to the leader: what a standby's answer names, which config server to ask next, and
// the output of an invocation from the outcome of its exchanges (the leader's reply formatted by
// imctl_format.cpp, or why no config server answered). Pure; any thread.
#include <algorithm>
#include <boost/json.hpp>
#include <chrono>

#include "admin_api/admin_contract.h"
#include "common/codec/printable.h"
#include "common/runtime/options.h"
#include "imctl/imctl_format.h"

namespace imhash {

namespace json = boost::json;

namespace {

std::optional<AdminAddress> admin_address(const std::string& text) {
  try {
    const HostPort hp = parse_host_port(text, "leader");
    if (hp.port != 0) return AdminAddress{text, hp.host, hp.port};
  } catch (const UsageError&) {
  }
  return std::nullopt;
}

// What one failed attempt said, after "ADDRESS: ".
std::string attempt_phrase(const HttpOutcome& outcome, std::chrono::milliseconds timeout) {
  switch (outcome.failure) {
    case HttpFailure::kUnreachable:
      return outcome.error;
    case HttpFailure::kTimeout:
      return "no answer within " + std::to_string(timeout.count()) + " ms (" + outcome.error + ")";
    case HttpFailure::kBadReply:
      return "no valid reply (" + outcome.error + ")";
    case HttpFailure::kNone:
      break;
  }
  const std::optional<StandbyAnswer> standby = standby_answer(outcome);
  if (!standby) return "HTTP " + std::to_string(outcome.reply.status);  // not a failure
  if (!standby->leader_admin.empty()) {
    return "standby, leader " +
           (standby->leader_name.empty() ? std::string() : standby->leader_name + " at ") +
           standby->leader_admin + (admin_address(standby->leader_admin) ? "" : " (not HOST:PORT)");
  }
  if (standby->error.find("standby") != std::string::npos) return standby->error;
  return "standby, no leader known: " + standby->error;
}

}  // namespace

std::optional<StandbyAnswer> standby_answer(const HttpOutcome& outcome) {
  if (outcome.failure != HttpFailure::kNone || outcome.reply.status != 503) return std::nullopt;
  json::error_code ec;
  const json::value body = json::parse(outcome.reply.body, ec);
  if (ec || !body.is_object()) return std::nullopt;
  StandbyAnswer answer;
  answer.error = reply_error(outcome.reply, &body);
  const json::value* leader = reply_field(body, "leader");
  if (!leader && answer.error.find("standby") == std::string::npos) return std::nullopt;
  if (leader && leader->is_object()) {
    const json::value* name = reply_field(*leader, "name");
    const json::value* admin = reply_field(*leader, "admin");
    if (admin && admin->is_string()) {
      answer.leader_admin = printable(std::string_view(admin->get_string()), 300);
      if (name && name->is_string()) {
        answer.leader_name = printable(std::string_view(name->get_string()), 100);
      }
    }
  }
  return answer;
}

AdminStep next_admin_step(const std::vector<AdminAddress>& order,
                          const std::vector<AdminAttempt>& attempts,
                          std::chrono::milliseconds timeout) {
  const auto asked = [&](const AdminAddress& a) {
    return std::any_of(attempts.begin(), attempts.end(), [&](const AdminAttempt& attempt) {
      return same_admin_address(attempt.address, a);
    });
  };
  AdminStep step;
  if (!attempts.empty() && attempts.back().outcome.failure == HttpFailure::kNone) {
    const std::optional<StandbyAnswer> standby = standby_answer(attempts.back().outcome);
    if (!standby) return step;  // a config server's answer: the outcome
    // A standby: its leader next, unless asked already (then the list goes on).
    if (std::optional<AdminAddress> leader = admin_address(standby->leader_admin)) {
      if (!asked(*leader)) step.ask = std::move(leader);
    }
  }
  for (size_t i = 0; !step.ask && i < order.size(); ++i) {
    if (!asked(order[i])) step.ask = order[i];
  }
  if (step.ask && attempts.size() < kImctlMaxAdminAttempts) return step;
  step.ask.reset();
  for (const AdminAttempt& attempt : attempts) {
    step.failed += (step.failed.empty() ? "" : "; ") + attempt.address.text + ": " +
                   attempt_phrase(attempt.outcome, timeout);
  }
  if (step.failed.empty()) step.failed = "no config server to ask";
  return step;
}

std::vector<AdminAddress> admin_order(const std::vector<AdminAddress>& admins,
                                      const std::optional<AdminAddress>& answered) {
  std::vector<AdminAddress> order;
  if (answered) order.push_back(*answered);
  for (const AdminAddress& a : admins) {
    if (!answered || !same_admin_address(a, *answered)) order.push_back(a);
  }
  return order;
}

ImctlInvocation asking(const ImctlInvocation& inv, const AdminAddress& address) {
  ImctlInvocation out = inv;
  out.admin = address.text;
  out.host = address.host;
  out.port = address.port;
  return out;
}

ImctlOutput all_failed_output(const ImctlInvocation& inv, const std::vector<AdminAttempt>& attempts,
                              const std::string& failed) {
  if (attempts.size() == 1 && attempts[0].outcome.failure != HttpFailure::kNone) {
    return imctl_output(asking(inv, attempts[0].address), attempts[0].outcome);  // as with one
  }
  ImctlOutput o;
  o.exit_code = kExitUnavailable;
  o.err = "imctl: no config server served the request: " + failed + "\n";
  if (inv.json && !attempts.empty() && attempts.back().outcome.failure == HttpFailure::kNone) {
    o.out = attempts.back().outcome.reply.body;
    if (!o.out.empty() && o.out.back() != '\n') o.out += '\n';
  }
  return o;
}

AdminFollow follow_leader(const ImctlInvocation& inv, const std::vector<AdminAddress>& order,
                          const AdminExchange& exchange) {
  std::vector<AdminAttempt> attempts;
  AdminStep step = next_admin_step(order, attempts, inv.timeout);
  while (step.ask) {
    HttpOutcome outcome = exchange(*step.ask);
    attempts.push_back(AdminAttempt{std::move(*step.ask), std::move(outcome)});
    step = next_admin_step(order, attempts, inv.timeout);
  }
  AdminFollow follow;
  if (step.failed.empty()) {
    follow.answered = attempts.back().address;
    follow.output = imctl_output(asking(inv, *follow.answered), attempts.back().outcome);
  } else {
    follow.output = all_failed_output(inv, attempts, step.failed);
  }
  if (!attempts.empty()) follow.outcome = std::move(attempts.back().outcome);
  return follow;
}

ImctlOutput imctl_output(const ImctlInvocation& inv, const HttpOutcome& outcome) {
  ImctlOutput o;
  switch (outcome.failure) {
    case HttpFailure::kNone:
      break;
    case HttpFailure::kUnreachable:
      o.exit_code = kExitUnavailable;
      o.err = "imctl: cannot reach the config server at " + inv.admin + ": " + outcome.error + "\n";
      return o;
    case HttpFailure::kTimeout:
      o.exit_code = kExitUnavailable;
      o.err = "imctl: no answer from the config server at " + inv.admin + " within " +
              std::to_string(inv.timeout.count()) + " ms (" + outcome.error + ")\n";
      return o;
    case HttpFailure::kBadReply:
      o.exit_code = kExitUnavailable;
      o.err = "imctl: no valid reply from the config server at " + inv.admin + ": " +
              outcome.error + "\n";
      return o;
  }

  const HttpReply& reply = outcome.reply;
  json::error_code ec;
  const json::value body = json::parse(reply.body, ec);
  const bool ok = reply.status >= 200 && reply.status < 300;
  if (inv.json) {
    o.out = reply.body;
    if (!o.out.empty() && o.out.back() != '\n') o.out += '\n';
  }
  if (!ok) {
    o.exit_code = 1;
    o.err = "imctl: " + inv.name + ": " + reply_error(reply, ec ? nullptr : &body) + "\n";
    return o;
  }
  if (ec) {
    o.exit_code = kExitUnavailable;
    o.err = "imctl: the reply from " + inv.admin + " is not JSON (" + ec.message() +
            "); is it the config server's admin API?\n";
    return o;
  }
  if (!inv.json) o.out = format_reply(inv, body);
  return o;
}

}  // namespace imhash
