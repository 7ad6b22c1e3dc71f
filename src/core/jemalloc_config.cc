// Linked into every kvgate binary when KVGATE_JEMALLOC is on (cmake/KvgateHelpers.cmake).
//
// jemalloc reads this symbol at start-up. A background thread purges dirty pages on a schedule,
// so memory freed after a burst returns to the OS while the process idles instead of staying in
// the arenas until the next allocation happens to trigger a purge. Its memory is marked for
// transparent huge pages (where the kernel allows them on request): the KV index's per-holder maps
// are far larger than the TLB covers with 4 KiB pages, and huge pages made the chain index's
// replay 25% faster on the development machine. MALLOC_CONF in the environment still overrides it.
extern "C" {
__attribute__((used)) const char* malloc_conf =
    "background_thread:true,dirty_decay_ms:5000,muzzy_decay_ms:5000,thp:always,metadata_thp:auto,"
    "abort_conf:false";
}
