// SPDX-License-Identifier: Apache-2.0
// The enum-to-text tables (common::Named, name_in) answer "?" for an enumerator they do not list,
// so the compiler says nothing when an enumerator is added to an enum and not to its table.
// Here the enumerators are found by the compiler itself (no list to keep up to date): each
// must have a name of its own.
#include <archguard/coverage.hpp>
#include <archguard/doctor.hpp>
#include <archguard/fatbin.hpp>

#include "cli.hpp"
#include "verb_inputs.hpp"

#include <catch2/catch.hpp>

#include <string_view>
#include <utility>
#include <vector>

using namespace archguard;

namespace {

/// Whether V is an enumerator of its enum: GCC and Clang write a value that names none as a
/// cast in the function's name ("[with auto V = (archguard::Tier)6]", "[V = (archguard::Tier)6]").
template <auto V>
constexpr bool is_enumerator() {
  constexpr std::string_view f = __PRETTY_FUNCTION__;
  constexpr auto at = f.find("V = ");
  static_assert(at != std::string_view::npos, "a compiler that spells template arguments otherwise");
  return f[at + 4] != '(';
}

/// The enumerators of E among the values 0 to 63 (all of them, for the enums with name tables).
template <class E, std::size_t... I>
std::vector<E> enumerators(std::index_sequence<I...>) {
  std::vector<E> all;
  ((is_enumerator<static_cast<E>(I)>() ? all.push_back(static_cast<E>(I)) : void()), ...);
  return all;
}

/// Checks that `name` gives every enumerator of E a name other than "?".
template <class E, class Name>
void check_named(Name name) {
  const std::vector<E> all = enumerators<E>(std::make_index_sequence<64>());
  CHECK(all.size() >= 3);
  for (const E e : all) {
    INFO("enumerator " << static_cast<int>(e));
    CHECK(std::string_view(name(e)) != "?");
  }
}

const auto library_name = [](auto v) { return to_string(v); };

}  // namespace

TEST_CASE("the enumerators of an enum are found without a list", "[names]") {
  CHECK(enumerators<doctor::Level>(std::make_index_sequence<64>()) ==
        std::vector<doctor::Level>{doctor::Level::pass, doctor::Level::warn, doctor::Level::fail, doctor::Level::skip});
}

TEST_CASE("every enumerator of every name table has a name", "[names]") {
  check_named<CodeKind>([](CodeKind v) { return cli::kind_text(v); });
  check_named<Outcome>([](Outcome v) { return cli::outcome_text(v); });
  check_named<Compression>(library_name);
  check_named<FatbinSection>(library_name);
  check_named<UnitStatus>(library_name);
  check_named<ObjectKind>(library_name);
  check_named<Tier>(library_name);
  check_named<doctor::Level>(library_name);
  check_named<doctor::FixKind>(library_name);
}
