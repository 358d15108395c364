// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// CUDA fatbinaries: the fatbins in an ELF file's .nv_fatbin and __nv_relfatbin sections and
/// those kept as data in its other loaded sections, files that are device code by themselves
/// (cubin, PTX, LTO-IR) as one-entry fatbins, the translation unit of each fatbin, the images
/// (entries) in each, every entry-header field, and on demand the payloads (decompressed
/// with liblz4 / libzstd) and the kernel entry points they define. The layout is described in
/// docs/fatbin-format.md. No CUDA runtime is involved; nothing is printed.
///
/// Lifetime: Fatbin and FatbinEntry hold spans into the bytes they were parsed from (a mapped
/// file, an archive member, process memory); those bytes must outlive them.

#include <archguard/arch.hpp>
#include <archguard/bytes.hpp>
#include <archguard/compat.hpp>
#include <archguard/elf.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace archguard {

inline constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;
inline constexpr std::uint32_t kFatbinWrapperMagic = 0x466243B1;

/// One field of an on-disk header: its offset from the header's start and its width in bytes
/// (little endian).
struct HeaderField {
  std::uint64_t offset;
  std::uint64_t size;
};

/// The fatbin header: 16 bytes, then `fat_size` bytes of entries. docs/fatbin-format.md
/// describes the same fields under the same names; Fatbin::parse validates them.
struct FatbinHeaderLayout {
  static constexpr HeaderField magic{0x00, 4};        ///< kFatbinMagic
  static constexpr HeaderField version{0x04, 2};      ///< 1
  static constexpr HeaderField header_size{0x06, 2};  ///< 16: the entries start here
  static constexpr HeaderField fat_size{0x08, 8};     ///< bytes of entries after the header
  static constexpr std::uint64_t size = 0x10;
};

/// An entry header (one per image), at least 0x40 bytes; the image follows at `header_size`.
/// docs/fatbin-format.md describes the same fields under the same names; the entry parser
/// validates each one.
struct EntryHeaderLayout {
  static constexpr HeaderField kind{0x00, 2};               ///< kEntryKind*
  static constexpr HeaderField version{0x02, 2};            ///< 0x0101 in every fatbin nvcc writes
  static constexpr HeaderField header_size{0x04, 4};        ///< the image starts at entry + header_size
  static constexpr HeaderField stored_size{0x08, 8};        ///< the image's bytes, padded to 8
  static constexpr HeaderField compressed_size{0x10, 4};    ///< exact compressed size, 0 when not compressed
  static constexpr HeaderField options_offset{0x14, 4};     ///< to an options record {u32 offset, u32 length}
  static constexpr HeaderField minor{0x18, 2};              ///< PTX ISA minor / cubin ABI minor
  static constexpr HeaderField major{0x1A, 2};              ///< PTX ISA major / cubin ABI version
  static constexpr HeaderField arch{0x1C, 4};               ///< architecture number (90, 100, 120)
  static constexpr HeaderField identifier_offset{0x20, 4};  ///< 0: no identifier
  static constexpr HeaderField identifier_length{0x24, 4};  ///< without the NUL
  static constexpr HeaderField flags{0x28, 8};              ///< kEntryFlag*
  static constexpr HeaderField uncompressed_size{0x38, 8};  ///< 0 when not compressed
  static constexpr std::uint64_t min_size = 0x40;
};

inline constexpr std::uint64_t kFatbinHeaderSize = FatbinHeaderLayout::size;
inline constexpr std::uint64_t kEntryHeaderMinSize = EntryHeaderLayout::min_size;

/// Raw entry kinds (fatbin entry header +0x00).
inline constexpr std::uint16_t kEntryKindPtx = 1;
inline constexpr std::uint16_t kEntryKindElf = 2;
inline constexpr std::uint16_t kEntryKindOldCubin = 4;
inline constexpr std::uint16_t kEntryKindLtoIr = 8;

/// Entry flags (entry header +0x28).
inline constexpr std::uint64_t kEntryFlag64Bit = 0x1;
inline constexpr std::uint64_t kEntryFlagDebug = 0x2;
inline constexpr std::uint64_t kEntryFlagLz4 = 0x2000;
inline constexpr std::uint64_t kEntryFlagZstd = 0x8000;
inline constexpr std::uint64_t kEntryFlagArchSpecific = 0x100000;
inline constexpr std::uint64_t kEntryFlagFamilySpecific = 0x200000;
inline constexpr std::uint64_t kEntryFlagCompatExtension = 0x1000000;

/// The largest payload the reader decompresses (256 MiB). The biggest image in NVIDIA's CUDA
/// 13.0 libraries is far below 16 MiB; a header claiming more is treated as corrupt rather
/// than trusted with an allocation.
inline constexpr std::uint64_t kMaxImageSize = std::uint64_t{256} << 20;

enum class Compression : std::uint8_t { none,
                                        lz4,
                                        zstd };

/// Told about byte ranges (offset and length in the file) the parser has finished reading, so
/// that a memory mapping can drop those pages: on a 500 MB library the entry headers are spread
/// over every page, and the kernel maps the neighbours of each one it faults in. Optional.
/// The same signature announces ranges about to be read in full (prefetch).
using ReleaseHook = std::function<void(std::uint64_t offset, std::uint64_t length)>;

/// The first offset (in the file) at or after `offset` that may hold bytes other than zeros:
/// the holes of a sparse file are skipped rather than read (a 16 GiB sparse ELF of 4 KB on disk
/// cost 49 s and 22 GB of page cache). Optional; without it every byte is looked at.
using DataHook = std::function<std::uint64_t(std::uint64_t offset)>;

/// Where a fatbin came from.
enum class FatbinSection : std::uint8_t {
  nv_fatbin,     ///< .nv_fatbin: whole-program fatbins
  nv_relfatbin,  ///< __nv_relfatbin: relocatable (-rdc) fatbins the driver JIT-links
  memory,        ///< a region handed over by the caller (e.g. a loaded module), or a fatbin file
  /// Found as data in another loaded section of an ELF file (.rodata, .ldata, .cask_resource ...):
  /// libraries such as cuFFT keep fatbins there and load them themselves (cuModuleLoadData).
  embedded,
  /// Synthesised for a file that is device code itself: a cubin, a PTX file or an LTO-IR file.
  standalone,
};

std::string_view to_string(Compression c);
std::string_view to_string(FatbinSection s);

/// One image of a fatbin: every field of its entry header, decoded and validated.
struct FatbinEntry {
  std::size_t index = 0;       ///< position in its fatbin, from 0
  std::uint64_t offset = 0;    ///< of the entry header, in the file (or region)
  std::uint16_t raw_kind = 0;  ///< 1 PTX, 2 ELF, 4 old cubin, 8 LTO-IR
  CodeKind kind = CodeKind::sass;
  Arch arch;         ///< with the a/f suffix from the flags
  Version2 version;  ///< PTX: PTX ISA version; ELF: code (ELF ABI) version
  std::uint32_t header_size = 0;
  std::uint64_t stored_size = 0;        ///< payload bytes in the file (padded)
  std::uint32_t compressed_size = 0;    ///< exact compressed length, 0 when not compressed
  std::uint64_t uncompressed_size = 0;  ///< 0 when not compressed
  Compression compression = Compression::none;
  std::uint64_t flags = 0;
  bool debug = false;                ///< built with -G
  std::string identifier;            ///< empty when none
  std::string options;               ///< e.g. ptxas options for PTX; empty when none
  std::vector<std::byte> extension;  ///< the binary record of ELF entries with .nv.compat
  Bytes payload;                     ///< the stored payload bytes (compressed when compressed)

  /// Size of the image once decompressed.
  std::uint64_t image_size() const {
    return compression == Compression::none ? stored_size : uncompressed_size;
  }
};

/// One fatbin: header plus entries.
class Fatbin {
 public:
  std::size_t index = 0;     ///< position among the fatbins of its object, from 0
  std::uint64_t offset = 0;  ///< of the fatbin header, in the file (or region)
  std::uint16_t version = 0;
  std::uint64_t size = 0;  ///< header + entries
  FatbinSection section = FatbinSection::nv_fatbin;
  /// The ELF section the fatbin was found in (".nv_fatbin", "__nv_relfatbin", ".ldata", ...);
  /// empty for memory regions, fatbin files and standalone device-code files.
  std::string section_name;
  /// The translation unit nvcc compiled it from ("old_tu.cu"), read from the symbol table: the
  /// STT_FILE symbol `tmpxft_<hex>_<hex>-<n>_<tu>.cudafe1.cpp` whose local `fatbinData` symbol
  /// sits at this fatbin's address. nvcc's intermediate name drops the source's extension;
  /// ".cu" is assumed. Empty when stripped, for the device-link fatbin and where unknown.
  std::string translation_unit;
  /// Registered by a version-2 (.nvFatBinSegment) wrapper: the fatbin nvlink wrote at link time.
  bool linked = false;
  /// The device-link fatbin of a non-rdc link: linked, and its code defines no kernel. It
  /// decides nothing (rule 9). In an -rdc executable the linked fatbin holds every kernel
  /// and is not marked.
  bool device_link = false;
  std::vector<FatbinEntry> entries;

  /// Parses the fatbin starting at `offset` of `reader`. `index` numbers it in messages.
  static Result<Fatbin> parse(const ByteReader& reader, std::uint64_t offset, std::size_t index);

  /// Parses every fatbin of a region laid out as in .nv_fatbin: back to back, tolerating zero
  /// padding to 8 bytes between and after them. `name` names the region in messages and
  /// `base` is the region's offset in its file (0 for memory).
  static Result<std::vector<Fatbin>> parse_all(Bytes bytes, std::string name,
                                               FatbinSection section = FatbinSection::memory,
                                               std::uint64_t base = 0, const ReleaseHook& release = {},
                                               const DataHook& next_data = {});

  /// The images as the compatibility engine sees them.
  std::vector<Image> images() const;
  /// The identifier of the first entry that has one ("kernels.cu"), or "".
  std::string identifier() const;
  /// Whether every image is arch- or family-specific (a/f).
  bool only_specific() const;
};

/// The device code of one ELF object (a file, an archive member or a memory region).
struct ObjectFatbins {
  std::string path;     ///< display path: "lib.so", "lib.a:member.o", "x.whl:pkg/lib.so"
  std::string archive;  ///< the outer file when this is a member, else empty
  std::string member;   ///< member path inside the archive, else empty
  std::uint16_t elf_type = 0;
  std::uint16_t machine = 0;
  std::vector<Fatbin> fatbins;  ///< .nv_fatbin first, then __nv_relfatbin
  /// The object whose DT_NEEDED loads this one (a shared library found by the dependency walk,
  /// see deps.hpp); empty for an input named by the user.
  std::string loaded_by;
  /// Read from a Windows PE/COFF image (pe.hpp); elf_type and machine then say what it stands for.
  bool pe = false;
  /// An ET_DYN object flagged DF_1_PIE: a position-independent executable, not a shared library.
  bool pie = false;
  /// What finds this object again in the results cache (FactsStore): the identity of the file it
  /// was read from (device, inode, size, modification and change times), then, for an archive
  /// member, a line with its ordinal and path ("<archive identity>\n<ordinal> <member>"); an
  /// archive's members merged by judged_objects have merged_identity(). Empty when the scan had
  /// no store, the file changed in the last two seconds, or the bytes came from memory: nothing
  /// is then kept or looked up.
  std::string identity;

  /// The object of a parsed ELF file (type and machine from its header) that holds `fatbins`;
  /// `archive` and `member` name the enclosing archive, empty when there is none.
  static ObjectFatbins of_elf(const ElfFile& elf, std::string path, std::string archive, std::string member,
                              std::vector<Fatbin> fatbins);
};

/// The most bytes of kernel names one image may yield, mangled and demangled counted together
/// (64 MiB; the image with the most kernels in NVIDIA's libraries yields a few MiB). The image
/// size limit bounds an image, not what is derived from it: 20,000 symbols sharing one long
/// name in a 1 MB compressed image would otherwise copy and demangle gigabytes.
inline constexpr std::uint64_t kMaxKernelNameBytes = std::uint64_t{64} << 20;
/// Names longer than this are listed as they are, not demangled (64 KiB).
inline constexpr std::size_t kMaxDemangledInput = std::size_t{64} << 10;
/// The embedded-fatbin search's work bound (find_embedded_fatbins): entry headers checked per
/// 8 bytes searched, plus a floor per search.
inline constexpr std::uint64_t kSearchWorkPer8Bytes = 2;
inline constexpr std::uint64_t kSearchWorkFloor = std::uint64_t{1} << 16;

/// The limits on what is derived from an input rather than on the input itself (docs/cli.md,
/// "what is derived from input is bounded too"). The defaults are the constants above; the CLI
/// overrides them (ARCHGUARD_MAX_NAME_LENGTH, ARCHGUARD_MAX_KERNEL_NAMES, ARCHGUARD_MAX_SEARCH_WORK).
struct DerivedLimits {
  /// The longest name read from a string table (section, symbol, DT_NEEDED).
  std::uint64_t max_name_length = kMaxNameLength;
  /// The most bytes of kernel names one image may yield, mangled and demangled together.
  std::uint64_t max_kernel_name_bytes = kMaxKernelNameBytes;
  /// Entry headers the embedded-fatbin search may check per 8 bytes searched, and beyond.
  std::uint64_t search_work_per_8_bytes = kSearchWorkPer8Bytes;
  std::uint64_t search_work_floor = kSearchWorkFloor;
};

/// Where the embedded-fatbin search of one ELF file looked and what it found: every section
/// searched (name, file offset, size, in search order) with the file offsets of the fatbins in
/// it. read_elf_fatbins fills it, and given it back for the same file parses those fatbins
/// instead of searching (the results cache keeps it by the file's identity).
struct EmbeddedFinds {
  struct Section {
    std::string name;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
    std::vector<std::uint64_t> fatbins;
  };
  std::vector<Section> sections;
  /// The device-link probe's answers (defines_no_kernel) by fatbin offset: the probe decodes an
  /// image (NCCL's smallest linked one is 50 MB), the answer is the same for the same file.
  std::vector<std::pair<std::uint64_t, bool>> no_kernels;
};

/// Reads the fatbins of a validated ELF file; an object without device code gives an empty
/// list. The linked fatbin is found from the .nvFatBinSegment wrappers (version 2); it is
/// marked device_link when its first SASS image defines no kernel. Then come the fatbins
/// embedded as data in the other loaded, non-executable sections (find_embedded_fatbins), in
/// section order. Translation units are filled in from the symbol table when there is one.
/// With `threads` > 1 the embedded-fatbin search runs on up to that many threads (one per
/// 8 MiB searched, 8 at most), meanwhile the standard sections are read; the result does not
/// depend on the number. The hooks are then called from several threads at once. With
/// `search_embedded` false no data section is searched (only the standard sections are read).
/// `known`, when given, is what an earlier search of the same file found: when it names exactly
/// the sections that would be searched, the fatbins at its offsets are parsed (each validated
/// as the search validates it) and nothing is searched; otherwise, or when one of them does not
/// parse, the search runs; its device-link probe answers are used for the fatbins they name.
/// `found` (optional) receives what was searched and found, and the probe's answers. The search
/// is bounded by `limits` (search_work_per_8_bytes, search_work_floor).
Result<std::vector<Fatbin>> read_elf_fatbins(const ElfFile& elf, const ReleaseHook& release = {},
                                             const ReleaseHook& prefetch = {}, unsigned threads = 1,
                                             const DataHook& next_data = {}, bool search_embedded = true,
                                             const EmbeddedFinds* known = nullptr, EmbeddedFinds* found = nullptr,
                                             const DerivedLimits& limits = {});

/// Finds the fatbins stored as plain data in `bytes` (one loaded section of an ELF file other
/// than .nv_fatbin and __nv_relfatbin), by the fatbin magic at 8-aligned addresses followed by a
/// strictly valid header and entry chain (version 1, 16-byte header, entry version 0x0101,
/// entries filling the fatbin exactly). Anything else that merely contains the magic is skipped:
/// this never fails. `base` is the section's offset in its file, `address` its virtual address
/// (0 in relocatable files); `section_name` is recorded in each fatbin. The scan is linear
/// (one 32-bit compare per 8-aligned address; a fatbin found is skipped whole), in chunks of
/// embedded_scan_chunk_bytes() announced to `prefetch` before and to `release` after they are read. With `threads`
/// > 1 runs of consecutive chunks are searched in parallel, each from its first chunk's start,
/// and merged in order so that the result is exactly that of one thread (a search that began
/// inside a fatbin found before it keeps only what lies past that fatbin's end); the hooks are
/// then called from several threads. The work is bounded: about two entry headers checked per
/// 8 bytes searched (`limits`; real data needs about one per entry found); a search of crafted data
/// that exceeds the bound stops, and `problem` (when given) receives a message naming the
/// file, section, offset and limit. read_elf_fatbins fails with that message.
/// The size of the embedded search's chunks: 4 MiB (1 MiB released and announced a quarter as
/// often: 7-9% less time inspecting cuFFT and cuBLASLt on two cores, the same peak memory).
std::uint64_t embedded_scan_chunk_bytes();

std::vector<Fatbin> find_embedded_fatbins(Bytes bytes, const std::string& name, const std::string& section_name,
                                          std::uint64_t base = 0, std::uint64_t address = 0,
                                          const ReleaseHook& release = {}, const ReleaseHook& prefetch = {},
                                          unsigned threads = 1, std::string* problem = nullptr,
                                          const DerivedLimits& limits = {});

/// The kind of a file that is device code by itself, told by its first bytes.
enum class DeviceFileKind : std::uint8_t {
  none,   ///< something else
  cubin,  ///< an ELF file with e_machine EM_CUDA (190): `nvcc -cubin`, `archguard jit compile -o x.cubin`
  ptx,    ///< PTX text: a `.version` directive and a `.target sm_XX` directive near the top
  ltoir,  ///< NVVM LTO-IR as `nvcc -dlto --ltoir` writes it (magic ed 43 4e 7f)
};

DeviceFileKind classify_device_file(Bytes bytes);

/// Builds the one-entry fatbin (FatbinSection::standalone) that stands for a cubin, PTX or LTO-IR
/// file, so that kernels and coverage are read from it as from any fatbin. The entry's payload
/// is the whole file, uncompressed. A cubin's architecture comes from e_flags (ELF ABI v7: bits
/// 7:0, 0x800 for "a"; v8: bits 15:8, "a" from the .nv.compat record 9 or, for ptxas 12.8/12.9, e_flags bit 0x8), a PTX file's from its
/// `.target` and `.version` directives, an LTO-IR file's from the header (u16 at 0x1a, sm x 10;
/// the a/f suffix is not recorded there and is not reported).
Result<Fatbin> read_standalone(Bytes bytes, const std::string& name);

/// Reads the fatbins of a memory region laid out as .nv_fatbin (for instance the section of a
/// loaded module, found with dl_iterate_phdr): the self-check hands over such bytes. Without
/// the file's .nvFatBinSegment wrappers the device-link fatbin is recognised by its content:
/// when the region holds several fatbins and the first one defines no kernel, it is marked
/// device_link. The bytes must outlive the result.
Result<ObjectFatbins> read_region(Bytes bytes, std::string name);

/// Whether the smallest SASS image of a fatbin defines no kernel (decodes it). An image that does
/// not decode counts as defining some: when in doubt a fatbin is judged, not ignored.
bool defines_no_kernel(const Fatbin& fatbin, std::string_view name);

// ---- payloads (on demand) --------------------------------------------------------------

/// The most bytes of payload copies and decoded images held by decoders at once in a process
/// (DecodeBudget::process()): each image may claim up to kMaxImageSize, so that without a bound
/// 16 threads decoding hostile images would hold 16 of them. 96 MiB: `inspect --kernels` of
/// cuBLASLt on 16 threads peaks at 175-190 MB with it (260-280 MB with 256 MiB).
inline constexpr std::uint64_t kDecodeBytesAtOnce = std::uint64_t{96} << 20;

/// What the decoders may hold at once while `check` and `doctor` judge many objects on `threads`
/// threads (DecodeBudget::Raised): 32 MiB per thread, at least kDecodeBytesAtOnce and at most
/// 512 MiB. With 96 MiB the 16 threads of an H100 host waited for one another: a cold `check`
/// of a whole site-packages took 1.70-1.78 s with 55,000-61,000 waits (voluntary context
/// switches), 1.13-1.24 s with 512 MiB (22,000-30,000), at 0.7 GB and 1.0-1.2 GB of peak memory.
std::uint64_t judging_decode_bytes(unsigned threads);

/// Gives back the buffers that threads keep between images to decode the next one without new
/// pages (together at most 48 MiB, kept by the threads of the process's shared pool for its
/// life). A thread decoding at the moment keeps its own. For a caller whose decoding is over:
/// doctor, before its smoke test creates a CUDA context.
void release_decode_scratch();
/// The bytes the threads' decode buffers hold mapped now (for tests and statistics).
std::size_t decode_scratch_bytes();

/// What the threads' decode buffers may keep between images, all together, by default: a buffer
/// beyond it is unmapped after its image, and the next image maps and faults in new pages.
inline constexpr std::size_t kDecodeScratchKeptDefault = std::size_t{48} << 20;

/// Raises what the decode buffers may keep together to at least `most` while it lives (or, with
/// Bound::at_most, lowers it to at most `most`), then puts the bound back (a thread over it gives
/// its buffers back after its next image, an idle one with release_decode_scratch()). For a
/// caller that judges many objects for time (check), or for memory (doctor); one at a time, as
/// DecodeBudget::Raised.
class DecodeScratchKept {
 public:
  enum class Bound { at_least,
                     at_most };
  explicit DecodeScratchKept(std::size_t most, Bound bound = Bound::at_least);
  ~DecodeScratchKept();
  DecodeScratchKept(const DecodeScratchKept&) = delete;
  DecodeScratchKept& operator=(const DecodeScratchKept&) = delete;
  /// The bound now.
  static std::size_t most();

 private:
  std::size_t before_;
};

/// What check lets the decode buffers of `threads` judging threads keep together: 12 MiB per
/// thread, at least kDecodeScratchKeptDefault and at most 192 MiB. With 48 MiB the 16 threads of
/// an H100 host unmapped and faulted in their buffers image after image: a cold check of a torch
/// site-packages judged in 0.63-0.69 s (2.1-2.3 s of system time), with 192 MiB in 0.48-0.57 s
/// (1.4 s), at about the same peak (0.39-0.47 GB).
std::size_t judging_scratch_kept_bytes(unsigned threads);

/// A bound on the bytes being decoded at once across threads. take() waits while its bytes do
/// not fit beside those already taken, unless none are taken (an image larger than the bound
/// is decoded alone). A thread that already holds a ticket of a budget gets an empty ticket
/// from it without waiting: a decode nested in another (a caller that holds a ticket while it
/// calls decompress or decode_kernels) is counted once and cannot wait for itself.
class DecodeBudget {
 public:
  explicit DecodeBudget(std::uint64_t most);
  DecodeBudget(const DecodeBudget&) = delete;
  DecodeBudget& operator=(const DecodeBudget&) = delete;

  /// Bytes taken from a budget, given back when the ticket is destroyed.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket();
    /// The bytes this ticket holds (0 for a nested or empty ticket).
    std::uint64_t bytes() const { return bytes_; }

   private:
    friend class DecodeBudget;
    Ticket(DecodeBudget* budget, std::uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    void give_back();
    DecodeBudget* budget_ = nullptr;
    std::uint64_t bytes_ = 0;
  };

  /// Takes `bytes`, waiting for room (see the class comment).
  Ticket take(std::uint64_t bytes);
  /// The bytes taken now, and the most ever taken at once (for tests and benchmarks).
  std::uint64_t in_use() const;
  std::uint64_t peak() const;
  /// The budget every decoder of the library takes from (kDecodeBytesAtOnce).
  static DecodeBudget& process();
  /// The bound now, and a new one (waiting takers are woken to look again).
  std::uint64_t most() const;
  void set_most(std::uint64_t most);

  /// The process budget raised to at least `most` while it lives, then put back (one judging
  /// loop at a time: scopes on several threads at once would put back each other's bound).
  class Raised {
   public:
    explicit Raised(std::uint64_t most);
    ~Raised();
    Raised(const Raised&) = delete;
    Raised& operator=(const Raised&) = delete;

   private:
    std::uint64_t before_;
  };

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// The bytes decoding `entry` holds at its peak: the copy of its payload and, compressed, the
/// decoded image (the claim, at most `limit`).
std::uint64_t decode_footprint(const FatbinEntry& entry, std::uint64_t limit = kMaxImageSize);

/// The decompressed image. Refuses sizes above `limit` or inconsistent with the header.
/// `name` names the file in messages. Takes decode_footprint() from DecodeBudget::process()
/// while it decodes (nothing more when the calling thread already holds a ticket).
Result<std::vector<std::byte>> decompress(const FatbinEntry& entry, std::string_view name,
                                          std::uint64_t limit = kMaxImageSize);

/// Whether `entry` decodes (decompress()'s checks and errors, up to kMaxImageSize), decoded into
/// this thread's reused buffers and dropped; LTO-IR is not decoded (Ok).
Status check_decodes(const FatbinEntry& entry, std::string_view name);

struct Kernel {
  std::string name;       ///< mangled
  std::string demangled;  ///< equal to name when it does not demangle
};

/// The kernel entry points of an image: cubin symbols marked as CUDA entries, PTX .entry
/// directives. LTO-IR is not decoded (empty list). `image` is the decompressed payload. An
/// image whose names exceed `limits.max_kernel_name_bytes` (kMaxKernelNameBytes by default) is
/// an error (ErrorKind::limit); a cubin's names are read up to `limits.max_name_length`.
Result<std::vector<Kernel>> list_kernels(const FatbinEntry& entry, Bytes image,
                                         std::string_view name, const DerivedLimits& limits = {});

/// Decodes as decompress() does, then list_kernels(), the image held under one ticket of
/// DecodeBudget::process() until its kernels are listed: what every verb that lists kernels
/// calls (inspect --kernels, the kernel index of check, doctor and verify). The image is decoded
/// into buffers the calling thread keeps for its next image (up to 4 MiB each), not zeroed.
///
/// A large zstd-compressed cubin (sparse_decode_from() bytes and more) is decoded in a stream of
/// which only the parts its kernel list reads are kept (its header, section table, section
/// names, symbol table and their strings: the first 4 MiB, then what its section table names):
/// the rest passes through 256 KiB of scratch. A 134 MB NCCL image is held in about 6 MiB with
/// the decoder's window. The list, and every error, is the one the whole image gives; an image
/// whose layout does not allow it is decoded whole.
///
/// `release`, when given, is called with the part of the payload read so far once nothing more
/// will be read from it (after the copy; in 4 MiB steps while a large image streams): the
/// caller drops those pages (PayloadPages::release), so that the file pages held are those of
/// the images being read, not whole payloads. It must accept any prefix of the payload.
using PayloadRelease = std::function<void(Bytes read)>;

/// The payloads whose pages a caller releases alone once decoded: smaller ones go in runs (the
/// judging's PayloadTrail, the printer of `inspect --kernels`, or the object's end). Each release
/// is a system call and, while other threads of the process run, a TLB shootdown on their cores:
/// a check of cuFFT made 6,300 of them for 94 MiB (15 KB each on average).
inline constexpr std::size_t kPayloadReleasedAlone = std::size_t{64} << 10;
/// Whether the caller of decode_kernels releases `entry`'s payload pages on their own (pass a
/// PayloadRelease), or leaves them to a run with their neighbours' (pass none).
inline bool payload_released_alone(const FatbinEntry& entry) { return entry.payload.size() >= kPayloadReleasedAlone; }
Result<std::vector<Kernel>> decode_kernels(const FatbinEntry& entry, std::string_view name,
                                           const DerivedLimits& limits = {}, const PayloadRelease& release = {});

/// The size from which decode_kernels() keeps only what it reads of an image (16 MiB); set
/// returns the value before (tests set 0 to decode every zstd cubin so).
std::uint64_t sparse_decode_from();
std::uint64_t set_sparse_decode_from(std::uint64_t bytes);
/// How decode_kernels() took the images of sparse_decode_from() bytes and more, since the
/// process started: listed from what one pass kept, from a second pass keeping what the first
/// found they need (or a third, where the second first kept the section table), or decoded whole (a layout or a payload sparse decoding does not follow).
struct SparseDecodeCounts {
  std::uint64_t one_pass = 0, two_passes = 0, whole = 0;
};
SparseDecodeCounts sparse_decode_counts();

/// The bytes this thread's zstd decoder holds between payloads (0 when built without the
/// compression libraries). A frame decoded in steps (its size not stated, or its output growing
/// past a claim) makes the decoder allocate a window of up to the frame's window size; that
/// window is given back after the payload, so this stays near its 100-200 KiB of tables.
std::size_t zstd_decoder_bytes();

/// The header fields of an entry that identify its image within its object: offset, kind,
/// architecture, flags and sizes ("<offset> <kind> <sm> ..."). A kernel list kept for an
/// object is used again only for an entry with the same fingerprint.
std::string entry_fingerprint(const FatbinEntry& entry);

/// A kernel list kept for one entry of an object, with the entry's fingerprint.
struct StoredKernels {
  std::string fingerprint;
  std::vector<Kernel> kernels;  ///< sorted by mangled name, unique
};
/// Where a kept kernel list belongs in its object: the position of the entry's fatbin among the
/// object's fatbins, and the entry's offset. The offset alone does not tell entries apart in an
/// archive's members merged into one object (judged_objects): each member's offsets count from
/// the member's start, so two members may have entries at the same offset with the same header.
using StoredKernelsAt = std::pair<std::uint64_t, std::uint64_t>;  // (fatbin, entry offset)
/// The kernel lists kept for an object, by fatbin and entry offset.
using StoredKernelLists = std::map<StoredKernelsAt, StoredKernels>;

/// What earlier runs learnt about an object, found again by the object's identity
/// (ObjectFatbins::identity): where the embedded-fatbin search found fatbins, and the kernel
/// lists of its images. The results cache (archguard/results_cache.hpp) implements it; the
/// scan asks it before searching, KernelIndex before decoding. Implementations are used from
/// several threads at once and never fail the caller: a store that cannot read or write finds
/// nothing.
class FactsStore {
 public:
  virtual ~FactsStore() = default;
  /// The sections searched, and the fatbins found, in the object of `identity`; or nothing.
  virtual std::optional<EmbeddedFinds> find_embedded(const std::string& identity) = 0;
  virtual void keep_embedded(const std::string& identity, const EmbeddedFinds& finds) = 0;
  /// The kernel lists kept for the object of `identity` (empty when none).
  virtual StoredKernelLists find_kernels(const std::string& identity) = 0;
  /// Keeps every list of `lists` for the object (replacing what was kept).
  virtual void keep_kernels(const std::string& identity, const StoredKernelLists& lists) = 0;
  /// Counts images found in kept lists (hits) and images decoded (misses), for the statistics.
  virtual void count(std::uint64_t hits, std::uint64_t misses) = 0;
  /// What a scan read from a whole file, by a key of its identity and the scan's options: the
  /// objects with every header field, their payloads as offsets into the file (encoded and
  /// decoded by the scan; opaque here). A scan that finds it parses nothing of the file. None
  /// by default: a store that does not keep files makes the scan read every file.
  virtual std::optional<std::vector<std::byte>> find_file(const std::string& key) {
    (void)key;
    return std::nullopt;
  }
  virtual void keep_file(const std::string& key, std::vector<std::byte> facts) {
    (void)key;
    (void)facts;
  }
  /// The files of a directory walk found to hold no device code, by a key of the directory
  /// (scan_path writes and reads it; opaque here). None by default: every file is peeked at.
  virtual std::optional<std::vector<std::byte>> find_tree(const std::string& key) {
    (void)key;
    return std::nullopt;
  }
  virtual void keep_tree(const std::string& key, std::vector<std::byte> record) {
    (void)key;
    (void)record;
  }
  /// An object's verdict and judgement on one GPU, by a key of the object's identity, how it
  /// was read, the GPU, the driver settings and the options (judge_with_store writes and reads
  /// it; opaque here). None by default: every object is judged.
  virtual std::optional<std::vector<std::byte>> find_judgement(const std::string& key) {
    (void)key;
    return std::nullopt;
  }
  virtual void keep_judgement(const std::string& key, std::vector<std::byte> record) {
    (void)key;
    (void)record;
  }
  /// A whole answer of a verb (what it printed and its exit code) by a key of everything it
  /// depends on (the verb computes the key; opaque here). None by default.
  virtual std::optional<std::vector<std::byte>> find_answer(const std::string& key) {
    (void)key;
    return std::nullopt;
  }
  virtual void keep_answer(const std::string& key, std::vector<std::byte> record) {
    (void)key;
    (void)record;
  }
};

/// Whether the decoded image of a SASS entry (raw kind 2) is a cubin: a 64-bit little-endian
/// ELF file for EM_CUDA. Anything else decodes but cannot be loaded by the driver; the error
/// names the file, the entry and what its first bytes are. Other entries pass.
Status check_cubin_image(const FatbinEntry& entry, Bytes image, std::string_view name);

/// abi::__cxa_demangle, or the input when it is not a mangled name or longer than
/// kMaxDemangledInput.
std::string demangle(std::string_view name);

// ---- cuobjdump-compatible names ----------------------------------------------------------

/// The name cuobjdump gives an entry: "<base>.<n>.<arch>.cubin|ptx", or
/// "<identifier base>.<arch>.cubin|ptx" for entries with an identifier. `n` counts from 1.
/// "a" shows, "f" shows for PTX only; PTX arch is written sm_XY too.
std::string cuobjdump_name(const FatbinEntry& entry, std::string_view base, std::size_t n);
/// cuobjdump's base: the file name without directories and without its last extension.
std::string cuobjdump_base(std::string_view path);

}  // namespace archguard
