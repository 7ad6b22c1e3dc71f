// Read readiness: a read on a socket known to be drained waits for epoll's wake-up instead of
// trying a receive first.
//
// Asio's epoll reactor (Boost 1.74) starts every read with a receive and waits only when that
// fails with EAGAIN. A proxy's reads nearly always start before their bytes exist (the client's
// next request, the worker's answer), so about half of its receives fail: one wasted system call
// per read, measured at 1.9 per proxied request. Asio keeps a flag per socket for this,
// `try_speculative_`: every epoll edge sets it, and a read starts with a receive only while it is
// set. Asio clears it only at end of stream; nginx clears its own equivalent (`ready`) whenever a
// receive returns less than it asked for. mark_drained() does the latter: the next read then
// queues without a receive and the socket's edge-triggered registration wakes it when bytes
// arrive.
//
// A short receive does not mean drained when the peer's end of stream follows the bytes: both
// can arrive before one epoll wait, which reports a single edge, and the receive stops at the end
// of stream, which the next receive would return at once. nginx learns of it from EPOLLRDHUP
// (`pending_eof`); so does mark_drained(): it asks epoll for EPOLLRDHUP on a socket's first
// short read (which it leaves unmarked) and never marks one whose wake-up reported it. (The
// events it looks at are the descriptor's last reported ones. For a read whose completion was
// deferred behind a later epoll wait, below, they may come from that wait instead; it reported
// the socket's state then, in which an end of stream that had arrived stays reported.)
//
// Clearing the flag is correct only if no epoll wait ran between the short receive and the
// clearing: an edge collected in between would be forgotten and the read would wait forever. That
// holds for a read the reactor completed while dispatching the socket's event: it receives and
// calls the completion handler right there, before its next epoll wait, provided one thread runs
// the context. (When a write completes in the same dispatch, the write's handler runs there and
// the read's is queued behind the next epoll wait; an edge that wait collects for the socket is
// applied by a descriptor operation queued behind the read's handler, so it still sets the flag
// after the clearing.) It does not hold for a read completed by the receive Asio tries first (that
// completion is queued behind the next epoll wait). So callers mark only reads that
// read_is_queued() saw waiting when their initiation returned, on contexts for which
// marks_drained() holds (one thread: concurrency hint 1).
//
// The flag and the reactor's queue are private to Asio. They are reached by explicit template
// instantiation, which the language exempts from access checks, and only for the reactor of
// Boost 1.74 on Linux, whose layout and rules this relies on; on any other build every function
// here is a no-op and reads behave as Asio's own.
//
// Threading: on the socket's context thread. read_is_queued() and mark_drained() are for sockets
// whose context marks_drained() accepts (one thread runs it and its reactor) and take no lock.
#pragma once

#include "boost/asio/ip/tcp.hpp"

namespace kvgate::http::detail {

// Whether reads on `socket` may be marked: its context is an io_context run by one thread and
// the reactor is the one this relies on.
bool marks_drained(boost::asio::ip::tcp::socket& socket);
// Whether a read on `socket` waits in the reactor's queue (its first receive, if any, failed).
bool read_is_queued(boost::asio::ip::tcp::socket& socket);
// Makes the next read on `socket` wait for the next epoll edge without a receive first, unless
// the wake-up of the read that just completed reported the peer's end of stream.
void mark_drained(boost::asio::ip::tcp::socket& socket);
// Whether the next read on `socket` starts with a receive (for tests).
bool next_read_receives_first(boost::asio::ip::tcp::socket& socket);

}  // namespace kvgate::http::detail
