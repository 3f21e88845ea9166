#include "hash_server/handoff.h"

#include <algorithm>

#include "common/routing/shard_map.h"

namespace imhash {

namespace {
// An IMPORT record: id (8), age (4), family (1), port (2), an IPv6 address (16).
constexpr size_t kMaxRecordBytes = 31;
}  // namespace

const char* to_string(Handoff::State s) {
  switch (s) {
    case Handoff::State::kIdle:
      return "idle";
    case Handoff::State::kRunning:
      return "running";
    case Handoff::State::kDone:
      return "done";
    case Handoff::State::kCancelled:
      return "cancelled";
  }
  return "?";
}

void Handoff::start(std::shared_ptr<const Router> router, int self_index, const RecordStore& store,
                    bool fresh, const std::vector<std::shared_ptr<const Router>>& history,
                    const std::vector<std::string>& lost, std::vector<int> self_in_history) {
  const bool restart = !fresh && progress_.state == State::kRunning;
  router_ = std::move(router);
  self_index_ = self_index;
  store_ = &store;
  const uint64_t acked = restart ? progress_.acked : 0;
  const uint64_t restarts = restart ? progress_.restarts + 1 : 0;
  if (!restart) targets_.clear();
  progress_ = Progress{};
  progress_.state = State::kRunning;
  progress_.version = router_ ? router_->version() : 0;
  progress_.acked = acked;
  progress_.restarts = restarts;
  // A restart under a newer table still owes a full send to a target that lost its link.
  send_all_ = restart && (send_all_ || rescan_);
  rescan_ = false;
  history_.clear();
  history_index_.clear();
  self_in_history_.clear();
  lost_ = lost;
  lost_index_.clear();
  if (router_ && router_->replicas() > 1) {
    for (const ServerInfo& s : router_->table().servers)
      lost_index_.push_back(std::find(lost.begin(), lost.end(), s.name) != lost.end());
    for (const auto& h : history) {
      if (!h) continue;
      std::vector<int> index;
      for (const ServerInfo& s : router_->table().servers)
        index.push_back(h->table().server_index(s.name));
      history_.push_back(h);
      history_index_.push_back(std::move(index));
    }
    if (self_in_history.size() == history.size() &&
        std::none_of(history.begin(), history.end(), [](const auto& h) { return !h; })) {
      self_in_history_ = std::move(self_in_history);
    }
  }
  restart_scan();
}

bool Handoff::refilled_by_others(uint64_t id, const ReplicaSet& set, uint32_t lost) const {
  for (uint32_t k = 0; k < set.size; ++k) {
    const uint32_t other = set.routes[k].server;
    if (other != lost && !lost_index_[other] && held_throughout(id, other)) return true;
  }
  return false;
}

bool Handoff::held_since_last_stream(uint64_t id) const {
  if (self_in_history_.empty() || send_all_) return true;
  for (size_t i = 0; i < history_.size(); ++i) {
    const int self = self_in_history_[i];
    if (self >= 0 && history_[i]->holds(id, static_cast<uint32_t>(self))) return true;
  }
  return false;
}

bool Handoff::held_throughout(uint64_t id, uint32_t member) const {
  if (history_.empty() || send_all_ || lost_index_[member]) return false;
  for (size_t i = 0; i < history_.size(); ++i) {
    const int then = history_index_[i][member];
    if (then < 0 || !history_[i]->holds(id, static_cast<uint32_t>(then))) return false;
  }
  return true;
}

void Handoff::cut(uint64_t id, const RecordStore::Record& r, const Route& route,
                  std::vector<Batch>& out) {
  const size_t buffer = first_buffer_[route.server] + route.shard;
  Batch& b = buffers_[buffer];
  if (b.count == 0) b.records.reserve(size_t{kBatchRecords} * kMaxRecordBytes);
  // The second it was last seen, not its age: the batch may wait before it is sent (the stream
  // sender turns it into ages for a receiver that does not understand that).
  frame::append_import_record(frame::ImportRecord{id, r.last_seen, r.endpoint}, b.records);
  if (++b.count == kBatchRecords) emit(buffer, out);
}

void Handoff::restart_scan() {
  ++generation_;
  progress_.in_flight = 0;  // batches of older generations no longer count
  progress_.scanned = 0;
  progress_.total = store_ ? store_->capacity() : 0;
  cursor_ = RecordStore::ScanCursor{};
  first_buffer_.clear();
  buffers_.clear();
  if (!router_) {  // no table: this server owns every id, nothing moves
    cursor_.done = true;
    maybe_finish();
    return;
  }
  const auto& servers = router_->table().servers;
  for (size_t i = 0; i < servers.size(); ++i) {
    first_buffer_.push_back(buffers_.size());
    for (uint32_t shard = 0; shard < servers[i].shards; ++shard) {
      Batch b;
      b.target = servers[i];
      b.target_shard = static_cast<uint16_t>(shard);
      buffers_.push_back(std::move(b));
    }
  }
}

void Handoff::cancel() {
  if (!running()) return;
  progress_.state = State::kCancelled;
  ++generation_;  // acknowledgements still on their way are ignored
  buffers_.clear();
  first_buffer_.clear();
}

void Handoff::emit(size_t buffer, std::vector<Batch>& out) {
  Batch& b = buffers_[buffer];
  if (b.count == 0) return;
  Batch full;
  full.generation = generation_;
  full.seq = next_seq_++;
  full.version = progress_.version;
  full.target = b.target;
  full.target_shard = b.target_shard;
  full.count = b.count;
  full.records = std::move(b.records);
  b.records = {};
  b.count = 0;
  ++progress_.in_flight;
  out.push_back(std::move(full));
}

size_t Handoff::step(RecordStore& store, size_t max_slots, std::vector<Batch>& out) {
  if (!scanning()) return 0;
  const Router& router = *router_;
  const auto& servers = router.table().servers;
  size_t records_cut = 0;
  const RecordStore::ScanStep done =
      store.scan(cursor_, max_slots, [&](uint64_t id, const RecordStore::Record& r) {
        if (router.replicas() == 1) {
          const uint32_t owner = router.owner(id);
          if (self_index_ >= 0 && owner == static_cast<uint32_t>(self_index_)) return false;
          cut(id, r, Route{owner, shard_of(id, servers[owner].shards)}, out);
          ++records_cut;
          return false;  // a handoff deletes nothing
        }
        if (!held_since_last_stream(id)) return false;  // an old copy awaiting its purge
        const ReplicaSet set = router.replica_set(id);
        bool self_member = false;
        for (uint32_t k = 0; k < set.size; ++k) {
          self_member = self_member || (self_index_ >= 0 &&
                                        set.routes[k].server == static_cast<uint32_t>(self_index_));
        }
        for (uint32_t k = 0; k < set.size; ++k) {
          const Route& member = set.routes[k];
          if (self_index_ >= 0 && member.server == static_cast<uint32_t>(self_index_)) continue;
          if (held_throughout(id, member.server)) continue;
          if (!self_member && lost_index_[member.server] &&
              refilled_by_others(id, set, member.server)) {
            continue;
          }
          cut(id, r, member, out);
          ++records_cut;
        }
        return false;
      });
  progress_.scanned += done.examined;
  progress_.cut += records_cut;
  progress_.total = progress_.scanned + store.slots_ahead(cursor_);
  if (cursor_.done) {
    for (size_t i = 0; i < buffers_.size(); ++i) emit(i, out);
    maybe_finish();
  }
  return records_cut;
}

void Handoff::acknowledged(uint64_t generation, uint16_t records, const std::string& target,
                           bool link_lost) {
  if (generation != generation_ || !running()) return;
  if (progress_.in_flight > 0) --progress_.in_flight;
  progress_.acked += records;
  auto it = std::find_if(targets_.begin(), targets_.end(),
                         [&](const auto& t) { return t.first == target; });
  if (it == targets_.end()) {
    targets_.emplace_back(target, records);
  } else {
    it->second += records;
  }
  if (link_lost) rescan_ = true;
  maybe_finish();
}

void Handoff::maybe_finish() {
  if (!running() || !cursor_.done || progress_.in_flight > 0) return;
  if (rescan_) {
    // The owner may have restarted and lost what it was sent: send it all again.
    rescan_ = false;
    send_all_ = true;
    ++progress_.restarts;
    restart_scan();
    return;
  }
  progress_.state = State::kDone;
}

}  // namespace imhash
