// Credentials for a cluster started off loopback, where the daemons need them (docs/security.md
// §5): a cluster key and an admin token, each in a file only its owner may read (the daemons
// refuse looser key files). Used from the test's thread.
#pragma once

#include <string>

namespace imhash::test {

// Writes `text` to a new file at `path` with mode 0600, replacing what was there; throws
// std::runtime_error naming the file if it cannot.
void write_private(const std::string& path, const std::string& text);

// 64 random hex digits: a cluster key (--cluster-key-file).
std::string random_hex_key();

// A cluster key and an admin token in files of the current run's directory (harness/run_logs.h),
// named after `who`: what ConfigClusterOptions::cluster_key_file and ::admin_token_file take.
struct ClusterSecrets {
  std::string key_file;
  std::string token_file;
};
ClusterSecrets make_cluster_secrets(const std::string& who);

}  // namespace imhash::test
