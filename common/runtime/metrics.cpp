#include "common/runtime/metrics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cmath>
#include <cstdio>

#include "common/codec/endpoint.h"
#include "common/runtime/process_metrics.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace imhash {

namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.9g", v);
  }
  return buf;
}

std::string escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

void MetricsText::header(std::string_view name, std::string_view help, std::string_view type) {
  if (std::find(declared_.begin(), declared_.end(), name) != declared_.end()) return;
  declared_.emplace_back(name);
  out_ += "# HELP " + std::string(name) + " " + std::string(help) + "\n";
  out_ += "# TYPE " + std::string(name) + " " + std::string(type) + "\n";
}

void MetricsText::sample(std::string_view name, double value, const Labels& labels) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) out_ += ',';
      out_ += labels[i].first + "=\"" + escape(labels[i].second) + "\"";
    }
    out_ += '}';
  }
  out_ += ' ' + number(value) + '\n';
}

void MetricsText::add(const MetricDef& metric, double value, const Labels& labels) {
  header(metric.name, metric.help, metric.type == MetricDef::Type::kCounter ? "counter" : "gauge");
  sample(metric.name, value, labels);
}

void MetricsText::histogram_samples(const MetricDef& metric, std::span<const double> bounds,
                                    std::span<const uint64_t> counts, double sum,
                                    const Labels& labels) {
  header(metric.name, metric.help, "histogram");
  const std::string base(metric.name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    Labels l = labels;
    l.emplace_back("le", i < bounds.size() ? number(bounds[i]) : "+Inf");
    sample(base + "_bucket", static_cast<double>(cumulative), l);
  }
  sample(base + "_sum", sum, labels);
  sample(base + "_count", static_cast<double>(cumulative), labels);
}

struct MetricsServer::State {
  State(asio::io_context& c, std::function<std::string()> r) : ctx(c), acceptor(c), render(r) {}
  asio::io_context& ctx;
  tcp::acceptor acceptor;
  std::function<std::string()> render;
  bool stopped = false;
  size_t sessions = 0;
};

namespace {

// One request per connection: scrapers open one per scrape, and this keeps the server tiny.
asio::awaitable<void> serve(std::shared_ptr<MetricsServer::State> st, tcp::socket socket);

}  // namespace

MetricsServer::MetricsServer(asio::io_context& ctx, const std::string& host, uint16_t port,
                             std::function<std::string()> render)
    : state_(std::make_shared<State>(ctx, std::move(render))) {
  tcp::resolver resolver(ctx);
  const auto at = resolver.resolve(host, std::to_string(port)).begin()->endpoint();
  state_->acceptor.open(at.protocol());
  state_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  state_->acceptor.bind(at);
  state_->acceptor.listen();
}

MetricsServer::~MetricsServer() { stop(); }

std::string MetricsServer::local_address() const {
  const auto ep = state_->acceptor.local_endpoint();
  return format_host_port(ep.address().to_string(), ep.port());
}

void MetricsServer::start() {
  asio::co_spawn(
      state_->ctx,
      [st = state_]() -> asio::awaitable<void> {
        for (;;) {
          auto [ec, socket] =
              co_await st->acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
          if (st->stopped) co_return;
          if (ec) continue;
          if (st->sessions >= 64) continue;  // bounded: the socket closes as it goes out of scope
          asio::co_spawn(st->ctx, serve(st, std::move(socket)), asio::detached);
        }
      },
      asio::detached);
}

void MetricsServer::stop() {
  if (state_->stopped) return;
  state_->stopped = true;
  boost::system::error_code ec;
  state_->acceptor.close(ec);
}

namespace {

asio::awaitable<void> serve(std::shared_ptr<MetricsServer::State> st, tcp::socket socket) {
  ++st->sessions;
  struct Count {
    MetricsServer::State& s;
    ~Count() { --s.sessions; }
  } count{*st};
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  http::request_parser<http::empty_body> parser;
  parser.header_limit(8 * 1024);
  stream.expires_after(std::chrono::seconds(5));
  auto [ec, n] =
      co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
  if (ec || st->stopped) co_return;
  const auto& req = parser.get();
  http::response<http::string_body> res;
  res.version(11);
  res.set(http::field::server, "imhash");
  res.keep_alive(false);
  const std::string_view target = req.target();
  if (req.method() == http::verb::get && target.substr(0, target.find('?')) == "/metrics") {
    res.result(http::status::ok);
    res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    MetricsText process;
    append_process_metrics(process);
    res.body() = st->render() + process.str();
  } else {
    res.result(http::status::not_found);
    res.set(http::field::content_type, "text/plain");
    res.body() = "only GET /metrics is served here\n";
  }
  res.prepare_payload();
  stream.expires_after(std::chrono::seconds(5));
  co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
}

}  // namespace

}  // namespace imhash
