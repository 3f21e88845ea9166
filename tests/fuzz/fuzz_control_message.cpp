// Fuzz target for the config-server link codec (common/routing/control_protocol.h).
// An input starting with '{' or whitespace is one JSON body (framed here, so mutations reach the
// JSON reader); anything else is a byte stream of frames. Invariants, checked with abort():
//   - next_message never throws; `consumed` is 0 for kNeedMore and kTooLarge, exactly one frame
//     otherwise, and never more than the input; an error always comes with a reason;
//   - kTooLarge exactly when the length prefix is above kMaxMessageSize;
//   - every message that decodes re-encodes to one frame that decodes to an equal message (stats
//     fractions within a rounding error: Boost 1.81 does not read every double back exactly), and
//     re-encoding that gives the same bytes when no fraction is involved.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "common/codec/bytes.h"
#include "common/routing/control_protocol.h"

using namespace imhash::control;

namespace {

[[noreturn]] void violated(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_control_message: invariant violated: %s %s\n", what, detail.c_str());
  std::abort();
}

bool has_fraction(const Message& m) {
  const auto* hb = std::get_if<Heartbeat>(&m);
  if (!hb) return false;
  for (const auto& entry : hb->stats) {
    if (entry.value().is_double()) return true;
  }
  return false;
}

bool close_enough(const boost::json::value& a, const boost::json::value& b) {
  if (a == b) return true;
  if (!a.is_double() || !b.is_double()) return false;
  const double x = a.get_double(), y = b.get_double();
  const double diff = std::fabs(x - y);
  return diff <= 1e-14 * std::fmax(std::fabs(x), std::fabs(y)) || diff <= 1e-300;
}

bool same(const Message& a, const Message& b) {
  const auto* ha = std::get_if<Heartbeat>(&a);
  const auto* hb = std::get_if<Heartbeat>(&b);
  if (!ha || !hb) return a == b;
  if (ha->version != hb->version || ha->stats.size() != hb->stats.size()) return false;
  for (const auto& entry : ha->stats) {
    const boost::json::value* other = hb->stats.if_contains(entry.key());
    if (!other || !close_enough(entry.value(), *other)) return false;
  }
  return true;
}

DecodeStatus decode(std::span<const uint8_t> in, Message& m, size_t& used, std::string& error) {
  try {
    return next_message(in, m, used, error);
  } catch (const std::exception& e) {
    violated("next_message threw", e.what());
  }
}

void round_trip(const Message& first) {
  std::vector<uint8_t> again;
  append_message(first, again);
  Message second;
  size_t used = 0;
  std::string error;
  const DecodeStatus st = decode(again, second, used, error);
  if (st != DecodeStatus::kOk) violated("re-encoded message does not decode", error);
  if (used != again.size()) violated("re-encoded message is not one frame");
  if (!same(first, second)) violated("round trip changed the message", type_name(first));
  if (!has_fraction(first)) {
    std::vector<uint8_t> third;
    append_message(second, third);
    if (third != again) violated("encoding is not stable", type_name(first));
  }
}

void check_stream(std::span<const uint8_t> in) {
  while (!in.empty()) {
    Message m;
    size_t used = 12345;
    std::string error;
    const DecodeStatus st = decode(in, m, used, error);
    const bool big =
        in.size() >= kLengthPrefixSize && imhash::bytes::get_u32(in.data()) > kMaxMessageSize;
    if ((st == DecodeStatus::kTooLarge) != big) violated("kTooLarge disagrees with the prefix");
    if (st == DecodeStatus::kNeedMore || st == DecodeStatus::kTooLarge) {
      if (used != 0) violated("consumed bytes without a whole frame");
      if (st == DecodeStatus::kTooLarge && error.empty()) violated("kTooLarge without a reason");
      return;
    }
    if (used > in.size()) violated("consumed more than the input");
    if (used != kLengthPrefixSize + imhash::bytes::get_u32(in.data())) {
      violated("consumed is not one frame");
    }
    if (st == DecodeStatus::kOk) {
      round_trip(m);
    } else if (error.empty()) {
      violated("an error without a reason");
    }
    in = in.subspan(used);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 0 && (data[0] == '{' || data[0] == ' ' || data[0] == '\n')) {
    if (size > kMaxMessageSize) return 0;
    std::vector<uint8_t> framed(kLengthPrefixSize + size);
    imhash::bytes::put_u32(framed.data(), static_cast<uint32_t>(size));
    std::copy(data, data + size, framed.begin() + kLengthPrefixSize);
    check_stream(framed);
  } else {
    check_stream({data, size});
  }
  return 0;
}
