#include "kernels/emu/symbol_names.h"

#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <vector>

namespace attnbench::emu {
namespace {

struct FunctionSymbol {
  uint64_t start = 0;  // as the file states it (relative to the load base for PIE and .so)
  uint64_t size = 0;
  std::string name;
};

struct SymbolTable {
  bool relative = true;  // ET_DYN: addresses are offsets from the load base
  std::map<uint64_t, FunctionSymbol> by_start;
};

// The function symbols of an ELF64 file's .symtab; empty when it has none or is not ELF64.
SymbolTable read_symbol_table(const char* path) {
  SymbolTable table;
  std::ifstream file(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)), {});
  if (bytes.size() < sizeof(Elf64_Ehdr) || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0 ||
      bytes[EI_CLASS] != ELFCLASS64) {
    return table;
  }
  Elf64_Ehdr header;
  std::memcpy(&header, bytes.data(), sizeof header);
  table.relative = header.e_type == ET_DYN;
  const auto section = [&](size_t index) {
    Elf64_Shdr s{};
    const size_t at = header.e_shoff + index * sizeof(Elf64_Shdr);
    if (at + sizeof s <= bytes.size()) std::memcpy(&s, bytes.data() + at, sizeof s);
    return s;
  };
  for (size_t i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr symbols = section(i);
    if (symbols.sh_type != SHT_SYMTAB || symbols.sh_entsize != sizeof(Elf64_Sym)) continue;
    const Elf64_Shdr strings = section(symbols.sh_link);
    if (symbols.sh_offset + symbols.sh_size > bytes.size() ||
        strings.sh_offset + strings.sh_size > bytes.size()) {
      continue;
    }
    for (size_t s = 0; s < symbols.sh_size / sizeof(Elf64_Sym); ++s) {
      Elf64_Sym symbol;
      std::memcpy(&symbol, bytes.data() + symbols.sh_offset + s * sizeof symbol, sizeof symbol);
      if (ELF64_ST_TYPE(symbol.st_info) != STT_FUNC || symbol.st_value == 0 ||
          symbol.st_name >= strings.sh_size) {
        continue;
      }
      const char* name = bytes.data() + strings.sh_offset + symbol.st_name;
      table.by_start[symbol.st_value] = {
          symbol.st_value, symbol.st_size,
          std::string(name, strnlen(name, strings.sh_size - symbol.st_name))};
    }
  }
  return table;
}

}  // namespace

std::string symbol_name(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0) return {};
  if (info.dli_sname != nullptr && info.dli_saddr == address) return info.dli_sname;
  if (info.dli_fname == nullptr) return {};
  static std::mutex mutex;
  static std::map<std::string, SymbolTable> tables;  // by file, read on first use
  std::lock_guard<std::mutex> lock(mutex);
  auto found = tables.find(info.dli_fname);
  if (found == tables.end()) {
    found = tables.emplace(info.dli_fname, read_symbol_table(info.dli_fname)).first;
  }
  const SymbolTable& table = found->second;
  const uint64_t base = table.relative ? reinterpret_cast<uint64_t>(info.dli_fbase) : 0;
  const uint64_t wanted = reinterpret_cast<uint64_t>(address) - base;
  auto at = table.by_start.upper_bound(wanted);
  if (at == table.by_start.begin()) return {};
  --at;
  const FunctionSymbol& symbol = at->second;
  return wanted < symbol.start + std::max<uint64_t>(symbol.size, 1) ? symbol.name : std::string();
}

}  // namespace attnbench::emu
