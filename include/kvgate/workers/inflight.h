// InflightRequests: the requests in flight at one worker, so a veto can reach them.
//
// When a worker is vetoed (wedged, unreachable, unhealthy), requests already sent there would
// otherwise wait for their timeouts. The control path calls veto_all(); each request's callback
// hands the news to the request's own executor, where the request decides: one that has sent
// nothing to its client goes to another worker at once, a stream underway on a wedged worker ends
// with an error event.
//
// An entry is an intrusive list node owned by the request (no allocation here).
//
// Threading: add() and remove() from any thread; veto_all() from any thread, calling each
// entry's `on_veto` under the list's lock: a callback must only hand work to another executor
// (post), never block, and never call back into this list.
#pragma once

#include <cstddef>

#include "kvgate/core/thread_annotations.h"

namespace kvgate::workers {

// kShutdown is the gateway's own: its drain deadline passed and what still runs is ended.
enum class VetoKind : uint8_t { kWedged, kUnreachable, kUnhealthy, kShutdown };
const char* veto_kind_name(VetoKind k);

class InflightRequests {
 public:
  class Entry {
   public:
    using OnVeto = void (*)(void* context, VetoKind kind);
    Entry(OnVeto on_veto, void* context) : on_veto(on_veto), context(context) {}
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    friend class InflightRequests;
    const OnVeto on_veto;
    void* const context;
    Entry* prev = nullptr;
    Entry* next = nullptr;
    bool linked = false;
  };

  InflightRequests() = default;
  InflightRequests(const InflightRequests&) = delete;
  InflightRequests& operator=(const InflightRequests&) = delete;

  void add(Entry* e);
  void remove(Entry* e);  // a no-op for an entry not in the list
  // Calls every entry's on_veto; returns how many.
  size_t veto_all(VetoKind kind);
  size_t size() const;

 private:
  mutable Mutex mu_;
  Entry* head_ KVGATE_GUARDED_BY(mu_) = nullptr;
  size_t size_ KVGATE_GUARDED_BY(mu_) = 0;
};

}  // namespace kvgate::workers
