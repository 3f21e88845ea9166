#include "tools/bench/ab.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace imhash::bench {

namespace {

struct Stats {
  double mean = 0, min = 0, max = 0;
  // (max - min) / mean: how far rounds of one build land apart, as a percentage.
  double spread_pct() const { return mean != 0 ? 100 * (max - min) / std::fabs(mean) : 0; }
};

Stats stats_of(const std::vector<double>& values) {
  Stats s;
  if (values.empty()) return s;
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  return s;
}

std::string round_line(int round, const std::string& side, const RoundFigures& f) {
  std::string line = "round " + std::to_string(round) + "  " + side + " ";
  for (const auto& [name, value] : f) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "  %s %.6g", name.c_str(), value);
    line += buf;
  }
  return line;
}

}  // namespace

boost::json::object alternate(Context& ctx, const std::string& label, const RoundFunction& round) {
  std::vector<Side> sides;
  if (ctx.base) sides.push_back(Side{"base", *ctx.base});
  sides.push_back(Side{"self", ctx.self});
  // side -> figure -> one value per round
  std::map<std::string, std::map<std::string, std::vector<double>>> values;
  boost::json::array rounds;
  for (int r = 1; r <= std::max(ctx.rounds, 1); ++r) {
    for (const Side& side : sides) {
      RoundFigures f;
      {
        const InDirectory in(ctx.work_dir + "/" + label + "-" + side.name + "-round" +
                             std::to_string(r));
        f = round(side, r);
      }
      boost::json::object o{{"round", r}, {"side", side.name}};
      for (const auto& [name, value] : f) {
        o[name] = value;
        values[side.name][name].push_back(value);
      }
      rounds.push_back(std::move(o));
      ctx.result.say(round_line(r, side.name, f));
    }
  }
  boost::json::object out{{"rounds", std::move(rounds)}};
  boost::json::object per_side;
  std::map<std::string, std::map<std::string, Stats>> st;
  for (const auto& [side, figures] : values) {
    boost::json::object o;
    for (const auto& [name, list] : figures) {
      const Stats s = stats_of(list);
      st[side][name] = s;
      o[name] = {
          {"mean", s.mean}, {"min", s.min}, {"max", s.max}, {"aa_spread_pct", s.spread_pct()}};
    }
    per_side[side] = std::move(o);
  }
  out["sides"] = std::move(per_side);
  if (!ctx.base) {
    for (const auto& [name, s] : st["self"]) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s: mean %.6g  min %.6g  max %.6g  (spread %.1f%%)",
                    name.c_str(), s.mean, s.min, s.max, s.spread_pct());
      ctx.result.say(buf);
    }
    return out;
  }
  boost::json::object ratio, change, spread, beyond;
  for (const auto& [name, self] : st["self"]) {
    const auto b = st["base"].find(name);
    if (b == st["base"].end() || b->second.mean == 0) continue;
    const double r = self.mean / b->second.mean;
    const double aa = std::max(self.spread_pct(), b->second.spread_pct());
    ratio[name] = r;
    change[name] = 100 * (r - 1);
    spread[name] = aa;
    beyond[name] = std::fabs(100 * (r - 1)) > aa;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%s: base %.6g  self %.6g  self/base %.3f (%+.1f%%; A/A spread %.1f%%: %s)",
                  name.c_str(), b->second.mean, self.mean, r, 100 * (r - 1), aa,
                  std::fabs(100 * (r - 1)) > aa ? "beyond the noise" : "within the noise");
    ctx.result.say(buf);
  }
  out["ratio_self_over_base"] = std::move(ratio);
  out["change_pct"] = std::move(change);
  out["aa_spread_pct"] = std::move(spread);
  out["beyond_noise"] = std::move(beyond);
  return out;
}

}  // namespace imhash::bench
