#include "hash_server/purge.h"

namespace imhash {

using frame::PurgeAction;
using frame::PurgeState;

bool Purge::start(PurgeAction kind, uint32_t age_seconds, const RecordStore& store) {
  if (kind != PurgeAction::kNotOwned && kind != PurgeAction::kOlderThan &&
      kind != PurgeAction::kAll) {
    return false;
  }
  progress_ = {PurgeState::kRunning, kind, 0, store.capacity(), 0};
  age_seconds_ = age_seconds;
  cursor_ = RecordStore::ScanCursor{};
  return true;
}

void Purge::cancel() {
  if (running()) progress_.state = PurgeState::kCancelled;
}

bool Purge::doomed(uint64_t id, const RecordStore::Record& r, const Context& ctx) const {
  switch (progress_.kind) {
    case PurgeAction::kAll:
      return true;
    case PurgeAction::kOlderThan:
      return ctx.now >= r.last_seen && ctx.now - r.last_seen >= age_seconds_;
    case PurgeAction::kNotOwned:
      if (ctx.router == nullptr) return false;
      // A replica's copies are owned too (Router::holds).
      return ctx.self_index < 0 || !ctx.router->holds(id, static_cast<uint32_t>(ctx.self_index));
    default:
      return false;
  }
}

size_t Purge::step(RecordStore& store, size_t batch_slots, const Context& ctx) {
  if (!running()) return 0;
  const RecordStore::ScanStep done =
      store.scan(cursor_, batch_slots,
                 [&](uint64_t id, const RecordStore::Record& r) { return doomed(id, r, ctx); });
  progress_.scanned += done.examined;
  progress_.deleted += done.erased;
  progress_.total = progress_.scanned + store.slots_ahead(cursor_);
  if (cursor_.done) progress_.state = PurgeState::kDone;
  return done.erased;
}

}  // namespace imhash
