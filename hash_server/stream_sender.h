// StreamSender: delivers a hash server's outbound stream (docs/design.md §4, "Streaming"). Shards
// cut IMPORT batches (hash_server/handoff.h) and hand them here; the sender keeps one HashLink per
// shard of each target server (the login server's link: pipelined, reconnecting, and with the
// cluster key and TLS of the server-to-server links, role "hash"), writes each batch, and reports
// its acknowledgement through the batch's callback. A batch that times out or whose link drops is
// sent again when the link is back (an IMPORT is idempotent), so every batch is acknowledged
// eventually unless its stream is abandoned first; the callback says whether its link was lost on
// the way (the target may have restarted and lost earlier batches).
//
// Thread rules: construct, call and destroy it on the hash server's main thread (the thread that
// runs `ctx`); the callbacks run there too.
#pragma once

#include <boost/asio.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>

#include "common/links/hash_link.h"
#include "hash_server/handoff.h"

namespace imhash {

class StreamSender final : private LinkListener {
 public:
  // `done(link_lost)` runs once the batch was acknowledged.
  using Done = std::function<void(bool link_lost)>;

  // `on_link_lost(source_shard)`: a link to a target that shard has streamed to was lost and made
  // again (the target may have restarted empty): that shard's stream must send everything again.
  StreamSender(boost::asio::io_context& ctx, LinkSettings settings,
               std::function<void(uint32_t source_shard)> on_link_lost);
  ~StreamSender();
  StreamSender(const StreamSender&) = delete;
  StreamSender& operator=(const StreamSender&) = delete;

  // Queues `batch` from shard `source_shard` for its target.
  void send(uint32_t source_shard, Handoff::Batch batch, Done done);
  // Drops the batches of `source_shard` older than `generation` that are still queued (a restarted
  // or cancelled stream); those in flight are answered and their acknowledgements ignored.
  void drop_older(uint32_t source_shard, uint64_t generation);
  // Closes every link; queued batches are dropped without their callbacks.
  void stop();

  uint64_t batches_sent() const { return batches_sent_; }  // acknowledged
  uint64_t records_sent() const { return records_sent_; }  // acknowledged
  uint64_t retries() const { return retries_; }            // batches sent again
  size_t queued() const;                                   // batches waiting or in flight

 private:
  struct Entry {
    uint32_t source_shard = 0;
    Handoff::Batch batch;
    Done done;
    bool link_lost = false;
    bool in_flight = false;
  };
  struct Target {
    std::unique_ptr<HashLink> link;
    std::deque<uint64_t> waiting;  // entry ids, in order
    int64_t last_used_ns = 0;
    int64_t hold_until_ns = 0;   // after a refused batch: wait before sending again
    uint64_t times_up = 0;       // the link's times_up() when last looked at
    std::set<uint32_t> sources;  // shards that streamed to this target
  };
  // A link that came up again: tells every shard that streamed over it.
  void check_reconnect(Target& t);

  void on_answer(uint64_t token, const frame::Response& response) override;
  void on_failure(uint64_t token, client::Status status) override;
  void after_link_io() override;
  void pump(Target& t);
  void schedule_tick();
  static std::string key(const Handoff::Batch& b);

  boost::asio::io_context& ctx_;
  const LinkSettings settings_;
  const std::function<void(uint32_t)> on_link_lost_;
  boost::asio::steady_timer tick_timer_;
  std::map<std::string, Target> targets_;        // "name address shard"
  std::unordered_map<uint64_t, Entry> entries_;  // by id (the link token)
  std::unordered_map<uint64_t, std::string> entry_target_;
  uint64_t next_id_ = 1;
  uint64_t link_seed_ = 0x5eed;
  uint64_t batches_sent_ = 0, records_sent_ = 0, retries_ = 0;
  bool stopped_ = false;
};

}  // namespace imhash
