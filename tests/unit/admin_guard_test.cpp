#include "admin_api/admin_guard.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

using namespace imhash;
using boost::beast::http::verb;

namespace {

unsigned status_of(const AdminGuard& g, verb method, AdminRequestHeaders h) {
  const auto r = g.check(method, h);
  return r ? r->status : 200;
}

}  // namespace

TEST_CASE("admin_guard: the Host must be this API's address (DNS rebinding is refused)") {
  const AdminGuard g("127.0.0.1:7100", {"admin.example:7100"}, "");
  for (const char* ok : {"127.0.0.1:7100", "localhost:7100", "LOCALHOST:7100", "[::1]:7100",
                         "127.0.0.1", "localhost", "admin.example:7100"}) {
    CAPTURE(ok);
    CHECK(status_of(g, verb::get, {.host = ok}) == 200);
  }
  // No Host at all (HTTP/1.0): not a browser, so not a rebinding; the token guards changes.
  CHECK(status_of(g, verb::get, {}) == 200);
  for (const char* bad :
       {"evil.example:7100", "evil.example", "127.0.0.1:7101", "x", "admin.example:80"}) {
    CAPTURE(bad);
    CHECK(status_of(g, verb::get, {.host = bad}) == 403);
  }
  // Bound to another address: that address, not the loopback names.
  const AdminGuard lan("10.0.0.10:7100", {}, "");
  CHECK(status_of(lan, verb::get, {.host = "10.0.0.10:7100"}) == 200);
  CHECK(status_of(lan, verb::get, {.host = "localhost:7100"}) == 403);
}

TEST_CASE("admin_guard: a foreign Origin is refused, the API's own is not") {
  const AdminGuard g("127.0.0.1:7100", {}, "");
  const AdminRequestHeaders own{.host = "127.0.0.1:7100",
                                .origin = "http://127.0.0.1:7100",
                                .content_type = "application/json"};
  CHECK(status_of(g, verb::post, own) == 200);
  CHECK(status_of(g, verb::get, {.host = "127.0.0.1:7100", .origin = "http://evil.example"}) ==
        403);
  CHECK(status_of(g, verb::post,
                  {.host = "127.0.0.1:7100",
                   .origin = "http://evil.example",
                   .content_type = "application/json"}) == 403);
  CHECK(
      status_of(g, verb::post,
                {.host = "127.0.0.1:7100", .origin = "null", .content_type = "application/json"}) ==
      403);
}

TEST_CASE("admin_guard: a state change needs Content-Type application/json (no cross-site forms)") {
  const AdminGuard g("127.0.0.1:7100", {}, "");
  CHECK(status_of(g, verb::post, {.host = "127.0.0.1:7100", .content_type = "text/plain"}) == 415);
  CHECK(status_of(g, verb::post, {.host = "127.0.0.1:7100"}) == 415);
  CHECK(status_of(g, verb::post,
                  {.host = "127.0.0.1:7100",
                   .content_type = "application/x-www-form-urlencoded"}) == 415);
  CHECK(status_of(g, verb::post,
                  {.host = "127.0.0.1:7100", .content_type = "Application/JSON; charset=utf-8"}) ==
        200);
  CHECK(status_of(g, verb::get, {.host = "127.0.0.1:7100"}) == 200);  // reads need none
}

TEST_CASE("admin_guard: with a token, state changes need it, reads do not") {
  const AdminGuard g("127.0.0.1:7100", {}, "s3cret-token-0123456789");
  const auto post = [&](std::string_view auth) {
    return status_of(
        g, verb::post,
        {.host = "127.0.0.1:7100", .content_type = "application/json", .authorization = auth});
  };
  CHECK(post("Bearer s3cret-token-0123456789") == 200);
  CHECK(post("bearer s3cret-token-0123456789") == 200);
  CHECK(post("") == 401);
  CHECK(post("Bearer ") == 401);
  CHECK(post("Bearer s3cret-token-012345678") == 401);
  CHECK(post("Bearer s3cret-token-01234567890") == 401);
  CHECK(post("Basic s3cret-token-0123456789") == 401);
  CHECK(status_of(g, verb::get, {.host = "127.0.0.1:7100"}) == 200);
  CHECK(g.has_token());
}

TEST_CASE("admin_guard: token files are checked like key files") {
  const std::string path = "admin_token." + std::to_string(getpid());
  std::ofstream(path) << "  0123456789abcdef-token \n";
  ::chmod(path.c_str(), 0600);
  CHECK(load_admin_token_file(path) == "0123456789abcdef-token");
  ::chmod(path.c_str(), 0644);
  CHECK_THROWS_WITH_AS(load_admin_token_file(path), doctest::Contains("accessible by other users"),
                       std::exception);
  std::ofstream(path) << "short\n";
  ::chmod(path.c_str(), 0600);
  CHECK_THROWS_WITH_AS(load_admin_token_file(path), doctest::Contains("shorter than 16"),
                       std::exception);
  std::ofstream(path) << "two words here, long enough\n";
  CHECK_THROWS_WITH_AS(load_admin_token_file(path), doctest::Contains("one word"), std::exception);
  ::unlink(path.c_str());
  CHECK_THROWS_WITH_AS(load_admin_token_file(path), doctest::Contains("cannot open"),
                       std::exception);
}
