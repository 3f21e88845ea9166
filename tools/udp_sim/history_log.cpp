#include "tools/udp_sim/history_log.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <sstream>

namespace imhash::sim {

namespace {

constexpr int kWriterNice = 10;

template <typename Int>
void append_number(Int v, std::string& out) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

}  // namespace

void append_endpoint_text(const Endpoint& e, std::string& out) {
  if (!e.valid()) {
    out += '-';
    return;
  }
  uint16_t w[8];
  for (int i = 0; i < 8; ++i) w[i] = static_cast<uint16_t>(e.addr[2 * i] << 8 | e.addr[2 * i + 1]);
  if (e.family == 6 && w[0] == 0) {
    out += e.to_string();  // may have an IPv4 tail (::ffff:1.2.3.4); rare here
    return;
  }
  char buf[8];
  if (e.family == 4) {
    for (int i = 0; i < 4; ++i) {
      if (i > 0) out += '.';
      out.append(buf, std::to_chars(buf, buf + sizeof buf, unsigned{e.addr[i]}).ptr);
    }
  } else {
    // The first longest run of two or more zero groups becomes "::".
    int best = -1, best_len = 1;
    for (int i = 0; i < 8;) {
      int j = i;
      while (j < 8 && w[j] == 0) ++j;
      if (j - i > best_len) {
        best = i;
        best_len = j - i;
      }
      i = j == i ? i + 1 : j;
    }
    out += '[';
    for (int i = 0; i < 8; ++i) {
      if (i == best) {
        out += "::";
        i += best_len - 1;
        continue;
      }
      if (i > 0 && i != best + best_len) out += ':';
      out.append(buf, std::to_chars(buf, buf + sizeof buf, unsigned{w[i]}, 16).ptr);
    }
    out += ']';
  }
  out += ':';
  append_number(e.port, out);
}

std::string history_header(std::string_view comment) {
  std::string h = "# imhash-history 1\n# ";
  h.append(comment);
  h += '\n';
  return h;
}

std::string history_comment(const SimConfig& c) {
  std::ostringstream s;
  s << std::boolalpha << "udp_sim target=" << c.target << " first_user=" << c.first_user
    << " users=" << c.users << " seed=" << c.seed << " history_client=" << c.history_client;
  if (c.open_loop()) {
    s << " rate=" << c.rate;
  } else {
    s << " window=" << c.window;
  }
  s << " mix=" << to_string(c.mix) << " duration_s=" << c.duration_s << " warmup_s=" << c.warmup_s
    << " timeout_ms=" << c.timeout_ms << " retries=" << c.retries << " sockets=" << c.sockets
    << " storm=" << c.storm << " lookup_only=" << c.lookup_only;
  return s.str();
}

void append_history_line(const HistoryRecord& r, std::string& out) {
  append_number(r.invoke_ns, out);
  out += ' ';
  append_number(r.complete_ns, out);
  out += ' ';
  out += client::to_string(r.op);
  out += ' ';
  append_number(r.user_id, out);
  out += ' ';
  out += r.answered ? client::to_string(r.status) : "none";
  out += ' ';
  append_endpoint_text(r.endpoint, out);
  out += '\n';
}

HistoryLog::HistoryLog(std::ostream& out, std::string_view comment, size_t chunk_records)
    : out_(out), chunk_records_(chunk_records > 0 ? chunk_records : 1) {
  chunk_.reserve(chunk_records_);
  out_ << history_header(comment);
  // The writer starts with SIGINT and SIGTERM blocked, so that they reach the driver's thread,
  // whose ppoll() they must interrupt at once (tools/udp_sim/main.cpp installs no SA_RESTART).
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  writer_ = std::thread([this] { write_loop(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

HistoryLog::~HistoryLog() {
  if (!finished_) finish();
}

void HistoryLog::hand_off() {
  std::vector<HistoryRecord> next;
  {
    const std::lock_guard lock(mutex_);
    full_.push_back(std::move(chunk_));
    if (!spare_.empty()) {
      next = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  wake_.notify_one();
  // No spare chunk: the writer is behind (or this is the first hand-off); one more chunk.
  if (next.capacity() < chunk_records_) next.reserve(chunk_records_);
  chunk_ = std::move(next);
}

bool HistoryLog::finish() {
  if (finished_) return static_cast<bool>(out_);
  finished_ = true;
  if (!chunk_.empty()) hand_off();
  {
    const std::lock_guard lock(mutex_);
    closing_ = true;
  }
  wake_.notify_one();
  writer_.join();
  out_.flush();
  return static_cast<bool>(out_);
}

void HistoryLog::write_loop() {
  // Behind the load on a busy machine: the driver's loop and servers on the same host go first
  // (Linux: a nice value is per thread). At ~100 ns a record it still keeps up.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kWriterNice);
  std::string text;
  text.reserve(chunk_records_ * 96);  // a line is at most ~90 characters
  for (;;) {
    std::vector<HistoryRecord> chunk;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return !full_.empty() || closing_; });
      if (full_.empty()) return;  // closing, and everything is written
      chunk = std::move(full_.front());
      full_.pop_front();
    }
    text.clear();
    for (const HistoryRecord& r : chunk) append_history_line(r, text);
    out_.write(text.data(), static_cast<std::streamsize>(text.size()));
    chunk.clear();
    const std::lock_guard lock(mutex_);
    spare_.push_back(std::move(chunk));
  }
}

}  // namespace imhash::sim
