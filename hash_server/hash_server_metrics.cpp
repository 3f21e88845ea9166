// HashServer's /metrics: the server's figures, then each shard's from its latest sampled snapshot
// (sample_shards), as the Prometheus text format; hash_server/hash_metrics.h declares them.
#include "hash_server/hash_metrics.h"
#include "hash_server/hash_server.h"

namespace imhash {

void HashServer::render_metrics(MetricsText& m) const {
  namespace hm = hash_metrics;
  m.add(node_metrics::kTableVersion, static_cast<double>(table_version_));
  m.add(hm::kAuthRefusedTotal, static_cast<double>(auth_refused_));
  m.add(hm::kTlsRefusedTotal, static_cast<double>(tls_refused_));
  m.add(hm::kConnectionsRefusedTotal, static_cast<double>(refused_total_cap_),
        {{"limit", "total"}});
  m.add(hm::kConnectionsRefusedTotal, static_cast<double>(refused_source_cap_),
        {{"limit", "source"}});
  m.add(hm::kOpenConnections, static_cast<double>(quota_.open()));
  m.add(hm::kStreamBatchesRetriedTotal, static_cast<double>(sender_->retries()));
  m.add(hm::kStreamBatchesQueued, static_cast<double>(sender_->queued()));
  m.add(hm::kStreamRecordsPerSecond, static_cast<double>(stream_rate_));
  m.add(hm::kFilling, filling_ ? 1 : 0);
  for (const auto& s : snapshots_) {
    const std::string shard_number = std::to_string(s.shard);
    const MetricsText::Labels shard{{"shard", shard_number}};
    m.add(hm::kRecords, static_cast<double>(s.records), shard);
    m.add(hm::kMemoryBytes, static_cast<double>(s.memory_bytes), shard);
    m.add(hm::kConnections, static_cast<double>(s.connections), shard);
    for (const auto& [op, n] :
         {std::pair{"upsert", s.counters.upserts}, std::pair{"get", s.counters.gets},
          std::pair{"delete", s.counters.deletes}}) {
      m.add(hm::kRequestsTotal, static_cast<double>(n), {{"shard", shard_number}, {"op", op}});
    }
    m.add(hm::kTlsConnections, static_cast<double>(s.tls_connections), shard);
    m.add(hm::kTlsHandshakeFailuresTotal, static_cast<double>(s.counters.tls_failures), shard);
    m.add(hm::kMovedTotal, static_cast<double>(s.counters.moved), shard);
    m.add(hm::kBadFramesTotal, static_cast<double>(s.counters.bad_frames), shard);
    m.add(hm::kPurgedTotal, static_cast<double>(s.counters.purged), shard);
    m.add(hm::kLongestTurnSeconds, static_cast<double>(s.turns.longest_ns) * 1e-9, shard);
    m.histogram(hm::kTurnSeconds, s.turns.seconds, shard);
    m.add(hm::kStreamRunning, s.stream.state == Handoff::State::kRunning ? 1 : 0, shard);
    m.add(hm::kStreamVersion, static_cast<double>(s.stream.version), shard);
    m.add(hm::kStreamScannedSlots, static_cast<double>(s.stream.scanned), shard);
    m.add(hm::kStreamTotalSlots, static_cast<double>(s.stream.total), shard);
    m.add(hm::kStreamRecordsSent, static_cast<double>(s.stream.acked), shard);
    for (const auto& [result, n] : {std::pair{"stored", s.counters.imported},
                                    std::pair{"newer", s.counters.import_skipped_newer},
                                    std::pair{"deleted", s.counters.import_skipped_deleted},
                                    std::pair{"wrong_shard", s.counters.import_wrong_shard},
                                    std::pair{"not_held", s.counters.import_not_held}}) {
      m.add(hm::kImportRecordsTotal, static_cast<double>(n),
            {{"shard", shard_number}, {"result", result}});
    }
    m.add(hm::kRepairsSkippedDeletedTotal, static_cast<double>(s.counters.repairs_skipped_deleted),
          shard);
    m.add(hm::kWritesSupersededTotal, static_cast<double>(s.counters.writes_superseded), shard);
    m.add(hm::kTombstones, static_cast<double>(s.tombstones), shard);
    m.add(hm::kNotReadyTotal, static_cast<double>(s.counters.not_ready), shard);
    m.add(hm::kTombstonesDroppedTotal, static_cast<double>(s.counters.tombstones_dropped), shard);
    m.add(hm::kPurgeRunning, s.purge.state == frame::PurgeState::kRunning ? 1 : 0, shard);
    m.add(hm::kPurgeScannedSlots, static_cast<double>(s.purge.scanned), shard);
    m.add(hm::kPurgeTotalSlots, static_cast<double>(s.purge.total), shard);
    m.add(hm::kPurgeDeleted, static_cast<double>(s.purge.deleted), shard);
  }
}

}  // namespace imhash
