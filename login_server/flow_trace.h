// FlowTrace: what happened to each request of a RequestFlow (every frame sent for it, what came
// back, hedges and waits), kept per slot, so a request whose client heard TIMEOUT or UNAVAILABLE
// can be told step by step (--trace-failed-requests). For tracing faults (the nemesis runs), not
// for production load: a step copies a server name. Part of the flow's core: no clock, no log
// call; the flow hands the finished stories to its adapter, which logs them.
//
// Thread rules: the owning RequestFlow's thread only.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace imhash {

class FlowTrace {
 public:
  // The time of the event the flow is handling: its steps are noted at it.
  void set_now(int64_t now_ns) { now_ns_ = now_ns; }
  // Slot `index` starts a new story (a request, a copy, a repair).
  void start(uint32_t index);
  // Slot `to` carries on the story of slot `from` (a hedge takes a client over).
  void inherit(uint32_t to, uint32_t from);
  // One step of slot `index`'s story: `what` and `detail` (literals) and, for a send, where.
  void note(uint32_t index, const char* what, const char* detail = nullptr,
            const std::string& server = {}, uint32_t shard = 0, uint64_t version = 0);
  // The story of slot `index` as one line: "+0.0 ms sent first hash4/1 v9; +1.2 ms answer
  // NOT_FOUND; ...", times from its start.
  std::string told(uint32_t index) const;
  // The start of slot `index`'s request, for its age in a report.
  int64_t started(uint32_t index) const;

  // Finished stories of requests whose client heard TIMEOUT or UNAVAILABLE, for the adapter.
  void report(std::string line) { reports_.push_back(std::move(line)); }
  std::vector<std::string> take_reports() { return std::exchange(reports_, {}); }

 private:
  struct Step {
    int64_t at_ns = 0;
    const char* what = "";
    const char* detail = nullptr;
    std::string server;
    uint32_t shard = 0;
    uint64_t version = 0;
  };
  struct Story {
    int64_t start_ns = 0;
    std::vector<Step> steps;
  };
  // A request's story stops growing here (one that loops would otherwise grow without bound).
  static constexpr size_t kMaxSteps = 32;
  Story& story(uint32_t index);
  std::vector<Story> stories_;
  int64_t now_ns_ = 0;
  std::vector<std::string> reports_;
};

}  // namespace imhash
