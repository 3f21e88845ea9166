#include "tools/udp_sim/load_driver.h"

#include <errno.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <ctime>

#include "common/runtime/clock.h"
#include "tools/udp_sim/receive_time.h"

namespace imhash::sim {

using client::Op;

namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr uint32_t kMaxIssuePerTurn = 4096;  // keeps receiving while a huge window fills
constexpr int64_t kMaxWaitNs = 50'000'000;   // a lost wake-up costs at most this

int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * kSecond + ts.tv_nsec;
}

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

}  // namespace

LoadDriver::LoadDriver(const SimConfig& config, const UdpSockets& sockets, UserModel& model,
                       Reporter& reporter, HistoryLog* history)
    : config_(config),
      sockets_(sockets),
      model_(model),
      reporter_(reporter),
      history_(history),
      timeout_ns_(int64_t{config.timeout_ms} * 1'000'000),
      tokens_(config.auth_key.empty()
                  ? nullptr
                  : std::make_unique<TokenSource>(config.auth_key, config.first_user,
                                                  static_cast<uint32_t>(config.users))),
      table_(config.in_flight_capacity()),
      latencies_(std::make_unique<Latencies>()),
      queues_(sockets.size()),
      pollfds_(sockets.size()) {
  const size_t queue_size = std::bit_ceil(std::clamp<size_t>(table_.capacity(), kBatch, 1 << 16));
  for (size_t i = 0; i < sockets.size(); ++i) {
    queues_[i].ring.resize(queue_size);
    pollfds_[i] = pollfd{sockets.fd(i), POLLIN, 0};
  }
  tx_msgs_.resize(kBatch);
  tx_iov_.resize(kBatch);
  tx_slot_.resize(kBatch);
  tx_next_.resize(kBatch);
  rx_msgs_.resize(kBatch);
  rx_iov_.resize(kBatch);
  rx_buf_.resize(kBatch * kRecvBufSize);
  for (uint32_t i = 0; i < kBatch; ++i) {
    rx_iov_[i] = iovec{rx_buf_.data() + i * kRecvBufSize, kRecvBufSize};
    rx_msgs_[i] = mmsghdr{};
    rx_msgs_[i].msg_hdr.msg_iov = &rx_iov_[i];
    rx_msgs_[i].msg_hdr.msg_iovlen = 1;
  }
  rx_control_.resize(kBatch * kReceiveControlSize);
  for (size_t i = 0; i < kBatch; ++i) {
    rx_msgs_[i].msg_hdr.msg_control = rx_control_.data() + i * kReceiveControlSize;
    rx_msgs_[i].msg_hdr.msg_controllen = kReceiveControlSize;
  }
}

void LoadDriver::run(const std::atomic<int>& signals) {
  phases_ = RunPhases(monotonic_ns(), config_.warmup_s, config_.duration_s);
  warming_ = phases_.measure_from > phases_.start;
  next_tick_ns_ = phases_.measure_from + kSecond;  // no progress lines during the warm-up
  if (config_.open_loop()) {
    schedule_ = OpenLoopSchedule(config_.rate, phases_.start);
    // Latency counts from each request's scheduled time, so a late wake-up is charged to the
    // server. The default timer slack lets ppoll() oversleep by up to 50 us; ask for none.
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  }
  bool draining = false;
  int signals_at_drain = 0;

  for (;;) {
    const int64_t now = monotonic_ns();
    if (warming_ && !phases_.in_warmup(now)) {
      warming_ = false;
      counters_ = Counters{};  // errors seen outside any request (send/receive) during the warm-up
    }
    const int signals_now = signals.load(std::memory_order_relaxed);
    if (!draining && (now >= phases_.end || signals_now > 0 || model_.finished())) {
      draining = true;
      signals_at_drain = signals_now;
      interrupted_ = now < phases_.end && !model_.finished();
      drain_end_ns_ = now + timeout_ns_;
      if (config_.open_loop()) {
        const uint64_t due = schedule_.due_by(std::min(now, phases_.end - 1));
        if (due > scheduled_) counters_.unsent += due - scheduled_;
      }
      // The load's last (maybe partial) second gets its line; the drain gets none.
      if (now - (next_tick_ns_ - kSecond) >= kSecond / 10) {
        reporter_.progress(phases_.elapsed_s(now), counters_, model_.verify_counts(), *latencies_,
                           table_.size());
      }
      next_tick_ns_ = INT64_MAX;
    }
    if (draining &&
        (table_.size() == 0 || now >= drain_end_ns_ || signals_now > signals_at_drain)) {
      break;
    }

    expire(now, draining);
    if (!draining) issue(now);
    for (size_t i = 0; i < queues_.size(); ++i) {
      if (queues_[i].size() > 0 && !queues_[i].blocked) flush(i);
    }
    if (now >= next_tick_ns_) {
      reporter_.progress(phases_.elapsed_s(now), counters_, model_.verify_counts(), *latencies_,
                         table_.size());
      while (next_tick_ns_ <= now) next_tick_ns_ += kSecond;
    }

    const int64_t wait =
        config_.busy_wait ? 0 : std::clamp<int64_t>(wake_time(now, draining) - now, 0, kMaxWaitNs);
    for (size_t i = 0; i < pollfds_.size(); ++i) {
      pollfds_[i].events = static_cast<short>(POLLIN | (queues_[i].blocked ? POLLOUT : 0));
      pollfds_[i].revents = 0;
    }
    const timespec ts{static_cast<time_t>(wait / kSecond), static_cast<long>(wait % kSecond)};
    if (ppoll(pollfds_.data(), pollfds_.size(), &ts, nullptr) <= 0) continue;
    for (size_t i = 0; i < pollfds_.size(); ++i) {
      const short ev = pollfds_[i].revents;
      if (ev & (POLLIN | POLLERR)) receive(i);
      if (ev & POLLOUT) {
        queues_[i].blocked = false;
        flush(i);
      }
    }
  }

  const int64_t end = monotonic_ns();
  for (uint32_t slot = 0; slot < table_.capacity(); ++slot) {
    if (table_.in_use(slot)) end_request(slot, nullptr, /*abandoned=*/true, end);
  }
  elapsed_s_ = phases_.elapsed_s(monotonic_ns());
  latencies_->fold_interval();
}

int64_t LoadDriver::wake_time(int64_t now, bool draining) const {
  int64_t t =
      std::min({table_.next_deadline(), next_tick_ns_, draining ? drain_end_ns_ : phases_.end});
  if (!draining) {
    if (config_.open_loop()) {
      if (!table_.full()) t = std::min(t, schedule_.due_at(scheduled_));
    } else if (table_.size() < config_.window && model_.can_issue()) {
      t = now;  // the window is not full yet (a huge window fills over several turns)
    }
  }
  return t;
}

void LoadDriver::issue(int64_t now) {
  uint64_t quota = 0;
  if (config_.open_loop()) {
    const uint64_t due = schedule_.due_by(now);
    quota = std::min<uint64_t>(due - scheduled_, table_.capacity() - table_.size());
  } else {
    quota = closed_loop_quota(config_.window, table_.size());
  }
  quota = std::min<uint64_t>(quota, kMaxIssuePerTurn);
  for (uint64_t i = 0; i < quota && model_.can_issue(); ++i) {
    const uint32_t slot = table_.acquire();
    Slot& s = table_[slot];
    s.tag = model_.next();
    s.start_ns = config_.open_loop() ? schedule_.due_at(scheduled_++) : now;
    s.issued_ns = now;
    s.warmup = phases_.in_warmup(s.start_ns);
    s.socket = static_cast<uint16_t>(model_.socket_of(s.tag.user));
    if (!encode(s)) {  // cannot happen with the endpoints the model makes; never loop on it
      ++counters_.send_errors;
      model_.complete(s.tag, nullptr);
      table_.release(slot);
      continue;
    }
    s.tries = 1;
    if (!s.warmup) ++counters_.ops[op_index(s.tag.op)].requests;
    enqueue(slot);
    table_.arm(slot, now + timeout_ns_);
  }
}

bool LoadDriver::encode(Slot& s) {
  client::Message m;
  m.op = s.tag.op;
  m.request_id = s.request_id;
  m.user_id = model_.id_of(s.tag.user);
  if (m.op == Op::kLogin || m.op == Op::kHeartbeat) m.endpoint = model_.endpoint_to_send(s.tag);
  // Authentication (docs/design.md §6): a TOKEN for m.user_id in LOGIN, HEARTBEAT and LOGOUT.
  if (tokens_ && m.op != Op::kLookup && m.op != Op::kPing) {
    m.token = tokens_->token_for(s.tag.user, static_cast<uint32_t>(std::time(nullptr)));
  }
  s.len = static_cast<uint8_t>(client::encode_request(m, s.bytes));
  return s.len != 0;
}

void LoadDriver::enqueue(uint32_t slot) {
  Slot& s = table_[slot];
  SendQueue& q = queues_[s.socket];
  if (q.size() == q.ring.size()) {
    ++counters_.send_errors;  // not sent: this try times out and the next one goes
    return;
  }
  q.ring[q.tail++ & (q.ring.size() - 1)] = SendQueue::Entry{slot, s.request_id};
  s.queued = true;
}

void LoadDriver::flush(size_t sock) {
  SendQueue& q = queues_[sock];
  const size_t mask = q.ring.size() - 1;
  for (int guard = 0; q.size() > 0 && guard < 256; ++guard) {
    uint32_t n = 0;
    size_t pos = q.head;
    while (n < kBatch && pos != q.tail) {
      const SendQueue::Entry e = q.ring[pos++ & mask];
      if (!table_.in_use(e.slot)) continue;
      Slot& s = table_[e.slot];
      if (s.request_id != e.request_id || !s.queued) continue;  // ended or re-queued since
      tx_iov_[n] = iovec{s.bytes.data(), s.len};
      tx_msgs_[n] = mmsghdr{};
      tx_msgs_[n].msg_hdr.msg_iov = &tx_iov_[n];
      tx_msgs_[n].msg_hdr.msg_iovlen = 1;
      tx_slot_[n] = e.slot;
      tx_next_[n] = pos;
      ++n;
    }
    if (n == 0) {
      q.head = pos;
      continue;
    }
    const int r = sendmmsg(sockets_.fd(sock), tx_msgs_.data(), n, MSG_DONTWAIT);
    if (r < 0) {
      const int e = errno;
      if (would_block(e)) {
        q.blocked = true;
        return;
      }
      if (e == EINTR) continue;
      if (e == ECONNREFUSED) {  // an ICMP error for an earlier datagram; nothing was sent
        ++counters_.refused;
        continue;
      }
      ++counters_.send_errors;  // drop the first; its try times out and is sent again
      table_[tx_slot_[0]].queued = false;
      q.head = tx_next_[0];
      continue;
    }
    for (int i = 0; i < r; ++i) table_[tx_slot_[i]].queued = false;
    if (r > 0) q.head = tx_next_[r - 1];
  }
  if (q.size() == 0) q.head = q.tail = 0;
}

void LoadDriver::receive(size_t sock) {
  for (int round = 0; round < 16; ++round) {
    const int r = recvmmsg(sockets_.fd(sock), rx_msgs_.data(), kBatch, MSG_DONTWAIT, nullptr);
    if (r < 0) {
      const int e = errno;
      if (would_block(e)) return;
      if (e == EINTR) continue;
      if (e == ECONNREFUSED) {
        ++counters_.refused;
        continue;
      }
      ++counters_.recv_errors;
      return;
    }
    const int64_t now = monotonic_ns();
    const int64_t realtime_minus_monotonic = realtime_ns() - now;
    for (int i = 0; i < r; ++i) {
      mmsghdr& m = rx_msgs_[static_cast<size_t>(i)];
      on_datagram(rx_buf_.data() + static_cast<size_t>(i) * kRecvBufSize, m.msg_len,
                  (m.msg_hdr.msg_flags & MSG_TRUNC) != 0,
                  receive_time_ns(m.msg_hdr, realtime_minus_monotonic, now), now);
      m.msg_hdr.msg_controllen = kReceiveControlSize;  // the kernel shrank it to what it wrote
    }
    if (static_cast<uint32_t>(r) < kBatch) return;
  }
}

void LoadDriver::on_datagram(const uint8_t* data, size_t len, bool truncated, int64_t arrived_ns,
                             int64_t read_ns) {
  if (truncated) {  // larger than the receive buffer, so far larger than any request
    ++counters_.malformed_replies;
    ++counters_.amplified_replies;
    return;
  }
  // --echo: the datagram is our request itself, which the request decoder reads.
  const client::Decoded d =
      config_.echo ? client::decode_request({data, len}) : client::decode_response({data, len});
  const uint32_t slot = d.header_valid ? table_.find(d.header.request_id) : InFlightTable::kNone;
  const size_t request_len = slot != InFlightTable::kNone ? table_[slot].len : client::kMinDatagram;
  if (len > request_len) ++counters_.amplified_replies;
  if (d.error != client::DecodeError::kOk) {
    ++counters_.malformed_replies;
    return;
  }
  const client::Message& m = d.msg;
  if (slot == InFlightTable::kNone) {
    ++counters_.late_replies;
    return;
  }
  Slot& s = table_[slot];
  if (m.user_id != model_.id_of(s.tag.user) || m.op != s.tag.op) {
    ++counters_.mismatched_replies;  // the request stays in flight: its own answer may still come
    return;
  }
  if (!config_.echo && !client::has_required_tlvs(m)) {
    ++counters_.malformed_replies;  // still its answer
  }
  if (!s.warmup) {
    latencies_->record(m.op,
                       static_cast<uint64_t>(std::max<int64_t>(0, arrived_ns - s.start_ns)) / 1000);
  }
  end_request(slot, &m, false, read_ns);
}

void LoadDriver::expire(int64_t now, bool draining) {
  for (uint32_t slot; (slot = table_.pop_expired(now)) != InFlightTable::kNone;) {
    Slot& s = table_[slot];
    if (s.tries > config_.retries) {
      end_request(slot, nullptr, /*abandoned=*/false, now);
    } else if (draining) {
      end_request(slot, nullptr, /*abandoned=*/true, now);
    } else {
      ++s.tries;
      if (!s.warmup) ++counters_.ops[op_index(s.tag.op)].retries;
      if (!s.queued) enqueue(slot);
      table_.arm(slot, now + timeout_ns_);
    }
  }
}

void LoadDriver::end_request(uint32_t slot, const client::Message* reply, bool abandoned,
                             int64_t now) {
  Slot& s = table_[slot];
  if (history_ != nullptr) record_history(s, reply, now);
  if (s.warmup) {
    model_.complete(s.tag, reply);
    table_.release(slot);
    return;
  }
  OpCounters& oc = counters_.ops[op_index(s.tag.op)];
  if (reply != nullptr) {
    ++oc.status[static_cast<size_t>(reply->status)];
  } else if (abandoned) {
    ++oc.abandoned;
  } else {
    ++oc.no_reply;
  }
  model_.complete(s.tag, reply);
  table_.release(slot);
}

void LoadDriver::record_history(const Slot& s, const client::Message* reply, int64_t now) {
  HistoryRecord r{.invoke_ns = s.issued_ns,
                  .complete_ns = now,
                  .user_id = model_.id_of(s.tag.user),
                  .endpoint = {},
                  .op = s.tag.op,
                  .answered = reply != nullptr,
                  .status = reply != nullptr ? reply->status : client::Status::kOk};
  if (s.tag.op == Op::kLogin || s.tag.op == Op::kHeartbeat) {
    r.endpoint = model_.endpoint_to_send(s.tag).value_or(Endpoint{});  // the value written
  } else if (s.tag.op == Op::kLookup && reply != nullptr && reply->endpoint) {
    r.endpoint = *reply->endpoint;  // the value read
  }
  history_->add(r);
}

}  // namespace imhash::sim
