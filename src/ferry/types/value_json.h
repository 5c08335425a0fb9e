// Lists as JSON text, the form in which the text destinations (SQLite, Redis, MySQL) store a list
// value: an array whose elements are null, true/false, integers, numbers for floats (a float by
// its shortest decimal text, so 0.1f is 0.1; NaN, Infinity and -Infinity as strings), strings,
// base64 for binary (value_text.h), and for every other type the destination's own text form of
// the value, which each destination passes in.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry {

// The destination's text form of element `i` of column `c` (dates, times, decimals, ...).
using ElementToText = std::function<Result<std::string>(const Column& c, size_t i)>;
// Appends the value that `text` (in that form) holds to `col`.
using ElementFromText = std::function<Status(std::string_view text, Column* col)>;

// Row `row` of the list column `list` as JSON text.
Result<std::string> FormatListJson(const Column& list, size_t row, const ElementToText& text);
// Appends the list that the JSON text `json` holds as one row of the list column `list`. On an
// error nothing is appended, and the error names the element that does not fit.
Status AppendListJson(std::string_view json, Column* list, const ElementFromText& parse);

}  // namespace ferry
