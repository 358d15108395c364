// SPDX-License-Identifier: Apache-2.0
// The floor for bench/bench_inspect.sh: the least work that finds what `archguard inspect`
// finds in an ELF file, in plain C with no dependency. It maps the file, walks the section
// headers, parses the fatbins of .nv_fatbin and __nv_relfatbin (header, then each entry
// header), and searches the same loaded data sections the reader searches for fatbins kept as
// data (8-aligned magic, then a strictly valid header and entry chain), dropping each 1 MiB
// searched and each fatbin parsed from memory as the reader does (MADV_DONTNEED). One thread.
// Layout: docs/fatbin-format.md; the rules mirror src/fatbin/fatbin.cpp (embedded_regions,
// plausible_fatbin, walk_region).
//
// Built with -DFLOOR_DECODE (and -lzstd -llz4) it also decodes every image, as
// `inspect --kernels` does, and counts the kernels: cubin symbols STT_FUNC with st_other 0x10,
// PTX `.entry` directives; LTO-IR is left alone, as by the reader. No demangling, no output but the counts.
//
// Usage: fatbin_floor FILE...   prints "files F fatbins N entries E [kernels K bytes B]"
// Files that are not 64-bit little-endian ELF (or that cannot be read) count as files without
// device code; a malformed standard section fails (exit 1), as it does for the reader.
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef FLOOR_DECODE
#include <lz4.h>
#include <zstd.h>
#endif

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_HEADER 16u
#define ENTRY_MIN 64u
#define CHUNK ((uint64_t)1 << 20)

static uint64_t n_fatbins, n_entries;
#ifdef FLOOR_DECODE
static uint64_t n_kernels, n_bytes;
#endif
static long page;

static uint16_t u16(const unsigned char* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}
static uint32_t u32(const unsigned char* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint64_t u64(const unsigned char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/// Drops [off, off+len) of the mapping at `map` from memory (whole pages inside it only).
static void release(const unsigned char* map, uint64_t off, uint64_t len) {
  uint64_t b = (off + (uint64_t)page - 1) / (uint64_t)page * (uint64_t)page, e = (off + len) / (uint64_t)page * (uint64_t)page;
  if (e > b) madvise((void*)(map + b), e - b, MADV_DONTNEED);
}

#ifdef FLOOR_DECODE
static unsigned char* buf;
static size_t buf_size;
static ZSTD_DCtx* dctx;

/// Kernels of a decoded cubin: symbols STT_FUNC with st_other bit 0x10 and a name.
static uint64_t cubin_kernels(const unsigned char* im, uint64_t n) {
  if (n < sizeof(Elf64_Ehdr) || memcmp(im, ELFMAG, SELFMAG) != 0 || im[EI_CLASS] != ELFCLASS64) return 0;
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)im;
  if (eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > n) return 0;
  const Elf64_Shdr* sh = (const Elf64_Shdr*)(im + eh->e_shoff);
  uint64_t k = 0;
  for (unsigned i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_offset + sh[i].sh_size > n || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr* str = &sh[sh[i].sh_link];
    for (uint64_t o = 0; o + sizeof(Elf64_Sym) <= sh[i].sh_size; o += sizeof(Elf64_Sym)) {
      Elf64_Sym s;
      memcpy(&s, im + sh[i].sh_offset + o, sizeof s);
      if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || (s.st_other & 0x10) == 0) continue;
      if (s.st_name == 0 || s.st_name >= str->sh_size || im[str->sh_offset + s.st_name] == 0) continue;
      ++k;
    }
  }
  return k;
}

/// Kernels of PTX text: lines whose first directive, after .visible/.weak/.extern, is .entry.
static uint64_t ptx_kernels(const unsigned char* im, uint64_t n) {
  uint64_t k = 0;
  const char* p = (const char*)im;
  const char* end = p + strnlen(p, n);
  while (p < end) {
    const char* nl = memchr(p, '\n', (size_t)(end - p));
    const char* e = nl ? nl : end;
    while (p < e && (*p == ' ' || *p == '\t')) ++p;
    for (int again = 1; again;) {
      again = 0;
      static const char* const pre[] = {".visible", ".weak", ".extern"};
      for (int i = 0; i < 3; ++i) {
        size_t l = strlen(pre[i]);
        if ((size_t)(e - p) > l && memcmp(p, pre[i], l) == 0 && (p[l] == ' ' || p[l] == '\t')) {
          p += l;
          while (p < e && (*p == ' ' || *p == '\t')) ++p;
          again = 1;
        }
      }
    }
    if (e - p > 6 && memcmp(p, ".entry", 6) == 0 && (p[6] == ' ' || p[6] == '\t')) ++k;
    p = e + 1;
  }
  return k;
}

static void decode(const unsigned char* e, uint64_t hs, uint64_t stored) {
  const uint16_t kind = u16(e);
  if (kind == 8) return;  // LTO-IR is not decoded (as by inspect --kernels)
  const uint32_t csize = u32(e + 0x10);
  const uint64_t flags = u64(e + 0x28), usize = u64(e + 0x38);
  const unsigned char* in = e + hs;
  const unsigned char* im = in;
  uint64_t n = stored;
  if (flags & 0xA000) {
    if (usize > buf_size) {
      free(buf);
      buf_size = usize;
      buf = malloc(buf_size);
      if (!buf) {
        fprintf(stderr, "fatbin_floor: out of memory\n");
        exit(1);
      }
    }
    if (flags & 0x2000) {
      const int r = LZ4_decompress_safe((const char*)in, (char*)buf, (int)(csize ? csize : stored), (int)usize);
      if (r < 0) {
        fprintf(stderr, "fatbin_floor: lz4 payload is corrupt (csize %u stored %llu usize %llu)\n", csize, (unsigned long long)stored, (unsigned long long)usize);
        exit(1);
      }
      n = (uint64_t)r;
    } else {
      const size_t r = ZSTD_decompressDCtx(dctx, buf, usize, in, csize ? csize : stored);
      if (ZSTD_isError(r)) {
        fprintf(stderr, "fatbin_floor: zstd payload is corrupt\n");
        exit(1);
      }
      n = r;
    }
    im = buf;
  }
  n_bytes += n;
  if (kind == 2 || kind == 4) n_kernels += cubin_kernels(im, n);
  else if (kind == 1) n_kernels += ptx_kernels(im, n);
}
#endif

/// The fatbin at `at` of [0, size): entries walked, each bounded by the fatbin's end. Returns
/// its size (header + entries), 0 when malformed.
static uint64_t parse_fatbin(const unsigned char* b, uint64_t at, uint64_t size) {
  if (size - at < FATBIN_HEADER || u32(b + at) != FATBIN_MAGIC) return 0;
  const uint64_t hs = u16(b + at + 6), fat = u64(b + at + 8);
  if (hs < FATBIN_HEADER || fat > size - at - hs) return 0;
  const uint64_t end = at + hs + fat;
  uint64_t count = 0;
  for (uint64_t e = at + hs; e < end;) {
    if (end - e < ENTRY_MIN) return 0;
    const uint32_t ehs = u32(b + e + 4);
    const uint64_t stored = u64(b + e + 8);
    if (ehs < ENTRY_MIN || ehs > end - e || stored == 0 || stored > end - e - ehs) return 0;
#ifdef FLOOR_DECODE
    decode(b + e, ehs, stored);
#endif
    e += ehs + stored;
    ++count;
  }
  ++n_fatbins;
  n_entries += count;
  return end - at;
}

/// The test a fatbin kept as data must pass (plausible_fatbin in src/fatbin/fatbin.cpp).
static int plausible(const unsigned char* b, uint64_t at, uint64_t size) {
  if (size - at < FATBIN_HEADER + ENTRY_MIN) return 0;
  if (u16(b + at + 4) != 1 || u16(b + at + 6) != FATBIN_HEADER) return 0;
  const uint64_t fat = u64(b + at + 8);
  if (fat < ENTRY_MIN || fat > size - at - FATBIN_HEADER) return 0;
  const uint64_t end = at + FATBIN_HEADER + fat;
  uint64_t e = at + FATBIN_HEADER;
  while (e < end) {
    if (end - e < ENTRY_MIN) return 0;
    const uint16_t kind = u16(b + e);
    if (kind != 1 && kind != 2 && kind != 4 && kind != 8) return 0;
    if (u16(b + e + 2) != 0x0101) return 0;
    const uint32_t hs = u32(b + e + 4);
    if (hs < ENTRY_MIN || hs > 0x1000 || hs % 8 != 0 || hs > end - e) return 0;
    const uint64_t stored = u64(b + e + 8);
    if (stored == 0 || stored > end - e - hs) return 0;
    e += hs + stored;
  }
  return e == end;
}

/// A section that may hold fatbins as data (embedded_regions in src/fatbin/fatbin.cpp).
static int searched(const Elf64_Shdr* s, const char* name) {
  if (s->sh_type != SHT_PROGBITS || !(s->sh_flags & SHF_ALLOC) || (s->sh_flags & SHF_EXECINSTR)) return 0;
  if (!strcmp(name, ".nv_fatbin") || !strcmp(name, "__nv_relfatbin") || s->sh_size < FATBIN_HEADER + ENTRY_MIN) return 0;
  return strncmp(name, ".eh_frame", 9) && strncmp(name, ".gcc_except_table", 17) && strncmp(name, ".got", 4);
}

static int by_offset(const void* a, const void* b) {
  const Elf64_Shdr* x = *(const Elf64_Shdr* const*)a;
  const Elf64_Shdr* y = *(const Elf64_Shdr* const*)b;
  return x->sh_offset < y->sh_offset ? -1 : x->sh_offset > y->sh_offset;
}

static int read_file(const char* path) {
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
    close(fd);
    return 0;
  }
  const uint64_t size = (uint64_t)st.st_size;
  unsigned char* m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return 0;
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)m;
  if (memcmp(m, ELFMAG, SELFMAG) != 0 || m[EI_CLASS] != ELFCLASS64 || m[EI_DATA] != ELFDATA2LSB ||
      eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
      (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size - eh->e_shoff || eh->e_shstrndx >= eh->e_shnum ||
      eh->e_machine == 190 /* a cubin: no fatbins kept as data */) {
    munmap(m, size);
    return 0;
  }
  const Elf64_Shdr* sh = (const Elf64_Shdr*)(m + eh->e_shoff);
  const Elf64_Shdr* strs = &sh[eh->e_shstrndx];
  const char* names = (const char*)m + strs->sh_offset;
  int rc = 0;
  // the standard sections: fatbins back to back, zero padding between them
  for (int pass = 0; pass < 2; ++pass) {
    for (unsigned i = 0; i < eh->e_shnum; ++i) {
      const Elf64_Shdr* s = &sh[i];
      if (s->sh_name >= strs->sh_size || strcmp(names + s->sh_name, pass ? "__nv_relfatbin" : ".nv_fatbin") != 0) continue;
      if (s->sh_type == SHT_NOBITS || s->sh_offset > size || s->sh_size > size - s->sh_offset) {
        rc = 1;
        continue;
      }
      const unsigned char* b = m + s->sh_offset;
      for (uint64_t pos = 0; pos < s->sh_size;) {
        if (b[pos] == 0) {
          ++pos;
          continue;
        }
        const uint64_t n = parse_fatbin(b, pos, s->sh_size);
        if (n == 0) {
          fprintf(stderr, "fatbin_floor: %s: malformed fatbin at 0x%llx\n", path, (unsigned long long)(s->sh_offset + pos));
          rc = 1;
          break;
        }
        release(m, s->sh_offset + pos, n);
        pos += n;
      }
    }
  }
  // the data sections, in file order, none overlapping one before it
  const Elf64_Shdr** regions = malloc(sizeof *regions * (eh->e_shnum + 1u));
  unsigned nr = 0;
  for (unsigned i = 0; i < eh->e_shnum; ++i) {
    const Elf64_Shdr* s = &sh[i];
    if (s->sh_name >= strs->sh_size || !searched(s, names + s->sh_name)) continue;
    if (s->sh_offset > size || s->sh_size > size - s->sh_offset) continue;
    regions[nr++] = s;
  }
  qsort(regions, nr, sizeof *regions, by_offset);
  uint64_t covered = 0;
  for (unsigned r = 0; r < nr; ++r) {
    const Elf64_Shdr* s = regions[r];
    if (s->sh_offset < covered) continue;
    covered = s->sh_offset + s->sh_size;
    const unsigned char* b = m + s->sh_offset;
    const uint64_t last = s->sh_size - FATBIN_HEADER;
    uint64_t pos = (8 - s->sh_addr % 8) % 8, done = 0;
    for (; pos <= last; pos += 8) {
      if (pos - done >= CHUNK) {  // the 1 MiB behind is searched: drop it
        release(m, s->sh_offset + done, pos - done);
        done = pos;
      }
      if (u32(b + pos) != FATBIN_MAGIC || !plausible(b, pos, s->sh_size)) continue;
      const uint64_t n = parse_fatbin(b, pos, s->sh_size);
      if (n == 0) continue;
      pos += (n + 7) / 8 * 8 - 8;
    }
    release(m, s->sh_offset + done, s->sh_size - done);
  }
  free(regions);
  munmap(m, size);
  return rc;
}

int main(int argc, char** argv) {
  page = sysconf(_SC_PAGESIZE);
#ifdef FLOOR_DECODE
  dctx = ZSTD_createDCtx();
#endif
  int rc = 0;
  for (int i = 1; i < argc; ++i) rc |= read_file(argv[i]);
#ifdef FLOOR_DECODE
  printf("files %d fatbins %llu entries %llu kernels %llu bytes %llu\n", argc - 1, (unsigned long long)n_fatbins,
         (unsigned long long)n_entries, (unsigned long long)n_kernels, (unsigned long long)n_bytes);
#else
  printf("files %d fatbins %llu entries %llu\n", argc - 1, (unsigned long long)n_fatbins, (unsigned long long)n_entries);
#endif
  return rc;
}
