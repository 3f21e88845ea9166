#include "hash_server/shard_core.h"

#include <algorithm>
#include <array>

#include "common/routing/shard_map.h"

namespace imhash {

using namespace frame;

ShardCore::ShardCore(uint32_t index, uint32_t shard_count, std::string server_name,
                     double stream_rate, bool remember_deletes)
    : index_(index),
      shard_count_(shard_count),
      server_name_(std::move(server_name)),
      stream_rate_(stream_rate),
      remember_deletes_(remember_deletes) {}

ShardCore::Effects ShardCore::take_effects() {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  Effects e = std::move(effects_);
  effects_ = Effects{};
  return e;
}

size_t ShardCore::prefetch_records(std::span<const uint8_t> frames) const {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  // The first frame is whole (drain_frames hands over only whole frames), so the size returned
  // covers at least it.
  // Two stages: every id's control group first, then (those lines arriving while the later ones
  // are asked for) exactly the slot lines each group's fingerprint matches. Loading the likely
  // slot lines blind fetched about twice the lines and measured 15-20% slower per lookup at 10M
  // records (docs/performance.md).
  std::array<uint64_t, kPrefetchBatch> ids;
  size_t count = 0;
  size_t offset = 0;
  for (size_t n = 0; n < kPrefetchBatch; ++n) {
    Header h;
    std::span<const uint8_t> body;
    size_t used = 0;
    if (next_frame(frames.subspan(offset), h, body, used) != DecodeStatus::kOk) break;
    if (const auto id = peek_request_id(h, body)) {
      store_.prefetch_group(*id);
      ids[count++] = *id;
    }
    offset += used;
  }
  for (size_t k = 0; k < count; ++k) store_.prefetch_record(ids[k]);
  return offset;
}

bool ShardCore::handle(const Header& h, std::span<const uint8_t> body, std::vector<uint8_t>& out,
                       uint64_t now_ms) {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  now_ms_ = now_ms;
  now_ = static_cast<uint32_t>(now_ms / 1000);
  Request& q = request_;
  if (decode_request(h, body, q) != DecodeStatus::kOk) return false;
  Response r{.type = q.type,
             .correlation = q.correlation,
             .table_version = router_ ? router_->version() : 0};

  if (is_keyed(q.type)) {
    if (shard_of(q.id, shard_count_) != index_) {
      r.status = FrameStatus::kWrongShard;
      append_response(r, out);
      return true;
    }
    // MOVED only when our table is at least as new as the sender's: a sender with a newer table
    // knows better than we do, and kFlagAnyOwner (a fallback read, or deleting the old copy of a
    // user who logs out during a move) asks us on purpose.
    const bool any_owner = q.type != FrameType::kUpsert && (q.flags & kFlagAnyOwner) != 0;
    if (router_ && !any_owner && router_->version() >= q.table_version &&
        (self_index_ < 0 || !router_->holds(q.id, static_cast<uint32_t>(self_index_)) ||
         stale_replica_write(q))) {
      ++counters_.moved;
      r.status = FrameStatus::kMoved;
      append_response(r, out);
      return true;
    }
  }

  switch (q.type) {
    case FrameType::kHello:
    case FrameType::kAuth:
      r.status = FrameStatus::kBadRequest;  // the connection is already bound
      break;
    case FrameType::kUpsert: {
      ++counters_.upserts;
      // A timed write (kFlagTimed) says when it was made: that decides whether a write applied
      // here already supersedes it.
      const bool timed = (q.flags & kFlagTimed) != 0;
      const uint32_t seen = now_ >= q.age_seconds ? now_ - q.age_seconds : 0;
      if (q.flags & kFlagIfAbsent) {
        // A read repair copies the old owner's record; if the user logged out meanwhile, the
        // copy is stale and must not bring them back.
        if (deleted_in_move(q.id)) {
          ++counters_.repairs_skipped_deleted;
        } else {
          store_.insert_if_absent(q.id, q.endpoint.unmapped(), seen);
        }
      } else if (timed) {
        if (!upsert_timed(q.id, q.endpoint.unmapped(), made_at(q.age_seconds))) {
          ++counters_.writes_superseded;
        }
      } else {
        if (!tombstones_.empty()) tombstones_.erase(q.id);  // logged in again
        store_.upsert(q.id, q.endpoint.unmapped(), seen);
        recent_write(q.id) = RecentWrite{q.id, now_ms_};
      }
      break;
    }
    case FrameType::kGet: {
      ++counters_.gets;
      RecordStore::Record rec;
      // Being refilled (with replicas): not caught up. A record may still be on its way, and one
      // it holds (streamed, or written since it started) may be older than a write a login server
      // still holds for it; so every read goes to another copy until the config server says it
      // is filled. Without a table yet, only a miss is in doubt. A fallback read (any owner) asks
      // what this server holds: what it found is the answer, a miss is in doubt.
      const bool not_caught_up = filling_ && (q.flags & kFlagAnyOwner) == 0;
      if (not_caught_up && router_ && router_->replicas() > 1) {
        ++counters_.not_ready;
        r.status = FrameStatus::kNotReady;
      } else if (store_.get(q.id, rec)) {
        r.endpoint = rec.endpoint;
        r.age_seconds = now_ >= rec.last_seen ? now_ - rec.last_seen : 0;
      } else if (filling_ && (!router_ || router_->replicas() > 1)) {
        // A miss while being refilled, a fallback read's too: the id may still be on its way, so
        // the miss is no answer (a login server takes an earlier member's NOT_FOUND for its
        // whole replica set, docs/design.md §3).
        ++counters_.not_ready;
        r.status = FrameStatus::kNotReady;
      } else {
        r.status = FrameStatus::kNotFound;
        // Logged out during a move: an earlier owner's copy, if it still has one, is older.
        if (deleted_in_move(q.id)) r.flags = kFlagDeleted;
      }
      break;
    }
    case FrameType::kDelete: {
      ++counters_.deletes;
      const bool timed = (q.flags & kFlagTimed) != 0;
      const auto erased =
          timed ? erase_timed(q.id, made_at(q.age_seconds))
                : (store_.erase(q.id) ? RecordStore::Erase::kErased : RecordStore::Erase::kAbsent);
      if (erased == RecordStore::Erase::kKeptNewer) {
        ++counters_.writes_superseded;  // a login made after the logout: the record stays
        break;
      }
      // An untimed delete counts as made on arrival; not an old copy's (an id placed elsewhere):
      // that says nothing of the order of the writes this server gets if the id comes back (a
      // nemesis run: the same LOGOUT's copy, replayed here once it did, was refused as older).
      if (!timed && !placed_elsewhere(q.id, q.table_version)) {
        recent_write(q.id) = RecentWrite{q.id, now_ms_};
      }
      remember_delete(q.id, q, timed ? static_cast<uint32_t>(made_at(q.age_seconds) / 1000) : now_);
      if (erased == RecordStore::Erase::kAbsent) r.status = FrameStatus::kNotFound;
      break;
    }
    case FrameType::kImport:
      handle_import(q);
      break;
    case FrameType::kStats:
      fill_stats(r);
      break;
    case FrameType::kPurge:
      command_purge(q.purge, q.age_seconds, 0);
      r.purge = purge_.progress();
      break;
    case FrameType::kPing:
      break;
  }
  append_response(r, out);
  return true;
}

// A timed write is compared with the id's latest write here to the millisecond while the table of
// recent writes still has it; else with the record's last seen second, which supersedes it when
// that second began after the write was made (within it the order is unknown: the write, which
// arrived later, is applied). One probe of the store either way.
bool ShardCore::upsert_timed(uint64_t id, const Endpoint& endpoint, uint64_t made_ms) {
  const auto seen = static_cast<uint32_t>(made_ms / 1000);
  RecentWrite& latest = recent_write(id);
  if (latest.id == id && latest.made_ms != 0) {
    if (latest.made_ms > made_ms) return false;
    store_.upsert(id, endpoint, seen);
  } else if (store_.upsert_if_newer(id, endpoint, seen, seen + 1) ==
             RecordStore::Merge::kKeptNewer) {
    return false;
  }
  if (!tombstones_.empty()) tombstones_.erase(id);  // logged in again
  latest = RecentWrite{id, made_ms};
  return true;
}

RecordStore::Erase ShardCore::erase_timed(uint64_t id, uint64_t made_ms) {
  RecentWrite& latest = recent_write(id);
  RecordStore::Erase erased;
  if (latest.id == id && latest.made_ms != 0) {
    if (latest.made_ms > made_ms) return RecordStore::Erase::kKeptNewer;
    erased = store_.erase(id) ? RecordStore::Erase::kErased : RecordStore::Erase::kAbsent;
  } else {
    erased = store_.erase_unless_seen_from(id, static_cast<uint32_t>(made_ms / 1000) + 1);
    if (erased == RecordStore::Erase::kKeptNewer) return erased;
  }
  latest = RecentWrite{id, made_ms};  // a delete too: a login made before it stays out
  return erased;
}

bool ShardCore::placed_elsewhere(uint64_t id, uint64_t sender_version) const {
  return router_ && router_->version() >= sender_version &&
         (self_index_ < 0 || !router_->holds(id, static_cast<uint32_t>(self_index_)));
}

void ShardCore::remember_delete(uint64_t id, const Request& q, uint32_t made_s) {
  if (!remember_deletes_) return;
  // The old copy of a user who logs out during a move (kFlagAnyOwner), deleted here while a table
  // at least as new as the sender's places the id elsewhere: the owner remembers that delete. Were
  // it remembered here too, a later table moving the id back would have this shard drop the
  // record the owner streams to it — a login made there after this delete.
  if (placed_elsewhere(id, q.table_version)) return;
  // A sender with a newer table than ours announces a change we have not installed yet: ids may
  // be on their way to us already.
  if (router_ && q.table_version > router_->version()) {
    open_tombstone_window(now_ + kTombstoneSlackS);
  }
  if (now_ >= tombstone_until_) {
    expire_tombstones();
    // Kept a while: a window that opens soon after remembers it too.
    const RecentDelete d{id, now_, made_s};
    if (recent_deletes_.size() < kMaxRecentDeletes) {
      recent_deletes_.push_back(d);
    } else {
      recent_deletes_[recent_head_] = d;
      recent_head_ = (recent_head_ + 1) % kMaxRecentDeletes;
    }
    return;
  }
  if (tombstones_.size() >= kMaxTombstones && !tombstones_.count(id)) {
    ++counters_.tombstones_dropped;
    return;
  }
  uint32_t& at = tombstones_[id];
  at = std::max(at, made_s);
}

void ShardCore::forget_tombstones_not_held() {
  // A tombstone guards the owner's store. Once the id is placed elsewhere, its owner there has
  // taken every later write; if the id comes back, what comes with it is newer than this delete.
  std::erase_if(tombstones_, [this](const auto& t) { return placed_elsewhere(t.first, 0); });
}

void ShardCore::open_tombstone_window(uint32_t until_s) {
  if (now_ >= tombstone_until_ && !recent_deletes_.empty()) {
    RecordStore::Record held;
    for (const RecentDelete& d : recent_deletes_) {
      // Not one whose user logged in here again since: the record here is newer than the delete.
      if (d.at_s + kRecentDeleteS >= now_ && tombstones_.size() < kMaxTombstones &&
          !store_.get(d.id, held)) {
        uint32_t& at = tombstones_[d.id];
        at = std::max(at, d.made_s);
      }
    }
    recent_deletes_.clear();
    recent_head_ = 0;
  }
  tombstone_until_ = std::max(tombstone_until_, until_s);
}

void ShardCore::expire_tombstones() {
  if (now_ >= tombstone_until_ && !tombstones_.empty()) {
    decltype(tombstones_)().swap(tombstones_);  // give the memory back
  }
}

void ShardCore::tick(uint32_t now_s) {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  now_ = std::max(now_, now_s);
  expire_tombstones();
}

void ShardCore::handle_import(const Request& q) {
  const bool timed = (q.flags & kFlagTimed) != 0;
  // Records are arriving: keep remembering deletes a while after the last batch.
  open_tombstone_window(now_ + kTombstoneSlackS);
  // Decoded a few records ahead, so each one's slot is prefetched before it is needed (a batch
  // lands all over a large table: each record is a cache miss otherwise).
  constexpr size_t kAhead = 8;
  std::array<ImportRecord, kAhead> ring;
  std::string_view records = q.records;
  size_t decoded = 0, applied = 0;
  auto decode_next = [&] {
    if (!next_import_record(records, ring[decoded % kAhead])) return false;
    store_.prefetch(ring[decoded % kAhead].id);
    ++decoded;
    return true;
  };
  while (decoded < kAhead && decode_next()) {
  }
  while (applied < decoded) {
    const ImportRecord rec = ring[applied % kAhead];
    ++applied;
    decode_next();
    if (shard_of(rec.id, shard_count_) != index_) {
      ++counters_.import_wrong_shard;
      continue;
    }
    // Cut under a table no newer than ours, which places the id elsewhere: a batch of a move
    // that was overtaken (the source scans again under the newer table and still holds the
    // record). Stored here, a fallback read could find a copy older than a logout.
    if (placed_elsewhere(rec.id, q.table_version == 0 ? UINT64_MAX : q.table_version)) {
      ++counters_.import_not_held;
      continue;
    }
    // A timed IMPORT carries the second each record was last seen; an older sender its age.
    const uint32_t seen = timed                     ? rec.age_seconds
                          : now_ >= rec.age_seconds ? now_ - rec.age_seconds
                                                    : 0;
    if (deleted_since(rec.id, seen)) {
      ++counters_.import_skipped_deleted;
      continue;
    }
    // A write that reached us directly (a login after the change) is at least as new as any copy
    // streamed from the old owner.
    if (store_.upsert_if_newer(rec.id, rec.endpoint.unmapped(), seen) ==
        RecordStore::Merge::kKeptNewer) {
      ++counters_.import_skipped_newer;
    } else {
      ++counters_.imported;
    }
  }
}

void ShardCore::fill_stats(Response& r) const {
  r.stat_count = kStatCount;
  r.stats[kStatRecords] = store_.size();
  r.stats[kStatMemoryBytes] = store_.memory_bytes();
  r.stats[kStatUpserts] = counters_.upserts;
  r.stats[kStatGets] = counters_.gets;
  r.stats[kStatDeletes] = counters_.deletes;
  r.stats[kStatMoved] = counters_.moved;
  r.stats[kStatPurged] = counters_.purged;
  r.stats[kStatConnections] = connections_;
  r.stats[kStatBadFrames] = counters_.bad_frames;
  r.stats[kStatLongestTurnNs] = longest_turn_ns_;
}

// ---- commands ------------------------------------------------------------------------------

void ShardCore::set_router(std::shared_ptr<const Router> router, uint32_t grace_s, uint32_t now_s) {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  const bool changed = !router_ || !router || router->version() != router_->version();
  router_ = std::move(router);
  self_index_ = router_ ? router_->table().server_index(server_name_) : -1;
  if (!changed) return;
  note_table_for_streams();
  // Ids may be moving: remember deletes until every login server has stopped reading the old
  // owners and streams have had time to arrive.
  now_ = std::max(now_, now_s);
  open_tombstone_window(now_s + grace_s + kTombstoneSlackS);
  forget_tombstones_not_held();
  if (handoff_.running()) {
    // Complete under the newest table: scan again against it.
    handoff_.start(router_, self_index_, store_, /*fresh=*/false, stream_history_, stream_lost_,
                   self_in_history());
    effects().drop_older = handoff_.generation();
    effects().stream_step = true;
  } else {
    maybe_start_stream();
  }
}

void ShardCore::command_purge(PurgeAction action, uint32_t age_seconds, uint64_t id) {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  if (action == PurgeAction::kCancel) {
    purge_.cancel();
    effects().changed = true;
  } else if (action != PurgeAction::kStatus && !stopped_) {
    purge_.start(action, age_seconds, store_);
    purge_id_ = id;
    Effects& e = effects();
    e.events.push_back(ShardEvent{
        .kind = ShardEvent::kPurgeStarted, .action = action, .count = purge_.progress().total});
    e.changed = true;
    e.purge_step = true;
  }
}

void ShardCore::command_stream(control::StreamAction action, uint64_t version,
                               std::vector<std::string> lost) {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  if (stopped_) return;
  if (action == control::StreamAction::kStart) {
    for (std::string& name : lost) {
      if (std::find(stream_lost_.begin(), stream_lost_.end(), name) == stream_lost_.end())
        stream_lost_.push_back(std::move(name));
    }
  }
  if (action == control::StreamAction::kCancel) {
    stream_wanted_ = 0;
    if (!handoff_.running()) return;
    handoff_.cancel();
    Effects& e = effects();
    e.drop_older = handoff_.generation();
    e.events.push_back(ShardEvent{.kind = ShardEvent::kStreamCancelled});
    e.changed = true;
    return;
  }
  stream_wanted_ = std::max<uint64_t>(version, 1);
  maybe_start_stream();
}

std::vector<int> ShardCore::self_in_history() const {
  std::vector<int> out;
  for (const auto& h : stream_history_) {
    out.push_back(h ? h->table().server_index(server_name_) : -1);
  }
  return out;
}

void ShardCore::maybe_start_stream() {
  if (stream_wanted_ == 0 || stopped_) return;
  // Without a table this server owns every id: nothing to move, and nothing to wait for unless a
  // version was named.
  const uint64_t have = router_ ? router_->version() : 0;
  if (have < stream_wanted_ && router_) return;  // starts when that table arrives
  if (!router_ && stream_wanted_ > 1) return;
  stream_wanted_ = 0;
  handoff_.start(router_, self_index_, store_, /*fresh=*/true, stream_history_, stream_lost_,
                 self_in_history());
  Effects& e = effects();
  e.drop_older = handoff_.generation();
  e.events.push_back(
      ShardEvent{.kind = ShardEvent::kStreamStarted, .version = have, .count = store_.size()});
  e.changed = true;
  e.stream_step = true;
}

void ShardCore::acknowledged(uint64_t generation, uint16_t records, const std::string& target,
                             bool link_lost) {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  const bool was_scanning = handoff_.scanning();
  handoff_.acknowledged(generation, records, target, link_lost);
  if (!handoff_.running()) {
    stream_finished();
    return;
  }
  if (!was_scanning && handoff_.scanning()) {
    effects().events.push_back(ShardEvent{.kind = ShardEvent::kStreamResent});
    effects().drop_older = handoff_.generation();
  }
  effects().stream_step = true;
}

void ShardCore::stream_link_lost() {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  // Marks the running stream (one already done stays done: what it sent was acknowledged before
  // the link was lost, and the purge may be under way).
  if (handoff_.running())
    effects().events.push_back(ShardEvent{.kind = ShardEvent::kStreamLinkLost});
  handoff_.link_lost();
}

void ShardCore::stop() {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  stopped_ = true;
  purge_.cancel();
  handoff_.cancel();
}

void ShardCore::note_table_for_streams() {
  if (!router_) return;
  const bool first = !had_table_;
  had_table_ = true;
  if (first) {
    // Every record this shard will hold arrives under this table or a later one.
    if (store_.size() == 0) stream_history_ = {router_};
    return;
  }
  if (stream_history_.empty()) return;  // unknown until a stream completes
  if (stream_history_.size() >= kMaxStreamHistory) {
    stream_history_.clear();  // too many changes without a completed stream: send everything
    return;
  }
  stream_history_.push_back(router_);
}

void ShardCore::stream_finished() {
  // Complete against its table: every member of each record's set under it has the record.
  if (handoff_.progress().state == Handoff::State::kDone && handoff_.router_ptr())
    stream_history_ = {handoff_.router_ptr()};
  if (handoff_.progress().state == Handoff::State::kDone) stream_lost_.clear();
  Effects& e = effects();
  e.events.push_back(
      ShardEvent{.kind = ShardEvent::kStreamDone, .count = handoff_.progress().acked});
  e.changed = true;
}

// ---- steps ---------------------------------------------------------------------------------

void ShardCore::purge_step(uint32_t now_s) {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  if (!purge_.running() || stopped_) return;
  now_ = now_s;
  counters_.purged +=
      purge_.step(store_, kPurgeBatchSlots, Purge::Context{router_.get(), self_index_, now_});
  Effects& e = effects();
  if (purge_.running()) {
    e.purge_step = true;
    return;
  }
  e.events.push_back(
      ShardEvent{.kind = ShardEvent::kPurgeFinished, .count = purge_.progress().deleted});
  e.changed = true;
}

ShardCore::StreamNext ShardCore::next_stream_step(int64_t now_ns) {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  if (!handoff_.scanning() || stopped_) return {};
  if (handoff_.progress().in_flight >= kStreamWindow) return {};  // an acknowledgement resumes it
  if (stream_rate_ > 0) {
    if (stream_refill_ns_ == 0) stream_refill_ns_ = now_ns;
    // A bucket of 10 ms worth (at least one batch), refilled at the rate: the stream never sends
    // more than that in one burst.
    const double burst = std::max(stream_rate_ / 100, static_cast<double>(Handoff::kBatchRecords));
    stream_tokens_ =
        std::min(burst, stream_tokens_ +
                            stream_rate_ * static_cast<double>(now_ns - stream_refill_ns_) / 1e9);
    stream_refill_ns_ = now_ns;
    if (stream_tokens_ < 0) {
      // Until the bucket is back at zero, and a millisecond more so the timer never fires early.
      return {.kind = StreamNext::kWait,
              .wait_ns = static_cast<int64_t>(-stream_tokens_ / stream_rate_ * 1e9) + 1'000'000};
    }
  }
  return {.kind = StreamNext::kNow};
}

std::vector<Handoff::Batch>& ShardCore::stream_step(uint32_t now_s) {
  IMHASH_ON_OWNER_THREAD(thread_check_.owned());
  cut_.clear();
  if (!handoff_.scanning() || stopped_) return cut_;
  now_ = now_s;
  const size_t cut = handoff_.step(store_, kStreamStepSlots, cut_);
  stream_tokens_ -= static_cast<double>(cut);
  if (!handoff_.running()) {  // nothing was left to send
    stream_finished();
  } else {
    effects().stream_step = true;
  }
  return cut_;
}

}  // namespace imhash
