#include "config_server/etcd_state_store.h"

#include <boost/json.hpp>
#include <charconv>
#include <cstdio>
#include <thread>

#include "common/runtime/options.h"

namespace json = boost::json;

namespace imhash {

namespace {

// Between two sends of a write whose answer was lost: etcd elects a new leader in about its
// election timeout (1 s by default).
constexpr std::chrono::milliseconds kResendPause{100};

}  // namespace

EtcdKeys::EtcdKeys(const std::string& p)
    : prefix(p.ends_with('/') ? p : p + "/"),
      version(prefix + "version"),
      history(prefix + "history/"),
      pending(prefix + "pending_purges"),
      leader(prefix + "leader"),
      members(prefix + "members/") {}

std::string EtcdKeys::history_key(uint64_t v) const {
  char digits[21];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(v));
  return history + digits;
}

EtcdStateStore::EtcdStateStore(EtcdClient& etcd, const std::string& prefix)
    : etcd_(etcd), keys_(prefix) {}

std::string EtcdStateStore::describe() const {
  return "etcd://" + etcd_.describe() + keys_.prefix.substr(0, keys_.prefix.size() - 1);
}

std::string EtcdStateStore::reload() {
  // The history and the rest at one revision: one range over the prefix (the election's keys come
  // along and are skipped).
  const EtcdReply r = etcd_.get(keys_.prefix, true);
  if (!r.ok()) return "cannot read the state: " + r.error;
  std::deque<HistoryEntry> history;  // oldest first while reading (keys sort by version)
  std::vector<PendingPurge> pending;
  uint64_t version = 0;
  int64_t version_revision = 0;
  const std::string where = describe();
  try {
    for (const EtcdKv& kv : r.ranges.front()) {
      if (kv.key == keys_.version) {
        const char* end = kv.value.data() + kv.value.size();
        if (std::from_chars(kv.value.data(), end, version).ptr != end || kv.value.empty()) {
          return where + ": " + keys_.version + " is not a version number";
        }
        version_revision = kv.mod_revision;
      } else if (kv.key.starts_with(keys_.history)) {
        boost::system::error_code ec;
        const json::value v = json::parse(kv.value, ec);
        if (ec) return where + ": " + kv.key + " is not JSON";
        HistoryEntry h = entry_of(v, where + " " + kv.key);
        if (kv.key != keys_.history_key(h.version)) {
          return where + ": " + kv.key + " holds version " + std::to_string(h.version);
        }
        history.push_front(std::move(h));
      } else if (kv.key == keys_.pending) {
        boost::system::error_code ec;
        const json::value v = json::parse(kv.value, ec);
        if (ec) return where + ": " + kv.key + " is not JSON";
        pending = pending_of(v, where);
      }
    }
  } catch (const ConfigError& e) {
    return e.what();
  }
  const uint64_t newest = history.empty() ? 0 : history.front().version;
  if (newest != version) {
    return where + ": " + keys_.version + " says " + std::to_string(version) +
           " but the newest history entry is " + std::to_string(newest);
  }
  assign(std::move(history), std::move(pending));
  version_revision_ = version_revision;
  loaded_ = true;
  doubt_.clear();
  return {};
}

// A resend failed its compare: was the first send applied? Yes if PREFIX/version holds the version
// written and PREFIX/leader is still this config server's key (nobody else can have written since
// it was created). A write that adds no version changes nothing the compares look at, so its
// resend cannot fail for that reason.
bool EtcdStateStore::applied_before(const std::vector<EtcdKv>& version,
                                    const std::vector<EtcdKv>& leader,
                                    const HistoryEntry* added) const {
  return added && version.size() == 1 && leader.size() == 1 &&
         leader.front().create_revision == fence_ &&
         version.front().value == std::to_string(added->version);
}

std::string EtcdStateStore::persist(const std::deque<HistoryEntry>& /*history*/,
                                    const HistoryEntry* added, const std::vector<uint64_t>& dropped,
                                    const std::vector<PendingPurge>& pending) {
  if (!loaded_) return "the state was not read from etcd yet";
  if (!doubt_.empty()) return doubt_;
  if (fence_ == 0) return "this config server does not lead: it writes nothing";
  std::vector<EtcdCompare> compare{
      {keys_.version, EtcdCompare::Target::kMod, version_revision_, {}},
      {keys_.leader, EtcdCompare::Target::kCreate, fence_, {}},
  };
  std::vector<EtcdOp> ops;
  if (added) {
    ops.push_back({EtcdOp::Kind::kPut, keys_.version, std::to_string(added->version), 0, false});
    ops.push_back({EtcdOp::Kind::kPut, keys_.history_key(added->version),
                   json::serialize(entry_json(*added)), 0, false});
  }
  for (uint64_t v : dropped) {
    ops.push_back({EtcdOp::Kind::kDelete, keys_.history_key(v), {}, 0, false});
  }
  ops.push_back(
      {EtcdOp::Kind::kPut, keys_.pending, json::serialize(pending_json(pending)), 0, false});
  // On a failed compare, what the compares looked at: to tell a resend of an applied write from
  // a deposed writer.
  const std::vector<EtcdOp> look{{EtcdOp::Kind::kRange, keys_.version, {}, 0, false},
                                 {EtcdOp::Kind::kRange, keys_.leader, {}, 0, false}};
  // With no retries, one send bounded by the client's timeout alone.
  const auto deadline = retry_for_.count() > 0 ? std::chrono::steady_clock::now() + retry_for_
                                               : EtcdClient::Deadline::max();
  std::string lost;
  for (bool resent = false;; resent = true) {
    const EtcdReply r = etcd_.txn(compare, ops, look, deadline);
    if (r.ok() && r.succeeded) {
      if (added) version_revision_ = r.revision;
      return {};
    }
    if (r.ok()) {
      if (resent && r.ranges.size() == 2 && applied_before(r.ranges[0], r.ranges[1], added)) {
        version_revision_ = r.ranges[0].front().mod_revision;
        return {};
      }
      lost = "the store changed under this config server: another config server leads now";
      break;
    }
    if (r.refused) return "the store refused the change: " + r.error;  // not applied
    lost =
        "the store did not answer (" + r.error + "): the change may or may not have been written";
    if (retry_for_.count() == 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(kResendPause);
  }
  doubt_ = lost + "; this config server writes nothing more until it has read the store again";
  if (on_lost) on_lost(lost);
  return lost;
}

}  // namespace imhash
