#include "tools/bench/background_sim.h"

#include <filesystem>
#include <stdexcept>

#include "harness/log_file.h"
#include "harness/wait_until.h"
#include "tools/bench/sim.h"

namespace imhash::bench {

namespace {

std::vector<std::string> with_csv(std::vector<std::string> args, const std::string& csv) {
  args.insert(args.end(), {"--csv", csv});
  return args;
}

}  // namespace

BackgroundSim::BackgroundSim(const std::string& udp_sim, std::vector<std::string> args,
                             const std::string& name, double own_s, std::chrono::milliseconds slack)
    : csv_(std::filesystem::absolute(name + ".csv").string()),
      own_s_(own_s),
      slack_(slack),
      sim_(with_csv(std::move(args), csv_), {.udp_sim = udp_sim, .name = name}) {}

void BackgroundSim::wait_first_second() {
  // udp_sim writes the header at its start and a row (flushed) after each measured second.
  const auto rows = [&] {
    const std::string text = test::file_text(csv_);
    size_t lines = 0;
    for (char c : text) lines += c == '\n';
    return lines >= 2;
  };
  const auto bound = slack_ + std::chrono::milliseconds(static_cast<int64_t>(own_s_ * 1000));
  if (!test::wait_until(rows, bound, std::chrono::milliseconds(20))) {
    throw std::runtime_error("udp_sim wrote no per-second row to " + csv_);
  }
}

test::UdpSimSummary BackgroundSim::wait() {
  return sim_.wait(slack_ + std::chrono::milliseconds(static_cast<int64_t>(own_s_ * 1000)));
}

boost::json::object BackgroundSim::series() const { return read_sim_csv(csv_); }

}  // namespace imhash::bench
