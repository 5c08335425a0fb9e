#include "ferry/engine/window.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "ferry/types/fingerprint.h"
#include "ferry/types/value_text.h"

namespace ferry::engine {
namespace {

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

void CursorTies::Add(uint64_t fingerprint) {
  ++rows_;
  sum_ += fingerprint;
  if (!listed_) return;
  if (fingerprints_.size() >= limit_) {
    listed_ = false;
    fingerprints_ = {};
    return;
  }
  sorted_ = sorted_ && (fingerprints_.empty() || fingerprints_.back() <= fingerprint);
  fingerprints_.push_back(fingerprint);
}

bool CursorTies::Contains(uint64_t fingerprint) const {
  if (sorted_) return std::binary_search(fingerprints_.begin(), fingerprints_.end(), fingerprint);
  return std::find(fingerprints_.begin(), fingerprints_.end(), fingerprint) != fingerprints_.end();
}

std::string CursorTies::Digest() const { return std::to_string(rows_) + "-" + Hex64(sum_); }

Json CursorTies::ToJson() const {
  Json j{{"rows", rows_}, {"sum", Hex64(sum_)}};
  if (listed_) {
    std::vector<uint64_t> sorted = fingerprints_;
    std::sort(sorted.begin(), sorted.end());
    std::string bytes(sorted.size() * 8, '\0');
    for (size_t i = 0; i < sorted.size(); ++i) {
      for (int b = 0; b < 8; ++b) {
        bytes[i * 8 + static_cast<size_t>(b)] = static_cast<char>(sorted[i] >> (56 - 8 * b));
      }
    }
    j["fingerprints"] = FormatBase64(bytes);
  }
  return j;
}

Result<CursorTies> CursorTies::FromJson(const Json& j, const std::string& origin) {
  auto bad = [&](const std::string& why) {
    return Status::Corruption(origin + ": the rows at the last cursor value (\"ties\") " + why +
                              "; remove the stream's entry from the state file to read the "
                              "stream again from the start");
  };
  if (!j.is_object() || !j.contains("rows") || !j["rows"].is_number_unsigned() ||
      !j.contains("sum") || !j["sum"].is_string()) {
    return bad("are not a valid record");
  }
  CursorTies t;
  t.rows_ = j["rows"].get<uint64_t>();
  const std::string& sum = j["sum"].get_ref<const std::string&>();
  auto [end, ec] = std::from_chars(sum.data(), sum.data() + sum.size(), t.sum_, 16);
  if (ec != std::errc() || end != sum.data() + sum.size() || sum.size() != 16) {
    return bad("have an invalid sum");
  }
  t.listed_ = j.contains("fingerprints");
  if (t.listed_) {
    if (!j["fingerprints"].is_string()) return bad("have invalid fingerprints");
    std::optional<std::string> bytes = ParseBase64(j["fingerprints"].get<std::string>());
    if (!bytes || bytes->size() % 8 != 0 || bytes->size() / 8 != t.rows_) {
      return bad("have fingerprints that do not match their count");
    }
    uint64_t sum_check = 0;
    for (size_t i = 0; i < bytes->size(); i += 8) {
      uint64_t v = 0;
      for (size_t b = 0; b < 8; ++b) v = (v << 8) | static_cast<unsigned char>((*bytes)[i + b]);
      if (!t.fingerprints_.empty() && t.fingerprints_.back() > v) return bad("are not sorted");
      t.fingerprints_.push_back(v);
      sum_check += v;
    }
    if (sum_check != t.sum_) return bad("do not add up to their sum");
  }
  t.limit_ = t.fingerprints_.size();
  return t;
}

Result<WindowRead> ReadWindow(source::Source* src, const source::StreamInfo& stream,
                              const std::string& cursor, const WindowBounds& bounds,
                              const std::shared_ptr<const Schema>& schema, size_t batch_rows,
                              size_t tie_limit, const std::function<bool(Batch&)>& emit) {
  std::vector<size_t> every(schema->fields.size());
  for (size_t i = 0; i < every.size(); ++i) every[i] = i;
  RowFingerprinter fingerprints(every, {});
  WindowRead out;
  out.end = bounds.upper.is_null() ? bounds.from : bounds.upper;
  out.ties = CursorTies(tie_limit);
  auto read = [&](const source::CursorRange& range, const std::function<bool(Batch&)>& each) {
    return src->ReadCursorRange(stream, cursor, range, schema, batch_rows, each);
  };
  auto pass = [&](Batch& b) {
    out.rows += static_cast<int64_t>(b.num_rows());
    return emit(b);
  };
  // The new end's rows, fingerprinted as they pass.
  auto at_end = [&](Batch& b) {
    for (size_t r = 0; r < b.num_rows(); ++r) out.ties.Add(fingerprints.Of(b, r).row);
    return pass(b);
  };

  if (!bounds.from.is_null()) {
    const source::CursorRange at_from = source::CursorRange::At(bounds.from);
    const bool ends_here = bounds.upper.is_null();
    CursorTies seen(tie_limit);
    if (bounds.ties && !bounds.ties->listed()) {
      // Only a digest of the committed ties: compare it with the rows at `from` now.
      FERRY_RETURN_IF_ERROR(read(at_from, [&](Batch& b) {
        for (size_t r = 0; r < b.num_rows(); ++r) seen.Add(fingerprints.Of(b, r).row);
        return true;
      }));
      if (seen.Digest() != bounds.ties->Digest()) FERRY_RETURN_IF_ERROR(read(at_from, pass));
    } else {
      // Every row at `from` whose fingerprint is not among the committed ties.
      Batch kept(schema);
      FERRY_RETURN_IF_ERROR(read(at_from, [&](Batch& b) {
        std::vector<bool> keep(b.num_rows());
        size_t kept_rows = 0;
        for (size_t r = 0; r < b.num_rows(); ++r) {
          const uint64_t f = fingerprints.Of(b, r).row;
          seen.Add(f);
          keep[r] = !bounds.ties || !bounds.ties->Contains(f);
          kept_rows += keep[r] ? 1 : 0;
        }
        if (kept_rows == b.num_rows()) return pass(b);
        if (kept_rows == 0) return true;
        kept.Clear();
        for (size_t c = 0; c < b.num_columns(); ++c) {
          for (size_t r = 0; r < b.num_rows(); ++r) {
            if (keep[r]) kept.column(c).AppendRowOf(b.column(c), r);
          }
        }
        return pass(kept);
      }));
    }
    if (ends_here) out.ties = std::move(seen);
  }
  if (!bounds.upper.is_null()) {
    FERRY_RETURN_IF_ERROR(read({bounds.from, false, bounds.upper, false}, pass));
    FERRY_RETURN_IF_ERROR(read(source::CursorRange::At(bounds.upper), at_end));
  }
  return out;
}

}  // namespace ferry::engine
