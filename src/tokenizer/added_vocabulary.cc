#include "tokenizer/added_vocabulary.h"

#include <bit>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tokenizer/json_util.h"
#include "tokenizer/unicode.h"

namespace kvgate::tokenizer {
namespace {

bool is_word_char(char32_t c) { return c == '_' || is_alphanumeric(c); }

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t len = 0;
  return is_word_char(next_char(s, prev_char_start(s, s.size()), &len));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t len = 0;
  return is_word_char(next_char(s, 0, &len));
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string_view pattern, uint32_t token_index) {
  if (pattern.empty()) return;
  uint32_t node = 0;
  for (const char c : pattern) {
    uint32_t next = child(node, static_cast<uint8_t>(c));
    if (next == kNone) {
      next = nodes_++;
      insert_edge((uint64_t{node} << 8 | static_cast<uint8_t>(c)) + 1, next);
      terminal_.push_back(kNone);
    }
    node = next;
  }
  if (terminal_[node] == kNone) {  // the first token listed with a text keeps it
    terminal_[node] = token_index;
    ++patterns_;
  }
  const auto first = static_cast<uint8_t>(pattern[0]);
  if (!first_byte_[first]) {
    first_byte_[first] = true;
    if (first_bytes_ < kMaxScanBytes) scan_bytes_[first_bytes_] = first;
    ++first_bytes_;
  }
  only_first_byte_ = first_bytes_ == 1 ? first : -1;
  if (pattern.size() == 1) {
    one_byte_pattern_[first] = true;
  } else {
    const auto second = static_cast<uint8_t>(pattern[1]);
    pair_bits_[first][second >> 6] |= uint64_t{1} << (second & 63);
  }
}

void AddedVocabulary::Matcher::insert_edge(uint64_t key, uint32_t child) {
  if (2 * (edges_ + 1) > edge_keys_.size()) {  // at most half full
    std::vector<uint64_t> keys(2 * edge_keys_.size(), 0);
    std::vector<uint32_t> children(keys.size(), 0);
    keys.swap(edge_keys_);
    children.swap(edge_children_);
    --edge_shift_;
    edges_ = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] != 0) insert_edge(keys[i], children[i]);
    }
  }
  size_t i = slot_of(key);
  while (edge_keys_[i] != 0) i = (i + 1) & (edge_keys_.size() - 1);
  edge_keys_[i] = key;
  edge_children_[i] = child;
  ++edges_;
}

size_t AddedVocabulary::Matcher::next_candidate(std::string_view text, size_t at) const {
  if (at >= text.size()) return text.size();
  if (only_first_byte_ >= 0) {
    const void* p = std::memchr(text.data() + at, only_first_byte_, text.size() - at);
    return p == nullptr ? text.size()
                        : static_cast<size_t>(static_cast<const char*>(p) - text.data());
  }
#if defined(__SSE2__)
  if (first_bytes_ > 0 && first_bytes_ <= kMaxScanBytes) {
    // Sixteen bytes a step against each first byte: a chat is long stretches of prose between
    // the few places a token may start.
    __m128i wanted[kMaxScanBytes];
    for (int i = 0; i < first_bytes_; ++i)
      wanted[i] = _mm_set1_epi8(static_cast<char>(scan_bytes_[i]));
    for (; at + 16 <= text.size(); at += 16) {
      const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + at));
      __m128i hit = _mm_cmpeq_epi8(chunk, wanted[0]);
      for (int i = 1; i < first_bytes_; ++i)
        hit = _mm_or_si128(hit, _mm_cmpeq_epi8(chunk, wanted[i]));
      if (const int mask = _mm_movemask_epi8(hit); mask != 0)
        return at + std::countr_zero(static_cast<unsigned>(mask));
    }
  }
#endif
  while (at < text.size() && !first_byte_[static_cast<uint8_t>(text[at])]) ++at;
  return at;
}

std::optional<std::pair<size_t, uint32_t>> AddedVocabulary::Matcher::longest_at(
    std::string_view text, size_t at) const {
  const auto first = static_cast<uint8_t>(text[at]);
  if (!first_byte_[first]) return std::nullopt;
  if (!one_byte_pattern_[first] &&
      (at + 1 >= text.size() || !pair_possible(first, static_cast<uint8_t>(text[at + 1])))) {
    return std::nullopt;
  }
  std::optional<std::pair<size_t, uint32_t>> best;
  uint32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    node = child(node, static_cast<uint8_t>(text[i]));
    if (node == kNone) break;
    if (terminal_[node] != kNone) best = {{i + 1, terminal_[node]}};
  }
  return best;
}

Result<AddedVocabulary> AddedVocabulary::from_json(JsonField field, const Normalizer* normalizer) {
  AddedVocabulary v;
  simdjson::dom::element json;
  if (!present(field, &json)) return v;
  simdjson::dom::array list;
  if (json.get_array().get(list) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("added_tokens is not a list");
  }
  for (simdjson::dom::element e : list) {
    AddedToken t;
    uint64_t id = 0;
    std::string_view content;
    if (e["id"].get_uint64().get(id) != simdjson::SUCCESS ||
        e["content"].get_string().get(content) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("added_tokens[" + std::to_string(v.tokens_.size()) +
                                        "] needs an \"id\" and a \"content\"");
    }
    t.id = static_cast<TokenId>(id);
    t.content = std::string(content);
    t.single_word = bool_or(e["single_word"], false);
    t.lstrip = bool_or(e["lstrip"], false);
    t.rstrip = bool_or(e["rstrip"], false);
    t.normalized = bool_or(e["normalized"], !bool_or(e["special"], false));
    t.special = bool_or(e["special"], false);
    const auto index = static_cast<uint32_t>(v.tokens_.size());
    v.by_id_[t.id] = index;
    v.by_content_[t.content] = t.id;
    v.max_id_plus_one_ = std::max(v.max_id_plus_one_, t.id + 1);
    if (t.normalized) {
      std::string pattern = t.content;
      if (normalizer != nullptr) normalizer->normalize(&pattern);
      v.normalized_.add(pattern, index);
    } else {
      v.raw_.add(t.content, index);
    }
    v.tokens_.push_back(std::move(t));
  }
  for (size_t i = 0; i < v.tokens_.size(); ++i) {
    if (v.cut_alike_everywhere(i)) v.boundary_.add(v.tokens_[i].content, static_cast<uint32_t>(i));
  }
  return v;
}

const AddedToken* AddedVocabulary::find(TokenId id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<TokenId> AddedVocabulary::find(std::string_view content) const {
  auto it = by_content_.find(key_of(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

void AddedVocabulary::split_with(const Matcher& matcher, std::string_view text, bool first,
                                 std::vector<Cut>* out, size_t from) const {
  size_t emitted = from;  // text before this is in `out`
  const auto emit_text = [&](size_t end) {
    if (end > emitted) {
      out->push_back({std::nullopt, text.substr(emitted, end - emitted), first && emitted == 0});
    }
  };
  if (!matcher.empty()) {
    for (size_t at = matcher.next_candidate(text, from); at < text.size();
         at = matcher.next_candidate(text, at)) {
      auto m = matcher.longest_at(text, at);
      if (!m) {
        ++at;
        continue;
      }
      size_t start = at;
      size_t stop = m->first;
      const AddedToken& t = tokens_[m->second];
      if (t.single_word &&
          (ends_with_word(text.substr(0, start)) || starts_with_word(text.substr(stop)))) {
        ++at;
        continue;
      }
      if (t.lstrip) {
        size_t s = start;
        while (s > emitted) {
          const size_t p = prev_char_start(text, s);
          size_t len = 0;
          if (!is_whitespace(next_char(text, p, &len))) break;
          s = p;
        }
        start = s;
      }
      if (t.rstrip) {
        while (stop < text.size()) {
          size_t len = 0;
          if (!is_whitespace(next_char(text, stop, &len))) break;
          stop += len;
        }
      }
      emit_text(start);
      out->push_back({t.id, text.substr(start, stop - start), false, t.special});
      emitted = stop;
      at = stop;
    }
  }
  emit_text(text.size());
  if (text.empty()) out->push_back({std::nullopt, std::string_view(), first});
}

void AddedVocabulary::split_raw(std::string_view text, std::vector<Cut>* out, size_t from) const {
  split_with(raw_, text, true, out, from);
}

void AddedVocabulary::boundaries(std::string_view text, std::vector<size_t>* ends) const {
  if (boundary_.empty()) return;
  for (size_t at = boundary_.next_candidate(text, 0); at < text.size();
       at = boundary_.next_candidate(text, at)) {
    const auto m = boundary_.longest_at(text, at);
    if (!m) {
      ++at;
      continue;
    }
    ends->push_back(m->first);
    at = m->first;
  }
}

bool AddedVocabulary::cut_alike_everywhere(size_t index) const {
  const AddedToken& s = tokens_[index];
  const std::string& c = s.content;
  // Found in the raw text, taking no whitespace or word test with it, and not starting with
  // whitespace (a token before it with rstrip would take that).
  if (!s.special || s.normalized || s.lstrip || s.rstrip || s.single_word || c.empty())
    return false;
  size_t len = 0;
  if (is_whitespace(next_char(c, 0, &len))) return false;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& t = tokens_[i].content;
    if (i == index || tokens_[i].normalized || t == c) continue;
    // A token holding it (a longer match at its start, or one starting before it), or one
    // whose end overlaps its start (a match starting before it would take part of it).
    if (t.find(c) != std::string::npos) return false;
    for (size_t k = 1; k < t.size() && k < c.size(); ++k) {
      if (t.compare(t.size() - k, k, c, 0, k) == 0) return false;
    }
  }
  return true;
}

void AddedVocabulary::split_stretch(Piece stretch, const Normalizer* normalizer,
                                    std::string* normalized, std::vector<Segment>* out) const {
  if (normalizer != nullptr) {
    normalized->assign(stretch.text);
    normalizer->normalize(normalized);
    stretch.text = *normalized;
  }
  if (normalized_.empty()) {
    out->push_back({std::nullopt, stretch});
  } else {
    thread_local std::vector<Cut> cuts;
    cuts.clear();
    split_with(normalized_, stretch.text, stretch.first, &cuts);
    for (const Cut& c : cuts) out->push_back({c.token, Piece{c.text, c.first}});
  }
}

}  // namespace kvgate::tokenizer
