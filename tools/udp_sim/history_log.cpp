#include "tools/udp_sim/history_log.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sstream>

#include "tools/nemesis/history.h"

namespace imhash::sim {

namespace {

constexpr int kWriterNice = 10;

}  // namespace

std::string history_header(std::string_view comment) {
  std::string h(history::kHeaderLine);
  h += "\n# ";
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
  history::Event e;
  e.invoke_ns = static_cast<uint64_t>(r.invoke_ns);
  e.complete_ns = static_cast<uint64_t>(r.complete_ns);
  e.user_id = r.user_id;
  e.endpoint = r.endpoint;
  e.op = r.op;
  if (r.answered) e.status = r.status;
  history::append_line(out, e);
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
