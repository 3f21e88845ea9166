#include "common/codec/role.h"

#include "common/codec/enum_names.h"

namespace imhash {

const char* to_string(Role r) {
  switch (r) {
    case Role::kHash:
      return "hash";
    case Role::kLogin:
      return "login";
  }
  return "?";
}

std::optional<Role> parse_role(std::string_view text) {
  return parse_name(text, kRoles, to_string);
}

}  // namespace imhash
