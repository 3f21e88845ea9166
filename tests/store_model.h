// StoreModel: a RecordStore driven side by side with a std::unordered_map oracle, for the
// differential unit test (tests/unit/record_store_differential_test.cpp) and the fuzz target
// (tests/fuzz/fuzz_record_store.cpp). Every operation returns "" when the store agreed with the
// oracle, else what differed.
//
// Scans: scan_start() notes every id present; scan_step() runs one bounded store.scan(), checks
// each visited record against the oracle and erases the ones `doomed` picks from both. An id
// present at the start and neither erased nor visited when the scan is done is a skipped record:
// the bug a purge must never have (a record not owned surviving a purge).
//
// Not thread-safe; one test's thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "common/codec/hash.h"
#include "hash_server/record_store.h"

namespace imhash::testing {

inline Endpoint store_ep4(uint64_t i) {
  return Endpoint::v4(0x0a000000u + static_cast<uint32_t>(i & 0xffffff),
                      static_cast<uint16_t>(i * 7));
}
inline Endpoint store_ep6(uint64_t i) {
  std::array<uint8_t, 16> a{0x20, 0x01, 0x0d, 0xb8};
  for (int k = 0; k < 8; ++k) a[8 + k] = static_cast<uint8_t>(i >> (56 - 8 * k));
  return Endpoint::v6(a, static_cast<uint16_t>(i * 13));
}

// The id whose store hash (mix64(id, HashSeed::kStore)) is `h`: fmix64 is a bijection, so ids
// can be made to share any hash prefix (the adversarial case the directory bound guards).
constexpr uint64_t store_id_with_hash(uint64_t h) {
  auto inverse = [](uint64_t c) {  // of an odd c, modulo 2^64 (Newton's iteration)
    uint64_t x = c;
    for (int i = 0; i < 6; ++i) x *= 2 - c * x;
    return x;
  };
  uint64_t k = h;
  k ^= k >> 33;  // a shift by 33 or more is its own inverse
  k *= inverse(0xc4ceb9fe1a85ec53ULL);
  k ^= k >> 33;
  k *= inverse(0xff51afd7ed558ccdULL);
  k ^= k >> 33;
  return k ^ static_cast<uint64_t>(HashSeed::kStore);
}
static_assert(mix64(store_id_with_hash(0x123456789abcdef0ULL), HashSeed::kStore) ==
              0x123456789abcdef0ULL);

class StoreModel {
 public:
  using Record = RecordStore::Record;

  std::string upsert(uint64_t id, const Endpoint& e, uint32_t last_seen) {
    const bool fresh = store_.upsert(id, e, last_seen);
    const bool expected = model_.count(id) == 0;
    model_[id] = Record{e, last_seen};
    if (fresh != expected) return "upsert(" + std::to_string(id) + ") said new=" + b(fresh);
    return "";
  }

  std::string insert_if_absent(uint64_t id, const Endpoint& e, uint32_t last_seen) {
    const bool stored = store_.insert_if_absent(id, e, last_seen);
    const bool expected = model_.emplace(id, Record{e, last_seen}).second;
    if (stored != expected) return "insert_if_absent(" + std::to_string(id) + ") = " + b(stored);
    return "";
  }

  std::string erase(uint64_t id) {
    const bool erased = store_.erase(id);
    const bool expected = model_.erase(id) == 1;
    pending_.erase(id);
    if (erased != expected) return "erase(" + std::to_string(id) + ") = " + b(erased);
    return "";
  }

  std::string get(uint64_t id) const {
    Record r;
    // The shard's two-stage prefetch first: a hint, it must read only memory the store owns
    // (the sanitizer and fuzz runs check that) and change nothing.
    store_.prefetch_group(id);
    store_.prefetch_record(id);
    const bool found = store_.get(id, r);
    const auto it = model_.find(id);
    if (found != (it != model_.end())) return "get(" + std::to_string(id) + ") = " + b(found);
    if (found && !same(r, it->second)) return "get(" + std::to_string(id) + ") wrong record";
    return "";
  }

  void scan_start() {
    cursor_ = RecordStore::ScanCursor{};
    scanning_ = true;
    pending_.clear();
    for (const auto& [id, r] : model_) pending_.insert(id);
  }
  bool scanning() const { return scanning_; }

  // One step of the scan (started if none runs); ends it when the cursor is done.
  template <typename Doomed>
  std::string scan_step(size_t max_slots, Doomed&& doomed) {
    if (!scanning_) scan_start();
    std::string error;
    size_t erased = 0;
    const auto step = store_.scan(cursor_, max_slots, [&](uint64_t id, const Record& r) {
      const auto it = model_.find(id);
      if (it == model_.end()) {
        if (error.empty()) error = "scan visited absent id " + std::to_string(id);
        return false;
      }
      if (!same(r, it->second) && error.empty()) error = "scan saw a wrong record";
      pending_.erase(id);
      if (!doomed(id)) return false;
      model_.erase(it);
      ++erased;
      return true;
    });
    if (!error.empty()) return error;
    if (step.erased != erased) return "scan step miscounted its erases";
    if (step.examined > max_slots) return "scan step examined more slots than allowed";
    if (cursor_.done) {
      scanning_ = false;
      if (!pending_.empty()) {
        return "scan skipped " + std::to_string(pending_.size()) + " records, e.g. id " +
               std::to_string(*pending_.begin());
      }
    }
    return "";
  }

  // Runs a whole scan to its end in steps of `max_slots`.
  template <typename Doomed>
  std::string scan_all(size_t max_slots, Doomed&& doomed) {
    scan_start();
    for (size_t guard = 0; scanning_; ++guard) {
      if (guard > 100 + 4 * store_.capacity()) return "scan does not end";
      if (auto e = scan_step(max_slots, doomed); !e.empty()) return e;
    }
    return "";
  }

  // The store's own invariants, then every record against the oracle.
  std::string check_all() const {
    if (auto e = store_.check(); !e.empty()) return e;
    if (store_.size() != model_.size()) return "size differs from the oracle's";
    for (const auto& [id, rec] : model_) {
      Record r;
      if (!store_.get(id, r)) return "id " + std::to_string(id) + " lost";
      if (!same(r, rec)) return "id " + std::to_string(id) + " has a wrong record";
    }
    return "";
  }

  RecordStore& store() { return store_; }
  const RecordStore& store() const { return store_; }
  size_t size() const { return model_.size(); }
  const std::unordered_map<uint64_t, Record>& records() const { return model_; }

 private:
  static bool same(const Record& a, const Record& b) {
    return a.endpoint == b.endpoint && a.last_seen == b.last_seen;
  }
  static std::string b(bool v) { return v ? "true" : "false"; }

  RecordStore store_;
  std::unordered_map<uint64_t, Record> model_;
  bool scanning_ = false;
  RecordStore::ScanCursor cursor_;
  std::unordered_set<uint64_t> pending_;  // present since scan_start, not yet visited or erased
};

}  // namespace imhash::testing
