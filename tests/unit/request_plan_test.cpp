#include "login_server/request_plan.h"

#include <doctest/doctest.h>

#include <vector>

using namespace imhash;
using client::Op;
using client::Status;

namespace {

std::vector<uint8_t> request(Op op, uint64_t user, std::optional<Endpoint> ep = std::nullopt,
                             size_t pad_to = client::kMinDatagram) {
  client::Message m;
  m.op = op;
  m.request_id = 77;
  m.user_id = user;
  m.endpoint = ep;
  std::vector<uint8_t> out(2048);
  out.resize(client::encode_request(m, out, pad_to));
  REQUIRE(!out.empty());
  return out;
}

const Endpoint kSource = Endpoint::v4(0x7f000001, 40000);

struct Planned {
  Plan plan;
  std::vector<uint8_t> reply;
};

Planned plan(const std::vector<uint8_t>& datagram, const Endpoint& source = kSource) {
  Planned p;
  p.reply.resize(client::kMinDatagram);
  p.plan = plan_request(datagram, source, 9, p.reply);
  p.reply.resize(p.plan.reply_size);
  return p;
}

client::Message decode_reply(const std::vector<uint8_t>& bytes) {
  auto d = client::decode_response(bytes);
  REQUIRE(d.error == client::DecodeError::kOk);
  return d.msg;
}

}  // namespace

TEST_CASE("request_plan: short datagrams and wrong magic are dropped without a reply") {
  auto ok = request(Op::kPing, 0);
  for (size_t len = 0; len < client::kMinDatagram; ++len) {
    auto p = plan(std::vector<uint8_t>(ok.begin(), ok.begin() + static_cast<ptrdiff_t>(len)));
    CHECK(p.plan.kind == Plan::kDrop);
    CHECK(p.plan.drop == DropReason::kTooShort);
  }
  auto bad_magic = ok;
  bad_magic[0] = 'X';
  CHECK(plan(bad_magic).plan.kind == Plan::kDrop);
  CHECK(plan(bad_magic).plan.drop == DropReason::kBadMagic);
}

TEST_CASE("request_plan: PING is answered locally with the table version") {
  auto p = plan(request(Op::kPing, 0));
  REQUIRE(p.plan.kind == Plan::kReply);
  CHECK(p.reply.size() <= client::kMinDatagram);
  auto r = decode_reply(p.reply);
  CHECK(r.op == Op::kPing);
  CHECK(r.request_id == 77);
  CHECK(r.table_version == 9u);
}

TEST_CASE("request_plan: wrong version gets UNSUPPORTED_VERSION, malformed gets BAD_REQUEST") {
  auto v2 = request(Op::kLogin, 5);
  v2[2] = 2;
  auto p = plan(v2);
  REQUIRE(p.plan.kind == Plan::kReply);
  CHECK(p.plan.status == Status::kUnsupportedVersion);
  CHECK(p.reply.size() == client::kHeaderSize);
  CHECK(p.reply[16] == static_cast<uint8_t>(Status::kUnsupportedVersion));

  auto longer = request(Op::kLookup, 5);
  longer.push_back(0);  // length no longer matches body_len
  p = plan(longer);
  REQUIRE(p.plan.kind == Plan::kReply);
  CHECK(p.plan.status == Status::kBadRequest);
  CHECK(p.reply.size() == client::kHeaderSize);

  auto unknown_op = request(Op::kLookup, 5);
  unknown_op[3] = 9;
  p = plan(unknown_op);
  CHECK(p.plan.status == Status::kBadRequest);
  CHECK(p.reply.size() <= unknown_op.size());
}

TEST_CASE("request_plan: LOGIN stores the ENDPOINT given, or the observed source") {
  const Endpoint given = Endpoint::v4(0x0a000001, 7000);
  auto p = plan(request(Op::kLogin, 42, given));
  REQUIRE(p.plan.kind == Plan::kForward);
  CHECK(p.plan.frame_type == frame::FrameType::kUpsert);
  CHECK(p.plan.ask.endpoint == given);
  CHECK(p.plan.ask.user_id == 42);

  p = plan(request(Op::kHeartbeat, 42));
  CHECK(p.plan.ask.endpoint == kSource);

  // A client seen through a dual-stack socket is stored as IPv4.
  std::array<uint8_t, 16> mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  p = plan(request(Op::kLogin, 42), Endpoint::v6(mapped, 5));
  CHECK(p.plan.ask.endpoint == Endpoint::v4(0xc0000201, 5));
}

TEST_CASE("request_plan: an ENDPOINT no client can be reached at is BAD_REQUEST, not stored") {
  std::array<uint8_t, 16> v6_zero{},
      v6_multicast{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const std::array<uint8_t, 16> v6_ok{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  for (const Endpoint& bad :
       {Endpoint::v4(0x0a000001, 0), Endpoint::v4(0, 7000), Endpoint::v4(0xe0000001, 7000),
        Endpoint::v4(0xefffffff, 7000), Endpoint::v4(0xffffffff, 7000), Endpoint::v6(v6_zero, 7000),
        Endpoint::v6(v6_multicast, 7000), Endpoint::v6(v6_ok, 0)}) {
    CAPTURE(bad.to_string());
    CHECK(unreachable_endpoint_reason(bad) != nullptr);
    for (const Op op : {Op::kLogin, Op::kHeartbeat}) {
      const auto p = plan(request(op, 42, bad));
      REQUIRE(p.plan.kind == Plan::kReply);
      CHECK(p.plan.status == Status::kBadRequest);
      CHECK(p.reply.size() == client::kHeaderSize);
    }
  }
  for (const Endpoint& good : {Endpoint::v4(0x0a000001, 1), Endpoint::v4(0xdfffffff, 65535),
                               Endpoint::v4(0xf0000001, 7000), Endpoint::v6(v6_ok, 7000)}) {
    CAPTURE(good.to_string());
    CHECK(unreachable_endpoint_reason(good) == nullptr);
    CHECK(plan(request(Op::kLogin, 42, good)).plan.kind == Plan::kForward);
  }
}

TEST_CASE("request_plan: LOOKUP and LOGOUT become GET and DELETE") {
  CHECK(plan(request(Op::kLookup, 1)).plan.frame_type == frame::FrameType::kGet);
  CHECK(plan(request(Op::kLogout, 1)).plan.frame_type == frame::FrameType::kDelete);
}

TEST_CASE("request_plan: replies from hash server answers never exceed the request") {
  ClientAsk ask{Op::kLookup, 3, 99, 48, {}};
  frame::Response ok{.type = frame::FrameType::kGet};
  ok.endpoint = Endpoint::v6({0x20, 1, 0xd, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 1);
  ok.age_seconds = 12;
  std::vector<uint8_t> buf(client::kMinDatagram);
  Status st;
  size_t n = reply_from_response(ask, ok, buf, st);
  CHECK(st == Status::kOk);
  CHECK(n <= 48);
  auto r = decode_reply({buf.begin(), buf.begin() + static_cast<ptrdiff_t>(n)});
  CHECK(r.endpoint == ok.endpoint);
  CHECK(r.age == 12u);
  CHECK(r.user_id == 99);

  frame::Response missing{.type = frame::FrameType::kGet, .status = frame::FrameStatus::kNotFound};
  n = reply_from_response(ask, missing, buf, st);
  CHECK(st == Status::kNotFound);
  CHECK(n == client::kHeaderSize);

  // A retried LOGOUT whose first try already deleted the record still reads OK.
  ClientAsk logout{Op::kLogout, 4, 99, 48, {}};
  frame::Response gone{.type = frame::FrameType::kDelete, .status = frame::FrameStatus::kNotFound};
  reply_from_response(logout, gone, buf, st);
  CHECK(st == Status::kOk);

  ClientAsk login{Op::kLogin, 5, 99, 48, Endpoint::v4(1, 2)};
  frame::Response stored{.type = frame::FrameType::kUpsert};
  n = reply_from_response(login, stored, buf, st);
  CHECK(decode_reply({buf.begin(), buf.begin() + static_cast<ptrdiff_t>(n)}).endpoint ==
        Endpoint::v4(1, 2));

  frame::Response refused{.type = frame::FrameType::kUpsert,
                          .status = frame::FrameStatus::kWrongShard};
  reply_from_response(login, refused, buf, st);
  CHECK(st == Status::kUnavailable);

  n = reply_with_status(ask, Status::kTimeout, buf);
  CHECK(n == client::kHeaderSize);
  CHECK(buf[16] == static_cast<uint8_t>(Status::kTimeout));
}
