// SPDX-License-Identifier: Apache-2.0
// The wheel section's libdeflate anchor (bench_inspect.sh): one inflate pass over every member
// of a zip with the fastest inflater, libdeflate, each member in one shot into a buffer of its
// size, its CRC-32 checked (as python's zipfile and unzip check it). Prints
// "members N inflated BYTES"; exits 1 on any member it cannot inflate.
// Not hardened against hostile zips: a benchmark over a wheel the script chose.
#include <libdeflate.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint32_t u16(const unsigned char* p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t u32(const unsigned char* p) { return u16(p) | u16(p + 2) << 16; }

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: inflate_floor ZIP\n");
    return 2;
  }
  int fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 22) {
    perror(argv[1]);
    return 2;
  }
  size_t size = (size_t)st.st_size;
  const unsigned char* z = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (z == MAP_FAILED) {
    perror("mmap");
    return 2;
  }
  size_t eocd = size - 22;
  while (eocd > 0 && u32(z + eocd) != 0x06054b50) --eocd;
  if (u32(z + eocd) != 0x06054b50) {
    fprintf(stderr, "%s: no end record\n", argv[1]);
    return 1;
  }
  uint32_t entries = u16(z + eocd + 10);
  size_t at = u32(z + eocd + 16);
  struct libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  unsigned char* out = NULL;
  size_t cap = 0;
  unsigned long long members = 0, total = 0;
  for (uint32_t i = 0; i < entries; ++i) {
    if (at + 46 > size || u32(z + at) != 0x02014b50) {
      fprintf(stderr, "%s: bad central directory\n", argv[1]);
      return 1;
    }
    uint32_t method = u16(z + at + 10), crc = u32(z + at + 16), csize = u32(z + at + 20), usize = u32(z + at + 24);
    size_t local = u32(z + at + 42);
    at += 46 + u16(z + at + 28) + u16(z + at + 30) + u16(z + at + 32);
    if (local + 30 > size) return 1;
    size_t data = local + 30 + u16(z + local + 26) + u16(z + local + 28);
    if (data + csize > size) return 1;
    if (usize > cap) {
      free(out);
      cap = usize;
      out = malloc(cap);
    }
    if (method == 8) {
      if (libdeflate_deflate_decompress(d, z + data, csize, out, usize, NULL) != LIBDEFLATE_SUCCESS) {
        fprintf(stderr, "%s: member %u does not inflate\n", argv[1], i);
        return 1;
      }
    } else if (method == 0) {
      memcpy(out, z + data, usize);
    } else {
      fprintf(stderr, "%s: member %u: method %u\n", argv[1], i, method);
      return 1;
    }
    if (libdeflate_crc32(0, out, usize) != crc) {
      fprintf(stderr, "%s: member %u: bad crc-32\n", argv[1], i);
      return 1;
    }
    ++members;
    total += usize;
  }
  printf("members %llu inflated %llu\n", members, total);
  return 0;
}
