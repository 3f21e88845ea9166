// Fuzz target for the record store (hash_server/record_store.h): the input is a sequence of
// operations (upserts and inserts of both address families, erases, lookups, bounded scan steps
// that erase, bulk inserts that grow and split segments, bulk erases that shrink them, and ids
// crafted to share a hash prefix), run side by side with the std::unordered_map oracle of
// tests/store_model.h. Invariants: every answer agrees with the oracle; no scan skips a record
// present throughout it; the store's own structure checks (RecordStore::check) hold.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "tests/store_model.h"

using imhash::testing::store_ep4;
using imhash::testing::store_ep6;
using imhash::testing::store_id_with_hash;
using imhash::testing::StoreModel;

namespace {

constexpr size_t kMaxRecords = 40000;  // keeps each input fast

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  bool empty() const { return pos_ >= in_.size(); }
  uint8_t u8() { return pos_ < in_.size() ? in_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }

 private:
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

void require(const std::string& error) {
  if (error.empty()) return;
  std::fprintf(stderr, "record store disagrees with the oracle: %s\n", error.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in({data, size});
  StoreModel m;
  uint32_t t = 0;
  for (size_t op = 0; !in.empty(); ++op) {
    const uint8_t code = in.u8();
    const bool v6 = code & 0x80;
    const auto ep = [v6](uint64_t id) { return v6 ? store_ep6(id) : store_ep4(id); };
    ++t;
    switch (code % 11) {
      case 0:
      case 1:
      case 2: {
        const uint64_t id = in.u16() % 4096;
        require(m.upsert(id, ep(id + t), t));
        break;
      }
      case 3: {
        const uint64_t id = in.u16() % 4096;
        require(m.insert_if_absent(id, ep(id), t));
        break;
      }
      case 4:
      case 5:
        require(m.erase(in.u16() % 4096));
        break;
      case 6:
        require(m.get(in.u16() % 4096));
        break;
      case 7: {
        const size_t slots = 1 + size_t{in.u8()} * 8;
        const uint8_t k = in.u8() % 4;
        require(m.scan_step(slots, [k](uint64_t id) { return id % 4 == k; }));
        break;
      }
      case 8: {  // a run of fresh ids: grows, rehashes and splits segments
        const uint64_t count = size_t{in.u8()} * 64;
        const uint64_t base = 100000 + uint64_t{in.u16()} * 65536;
        for (uint64_t i = 0; i < count && m.size() < kMaxRecords; ++i) {
          require(m.upsert(base + i, ep(base + i), t));
        }
        break;
      }
      case 9: {  // erase a share of what is stored: shrinks segments
        const size_t keep_one_in = 1 + in.u8() % 16;
        std::vector<uint64_t> ids;
        size_t i = 0;
        for (const auto& [id, r] : m.records()) {
          if (i++ % keep_one_in != 0) ids.push_back(id);
        }
        for (uint64_t id : ids) require(m.erase(id));
        break;
      }
      case 10: {  // ids sharing the top 20 bits of their hash: splits cannot separate them
        const uint64_t count = size_t{in.u8()} * 16;
        const uint64_t prefix = uint64_t{in.u8()} << 56;
        for (uint64_t i = 0; i < count && m.size() < kMaxRecords; ++i) {
          const uint64_t low = (i + t * 0x10000ULL) * 0x9e3779b97f4a7c15ULL >> 20;
          const uint64_t id = store_id_with_hash(prefix | low);
          require(m.upsert(id, ep(id), t));
        }
        break;
      }
    }
    if (op % 64 == 63) require(m.check_all());
  }
  // Finish any scan that is running: it must not have skipped a record.
  while (m.scanning()) require(m.scan_step(512, [](uint64_t) { return false; }));
  require(m.check_all());
  return 0;
}
