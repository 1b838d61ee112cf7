// The name of an emulated kernel for `attnbench profile`: an emulated launch knows its kernel only
// by address. dladdr names exported functions; the kernels are local to the executable, so the
// name comes from the symbol table (.symtab) of the file the address lies in, read once per file.
#pragma once

#include <string>

namespace attnbench::emu {

// The mangled symbol of the function at `address`; empty when no symbol table names it (a
// stripped binary).
std::string symbol_name(const void* address);

}  // namespace attnbench::emu
