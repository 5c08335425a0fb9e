#include "ferry/types/value_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "ferry/types/value_text.h"

namespace ferry {
namespace {

using Json = nlohmann::json;

Json FloatJson(double d, bool single) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (!single) return d;
  // A float's shortest text read as a double: JSON shows 0.1, not 0.10000000149011612.
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf) - 1, static_cast<float>(d));
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

Result<Json> ElementJson(const Column& c, size_t i, const ElementToText& text) {
  if (!c.IsValid(i)) return Json(nullptr);
  switch (c.type().kind()) {
    case TypeKind::kBoolean:
      return Json(c.ValueAt<uint8_t>(i) != 0);
    case TypeKind::kInt32:
      return Json(c.ValueAt<int32_t>(i));
    case TypeKind::kInt64:
      return Json(c.ValueAt<int64_t>(i));
    case TypeKind::kFloat32:
      return FloatJson(c.ValueAt<float>(i), true);
    case TypeKind::kFloat64:
      return FloatJson(c.ValueAt<double>(i), false);
    case TypeKind::kString:
      return Json(std::string(c.GetBytes(i)));
    case TypeKind::kBinary:
      return Json(FormatBase64(c.GetBytes(i)));
    default: {
      FERRY_ASSIGN_OR_RETURN(std::string t, text(c, i));
      return Json(std::move(t));
    }
  }
}

Status AppendElement(const Json& e, Column* col, const ElementFromText& parse) {
  if (e.is_null()) {
    col->AppendNull();
    return Status::OK();
  }
  const DataType& t = col->type();
  auto wrong = [&] {
    return Status::InvalidArgument("list element " +
                                   e.dump(-1, ' ', false, Json::error_handler_t::replace) +
                                   " is not a " + t.ToIceberg());
  };
  switch (t.kind()) {
    case TypeKind::kBoolean:
      if (!e.is_boolean()) return wrong();
      col->AppendBool(e.get<bool>());
      return Status::OK();
    case TypeKind::kInt32:
    case TypeKind::kInt64: {
      if (!e.is_number_integer()) return wrong();
      if (e.is_number_unsigned() &&
          e.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return wrong();
      }
      const int64_t v = e.get<int64_t>();
      if (t.kind() == TypeKind::kInt64) {
        col->AppendInt64(v);
        return Status::OK();
      }
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        return wrong();
      }
      col->AppendInt32(static_cast<int32_t>(v));
      return Status::OK();
    }
    case TypeKind::kFloat32:
    case TypeKind::kFloat64: {
      double d;
      if (e.is_number()) {
        d = e.get<double>();
      } else if (e == "NaN") {
        d = std::numeric_limits<double>::quiet_NaN();
      } else if (e == "Infinity") {
        d = std::numeric_limits<double>::infinity();
      } else if (e == "-Infinity") {
        d = -std::numeric_limits<double>::infinity();
      } else {
        return wrong();
      }
      if (t.kind() == TypeKind::kFloat32) {
        col->AppendFloat(static_cast<float>(d));
      } else {
        col->AppendDouble(d);
      }
      return Status::OK();
    }
    case TypeKind::kString:
      if (!e.is_string()) return wrong();
      col->AppendBytes(e.get_ref<const std::string&>());
      return Status::OK();
    case TypeKind::kBinary: {
      if (!e.is_string()) return wrong();
      std::optional<std::string> b = ParseBase64(e.get_ref<const std::string&>());
      if (!b) return wrong();
      col->AppendBytes(*b);
      return Status::OK();
    }
    default: {
      if (!e.is_string()) return wrong();
      Status s = parse(e.get_ref<const std::string&>(), col);
      return s.ok() ? s : wrong();
    }
  }
}

}  // namespace

Result<std::string> FormatListJson(const Column& list, size_t row, const ElementToText& text) {
  auto [first, end] = list.ListRange(row);
  Json arr = Json::array();
  for (size_t i = first; i < end; ++i) {
    FERRY_ASSIGN_OR_RETURN(Json e, ElementJson(list.list_child(), i, text));
    arr.push_back(std::move(e));
  }
  try {
    return arr.dump(-1, ' ', false, Json::error_handler_t::strict);
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string("a list cannot be written as JSON: ") + e.what());
  }
}

Status AppendListJson(std::string_view json, Column* list, const ElementFromText& parse) {
  Json arr = Json::parse(json, nullptr, false);
  if (arr.is_discarded() || !arr.is_array()) {
    std::string shown(json.substr(0, 40));
    if (json.size() > 40) shown += "...";
    return Status::InvalidArgument("'" + shown + "' is not a JSON array");
  }
  for (const Json& e : arr) {
    Status s = AppendElement(e, &list->list_child(), parse);
    if (!s.ok()) {
      list->DropOpenListElements();
      return s;
    }
  }
  list->AppendListEnd();
  return Status::OK();
}

}  // namespace ferry
