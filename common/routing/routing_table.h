// The routing table in one include, for the programs that run from a table: the type and its
// rules (common/routing/table.h), its words in text (common/routing/table_text.h) and its JSON form
// (common/routing/table_json.h). The edits only the config server and imctl make are in
// config_server/table_edits.h.
#pragma once

#include "common/routing/table.h"
#include "common/routing/table_json.h"
#include "common/routing/table_text.h"
