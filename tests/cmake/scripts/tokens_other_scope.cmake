# SPDX-License-Identifier: Apache-2.0
# Scenario script: the token functions called from a scope other than the one that included the
# module (as from a sibling directory: the module is included once, GLOBAL guard) must read a
# plain list themselves and hand only nvcc flag syntax to the tool. With no tool allowed, a
# plain list parses and a flag list fails saying why.
cmake_policy(VERSION 3.18)
function(_load_tokens)  # whatever the module sets at include time stays in this scope
  include("${MODULE_DIR}/CudaArchGuardTokens.cmake")
endfunction()
_load_tokens()
set(CudaArchGuard_BUILTIN_VERIFIER OFF)
_cag_tokens_parse("80;90a-real;8.6+PTX;Hopper" _items _err)
message(STATUS "plain: items=${_items} error=${_err}")
_cag_tokens_parse("-arch=sm_80" _items _err)
message(STATUS "flags: items=${_items} error=${_err}")
