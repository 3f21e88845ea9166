#include "config_server/config_service.h"

#include <spdlog/spdlog.h>

#include "common/runtime/clock.h"

namespace asio = boost::asio;
namespace json = boost::json;

namespace imhash {

namespace {

cluster::ControllerSettings controller_settings(const ConfigServiceSettings& s) {
  cluster::ControllerSettings c;
  c.heartbeat_ns = std::chrono::nanoseconds(s.heartbeat).count();
  c.missed_heartbeats_down = s.missed_heartbeats_down;
  c.grace_ms = static_cast<uint64_t>(s.grace.count());
  c.failover_auto = s.failover_auto;
  c.auto_purge = s.auto_purge;
  c.initial_mode = s.initial_mode;
  return c;
}

// Overloads for std::visit.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
// clang 14 does not deduce an aggregate's template arguments by itself (C++20's P1816).
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

ConfigService::ConfigService(asio::io_context& ctx, StateStore& store,
                             ConfigServiceSettings settings)
    : store_(store),
      settings_(std::move(settings)),
      timer_(ctx),
      // Purge ids from the wall clock at start-up: they are not reused after a restart.
      controller_(controller_settings(settings_), unix_millis(), [this](cluster::LinkId link) {
        const auto session = session_of(link);
        return session ? session->peer() : std::string();
      }) {
  thread_.bind();
  controller_.load(stored_state(), now(), false);
}

cluster::Now ConfigService::now() { return cluster::Now{monotonic_ns(), unix_micros()}; }

cluster::StoredState ConfigService::stored_state() const {
  cluster::StoredState s;
  if (store_.current()) {
    s.current = *store_.current();
    if (const Table* before = store_.at_version(store_.version() - 1)) s.previous = *before;
  }
  s.pending = store_.pending_purges();
  for (const HistoryEntry& h : store_.history()) {
    for (const ServerInfo& server : h.table.servers) s.ever_members.insert(server.name);
  }
  return s;
}

void ConfigService::set_control_plane(std::string name, ControlPlaneHooks hooks, bool leading) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  name_ = std::move(name);
  hooks_ = std::move(hooks);
  leading_ = leading;
  controller_.set_name(name_);
  if (!leading_) {
    standby_why_ = "not elected yet";
    perform(controller_.step_down());  // nothing is open yet: it only forgets the store's state
  }
}

std::string ConfigService::lead() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (std::string err = store_.reload(); !err.empty()) return err;
  // What the previous leader left: the table, its history and the pending purges. The nodes
  // register again, as after a restart; until they have, the takeover hold applies.
  for (const auto& [id, weak] : links_) {
    if (const auto link = weak.lock()) link->close();
  }
  links_.clear();
  controller_.load(stored_state(), now(), true);
  leading_ = true;
  standby_why_.clear();
  spdlog::info("config server {}: serving version {} from {}", name_, store_.version(),
               store_.describe());
  return {};
}

void ConfigService::step_down(const std::string& why) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  standby_why_ = why;
  if (!leading_) return;
  leading_ = false;
  perform(controller_.step_down());
  spdlog::warn("config server {}: standing by ({}); node links closed", name_, why);
}

std::string ConfigService::standby_reason() const {
  const std::optional<ConfigServerInfo> leader =
      hooks_.leader ? hooks_.leader() : std::optional<ConfigServerInfo>();
  const std::string me = "this config server" + (name_.empty() ? "" : " (" + name_ + ")");
  if (leader && leader->name != name_) {
    return me + " is a standby; the leader is " + leader->name + " at " + leader->admin +
           " (nodes: " + leader->node + ")";
  }
  return me + " is a standby and no leader is known: " + standby_why_;
}

std::optional<AdminResult> ConfigService::standby_answer() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (leading_) return std::nullopt;
  AdminResult r = AdminResult::error(503, standby_reason());
  const std::optional<ConfigServerInfo> leader =
      hooks_.leader ? hooks_.leader() : std::optional<ConfigServerInfo>();
  if (leader && leader->name != name_) r.body.as_object()["leader"] = leader->to_json();
  return r;
}

std::string ConfigService::store_write(const std::function<std::string()>& write) {
  const auto start = std::chrono::steady_clock::now();
  std::string err = write();
  store_last_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  store_total_ms_ += store_last_ms_;
  ++store_writes_;
  if (!err.empty()) ++store_write_errors_;
  return err;
}

void ConfigService::start() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  timer_.expires_after(settings_.heartbeat / 2);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    // A standby ticks too: the controller counts the loop's stalls, and does nothing else.
    perform(controller_.tick(now()));
    start();
  });
}

void ConfigService::stop() {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  timer_.cancel();
  for (const auto& [id, weak] : links_) {
    if (const auto link = weak.lock()) link->close();
  }
}

std::shared_ptr<NodeSession> ConfigService::session_of(cluster::LinkId link) const {
  const auto it = links_.find(link);
  return it == links_.end() ? nullptr : it->second.lock();
}

// ---------------------------------------------------------------------------------------------
// Events in, actions out

void ConfigService::on_message(NodeSession& session, const control::Message& m) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (!leading_) {
    // A standby: the node dials the leader next (it knows its address if it was configured with
    // every config server).
    const std::optional<ConfigServerInfo> leader =
        hooks_.leader ? hooks_.leader() : std::optional<ConfigServerInfo>();
    session.send_last(
        control::Refused{standby_reason(), leader && leader->name != name_ ? leader->node : ""});
    return;
  }
  if (!links_.contains(session.id())) links_.emplace(session.id(), session.weak_from_this());
  perform(controller_.on_message(session.id(), m, now()));
}

void ConfigService::on_disconnect(NodeSession& session) {
  IMHASH_ON_OWNER_THREAD(thread_.owned());
  if (links_.erase(session.id()) == 0) return;
  perform(controller_.on_link_closed(session.id()));
}

void ConfigService::perform(cluster::Actions actions) {
  for (cluster::Action& action : actions) {
    std::visit(Overloaded{
                   [&](cluster::SendMessage& a) {
                     if (const auto link = session_of(a.link)) link->send(a.message);
                   },
                   [&](cluster::SendTable& a) {
                     if (const auto link = session_of(a.link)) link->send_encoded(*a.framed);
                   },
                   [&](cluster::RefuseLink& a) {
                     if (const auto link = session_of(a.link)) link->send_last(a.refused);
                   },
                   [&](cluster::CloseLink& a) {
                     if (const auto link = session_of(a.link)) link->close();
                   },
                   [&](cluster::LabelLink& a) {
                     if (const auto link = session_of(a.link))
                       link->registered_as(std::move(a.key));
                   },
                   [&](cluster::LogRecord& a) {
                     switch (a.level) {
                       case cluster::LogLevel::kInfo:
                         spdlog::info("{}", a.text);
                         break;
                       case cluster::LogLevel::kWarn:
                         spdlog::warn("{}", a.text);
                         break;
                       case cluster::LogLevel::kError:
                         spdlog::error("{}", a.text);
                         break;
                     }
                   },
                   [&](cluster::PersistPending& a) {
                     // A write that fails leaves the state one step behind: after a restart a purge
                     // already sent is sent again (harmless), or one just added is missing (the old
                     // copies stay, as before issue 13).
                     if (std::string err = store_write(
                             [&] { return store_.set_pending_purges(std::move(a.pending)); });
                         !err.empty()) {
                       spdlog::error("cannot persist the pending purges ({}): {}", a.why, err);
                     }
                   },
                   [&](cluster::CommitChange& a) { commit(std::move(a.plan)); },
               },
               action);
  }
}

AdminResult ConfigService::commit(cluster::ChangePlan plan) {
  // The table and its pending purges in one write.
  const std::string err =
      store_write([&] { return store_.commit(plan.table, plan.change, plan.pending); });
  cluster::Outcome o = controller_.on_committed(std::move(plan), err, now());
  perform(std::move(o.actions));
  if (o.answer.status == 200)
    o.answer.body.as_object()["table"] = table_value(controller_.router()->table());
  return std::move(o.answer);
}

AdminResult ConfigService::answer(cluster::Outcome outcome) {
  perform(std::move(outcome.actions));
  return std::move(outcome.answer);
}

AdminResult ConfigService::answer(cluster::Change change) {
  if (auto* plan = std::get_if<cluster::ChangePlan>(&change)) return commit(std::move(*plan));
  return answer(std::get<cluster::Outcome>(std::move(change)));
}

}  // namespace imhash
