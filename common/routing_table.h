// The routing table in one include, for the programs that run from a table: the type and its
// rules (common/table.h), its words in text (common/table_text.h) and its JSON form
// (common/table_json.h). The edits only the config server and imctl make are in
// common/table_edits.h.
#pragma once

#include "common/table.h"
#include "common/table_json.h"
#include "common/table_text.h"
