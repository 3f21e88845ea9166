// Fuzz target for the login<->hash frame decoder (common/codec/frame_protocol.h).
// Invariants: the stream splitter never reads past its input and consumes exactly one frame;
// every request or response that decodes re-encodes to bytes that decode to an equal value;
// peek_request_id (the prefetch pass) agrees with decode_request on every request that decodes;
// the records of an IMPORT that decodes walk (next_import_record) to exactly its count of valid
// records, which append_import_record writes back to the same bytes.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "common/codec/frame_protocol.h"

using namespace imhash::frame;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

template <typename Msg, typename Decode, typename Append>
void round_trip(const Header& h, std::span<const uint8_t> body, Decode decode, Append append) {
  Msg first;
  if (decode(h, body, first) != DecodeStatus::kOk) return;
  std::vector<uint8_t> again;
  append(first, again);
  Header h2;
  std::span<const uint8_t> body2;
  size_t used = 0;
  check(next_frame(again, h2, body2, used) == DecodeStatus::kOk);
  check(used == again.size());
  Msg second;
  check(decode(h2, body2, second) == DecodeStatus::kOk);
  check(first == second);
}

void check_import(const Request& q) {
  std::string_view rest = q.records;
  std::vector<uint8_t> again;
  ImportRecord r;
  size_t n = 0;
  while (next_import_record(rest, r)) {
    check(r.endpoint.valid());
    append_import_record(r, again);
    ++n;
  }
  check(n == q.record_count && n <= kMaxImportRecords && rest.empty());
  check(std::string_view(reinterpret_cast<const char*>(again.data()), again.size()) == q.records);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  while (!in.empty()) {
    Header h;
    std::span<const uint8_t> body;
    size_t used = 0;
    const DecodeStatus st = next_frame(in, h, body, used);
    if (st != DecodeStatus::kOk) {
      check(used == 0);
      break;
    }
    check(used >= kHeaderSize && used <= in.size() && used <= 4 + size_t{kMaxFrameLength});
    check(body.data() == in.data() + kHeaderSize && body.size() == used - kHeaderSize);
    round_trip<Request>(h, body, decode_request, append_request);
    const auto peeked = peek_request_id(h, body);
    if (Request q; decode_request(h, body, q) == DecodeStatus::kOk) {
      check(peeked.has_value() == is_keyed(q.type) && (!peeked || *peeked == q.id));
      if (q.type == FrameType::kImport) check_import(q);
    }
    round_trip<Response>(h, body, decode_response, append_response);
    in = in.subspan(used);
  }
  return 0;
}
