// Fuzz target for the client protocol codec (common/codec/client_protocol.h). Beyond "no crash", it
// checks:
// - a datagram that decodes OK re-encodes, and the re-encoding decodes OK to an equal Message;
//   re-encoding that is byte-identical (the encoders are canonical);
// - a re-encoded response is never larger than the datagram it came from; a re-encoded request is
//   padded to max(original size, 48), or one byte more when only a 1-byte shortfall was left;
// - encoding into a buffer one byte too small writes nothing and returns 0;
// - a request decodes OK, or is answered, only when it is at least 48 bytes; the error reply is
//   exactly 20 bytes, never larger than the request, and echoes its op and request_id.
// Seeds: corpus/fuzz_client_codec/, made by make_client_seeds.py.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/codec/client_protocol.h"

namespace {

using namespace imhash::client;

void require(bool ok) {
  if (!ok) __builtin_trap();
}

std::vector<uint8_t> encode(const Message& m, bool response, size_t pad_to, size_t capacity) {
  std::vector<uint8_t> out(capacity);  // exact size, so ASan sees any write past it
  const size_t n = response ? encode_response(m, out) : encode_request(m, out, pad_to);
  out.resize(n);
  return out;
}

void check_round_trip(const Decoded& d, std::span<const uint8_t> in, bool response) {
  require(d.header_valid);
  require(in.size() == kHeaderSize + d.header.body_len);
  require(response || in.size() >= kMinDatagram);
  require(d.msg.response == response);

  const size_t pad_to = response ? 0 : std::max(in.size(), kMinDatagram);
  // Room for exactly what the invariants allow: more would make the encoder return 0.
  const size_t room = response ? in.size() : pad_to + 1;
  const std::vector<uint8_t> once = encode(d.msg, response, pad_to, room);
  require(!once.empty());
  if (response) {
    require(once.size() <= in.size());
  } else {
    require(once.size() == pad_to || once.size() == pad_to + 1);
  }

  const Decoded again = response ? decode_response(once) : decode_request(once);
  require(again.error == DecodeError::kOk);
  require(again.msg == d.msg);

  const std::vector<uint8_t> twice = encode(again.msg, response, pad_to, room);
  require(twice == once);

  // One byte short of room: nothing encoded.
  const std::vector<uint8_t> small = encode(d.msg, response, pad_to, once.size() - 1);
  require(small.empty());
}

void check_error(const Decoded& d, std::span<const uint8_t> in, bool response) {
  require(d.error != DecodeError::kOk);
  const std::optional<Status> status = error_reply_status(d.error);
  if (!response && status) {
    // The server answers: the request was well framed and big enough to pay for the answer.
    require(d.header_valid);
    require(in.size() >= kMinDatagram);
  }
  if (!d.header_valid) {
    require(d.error == DecodeError::kTooShort || d.error == DecodeError::kBadMagic);
    return;
  }
  std::vector<uint8_t> reply(kHeaderSize);
  const size_t n = encode_error_reply(d.header, status.value_or(Status::kBadRequest), reply);
  require(n == kHeaderSize);
  require(n <= in.size());
  std::vector<uint8_t> small(kHeaderSize - 1);
  require(encode_error_reply(d.header, Status::kBadRequest, small) == 0);

  const Decoded r = decode_response(reply);
  require(r.header_valid);
  require(r.header.version == kVersion);
  require(r.header.request_id == d.header.request_id);
  require(r.header.user_id == d.header.user_id);
  require(r.header.body_len == 0);
  require(r.header.op() == d.header.op());
  if (is_known(d.header.op())) {
    require(r.error == DecodeError::kOk);
    require(r.msg.op == d.header.op());
    require(r.msg.status == status.value_or(Status::kBadRequest));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  for (bool response : {false, true}) {
    const Decoded d = response ? decode_response(in) : decode_request(in);
    if (d.error == DecodeError::kOk) {
      check_round_trip(d, in, response);
    } else {
      check_error(d, in, response);
    }
  }
  return 0;
}
