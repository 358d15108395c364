// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// Windows binaries (PE/COFF: .dll, .exe, .pyd). nvcc on Windows puts the fatbins where it puts
/// them on Linux, in sections whose names PE cuts to eight characters: `.nv_fatb` (the
/// whole-program fatbins, as `.nv_fatbin`), `__nv_rel` (`-rdc` code, as `__nv_relfatbin`) and
/// `.nvFatBi` (the registration wrappers). They are read like their ELF counterparts, so that
/// Windows wheels can be judged on Linux (docs/fatbin-format.md).

#include <archguard/fatbin.hpp>

#include <string>

namespace archguard {

/// Whether `bytes` start like a PE image: "MZ", and e_lfanew pointing at "PE\0\0".
bool looks_like_pe(Bytes bytes);

/// The device code of a PE image. `elf_type` of the object says what the image is in ELF terms
/// (ET_DYN for a DLL or .pyd, ET_EXEC for an executable) and `machine` its ELF machine (62 for
/// x86-64, 183 for ARM64), so that verdicts read it like the ELF file it stands for, and `pe` is set. Errors name the file, the offset and the value.
Result<ObjectFatbins> read_pe(Bytes bytes, std::string path, std::string archive = {}, std::string member = {});

}  // namespace archguard
