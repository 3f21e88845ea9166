// The status page the config server serves at GET / (source: config_server/web/status.html,
// embedded at build time): the table as a picture of id ranges or ring shares per server, the
// nodes, live rates and purges, refreshing itself from the admin API. Any thread.
#pragma once

namespace imhash {

const char* status_page_html();

}  // namespace imhash
