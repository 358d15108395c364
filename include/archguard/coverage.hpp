// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// Coverage: which architectures the device code of a file covers, whether it meets a
/// requirement (`archguard verify`), and what the driver will do with it on a given device
/// (`archguard check`, the doctor, the self-check). Logic over the fatbin reader and the
/// compatibility engine (select_image); no I/O beyond decoding payloads on demand.

#include <archguard/compat.hpp>
#include <archguard/fatbin.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace archguard {

/// One translation unit as the driver sees it: a fatbin that defines kernels plus the images
/// the driver may use for it. For the fatbin nvlink wrote in an -rdc link, the PTX of
/// __nv_relfatbin is added (the driver JIT-links it, rule 8).
struct Unit {
  const ObjectFatbins* object = nullptr;
  const Fatbin* fatbin = nullptr;
  std::vector<Image> images;
  std::vector<const FatbinEntry*> entries;  ///< parallel to images
};

/// The units that decide whether an object's kernels run: every fatbin of .nv_fatbin except
/// the device-link one (rule 9); when .nv_fatbin holds none, the fatbins of __nv_relfatbin
/// (an -rdc object or archive member).
std::vector<Unit> units_of(const ObjectFatbins& object);

/// What the images of an object cover (device-link fatbins excluded).
struct CoverageSummary {
  std::vector<Arch> sass;  ///< ascending, unique
  std::vector<Arch> ptx;   ///< ascending, unique
  std::vector<Arch> ltoir;
  Version2 highest_ptx_isa;
  std::size_t fatbins = 0;  ///< deciding fatbins
  std::size_t images = 0;
};
CoverageSummary summarize(const ObjectFatbins& object);

// ---- verify ------------------------------------------------------------------------------

/// What every unit must carry.
struct Requirement {
  std::vector<Arch> sass;         ///< SASS for each (exact unless allow_compatible)
  std::vector<Arch> ptx;          ///< PTX for each (exact architecture)
  bool ptx_highest = false;       ///< PTX at or above the highest required SASS architecture
  bool allow_compatible = false;  ///< a binary-compatible lower SASS satisfies a SASS requirement
  bool strict = false;            ///< judge fatbins holding only a/f images like any other
};

/// Builds a requirement from `--require` and `--ptx`. `require` is a list in any dialect the
/// arch parser accepts ("75,80,90,120", "sm_90a", a CMake list "80-real;90"). In a CMake list
/// (any token with -real or -virtual) a bare "90" means SASS and PTX as CMake does; elsewhere
/// a bare number means SASS only. nvcc flags ("-gencode arch=compute_80,code=[sm_80,compute_80]")
/// require exactly the codes they name. `ptx`: "" (only what the list says), "none", "highest", or
/// an architecture ("90", "compute_90").
Result<Requirement> parse_requirement(std::string_view require, std::string_view ptx = {});

enum class UnitStatus {
  ok,              ///< every requirement met exactly
  compatible,      ///< met, using binary-compatible lower SASS (allow_compatible)
  specific_extra,  ///< holds only a/f images: an architecture-specific extra, not judged
  no_kernels,      ///< lacks a requirement but defines no kernel: decides nothing
  missing,         ///< a requirement is not met
};
std::string_view to_string(UnitStatus s);

struct UnitFinding {
  std::string object;      ///< display path of the object
  std::size_t fatbin = 0;  ///< index among the object's fatbins
  FatbinSection section = FatbinSection::nv_fatbin;
  std::string identifier;        ///< "" when the fatbin has none
  std::string translation_unit;  ///< "" when the binary does not record it
  std::vector<Kernel> kernels;   ///< the kernels it defines (listed only when it is missing something)
  UnitStatus status = UnitStatus::ok;
  std::vector<Arch> found_sass, found_ptx;
  std::vector<Arch> missing_sass;
  std::vector<std::pair<Arch, Arch>> compatible;  ///< {required, lower SASS accepted instead}
  std::vector<Arch> missing_ptx;                  ///< exact PTX requirements not met
  /// Device-link drops: {linked architecture, kernel} of -rdc objects built without it.
  std::vector<std::pair<Arch, Kernel>> link_drops;
  bool missing_ptx_highest = false;
  std::string message;  ///< one line naming the object, the fatbin and what it lacks; "" when ok
};

struct VerifyReport {
  std::vector<UnitFinding> units;
  std::size_t objects = 0;  ///< objects with at least one unit
  bool passed() const;
};

VerifyReport verify(std::span<const ObjectFatbins> objects, const Requirement& requirement);

// ---- check -------------------------------------------------------------------------------

struct UnitVerdict {
  std::string object;
  std::size_t fatbin = 0;
  FatbinSection section = FatbinSection::nv_fatbin;
  std::string identifier;
  std::string translation_unit;
  std::vector<Image> images;
  Verdict verdict;
};

struct ObjectVerdict {
  std::string object;
  Outcome outcome = Outcome::native;  ///< the worst over the units (fail > jit > native)
  int cuda_error = 0;                 ///< of the first failing unit
  std::vector<UnitVerdict> units;
  bool has_device_code() const { return !units.empty(); }
};

/// The bytes the images of `object` decode to (as their headers claim): the work of judging it
/// cold (NCCL's 143 fatbins decode to more than cuFFT's 24,000).
std::uint64_t decoded_bytes(const ObjectFatbins& object);
/// The positions of `objects`, most decoded_bytes first (ties in their order): how `check` and
/// `doctor` hand objects to their threads, so that a library of 500 MB is not the last item a
/// thread picks up while the others wait.
std::vector<std::size_t> most_work_first(const std::vector<const ObjectFatbins*>& objects);

/// The kernels of each image, decoded once and shared by the verdicts of several GPUs (a
/// fleet, --cc given twice, the doctor's devices). Not thread-safe: one per thread. With a
/// `store` (the results cache) an image decoded by an earlier run is not decoded again.
class KernelIndex {
 public:
  KernelIndex() = default;
  /// An index of the entries of `object` that asks `store` (the results cache) for the lists
  /// kept for the object before decoding, and keeps what it decoded there when it is flushed
  /// or destroyed, each list by its entry's fatbin (position in `object`) and offset. Without a
  /// store, or for an object without an identity, it only decodes (and counts what it decoded
  /// in the store's statistics); an entry that is not one of `object`'s is decoded, never kept.
  /// `object` must outlive the index unchanged.
  /// `limits` bounds the kernel names derived from each image (list_kernels).
  KernelIndex(FactsStore* store, const ObjectFatbins& object, const DerivedLimits& limits = {});
  ~KernelIndex();
  KernelIndex(const KernelIndex&) = delete;
  KernelIndex& operator=(const KernelIndex&) = delete;
  /// The kernels of `entry` (sorted by mangled name, unique), or why they cannot be listed.
  /// `name` names the file in messages. LTO-IR gives an empty list.
  const Result<std::vector<Kernel>>& of(const FatbinEntry& entry, std::string_view name);
  /// Gives the store what was decoded since the last flush, merged with what it kept before.
  void flush();
  /// Decode on up to `threads` threads what prefetch() finds (1, the default: no prefetch).
  void set_threads(unsigned threads) { threads_ = threads; }
  /// Called with each payload once its image is decoded, whatever it gave: the caller drops its
  /// pages (PayloadPages::release), so a large object's peak is the images being decoded, not
  /// every payload read so far (libtorch_cuda: 100 MB of file pages). None (the default): kept.
  void set_release(std::function<void(Bytes payload)> release) { release_ = std::move(release); }
  /// Runs `ask` (which judges `object`) against this index in a recording mode, in which of()
  /// decodes nothing and answers an empty list while it notes each entry asked, then decodes the
  /// noted entries that
  /// neither this index nor its store holds on up to set_threads() threads. The lists are the
  /// ones of() would give (of() then answers them), so what a caller computes with them does not
  /// change: a large object's images are decoded on every core instead of on the one thread that
  /// judges it. An entry `ask` did not reach (its question depended on a list) is decoded by
  /// of() when asked, as before; an object of fewer than 16 images is not recorded at all, and
  /// noted entries fewer than 16 are left to of() (starting threads for them costs more than it
  /// saves).
  void prefetch(const ObjectFatbins& object, const std::function<void(KernelIndex&)>& ask);
  /// The lists prefetch() decoded so far (for tests and statistics).
  std::uint64_t prefetched() const { return prefetched_; }
  /// The store and the object's identity given to the constructor (null and empty by default),
  /// and the limits on what is derived from each image.
  FactsStore* store() const { return store_; }
  const std::string& identity() const { return identity_; }
  const DerivedLimits& limits() const { return limits_; }

 private:
  FactsStore* store_ = nullptr;
  std::string identity_;
  DerivedLimits limits_;
  bool loaded_ = false;
  StoredKernelLists stored_;  ///< what the store kept for the object (loaded on first use)
  /// The object's fatbins with entries, by the address of their first entry: (first, count,
  /// position); only with a store and an identity.
  struct EntryRange {
    const FatbinEntry* first;
    std::size_t count, fatbin;
  };
  std::vector<EntryRange> ranges_;
  std::uint64_t hits_ = 0, decoded_ = 0, new_lists_ = 0;
  std::map<const FatbinEntry*, Result<std::vector<Kernel>>> cache_;
  unsigned threads_ = 1;
  std::function<void(Bytes)> release_;
  std::uint64_t prefetched_ = 0;
  bool recording_ = false;
  std::vector<std::pair<const FatbinEntry*, std::string>> asked_;  ///< noted while recording
  Result<std::vector<Kernel>> none_ = std::vector<Kernel>{};       ///< what of() answers while recording
  /// Where `entry` is kept in the store (its fatbin's position, its offset); nothing when it is
  /// not one of the object's entries.
  std::optional<StoredKernelsAt> kept_at(const FatbinEntry& entry) const;
  /// The store's list for `entry` when it kept one for this entry (loads the store's lists first).
  StoredKernels* stored_for(const FatbinEntry& entry);
  /// Decodes and lists `entry` as of() keeps it (sorted by mangled name, unique).
  Result<std::vector<Kernel>> decode_sorted(const FatbinEntry& entry, std::string_view name) const;
};

/// The compatibility engine on every unit of an object. The image the driver takes must also
/// decode: one that does not (a corrupt or truncated payload) fails the load with 200, as
/// `verify` says (the driver cannot load it).
/// `index` (optional) keeps what was decoded for judge_object and for other GPUs.
ObjectVerdict check_object(const ObjectFatbins& object, const Device& device,
                           const DriverSettings& settings = {}, KernelIndex* index = nullptr);

/// The kernels of a fatbin, from its first image that decodes (SASS preferred). `name`
/// names the file in messages.
Result<std::vector<Kernel>> kernels_of(const Fatbin& fatbin, std::string_view name);

struct KernelFinding {
  std::string object;
  std::size_t fatbin = 0;
  Kernel kernel;
  Verdict verdict;
};

/// For the doctor and the self-check: the kernels that have no usable image on the device
/// (the kernels of every failing unit). Decodes payloads of failing units only.
Result<std::vector<KernelFinding>> kernels_without_image(const ObjectFatbins& object,
                                                         const ObjectVerdict& verdict);

// ---- per-kernel judgement ------------------------------------------------------------------

/// What kind of object holds the device code: it decides how a kernel without an image for
/// the GPU is read (docs/verdicts.md).
enum class ObjectKind {
  executable,      ///< ET_EXEC, or ET_DYN whose name has no ".so" (a PIE)
  shared_library,  ///< ET_DYN named *.so or *.so.N (a Python extension module too)
  static_library,  ///< the members of an `ar` archive judged as one library (shipped_objects)
  relocatable,     ///< ET_REL: an object file or archive member
  other,           ///< a memory region, a standalone cubin, PTX or LTO-IR file
};
std::string_view to_string(ObjectKind k);
/// From the ELF type and the display path (the last path component is looked at).
ObjectKind object_kind(const ObjectFatbins& object);

/// The tiers of an object on one GPU.
enum class Tier {
  no_device_code,  ///< no fatbin decides anything
  no_kernels,      ///< fatbins, but none defines a kernel: nothing can fail
  all_run,         ///< every kernel has an image that runs (natively or after a JIT)
  other_gpus,      ///< some kernels have none, and the object is a library that picks kernels
                   ///< per GPU (kernels built for other GPUs): not a problem on this GPU
  some_missing,    ///< some kernels have no image: they fail with `cuda_error` if launched
  none_run,        ///< the object has kernels and none of them runs: every launch fails
};
std::string_view to_string(Tier t);
/// Whether the tier is a problem `check` reports with exit 1 (some_missing, none_run).
bool is_problem(Tier t);

/// One distinct kernel (by mangled name) of an object on one GPU. When several fatbins define
/// the same name, the best outcome counts (the library launches the one that runs).
struct KernelVerdict {
  Kernel kernel;
  std::size_t fatbin = 0;        ///< the fatbin whose verdict counts
  std::string translation_unit;  ///< of that fatbin; "" when unknown
  std::string identifier;        ///< of that fatbin (nvcc's source name); "" when none
  Verdict verdict;
  /// The kernel has no image here and carries an architecture in its name (sm100, sm_90a,
  /// volta_...) that is not this GPU's: what the tag says, e.g. "sm100"; else "".
  std::string arch_tag;
  /// Why a kernel without an image here reads as "built for other GPUs"; "" when it does not.
  std::string other_gpus;
  /// The fatbin runs here but the image the driver takes does not define this kernel, which
  /// other images of the same translation unit do: "" when not so, else what is missing, e.g.
  /// "not in the sm_80 image (in sm_90)" (the source leaves it out of older architectures).
  std::string absent_from_image;
  /// A device-link drop: the kernel's -rdc object carries no image for the architecture the
  /// program was device-linked for here, so nvlink left the kernel out of the linked image and
  /// its launch fails with 500. Names the relocatable fatbin ("fatbin 3 (old_lib.cu) has only
  /// sm_80(rel)"); "" when not a drop.
  std::string link_drop;
  std::string link_drop_object;  ///< for a drop: the -rdc object's unit ("old_lib.cu", "fatbin 3")
};

struct ObjectJudgement {
  std::string object;
  ObjectKind kind = ObjectKind::other;
  Tier tier = Tier::no_device_code;
  int cuda_error = 0;                           ///< of the failing kernels (some_missing, none_run, other_gpus)
  std::size_t units = 0;                        ///< deciding fatbins
  std::size_t kernel_units = 0;                 ///< of them, those that define kernels (0 when not decoded)
  std::size_t arch_sets = 0;                    ///< distinct image sets among the kernel-bearing fatbins
  std::size_t native = 0, jit = 0, failed = 0;  ///< distinct kernels
  std::size_t failed_tagged = 0;                ///< failing kernels whose name names another GPU
  std::size_t link_drops = 0;                   ///< failing kernels left out by the device link (500)
  std::size_t absent = 0;                       ///< failing kernels left out of the taken image by their source
  /// Why the failing kernels are read as "built for other GPUs" (tier other_gpus), one phrase.
  std::string dispatch_evidence;
  /// Every distinct kernel, sorted by demangled name; only the failing ones unless `all`.
  std::vector<KernelVerdict> kernels;
  std::vector<std::string> errors;  ///< fatbins whose kernels could not be listed (judged as having some)
  bool kernels_listed = false;      ///< false when nothing failed and `all` was not asked: counts are 0
  /// The failing kernels (kernels with verdict fail), in `kernels` order.
  std::vector<const KernelVerdict*> failing() const;
  /// The translation units (or, when unknown, "fatbin N (identifier)") of the failing kernels.
  std::vector<std::string> failing_units() const;
};

/// Judges the kernels of an object from the unit verdicts `check_object` gave. Decodes the
/// payloads of failing units (and, when some fail, of the others to see which kernels still
/// run); with `all` every unit, and `kernels` lists every kernel.
/// Only failures with 209 (no image for this GPU) can be read as "built for other GPUs"; with
/// CUDA_FORCE_PTX_JIT set (`settings`) none is.
///
/// Kernels are judged over every image of a translation unit: a kernel that some image defines
/// and the image the driver takes does not fails here (rule 10, docs/verdicts.md), and a kernel
/// of an -rdc object that carries no image for the linked architecture is a device-link drop
/// (500). `index` shares decoded kernel lists between calls (several GPUs); null: a local one.
ObjectJudgement judge_object(const ObjectFatbins& object, const ObjectVerdict& verdict, const Device& device,
                             const DriverSettings& settings = {}, bool all = false, KernelIndex* index = nullptr);

/// An object's verdict on one GPU and the judgement of its kernels.
struct JudgedResult {
  ObjectVerdict verdict;
  ObjectJudgement judgement;
};

/// check_object and judge_object with `index`; or, when the index has a store (the results
/// cache) and the object an identity, what an earlier run judged for the same object read the
/// same way (every header field of its fatbins and entries, its kind), on the same GPU, with the
/// same settings, `all` and derived limits. What is judged anew is kept in the store, unless its
/// messages name the file (a fatbin whose kernels cannot be listed, an image that does not
/// decode): those are judged again each time. A record that is damaged or does not fit the
/// object is not used.
JudgedResult judge_with_store(const ObjectFatbins& object, const Device& device, const DriverSettings& settings, bool all,
                              KernelIndex& index);

/// A kernel of an -rdc object missing from an image nvlink wrote: the object carries no code
/// for that architecture, so the device link left the kernel out, without a warning. On a GPU
/// that takes that image its launch fails with 500 (named symbol not found).
struct LinkDrop {
  std::size_t linked_fatbin = 0;  ///< the fatbin nvlink wrote
  Image linked;                   ///< its image that lacks the kernel
  Kernel kernel;
  std::size_t relocatable_fatbin = 0;
  std::string object_label;  ///< the -rdc object's unit ("old_lib.cu" or "fatbin 3")
  std::string defined_in;    ///< the relocatable images defining it: "sm_80(rel)"
};
/// Every device-link drop of an object (decodes its linked and relocatable images).
std::vector<LinkDrop> device_link_drops(const ObjectFatbins& object, KernelIndex* index = nullptr);

// ---- what users ship as a unit -----------------------------------------------------------

/// An object as the verdicts judge it: an input file or library as read, or the members of one
/// `ar` archive merged into a single static library (its fatbins renumbered, each fatbin's
/// translation unit defaulting to its member's name), since a static library, like a shared
/// one, is linked whole and picks kernels per GPU.
struct JudgedObject {
  const ObjectFatbins* object = nullptr;  ///< the object as read (null for a merged archive)
  std::shared_ptr<ObjectFatbins> merged;  ///< the merged archive, else null
  std::size_t members = 0;                ///< archive members with device code (merged only)
  const ObjectFatbins& get() const { return merged ? *merged : *object; }
};
/// The objects of a scan as they are judged: members of one archive (same path before the
/// last ':', ET_REL) merged; everything else as it is, in order. Objects without device code
/// are kept (they have no units). A merged object's identity is merged_identity() of the
/// members it took, so that the results cache keeps its kernel lists and judgements.
std::vector<JudgedObject> judged_objects(std::span<const ObjectFatbins> objects);
/// The identity (ObjectFatbins::identity) of archive members merged into one object, in the
/// order their fatbins were taken: the archive's identity, then a line "merged" with each
/// member's ordinal and number of fatbins ("<archive identity>\nmerged 0:2 3:1"). It changes
/// with the archive (its identity) and with which fatbins came from which member, and equals no
/// file's identity (one line) nor a member's (whose line after the archive's starts with a
/// digit). Empty when a member has no identity, or they are not members of one archive.
std::string merged_identity(std::span<const ObjectFatbins* const> members);

/// Why an object of a package does not decide the package's verdict on a GPU.
enum class Variance {
  none,      ///< it decides: a failure of it is a failure of the package
  variant,   ///< one of several builds of the same object, per architecture or CUDA runtime
  specific,  ///< every kernel-bearing fatbin holds only a/f images: for particular GPUs
  newer,     ///< its oldest target is newer than this GPU: built for newer GPUs on purpose
};

/// One object of a package and its judgement on one GPU.
struct PackageMember {
  std::string path;  ///< display path ("x.whl:pkg/lib_cuda118.so")
  const ObjectJudgement* judgement = nullptr;
  bool only_specific = false;  ///< every kernel-bearing fatbin holds only a/f images
  unsigned oldest_sm = 0;      ///< the lowest architecture of its images (SASS or PTX); 0: none
  bool dependency = false;     ///< loaded by another input (deps.hpp): never a variant
};

/// The member record of an object and its judgement (only_specific, oldest_sm and dependency
/// read off the object).
PackageMember package_member(const ObjectFatbins& object, const ObjectJudgement& judgement);

/// The verdict of what a user ships as one unit (a wheel, a conda package, a directory of
/// variants) on one GPU (docs/verdicts.md, "Packages").
struct PackageVerdict {
  bool problem = false;  ///< some object that decides fails, or a variant group has no member that runs
  int cuda_error = 0;    ///< of the first deciding failure
  std::size_t objects = 0, run = 0, failing = 0;
  std::vector<Variance> variance;  ///< parallel to the members
  std::vector<bool> excused;       ///< parallel: a problem of the object that the package explains
  /// One line per variant group and for the architecture-specific objects: which member serves
  /// this GPU, or that none does and why that is (or is not) a problem.
  std::vector<std::string> groups;
  std::string summary;  ///< one line: "runs (3 of 4 objects; ...)", "fails: ..."
};

/// The variant key of a file name: the name with its architecture tokens (sm_90a, Sm100a, _90a,
/// sm80) replaced by "{arch}" and its CUDA runtime tokens (cuda118, cu12x, cu126) by "{cuda}";
/// "" when it has none. Two objects in the same directory with the same key are variants.
std::string variant_key(std::string_view file_name);
/// The CUDA runtime (as 118, 120, 130) a name's runtime token stands for; 0 when none.
unsigned variant_cuda(std::string_view file_name);

PackageVerdict judge_package(std::span<const PackageMember> members, const Device& device);

/// The architecture a kernel name is tagged for ("sm100", "sm_90a", "volta", ...), as an SM
/// number (100, 90, 70); 0 when the name carries none.
unsigned arch_tag_of(std::string_view kernel_name, std::string* tag = nullptr);

/// How a unit is named in messages: "kernels.cu" (translation unit), else "fatbin N (identifier)".
std::string unit_label(std::size_t fatbin, std::string_view translation_unit, std::string_view identifier);

/// One GPU model of a fleet.
struct FleetModel {
  std::string name;  ///< "NVIDIA H100 80GB HBM3"
  Version2 cc;
  std::size_t count = 0;  ///< rows seen
};

/// Parses what `nvidia-smi --query-gpu=name,compute_cap --format=csv` prints, concatenated
/// from many nodes (headers repeated, blank lines, "noheader" output all accepted). Models
/// keep their first-seen order. `name` names the file in messages (line numbers are given).
Result<std::vector<FleetModel>> parse_fleet_csv(std::string_view text, std::string_view name);

}  // namespace archguard
