#include "http/detail/read_readiness.h"

#include <sys/epoll.h>

#include <cstdint>
#include <type_traits>

#include "boost/asio/execution/context.hpp"
#include "boost/asio/query.hpp"
#include "boost/version.hpp"

#if BOOST_VERSION == 107400 && defined(__linux__)
#include "boost/asio/detail/epoll_reactor.hpp"
#include "boost/asio/detail/reactor.hpp"
#include "boost/asio/detail/scheduler.hpp"
#define KVGATE_READ_READINESS 1
#else
#define KVGATE_READ_READINESS 0
#endif

namespace kvgate::http::detail {

#if KVGATE_READ_READINESS

namespace {

namespace ad = boost::asio::detail;
using tcp = boost::asio::ip::tcp;
using Reactor = ad::epoll_reactor;
using Descriptor = Reactor::descriptor_state;
static_assert(std::is_same_v<ad::reactor, Reactor>, "reads are marked on the epoll reactor only");

// Explicit instantiation may name private members; a friend function carries the pointer out.
template <class Tag, typename Tag::type kMember>
struct Expose {
  friend typename Tag::type member(Tag) { return kMember; }
};

using SocketBase = boost::asio::basic_socket<tcp, boost::asio::any_io_executor>;
struct SocketImpl {
  using type = ad::io_object_impl<ad::reactive_socket_service<tcp>, boost::asio::any_io_executor>
      SocketBase::*;
  friend type member(SocketImpl);
};
struct DescriptorMutex {
  using type = ad::conditionally_enabled_mutex Descriptor::*;
  friend type member(DescriptorMutex);
};
struct RegisteredEvents {
  using type = uint32_t Descriptor::*;
  friend type member(RegisteredEvents);
};
struct ReadyEvents {  // what the epoll wait that dispatched the descriptor reported
  using type = unsigned int ad::scheduler_operation::*;
  friend type member(ReadyEvents);
};
struct DescriptorFd {
  using type = int Descriptor::*;
  friend type member(DescriptorFd);
};
struct DescriptorReactor {
  using type = Reactor* Descriptor::*;
  friend type member(DescriptorReactor);
};
struct EpollFd {
  using type = int Reactor::*;
  friend type member(EpollFd);
};
struct OpQueues {
  using type = ad::op_queue<ad::reactor_op> (Descriptor::*)[Reactor::max_ops];
  friend type member(OpQueues);
};
struct TrySpeculative {
  using type = bool (Descriptor::*)[Reactor::max_ops];
  friend type member(TrySpeculative);
};
template struct Expose<SocketImpl, &SocketBase::impl_>;
template struct Expose<DescriptorMutex, &Descriptor::mutex_>;
template struct Expose<RegisteredEvents, &Descriptor::registered_events_>;
template struct Expose<ReadyEvents, &ad::scheduler_operation::task_result_>;
template struct Expose<DescriptorFd, &Descriptor::descriptor_>;
template struct Expose<DescriptorReactor, &Descriptor::reactor_>;
template struct Expose<EpollFd, &Reactor::epoll_fd_>;
template struct Expose<OpQueues, &Descriptor::op_queue_>;
template struct Expose<TrySpeculative, &Descriptor::try_speculative_>;

// The socket's reactor state; null when it is closed or was never registered.
Descriptor* descriptor_of(tcp::socket& socket) {
  SocketBase& base = socket;
  return (base.*member(SocketImpl{})).get_implementation().reactor_data_;
}

}  // namespace

bool marks_drained(tcp::socket& socket) {
  boost::asio::execution_context& ctx =
      boost::asio::query(socket.get_executor(), boost::asio::execution::context);
  return boost::asio::has_service<ad::scheduler>(ctx) &&
         boost::asio::use_service<ad::scheduler>(ctx).concurrency_hint() == 1;
}

// read_is_queued() and mark_drained() take no lock: they run only for sockets whose context one
// thread runs (marks_drained()), the thread that also runs the reactor, so nothing else can touch
// the descriptor meanwhile. (Its mutex would cost two of the proxied request's ~20 lock pairs.)
bool read_is_queued(tcp::socket& socket) {
  Descriptor* d = descriptor_of(socket);
  if (d == nullptr) return false;
  return !(d->*member(OpQueues{}))[Reactor::read_op].empty();
}

void mark_drained(tcp::socket& socket) {
  Descriptor* d = descriptor_of(socket);
  if (d == nullptr) return;
  uint32_t& registered = d->*member(RegisteredEvents{});
  // Unregistered descriptors cannot wait for an edge: Asio fails their non-speculative reads.
  if (registered == 0) return;
  if ((registered & EPOLLRDHUP) == 0) {
    // Asio does not ask epoll for the peer's end of stream, so this read's wake-up cannot tell
    // whether one follows the bytes it took: not marked. Later wake-ups will tell.
    epoll_event ev{};
    ev.events = registered | EPOLLRDHUP;
    ev.data.ptr = d;
    const int epoll_fd = (d->*member(DescriptorReactor{}))->*member(EpollFd{});
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, d->*member(DescriptorFd{}), &ev) == 0) {
      registered = ev.events;
    }
    return;
  }
  // The peer's end of stream (or an error) came with the bytes: the next receive returns it at
  // once, and no edge is left to wake a read that waits for it.
  // The descriptor is privately an operation; only a C-style cast converts to a private base.
  const auto* op = (const ad::scheduler_operation*)d;  // NOLINT(google-readability-casting)
  const unsigned int ready = op->*member(ReadyEvents{});
  if ((ready & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) return;
  (d->*member(TrySpeculative{}))[Reactor::read_op] = false;
}

bool next_read_receives_first(tcp::socket& socket) {
  Descriptor* d = descriptor_of(socket);
  if (d == nullptr) return true;
  ad::conditionally_enabled_mutex::scoped_lock lock(d->*member(DescriptorMutex{}));
  return (d->*member(TrySpeculative{}))[Reactor::read_op];
}

#else

bool marks_drained(boost::asio::ip::tcp::socket&) { return false; }
bool read_is_queued(boost::asio::ip::tcp::socket&) { return false; }
void mark_drained(boost::asio::ip::tcp::socket&) {}
bool next_read_receives_first(boost::asio::ip::tcp::socket&) { return true; }

#endif

}  // namespace kvgate::http::detail
