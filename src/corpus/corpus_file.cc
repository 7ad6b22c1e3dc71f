#include "kvgate/corpus/corpus_file.h"

#include <bit>
#include <cstring>
#include <sstream>

#include "xxhash.h"

namespace kvgate::corpus {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the corpus format is little-endian and is read in place");

constexpr size_t kHeaderChecked = offsetof(CorpusHeader, header_xxh3);

uint64_t header_hash(const CorpusHeader& h) { return XXH3_64bits(&h, kHeaderChecked); }

struct EventHead {
  uint8_t kind;
  uint8_t tier;
  uint8_t has_parent;
  uint8_t zero;
  uint32_t n;
};
static_assert(sizeof(EventHead) == 8);

}  // namespace

Result<std::unique_ptr<CorpusWriter>> CorpusWriter::open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::NotFoundError("cannot create corpus file " + path + ": " + std::strerror(errno));
  }
  std::unique_ptr<CorpusWriter> w(new CorpusWriter(f, path));
  CorpusHeader placeholder{};
  if (Status s = w->write(&placeholder, sizeof(placeholder)); !s.ok()) return s;
  w->payload_bytes_ = 0;
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(w->xxh_state_));
  return w;
}

CorpusWriter::CorpusWriter(std::FILE* f, std::string path)
    : f_(f), path_(std::move(path)), xxh_state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(xxh_state_));
}

CorpusWriter::~CorpusWriter() {
  if (f_ != nullptr) std::fclose(f_);
  XXH3_freeState(static_cast<XXH3_state_t*>(xxh_state_));
}

Status CorpusWriter::write(const void* data, size_t bytes) {
  if (f_ == nullptr) return absl::FailedPreconditionError("corpus writer already finished");
  if (std::fwrite(data, 1, bytes, f_) != bytes) {
    return absl::DataLossError("cannot write corpus file " + path_ + ": " + std::strerror(errno));
  }
  XXH3_64bits_update(static_cast<XXH3_state_t*>(xxh_state_), data, bytes);
  payload_bytes_ += bytes;
  return absl::OkStatus();
}

Status CorpusWriter::lookup(std::span<const SeqHash> chain) {
  const uint32_t head[2] = {kTagLookup, static_cast<uint32_t>(chain.size())};
  if (Status s = write(head, sizeof(head)); !s.ok()) return s;
  if (Status s = write(chain.data(), chain.size_bytes()); !s.ok()) return s;
  ++totals_.lookups;
  ++totals_.records;
  totals_.lookup_blocks += chain.size();
  return absl::OkStatus();
}

Status CorpusWriter::batch(HolderId holder, std::span<const index::Event> events) {
  const uint32_t head[4] = {kTagBatch, holder.value(), static_cast<uint32_t>(events.size()), 0};
  if (Status s = write(head, sizeof(head)); !s.ok()) return s;
  for (const index::Event& e : events) {
    const bool stored = e.kind == index::EventKind::kStored;
    if (stored && e.local_hashes.size() != e.engine_hashes.size()) {
      return absl::InvalidArgumentError("a stored event needs one local hash per engine hash");
    }
    const EventHead eh{static_cast<uint8_t>(e.kind), static_cast<uint8_t>(e.tier),
                       static_cast<uint8_t>(e.has_parent ? 1 : 0), 0,
                       static_cast<uint32_t>(e.engine_hashes.size())};
    if (Status s = write(&eh, sizeof(eh)); !s.ok()) return s;
    if (Status s = write(&e.parent, sizeof(e.parent)); !s.ok()) return s;
    if (Status s = write(e.engine_hashes.data(), e.engine_hashes.size_bytes()); !s.ok()) return s;
    if (stored) {
      if (Status s = write(e.local_hashes.data(), e.local_hashes.size_bytes()); !s.ok()) return s;
      totals_.stored_blocks += e.engine_hashes.size();
    } else if (e.kind == index::EventKind::kRemoved) {
      totals_.removed_blocks += e.engine_hashes.size();
    }
    ++totals_.events;
  }
  ++totals_.batches;
  ++totals_.records;
  return absl::OkStatus();
}

Status CorpusWriter::finish(const CorpusParams& params, uint64_t requests, uint64_t distinct_blocks,
                            uint64_t peak_memberships, uint64_t final_memberships) {
  if (f_ == nullptr) return absl::FailedPreconditionError("corpus writer already finished");
  totals_.requests = requests;
  totals_.distinct_blocks = distinct_blocks;
  totals_.peak_memberships = peak_memberships;
  totals_.final_memberships = final_memberships;
  CorpusHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.header_bytes = sizeof(CorpusHeader);
  h.params = params;
  h.totals = totals_;
  h.payload_bytes = payload_bytes_;  // open() restarted the count and hash after the header
  h.payload_xxh3 = XXH3_64bits_digest(static_cast<XXH3_state_t*>(xxh_state_));
  h.header_xxh3 = header_hash(h);
  const bool ok = std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(&h, sizeof(h), 1, f_) == 1;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok || !closed) {
    return absl::DataLossError("cannot write corpus header to " + path_ + ": " +
                               std::strerror(errno));
  }
  return absl::OkStatus();
}

Result<Corpus> Corpus::load(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError("cannot open corpus file " + path + ": " + std::strerror(errno));
  }
  std::vector<uint64_t> words;
  size_t bytes = 0;
  bool read_error = false;
  if (std::fseek(f, 0, SEEK_END) == 0) {
    const long size = std::ftell(f);
    if (size >= 0 && std::fseek(f, 0, SEEK_SET) == 0) {
      bytes = static_cast<size_t>(size);
      words.resize((bytes + 7) / 8);
      read_error = std::fread(words.data(), 1, bytes, f) != bytes;
    } else {
      read_error = true;
    }
  } else {
    read_error = true;
  }
  std::fclose(f);
  if (read_error) return absl::DataLossError("cannot read corpus file " + path);
  return parse(std::move(words), bytes, path);
}

// Walks the payload once, checking every bound before reading, and indexes the records.
Result<Corpus> Corpus::parse(std::vector<uint64_t> words, size_t bytes, std::string name) {
  auto bad = [&name](size_t offset, const std::string& what) {
    std::ostringstream o;
    o << "corpus " << name << ": " << what << " (at byte " << offset << ")";
    return absl::DataLossError(o.str());
  };
  Corpus c;
  c.words_ = std::move(words);
  c.bytes_ = bytes;
  if (bytes < sizeof(CorpusHeader)) {
    return bad(0, "file of " + std::to_string(bytes) + " bytes is shorter than the " +
                      std::to_string(sizeof(CorpusHeader)) + "-byte header (truncated?)");
  }
  std::memcpy(static_cast<void*>(&c.header_), c.words_.data(), sizeof(CorpusHeader));
  const CorpusHeader& h = c.header_;
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) {
    return bad(0, "not a kvgate corpus (wrong magic)");
  }
  if (h.version != kVersion) {
    return bad(8, "version " + std::to_string(h.version) + " is not the supported version " +
                      std::to_string(kVersion));
  }
  if (h.header_bytes != sizeof(CorpusHeader)) return bad(12, "unexpected header size");
  if (h.header_xxh3 != header_hash(h)) {
    return bad(kHeaderChecked, "header checksum mismatch (corrupt header)");
  }
  if (h.payload_bytes != bytes - sizeof(CorpusHeader)) {
    return bad(bytes, "payload is " + std::to_string(bytes - sizeof(CorpusHeader)) +
                          " bytes, the header says " + std::to_string(h.payload_bytes) +
                          (h.payload_bytes > bytes - sizeof(CorpusHeader) ? " (truncated)" : ""));
  }
  const char* base = reinterpret_cast<const char*>(c.words_.data());
  if (XXH3_64bits(base + sizeof(CorpusHeader), h.payload_bytes) != h.payload_xxh3) {
    return bad(sizeof(CorpusHeader), "payload checksum mismatch (corrupt payload)");
  }
  // Records are whole words: walk in words, with `w` the current word and `end` one past the last.
  const size_t end = bytes / 8;
  if (bytes % 8 != 0) return bad(bytes, "payload is not a whole number of 8-byte words");
  size_t w = sizeof(CorpusHeader) / 8;
  auto lo32 = [&](size_t i) { return static_cast<uint32_t>(c.words_[i]); };
  auto hi32 = [&](size_t i) { return static_cast<uint32_t>(c.words_[i] >> 32); };
  CorpusTotals seen;
  while (w < end) {
    const size_t record_at = w * 8;
    const std::string where = "record " + std::to_string(seen.records);
    const uint32_t tag = lo32(w);
    if (tag == kTagLookup) {
      const uint64_t n = hi32(w);
      if (n > end - w - 1) return bad(record_at, where + ": lookup runs past the end");
      c.ops_.push_back({Op::Kind::kLookup, static_cast<uint32_t>(c.lookups_.size())});
      c.lookups_.emplace_back(c.words_.data() + w + 1, n);
      seen.lookup_blocks += n;
      ++seen.lookups;
      w += 1 + n;
    } else if (tag == kTagBatch) {
      if (end - w < 2) return bad(record_at, where + ": batch header runs past the end");
      const uint32_t holder = hi32(w);
      const uint32_t n_events = lo32(w + 1);
      if (hi32(w + 1) != 0) return bad(record_at, where + ": reserved batch field is not zero");
      if (holder == HolderId::kInvalid) return bad(record_at, where + ": invalid holder id");
      w += 2;
      Batch b{HolderId(holder), static_cast<uint32_t>(c.events_.size()), n_events, 0, 0};
      for (uint32_t i = 0; i < n_events; ++i) {
        const size_t event_at = w * 8;
        const std::string ewhere = where + " event " + std::to_string(i);
        if (end - w < 2) return bad(event_at, ewhere + ": runs past the end");
        EventHead eh;
        std::memcpy(&eh, &c.words_[w], sizeof(eh));
        if (eh.kind > 2)
          return bad(event_at, ewhere + ": unknown event kind " + std::to_string(eh.kind));
        if (eh.tier >= index::kTierCount)
          return bad(event_at, ewhere + ": unknown tier " + std::to_string(eh.tier));
        if (eh.has_parent > 1 || eh.zero != 0) return bad(event_at, ewhere + ": bad flags");
        index::Event e;
        e.kind = static_cast<index::EventKind>(eh.kind);
        e.tier = static_cast<index::Tier>(eh.tier);
        e.has_parent = eh.has_parent != 0;
        e.parent = c.words_[w + 1];
        w += 2;
        const bool stored = e.kind == index::EventKind::kStored;
        const uint64_t need = uint64_t{eh.n} * (stored ? 2 : 1);
        if (need > end - w) return bad(event_at, ewhere + ": hashes run past the end");
        if (e.kind == index::EventKind::kCleared && eh.n != 0) {
          return bad(event_at, ewhere + ": a cleared event carries hashes");
        }
        e.engine_hashes = std::span<const uint64_t>(c.words_.data() + w, eh.n);
        if (stored) {
          e.local_hashes = std::span<const uint64_t>(c.words_.data() + w + eh.n, eh.n);
          b.stored_blocks += eh.n;
          seen.stored_blocks += eh.n;
        } else if (e.kind == index::EventKind::kRemoved) {
          b.removed_blocks += eh.n;
          seen.removed_blocks += eh.n;
        }
        w += need;
        c.events_.push_back(e);
        ++seen.events;
      }
      c.ops_.push_back({Op::Kind::kBatch, static_cast<uint32_t>(c.batches_.size())});
      c.batches_.push_back(b);
      ++seen.batches;
    } else {
      return bad(record_at, where + ": unknown record tag " + std::to_string(tag));
    }
    ++seen.records;
  }
  const CorpusTotals& t = h.totals;
  if (seen.records != t.records || seen.lookups != t.lookups ||
      seen.lookup_blocks != t.lookup_blocks || seen.batches != t.batches ||
      seen.events != t.events || seen.stored_blocks != t.stored_blocks ||
      seen.removed_blocks != t.removed_blocks) {
    return bad(bytes, "records do not add up to the header's totals");
  }
  return c;
}

std::string describe(const CorpusHeader& h) {
  const CorpusParams& p = h.params;
  const CorpusTotals& t = h.totals;
  std::ostringstream o;
  o << "trace " << std::string(p.trace, strnlen(p.trace, sizeof(p.trace))) << ", workers "
    << p.workers << ", duplication " << p.duplication << ", length factor " << p.length_factor
    << ", block tokens " << p.block_tokens << ", pool blocks " << p.pool_blocks << ", seed "
    << p.seed << ", hash seed " << p.hash_seed << "\n";
  o << "requests          " << t.requests << "\n"
    << "lookups           " << t.lookups << "\n"
    << "lookup blocks     " << t.lookup_blocks << "\n"
    << "stored blocks     " << t.stored_blocks << "\n"
    << "removed blocks    " << t.removed_blocks << "\n"
    << "block ops         " << t.block_ops() << "\n"
    << "events            " << t.events << "\n"
    << "event batches     " << t.batches << "\n"
    << "distinct blocks   " << t.distinct_blocks << "\n"
    << "peak memberships  " << t.peak_memberships << "\n"
    << "final memberships " << t.final_memberships << "\n";
  return o.str();
}

}  // namespace kvgate::corpus
