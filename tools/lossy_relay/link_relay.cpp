// The link mode's adapter: two AF_PACKET sockets, one per interface, a signalfd and epoll; the
// rules (what is lost, duplicated, reordered, delayed) are the FaultQueue's.
//
// Frames are read and written with a virtio-net header (PACKET_VNET_HDR): between veth devices
// the kernel hands over TCP segments of up to 64 KB whose checksums are still to be filled in
// (segmentation and checksum offload); the header carries that, so the frame goes out on the
// other interface as it came, and the device or the receiving stack finishes it. Without it such
// a frame is too big to send, or arrives with a bad checksum. PACKET_IGNORE_OUTGOING keeps each
// socket from reading back the frames the relay itself sends on its interface.
#include "tools/lossy_relay/link_relay.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/runtime/clock.h"
#include "tools/lossy_relay/relay_io.h"

namespace imhash {

namespace {

constexpr int kBatch = 64;  // frames read per socket per wake-up
// A frame with its virtio-net header: a 64 KB segment and headers fit (veth's GSO limit).
constexpr std::size_t kMaxFrame = 128 * 1024;

// A raw socket on `name` that reads every frame arriving there (promiscuous), with the virtio-net
// header, and not the frames sent from it.
int open_interface(const std::string& name) {
  const unsigned index = if_nametoindex(name.c_str());
  if (index == 0) relay_io::throw_errno("interface " + name);
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) relay_io::throw_errno("AF_PACKET socket (needs CAP_NET_RAW)");
  const int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0) {
    relay_io::throw_errno("PACKET_VNET_HDR on " + name);
  }
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) {
    relay_io::throw_errno("PACKET_IGNORE_OUTGOING on " + name);
  }
  const int buffer = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);  // best effort
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  sockaddr_ll at{};
  at.sll_family = AF_PACKET;
  at.sll_protocol = htons(ETH_P_ALL);
  at.sll_ifindex = static_cast<int>(index);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0) {
    relay_io::throw_errno("bind to " + name);
  }
  packet_mreq promisc{};
  promisc.mr_ifindex = static_cast<int>(index);
  promisc.mr_type = PACKET_MR_PROMISC;
  if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &promisc, sizeof promisc) != 0) {
    relay_io::throw_errno("promiscuous mode on " + name);
  }
  return fd;
}

class LinkRelay {
 public:
  LinkRelay(const std::string& a, const std::string& b, const FaultParams& faults)
      : names_{a, b}, faults_(faults), buf_(kMaxFrame) {
    signal_fd_ = relay_io::stop_signal_fd();
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) relay_io::throw_errno("epoll_create1");
    for (int i = 0; i < 2; ++i) fds_[i] = open_interface(names_[i]);
    relay_io::watch(epoll_fd_, fds_[0], 0);
    relay_io::watch(epoll_fd_, fds_[1], 1);
    relay_io::watch(epoll_fd_, signal_fd_, 2);
  }
  ~LinkRelay() {
    for (int fd : {fds_[0], fds_[1], epoll_fd_, signal_fd_}) {
      if (fd >= 0) close(fd);
    }
  }
  LinkRelay(const LinkRelay&) = delete;
  LinkRelay& operator=(const LinkRelay&) = delete;

  void run() {
    std::array<epoll_event, 4> events{};
    while (!stop_) {
      const int64_t due = faults_.next_due(), now = monotonic_ns();
      // Round up, so as never to wake before the due time and spin; at most a second.
      const int64_t wait_ns = std::min<int64_t>(due - now, 1'000'000'000);
      const int timeout_ms = wait_ns <= 0 ? 0 : static_cast<int>((wait_ns + 999'999) / 1'000'000);
      const int n =
          epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
      if (n < 0 && errno != EINTR) relay_io::throw_errno("epoll_wait");
      for (int i = 0; i < n; ++i) {
        const uint64_t id = events[static_cast<std::size_t>(i)].data.u64;
        if (id == 2) {
          stop_ = true;
        } else {
          receive(static_cast<uint32_t>(id));
        }
      }
      deliver_due();
    }
  }

  void print_summary() const {
    std::fprintf(stderr, "lossy_relay summary: %s to %s: %s; %s to %s: %s\n", names_[0].c_str(),
                 names_[1].c_str(), describe(faults_.counts(0), sends_[0]).c_str(),
                 names_[1].c_str(), names_[0].c_str(),
                 describe(faults_.counts(1), sends_[1]).c_str());
  }

 private:
  // Frames arriving on interface `from` go toward the other one: direction `from`.
  void receive(uint32_t from) {
    for (int i = 0; i < kBatch; ++i) {
      const ssize_t n = recv(fds_[from], buf_.data(), buf_.size(), MSG_TRUNC);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          spdlog::warn("receive on {}: {}", names_[from], std::strerror(errno));
        }
        return;
      }
      if (static_cast<std::size_t>(n) > buf_.size()) {
        ++sends_[from].send_failed;  // bigger than any frame veth hands over: not relayed
        continue;
      }
      faults_.offer(from, from ^ 1, std::span(buf_.data(), static_cast<std::size_t>(n)),
                    monotonic_ns());
    }
  }

  void deliver_due() {
    FaultQueue::Packet p;
    while (faults_.pop_due(monotonic_ns(), p)) {
      // A full send buffer or a link that is down loses the frame, as a wire would.
      if (send(fds_[p.key], p.data.data(), p.data.size(), 0) < 0) {
        ++sends_[p.dir].send_failed;
      } else {
        ++sends_[p.dir].forwarded;
      }
    }
  }

  std::array<std::string, 2> names_;
  FaultQueue faults_;
  std::vector<char> buf_;
  std::array<int, 2> fds_{-1, -1};
  int epoll_fd_ = -1, signal_fd_ = -1;
  bool stop_ = false;
  std::array<SendCounts, 2> sends_{};
};

}  // namespace

int run_link_relay(const std::string& a, const std::string& b, const FaultParams& faults,
                   const std::string& described) {
  if (a == b) throw std::invalid_argument("--link: the two interfaces must differ");
  LinkRelay relay(a, b, faults);
  spdlog::info("relaying {} <-> {}: {}", a, b, described);
  std::printf("relaying %s <-> %s\n", a.c_str(), b.c_str());
  std::fflush(stdout);
  relay.run();
  relay.print_summary();
  return 0;
}

}  // namespace imhash
