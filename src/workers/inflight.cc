#include "kvgate/workers/inflight.h"

namespace kvgate::workers {

const char* veto_kind_name(VetoKind k) {
  switch (k) {
    case VetoKind::kWedged:
      return "wedged";
    case VetoKind::kUnreachable:
      return "unreachable";
    case VetoKind::kUnhealthy:
      return "unhealthy";
    case VetoKind::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

void InflightRequests::add(Entry* e) {
  MutexLock lock(&mu_);
  e->prev = nullptr;
  e->next = head_;
  if (head_ != nullptr) head_->prev = e;
  head_ = e;
  e->linked = true;
  ++size_;
}

void InflightRequests::remove(Entry* e) {
  MutexLock lock(&mu_);
  if (!e->linked) return;
  if (e->prev != nullptr) {
    e->prev->next = e->next;
  } else {
    head_ = e->next;
  }
  if (e->next != nullptr) e->next->prev = e->prev;
  e->prev = e->next = nullptr;
  e->linked = false;
  --size_;
}

size_t InflightRequests::veto_all(VetoKind kind) {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (Entry* e = head_; e != nullptr; e = e->next, ++n) e->on_veto(e->context, kind);
  return n;
}

size_t InflightRequests::size() const {
  MutexLock lock(&mu_);
  return size_;
}

}  // namespace kvgate::workers
