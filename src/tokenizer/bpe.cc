#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "tokenizer/json_util.h"
#include "tokenizer/thread_cache.h"
#include "tokenizer/unicode.h"

namespace kvgate::tokenizer {

namespace {
struct WordCacheTag {};
constexpr std::string_view kWordMark = "\u2581";  // SentencePiece's word mark
constexpr size_t kMaxNoCutCharacters = 16;

// The character that ends just before s[at] (at > 0).
std::string_view char_before(std::string_view s, size_t at) {
  const size_t start = prev_char_start(s, at);
  return s.substr(start, at - start);
}
}  // namespace

Result<BpeModel> BpeModel::from_json(simdjson::dom::element json) {
  const std::string_view type = string_or(json["type"], "BPE");
  if (type != "BPE") {
    return absl::InvalidArgumentError("model type \"" + std::string(type) +
                                      "\" is not supported (only BPE)");
  }
  double dropout = 0;
  if (json["dropout"].get_double().get(dropout) == simdjson::SUCCESS && dropout > 0) {
    return absl::InvalidArgumentError("model.dropout is not supported (it makes encoding random)");
  }
  BpeModel m;
  m.cache_id_ = new_thread_cache_owner();
  m.fuse_unk_ = bool_or(json["fuse_unk"], false);
  m.byte_fallback_ = bool_or(json["byte_fallback"], false);
  m.ignore_merges_ = bool_or(json["ignore_merges"], false);
  m.continuing_subword_prefix_ = std::string(string_or(json["continuing_subword_prefix"], ""));
  m.end_of_word_suffix_ = std::string(string_or(json["end_of_word_suffix"], ""));
  simdjson::dom::object vocab;
  if (json["vocab"].get_object().get(vocab) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("model.vocab is not an object");
  }
  m.vocab_.reserve(vocab.size());
  for (auto [key, value] : vocab) {
    uint64_t id = 0;
    if (value.get_uint64().get(id) != simdjson::SUCCESS || id > (1u << 24)) {
      return absl::InvalidArgumentError("model.vocab[\"" + std::string(key) +
                                        "\"] is not a token id");
    }
    m.vocab_.emplace(std::string(key), static_cast<TokenId>(id));
    if (id >= m.tokens_.size()) m.tokens_.resize(id + 1);
    m.tokens_[id] = std::string(key);
  }
  m.char_ids_.assign(kCharTable, kNoId);
  for (uint32_t cp = 0; cp < kCharTable; ++cp) {
    std::string utf8;
    append_utf8(cp, &utf8);
    auto it = m.vocab_.find(key_of(utf8));
    if (it != m.vocab_.end()) m.char_ids_[cp] = it->second;
  }
  std::string_view unk;
  if (json["unk_token"].get_string().get(unk) == simdjson::SUCCESS) {
    auto it = m.vocab_.find(key_of(unk));
    if (it == m.vocab_.end()) {
      return absl::InvalidArgumentError("model.unk_token \"" + std::string(unk) +
                                        "\" is not in the vocabulary");
    }
    m.unk_ = it->second;
  }
  m.has_byte_tokens_ = true;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = m.vocab_.find(key_of(name));
    if (it == m.vocab_.end()) {
      m.has_byte_tokens_ = false;
      break;
    }
    m.byte_tokens_[b] = it->second;
  }
  simdjson::dom::array merges;
  if (json["merges"].get_array().get(merges) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("model.merges is not a list");
  }
  m.merges_.reserve(merges.size());
  uint32_t rank = 0;
  for (simdjson::dom::element e : merges) {
    std::string_view a, b, line;
    if (e.get_string().get(line) == simdjson::SUCCESS) {  // "a b"
      const size_t space = line.find(' ', 1);
      if (space == std::string_view::npos) {
        return absl::InvalidArgumentError("model.merges[" + std::to_string(rank) +
                                          "] is not \"a b\"");
      }
      a = line.substr(0, space);
      b = line.substr(space + 1);
    } else {  // ["a", "b"]
      simdjson::dom::array pair;
      if (e.get_array().get(pair) != simdjson::SUCCESS || pair.size() != 2 ||
          pair.at(0).get_string().get(a) != simdjson::SUCCESS ||
          pair.at(1).get_string().get(b) != simdjson::SUCCESS) {
        return absl::InvalidArgumentError("model.merges[" + std::to_string(rank) +
                                          "] is neither \"a b\" nor [a, b]");
      }
    }
    const auto ia = m.vocab_.find(key_of(a));
    const auto ib = m.vocab_.find(key_of(b));
    std::string merged(a);
    const std::string_view b_rest =
        !m.continuing_subword_prefix_.empty() && b.starts_with(m.continuing_subword_prefix_)
            ? b.substr(m.continuing_subword_prefix_.size())
            : b;
    merged += b_rest;
    const auto im = m.vocab_.find(key_of(merged));
    if (ia == m.vocab_.end() || ib == m.vocab_.end() || im == m.vocab_.end()) {
      return absl::InvalidArgumentError("model.merges[" + std::to_string(rank) + "] (\"" +
                                        std::string(a) + "\", \"" + std::string(b) +
                                        "\") names a token not in the vocabulary");
    }
    // A pair listed twice keeps its last rank, as Hugging Face's map of the list does.
    m.merges_.insert_or_assign(pair_key(ia->second, ib->second), Merge{rank, im->second});
    ++rank;
  }
  m.find_word_mark_cuts();
  return m;
}

std::optional<TokenId> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(key_of(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::string_view BpeModel::id_to_token(TokenId id) const {
  return id < tokens_.size() ? std::string_view(tokens_[id]) : std::string_view();
}

void BpeModel::initial_symbols(std::string_view word, std::vector<TokenId>* symbols) const {
  bool pending_unk = false;  // an unknown not yet emitted (fuse_unk may widen it)
  std::string scratch;
  for (size_t i = 0; i < word.size();) {
    const size_t len = char_len(static_cast<unsigned char>(word[i]));
    const bool first = i == 0;
    const bool last = i + len >= word.size();
    std::string_view ch = word.substr(i, len);
    if ((!first && !continuing_subword_prefix_.empty()) || (last && !end_of_word_suffix_.empty())) {
      scratch.clear();
      if (!first) scratch += continuing_subword_prefix_;
      scratch += ch;
      if (last) scratch += end_of_word_suffix_;
      ch = scratch;
    }
    i += len;
    // Characters of up to three bytes without a prefix or suffix come from the table.
    if (ch.data() != scratch.data()) {
      if (const TokenId id = char_id(ch); id != kNoId) {
        if (pending_unk) {
          symbols->push_back(*unk_);
          pending_unk = false;
        }
        symbols->push_back(id);
        continue;
      }
    }
    if (auto it = vocab_.find(key_of(ch)); it != vocab_.end()) {
      if (pending_unk) {
        symbols->push_back(*unk_);
        pending_unk = false;
      }
      symbols->push_back(it->second);
      continue;
    }
    if (byte_fallback_ && has_byte_tokens_) {
      // As Hugging Face does: a pending unknown is not flushed before byte tokens.
      for (const char c : ch) symbols->push_back(byte_tokens_[static_cast<uint8_t>(c)]);
      continue;
    }
    if (!unk_) continue;  // no unknown token: the character is dropped
    if (pending_unk && !fuse_unk_) symbols->push_back(*unk_);
    pending_unk = true;
  }
  if (pending_unk) symbols->push_back(*unk_);
}

void BpeModel::encode(std::string_view word, std::vector<TokenId>* out) const {
  if (word.empty()) return;
  if (cut_at_word_marks_ && word.size() > kCachedWordBytes) {
    return encode_by_word_marks(word, out);
  }
  encode_word(word, out);
}

TokenId BpeModel::char_id(std::string_view ch) const {
  // A whole character only (the size check keeps next_char() inside `ch`).
  if (ch.empty() || char_len(static_cast<uint8_t>(ch[0])) != ch.size()) return kNoId;
  size_t len = 0;
  const char32_t cp = next_char(ch, 0, &len);
  return cp < kCharTable ? char_ids_[cp] : kNoId;
}

void BpeModel::find_word_mark_cuts() {
  cut_at_word_marks_ = false;
  no_cut_after_.clear();
  // A prefix or suffix changes a character's symbol by its place in the word, ignore_merges
  // takes whole words from the vocabulary: a cut could change either.
  if (ignore_merges_ || !continuing_subword_prefix_.empty() || !end_of_word_suffix_.empty() ||
      !vocab_.contains(key_of(kWordMark))) {
    return;
  }
  for (const std::string& token : tokens_) {
    for (size_t at = token.find(kWordMark, 1); at != std::string::npos;
         at = token.find(kWordMark, at + kWordMark.size())) {
      const std::string_view before = char_before(token, at);
      if (before == kWordMark) continue;
      if (std::find(no_cut_after_.begin(), no_cut_after_.end(), before) == no_cut_after_.end()) {
        if (no_cut_after_.size() == kMaxNoCutCharacters) return;  // too many: never cut
        no_cut_after_.emplace_back(before);
      }
    }
  }
  cut_at_word_marks_ = true;
}

void BpeModel::encode_by_word_marks(std::string_view word, std::vector<TokenId>* out) const {
  size_t start = 0;
  for (size_t at = word.find(kWordMark, 1); at != std::string_view::npos;
       at = word.find(kWordMark, at + kWordMark.size())) {
    const std::string_view before = char_before(word, at);
    // The character before the cut must be a vocabulary entry of its own: one that falls back
    // to byte tokens or the unknown token could merge as those.
    if (before == kWordMark || char_id(before) == kNoId ||
        std::find(no_cut_after_.begin(), no_cut_after_.end(), before) != no_cut_after_.end()) {
      continue;
    }
    encode_word(word.substr(start, at - start), out);
    start = at;
  }
  encode_word(word.substr(start), out);
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>* out) const {
  if (word.size() > kCachedWordBytes) return encode_uncached(word, out);
  thread_token_cache<WordCacheTag>(cache_id_).append_ids(
      word, out, [&](std::vector<TokenId>* o) { encode_uncached(word, o); });
}

void BpeModel::encode_uncached(std::string_view word, std::vector<TokenId>* out) const {
  if (ignore_merges_) {
    if (auto it = vocab_.find(key_of(word)); it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  thread_local std::vector<TokenId> sym;
  thread_local std::vector<int32_t> prev, next;
  sym.clear();
  initial_symbols(word, &sym);
  const size_t n = sym.size();
  if (n <= 1) {
    out->insert(out->end(), sym.begin(), sym.end());
    return;
  }
  prev.resize(n);
  next.resize(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  // (rank, position, merged id): lowest rank first, then leftmost.
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    TokenId id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  // A min-heap on a thread's reused storage.
  thread_local std::vector<Candidate> heap;
  heap.clear();
  const auto push = [](Candidate c) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (size_t i = 0; i + 1 < n; ++i) {
    if (const Merge* m = merge_of(sym[i], sym[i + 1])) {
      heap.push_back({m->rank, static_cast<int32_t>(i), m->id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  thread_local std::vector<bool> removed;
  removed.assign(n, false);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate top = heap.back();
    heap.pop_back();
    const int32_t pos = top.pos;
    if (removed[pos]) continue;
    const int32_t right = next[pos];
    if (right < 0) continue;
    // A stale candidate: the pair at pos changed since it was queued.
    const Merge* now = merge_of(sym[pos], sym[right]);
    if (now == nullptr || now->id != top.id) continue;
    sym[pos] = top.id;
    removed[right] = true;
    next[pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = pos;
    if (prev[pos] >= 0) {
      if (const Merge* m = merge_of(sym[prev[pos]], sym[pos])) {
        push({m->rank, prev[pos], m->id});
      }
    }
    if (next[pos] >= 0) {
      if (const Merge* m = merge_of(sym[pos], sym[next[pos]])) {
        push({m->rank, pos, m->id});
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out->push_back(sym[i]);
}

}  // namespace kvgate::tokenizer
