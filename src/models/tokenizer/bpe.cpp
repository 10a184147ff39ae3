#include "models/tokenizer/bpe.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <queue>
#include <samebits/errors.hpp>

#include "models/tokenizer/text.hpp"

namespace samebits::models::tokenizer {

namespace {

constexpr std::size_t kCacheLimit = 1 << 16;  // words kept by the cache (results never depend on it)
constexpr std::size_t kCacheWordBytes = 64;   // longer words are not cached

std::string hex_of(std::string_view bytes) {
  std::string out;
  char buf[4];
  for (const char c : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
    out += buf;
  }
  return out;
}

std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

// The bytes HF's ByteLevel decoder gives for a token string: the table bytes when every character is a
// table character, else the string's own UTF-8 (docs/tokenizer.md §6).
std::string byte_level_bytes(std::string_view utf8) {
  std::string out;
  for (const char32_t c : utf8_to_u32(utf8)) {
    const int b = char_to_byte(c);
    if (b < 0) return std::string(utf8);
    out.push_back(static_cast<char>(b));
  }
  return out;
}

}  // namespace

// Leftmost-longest search over a set of added tokens (docs/tokenizer.md §2.3).
struct BpeTokenizer::Matcher {
  struct Entry {
    std::string content;
    std::int32_t id;
    bool special;
  };
  std::vector<std::vector<Entry>> by_first_byte = std::vector<std::vector<Entry>>(256);
  bool empty = true;

  void add(const AddedToken& t) {
    by_first_byte[static_cast<unsigned char>(t.content[0])].push_back({t.content, t.id, t.special});
    empty = false;
  }
  void finish() {
    for (auto& list : by_first_byte)
      std::stable_sort(list.begin(), list.end(),
                       [](const Entry& a, const Entry& b) { return a.content.size() > b.content.size(); });
  }
  // Calls piece(text) for text between matches and token(id) for each match, in order.
  template <typename Piece, typename Token>
  void split(std::string_view text, bool allow_special, Piece&& piece, Token&& token) const {
    if (empty) {
      if (!text.empty()) piece(text);
      return;
    }
    std::size_t previous = 0, i = 0;
    while (i < text.size()) {
      const Entry* hit = nullptr;
      for (const Entry& e : by_first_byte[static_cast<unsigned char>(text[i])]) {
        if (e.special && !allow_special) continue;
        if (text.compare(i, e.content.size(), e.content) == 0) {
          hit = &e;
          break;
        }
      }
      if (hit == nullptr) {
        ++i;
        continue;
      }
      if (i > previous) piece(text.substr(previous, i - previous));
      token(hit->id);
      i += hit->content.size();
      previous = i;
    }
    if (previous < text.size()) piece(text.substr(previous));
  }
};

BpeTokenizer::BpeTokenizer(TokenizerSpec spec) : spec_(std::move(spec)) {
  const std::string where = "samebits.models.Tokenizer: " + spec_.source + ": ";
  std::int64_t max_id = -1;
  for (const auto& [bytes, id] : spec_.vocab) {
    if (id < 0 || id > kMaxTokenId)
      throw_value_error(where + "model.vocab['" + bytes + "'] = " + std::to_string(id) + " is outside [0, " +
                        std::to_string(kMaxTokenId + 1) + ")");
    max_id = std::max<std::int64_t>(max_id, id);
  }
  for (const auto& t : spec_.added) {
    if (t.id < 0 || t.id > kMaxTokenId)
      throw_value_error(where + "added_tokens: id " + std::to_string(t.id) + " of '" + t.content +
                        "' is outside [0, " + std::to_string(kMaxTokenId + 1) + ")");
    if (t.content.empty())
      throw_value_error(where + "added_tokens: token " + std::to_string(t.id) + " is empty");
    max_id = std::max<std::int64_t>(max_id, t.id);
  }
  id_bytes_.assign(static_cast<std::size_t>(max_id + 1), std::string());
  id_kind_.assign(static_cast<std::size_t>(max_id + 1), 0);
  vocab_.reserve(spec_.vocab.size() * 2);
  for (const auto& [bytes, id] : spec_.vocab) {
    if (bytes.empty()) throw_value_error(where + "model.vocab: token " + std::to_string(id) + " is empty");
    const auto slot = static_cast<std::size_t>(id);
    if (id_kind_[slot] != 0)
      throw_value_error(where + "model.vocab: id " + std::to_string(id) + " is given to both '" +
                        hex_of(id_bytes_[slot]) + "' and '" + hex_of(bytes) + "' (hex)");
    id_kind_[slot] = 1;
    id_bytes_[slot] = bytes;
    vocab_.emplace(bytes, id);
  }
  // A byte without a single-byte token is dropped, or becomes unk_id, as `tokenizers` does (docs/tokenizer.md
  // §5.4).
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(std::string(1, static_cast<char>(b)));
    byte_id_[b] = it == vocab_.end() ? -1 : it->second;
  }
  if (spec_.unk_id && (*spec_.unk_id < 0 || static_cast<std::size_t>(*spec_.unk_id) >= id_kind_.size() ||
                       id_kind_[static_cast<std::size_t>(*spec_.unk_id)] == 0))
    throw_value_error(where + "model.unk_token names id " + std::to_string(*spec_.unk_id) +
                      ", which is not in model.vocab");
  merges_.reserve(spec_.merges.size() * 2);
  for (std::size_t k = 0; k < spec_.merges.size(); ++k) {
    const auto& [a, b] = spec_.merges[k];
    const auto ia = vocab_.find(a), ib = vocab_.find(b), ic = vocab_.find(a + b);
    const std::string name =
        "model.merges[" + std::to_string(k) + "] ('" + hex_of(a) + "' + '" + hex_of(b) + "', hex)";
    if (ia == vocab_.end() || ib == vocab_.end())
      throw_value_error(where + name + " names a part that is not in model.vocab");
    if (ic == vocab_.end()) throw_value_error(where + name + " makes a token that is not in model.vocab");
    const auto [it, fresh] = merges_.emplace(pair_key(ia->second, ib->second),
                                             std::make_pair(static_cast<std::uint32_t>(k), ic->second));
    if (!fresh)
      throw_value_error(where + name + " repeats model.merges[" + std::to_string(it->second.first) + "]");
  }
  raw_matcher_ = std::make_unique<Matcher>();
  normalized_matcher_ = std::make_unique<Matcher>();
  std::unordered_map<std::string, std::int32_t> added_content;
  for (const auto& t : spec_.added) {
    const auto slot = static_cast<std::size_t>(t.id);
    const auto [it, fresh] = added_content.emplace(t.content, t.id);
    if (!fresh && it->second != t.id)
      throw_value_error(where + "added_tokens: '" + t.content + "' is given both id " +
                        std::to_string(it->second) + " and id " + std::to_string(t.id));
    if (id_kind_[slot] >= 2 && id_bytes_[slot] != byte_level_bytes(t.content))
      throw_value_error(where + "added_tokens: id " + std::to_string(t.id) + " is given to two contents");
    id_kind_[slot] = t.special ? 3 : 2;
    id_bytes_[slot] = byte_level_bytes(t.content);
    if (fresh) (t.normalized ? *normalized_matcher_ : *raw_matcher_).add(t);
  }
  raw_matcher_->finish();
  normalized_matcher_->finish();
  const auto check_ids = [&](const std::vector<std::int32_t>& ids, const char* field) {
    for (const std::int32_t id : ids)
      if (id < 0 || static_cast<std::size_t>(id) >= id_kind_.size() ||
          id_kind_[static_cast<std::size_t>(id)] == 0)
        throw_value_error(where + field + " names id " + std::to_string(id) + ", which is no token");
  };
  check_ids(spec_.bos_ids, "post_processor (bos ids)");
  check_ids(spec_.eos_ids, "post_processor (eos ids)");
  pre_tokenizer_ = std::make_unique<PreTokenizer>(spec_.pre_tokenizer);
}

BpeTokenizer::~BpeTokenizer() = default;

bool BpeTokenizer::is_special(std::int32_t id) const {
  return id >= 0 && static_cast<std::size_t>(id) < id_kind_.size() &&
         id_kind_[static_cast<std::size_t>(id)] == 3;
}

std::optional<std::string_view> BpeTokenizer::token_bytes(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_kind_.size() ||
      id_kind_[static_cast<std::size_t>(id)] == 0)
    return std::nullopt;
  return std::string_view(id_bytes_[static_cast<std::size_t>(id)]);
}

// Merges of one pre-token by rank, lowest rank first and leftmost among equal ranks (docs/tokenizer.md §5.4).
void BpeTokenizer::bpe_word(std::string_view word, std::vector<std::int32_t>& out) const {
  if (spec_.ignore_merges) {
    const auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (word.size() == 1 && byte_id_[static_cast<unsigned char>(word[0])] >= 0) {
    out.push_back(byte_id_[static_cast<unsigned char>(word[0])]);
    return;
  }
  const bool cacheable = word.size() <= kCacheWordBytes;
  std::string key;
  if (cacheable) {
    key.assign(word);
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  // The initial symbols: one per byte; a byte without a token is dropped, or becomes unk (fused with an
  // unk just before it when fuse_unk), exactly as `tokenizers` builds its word.
  std::vector<std::int32_t> sym;
  sym.reserve(word.size());
  bool pending_unk = false;
  for (const char ch : word) {
    const std::int32_t id = byte_id_[static_cast<unsigned char>(ch)];
    if (id >= 0) {
      if (pending_unk) sym.push_back(*spec_.unk_id);
      pending_unk = false;
      sym.push_back(id);
    } else if (spec_.unk_id) {
      if (pending_unk && !spec_.fuse_unk) sym.push_back(*spec_.unk_id);
      pending_unk = true;
    }
  }
  if (pending_unk) sym.push_back(*spec_.unk_id);
  const std::size_t n = sym.size();
  if (n == 0) return;
  std::vector<std::int64_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (std::size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<std::int64_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<std::int64_t>(i + 1) : -1;
  }
  struct Candidate {
    std::uint32_t rank;
    std::int64_t pos;
    std::int32_t id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto consider = [&](std::int64_t left) {
    if (left < 0 || next[static_cast<std::size_t>(left)] < 0) return;
    const auto it =
        merges_.find(pair_key(sym[static_cast<std::size_t>(left)],
                              sym[static_cast<std::size_t>(next[static_cast<std::size_t>(left)])]));
    if (it != merges_.end()) queue.push({it->second.first, left, it->second.second});
  };
  for (std::size_t i = 0; i + 1 < n; ++i) consider(static_cast<std::int64_t>(i));
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const auto p = static_cast<std::size_t>(top.pos);
    if (!alive[p] || next[p] < 0) continue;
    const auto r = static_cast<std::size_t>(next[p]);
    const auto it = merges_.find(pair_key(sym[p], sym[r]));
    if (it == merges_.end() || it->second.first != top.rank || it->second.second != top.id) continue;
    sym[p] = top.id;
    alive[r] = false;
    next[p] = next[r];
    if (next[r] >= 0) prev[static_cast<std::size_t>(next[r])] = top.pos;
    consider(prev[p]);
    consider(top.pos);
  }
  const std::size_t start = out.size();
  for (std::int64_t i = 0; i >= 0; i = next[static_cast<std::size_t>(i)])
    out.push_back(sym[static_cast<std::size_t>(i)]);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheLimit) cache_.clear();
    cache_.emplace(std::move(key),
                   std::vector<std::int32_t>(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()));
  }
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<std::string_view> pieces;
  std::deque<std::string> arena;
  pre_tokenizer_->split(text, pieces, arena);
  for (const std::string_view piece : pieces) bpe_word(piece, out);
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view input, bool add_special_tokens,
                                               bool allow_special) const {
  std::string repaired;
  std::string_view text = input;
  if (!utf8_valid(input)) {
    repaired = utf8_lossy(input);
    text = repaired;
  }
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special_tokens) ids.insert(ids.end(), spec_.bos_ids.begin(), spec_.bos_ids.end());
  const auto token = [&](std::int32_t id) { ids.push_back(id); };
  raw_matcher_->split(
      text, allow_special,
      [&](std::string_view piece) {
        std::string normalized;
        std::string_view view = piece;
        if (spec_.nfc) {
          normalized = nfc(piece);
          view = normalized;
        }
        normalized_matcher_->split(
            view, allow_special, [&](std::string_view plain) { encode_plain(plain, ids); }, token);
      },
      token);
  if (add_special_tokens) ids.insert(ids.end(), spec_.eos_ids.begin(), spec_.eos_ids.end());
  return ids;
}

std::string BpeTokenizer::decode_bytes(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::int32_t id = ids[k];
    if (id < 0 || static_cast<std::size_t>(id) >= id_kind_.size() ||
        id_kind_[static_cast<std::size_t>(id)] == 0)
      throw_value_error("samebits.models.Tokenizer: id " + std::to_string(id) + " at position " +
                        std::to_string(k) + " is outside [0, n_vocab) and no added token");
    if (skip_special_tokens && id_kind_[static_cast<std::size_t>(id)] == 3) continue;
    out += id_bytes_[static_cast<std::size_t>(id)];
  }
  return out;
}

}  // namespace samebits::models::tokenizer
