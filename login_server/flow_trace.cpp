#include "login_server/flow_trace.h"

#include <cstdio>
#include <utility>

namespace imhash {

FlowTrace::Story& FlowTrace::story(uint32_t index) {
  if (index >= stories_.size()) stories_.resize(index + 1);
  return stories_[index];
}

void FlowTrace::start(uint32_t index) {
  Story& s = story(index);
  s.start_ns = now_ns_;
  s.steps.clear();
}

void FlowTrace::inherit(uint32_t to, uint32_t from) {
  Story copy = story(from);
  story(to) = std::move(copy);
}

void FlowTrace::note(uint32_t index, const char* what, const char* detail,
                     const std::string& server, uint32_t shard, uint64_t version) {
  Story& s = story(index);
  if (s.steps.size() >= kMaxSteps) return;
  s.steps.push_back(Step{now_ns_, what, detail, server, shard, version});
}

int64_t FlowTrace::started(uint32_t index) const {
  return index < stories_.size() ? stories_[index].start_ns : 0;
}

std::string FlowTrace::told(uint32_t index) const {
  if (index >= stories_.size()) return {};
  const Story& s = stories_[index];
  std::string line;
  char buf[64];
  for (const Step& step : s.steps) {
    if (!line.empty()) line += "; ";
    std::snprintf(buf, sizeof buf, "+%.1f ms ", static_cast<double>(step.at_ns - s.start_ns) / 1e6);
    line += buf;
    line += step.what;
    if (step.detail) line += std::string(" ") + step.detail;
    if (!step.server.empty()) {
      std::snprintf(buf, sizeof buf, "/%u v%llu", step.shard,
                    static_cast<unsigned long long>(step.version));
      line += " " + step.server + buf;
    }
  }
  if (s.steps.size() >= kMaxSteps) line += "; ...";
  return line;
}

}  // namespace imhash
