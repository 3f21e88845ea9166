// Durable files: replacing a small file so that a crash or kill -9 at any instant leaves either the
// old contents or the new, never a torn file (write a temporary file beside it, fsync it, rename it
// over the old one, fsync the directory). The config server's state (config_server/state_store.h)
// and the table a hash or login server keeps in its --state-dir (common/runtime/saved_table.h) are
// written this way.
//
// Plain functions: any thread, but two writers of one path at once would race on its temporary
// file (each caller owns its file).
#pragma once

#include <string>

namespace imhash {

// Makes `dir` (and its parents) if missing; "" or what failed.
std::string make_directory(const std::string& dir);

// Replaces `dir`/`name` with `text` durably (above). Returns "" on success or one sentence saying
// what failed; on failure the old file is untouched and no temporary file is left behind.
std::string replace_file_durably(const std::string& dir, const std::string& name,
                                 const std::string& text);

// Removes the temporary file an interrupted replace_file_durably() of `dir`/`name` left: the rename
// never happened, so the file itself still holds what was last written.
void remove_interrupted_write(const std::string& dir, const std::string& name);

}  // namespace imhash
