// The admin API's request handler (docs/admin_api.md): an HTTP method, a request target and a body
// in, an AdminResult (status + JSON body) out. Pure: no sockets, no logging, no exceptions out. It
// routes the request, checks its syntax (JSON body, field types, id ranges, names) and calls the
// one AdminBackend method the endpoint maps to; the backend judges the request against the cluster
// state. A request it rejects (400, 404, 405, 413) never reaches the backend.
//
// Thread rules: a plain function; it calls `backend`, so call it on the thread the backend allows
// (the config server's main io_context thread). The HTTP server (admin_http.h) and the fuzz target
// call it.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/codec/printable.h"
#include "config_server/admin_backend.h"

namespace imhash {

// Routes `method` + `target` ("/v1/history?limit=5") to `backend`. Answers itself:
//   GET /healthz -> 200 {"ok": true} (the backend is not called);
//   400 {"error": "..."} for a bad query, body or field; 404 for an unknown path; 405 for a method
//   the path does not take (see admin_allowed_methods); 413 for a body over kAdminMaxBodyBytes;
//   500 if the backend throws (it should not).
// The backend's own answers (200, 400, 404, 409, 503) are passed through unchanged.
AdminResult handle_admin_request(AdminBackend& backend, boost::beast::http::verb method,
                                 std::string_view target, std::string_view body);

// The methods the path of `target` takes ("GET", "POST" or "GET, POST"), for the Allow header of
// a 405 answer; "" if there is no such endpoint.
std::string_view admin_allowed_methods(std::string_view target);

}  // namespace imhash
