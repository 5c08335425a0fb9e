// NamedType<T, Tag>: a strong type over a value, so that positions and ids of different kinds
// cannot be mixed up or compared as text by accident.
#pragma once

#include <compare>
#include <functional>
#include <utility>

namespace ferry {

template <typename T, typename Tag>
class NamedType {
 public:
  using value_type = T;
  constexpr NamedType() = default;
  constexpr explicit NamedType(T v) : v_(std::move(v)) {}
  constexpr const T& value() const { return v_; }
  auto operator<=>(const NamedType&) const = default;
  bool operator==(const NamedType&) const = default;

 private:
  T v_{};
};

}  // namespace ferry
