#include "hash_server/stream_sender.h"

#include <spdlog/spdlog.h>

#include "common/runtime/clock.h"

namespace asio = boost::asio;

namespace imhash {

namespace {
// Links are ticked (deadlines, reconnects) and queues pumped this often.
constexpr auto kTick = std::chrono::milliseconds(20);
// A link with nothing queued for this long is closed.
constexpr int64_t kIdleCloseNs = 30'000'000'000;
}  // namespace

StreamSender::StreamSender(asio::io_context& ctx, LinkSettings settings,
                           std::function<void(uint32_t)> on_link_lost)
    : ctx_(ctx),
      settings_(std::move(settings)),
      on_link_lost_(std::move(on_link_lost)),
      tick_timer_(ctx) {}

void StreamSender::check_reconnect(Target& t) {
  const uint64_t ups = t.link->times_up();
  if (ups == t.times_up) return;
  const bool again = t.times_up != 0;
  t.times_up = ups;
  if (!again) return;
  spdlog::warn(
      "stream: the link to {} shard {} was lost and is up again; its sources send "
      "everything again",
      t.link->server().name, t.link->shard());
  if (on_link_lost_) {
    for (uint32_t shard : t.sources) on_link_lost_(shard);
  }
}

StreamSender::~StreamSender() { stop(); }

std::string StreamSender::key(const Handoff::Batch& b) {
  return b.target.name + " " + b.target.address + " " + std::to_string(b.target.shards) + "/" +
         std::to_string(b.target_shard);
}

size_t StreamSender::queued() const { return entries_.size(); }

void StreamSender::send(uint32_t source_shard, Handoff::Batch batch, Done done) {
  if (stopped_) return;
  const std::string k = key(batch);
  auto [it, created] = targets_.try_emplace(k);
  Target& t = it->second;
  if (created || !t.link) {
    t.link = std::make_unique<HashLink>(ctx_, static_cast<LinkListener&>(*this), settings_,
                                        batch.target, batch.target_shard, link_seed_++);
    t.link->start();
  }
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{source_shard, std::move(batch), std::move(done), false, false});
  entry_target_.emplace(id, k);
  t.waiting.push_back(id);
  t.sources.insert(source_shard);
  t.last_used_ns = monotonic_ns();
  pump(t);
  schedule_tick();
}

void StreamSender::pump(Target& t) {
  check_reconnect(t);
  bool queued_any = false;
  const int64_t now = monotonic_ns();
  if (now < t.hold_until_ns) return;
  while (!t.waiting.empty() && t.link->can_send()) {
    const uint64_t id = t.waiting.front();
    t.waiting.pop_front();
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;  // dropped
    Entry& e = it->second;
    // Timed: each record carries its last-seen second (HashLink makes them ages for an older
    // receiver).
    frame::Request q{.type = frame::FrameType::kImport,
                     .flags = frame::kFlagTimed,
                     .table_version = e.batch.version};
    q.record_count = e.batch.count;
    q.records = std::string_view(reinterpret_cast<const char*>(e.batch.records.data()),
                                 e.batch.records.size());
    e.in_flight = true;
    t.link->submit(q, id, now);
    queued_any = true;
  }
  if (queued_any) t.link->flush();
}

void StreamSender::on_answer(uint64_t token, const frame::Response& response) {
  auto it = entries_.find(token);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  if (response.status != frame::FrameStatus::kOk) {
    // The target refused the batch (e.g. its shard count is not the table's): sending it again
    // later is all that can be done; the stream does not finish, so no purge deletes the copies.
    spdlog::error("stream to {} shard {}: IMPORT answered {}; retrying", e.batch.target.name,
                  e.batch.target_shard, frame::to_string(response.status));
    on_failure(token, client::Status::kTimeout);
    if (auto t = targets_.find(entry_target_[token]); t != targets_.end()) {
      t->second.hold_until_ns = monotonic_ns() + 1'000'000'000;
    }
    return;
  }
  ++batches_sent_;
  records_sent_ += e.batch.count;
  Done done = std::move(e.done);
  const bool lost = e.link_lost;
  entries_.erase(it);
  entry_target_.erase(token);
  if (done) done(lost);
}

void StreamSender::on_failure(uint64_t token, client::Status status) {
  auto it = entries_.find(token);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.in_flight = false;
  if (status == client::Status::kUnavailable) e.link_lost = true;
  ++retries_;
  auto t = targets_.find(entry_target_[token]);
  if (t != targets_.end()) t->second.waiting.push_front(token);
}

void StreamSender::after_link_io() {
  for (auto& [k, t] : targets_) {
    if (t.link) pump(t);
  }
}

void StreamSender::drop_older(uint32_t source_shard, uint64_t generation) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.source_shard == source_shard && it->second.batch.generation < generation &&
        !it->second.in_flight) {
      entry_target_.erase(it->first);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

void StreamSender::schedule_tick() {
  if (stopped_ || tick_timer_.expiry() > asio::steady_timer::clock_type::now()) return;
  tick_timer_.expires_after(kTick);
  tick_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    const int64_t now = monotonic_ns();
    bool busy = false;
    for (auto it = targets_.begin(); it != targets_.end();) {
      Target& t = it->second;
      t.link->tick(now);
      pump(t);
      if (!t.waiting.empty() || t.link->in_flight() > 0) t.last_used_ns = now;
      if (now - t.last_used_ns > kIdleCloseNs) t.link->close();
      if (t.link->finished()) {
        it = targets_.erase(it);
        continue;
      }
      busy = true;
      ++it;
    }
    if (busy) schedule_tick();
  });
}

void StreamSender::stop() {
  if (stopped_) return;
  stopped_ = true;
  tick_timer_.cancel();
  entries_.clear();
  entry_target_.clear();
  for (auto& [k, t] : targets_) {
    if (t.link) t.link->close();
  }
}

}  // namespace imhash
